/* SPDX-License-Identifier: MIT */
/* The timeline recorder behind barecuda.tools.trace().
 *
 * _trace_start() synchronizes the current context, records one base event on the
 * default stream and notes the host clock when it has completed; then st->trace
 * points at a recorder and every instrumented call site (see trace.h) appends a
 * compact C record: kind, name, stream, thread, host begin/end (CLOCK_MONOTONIC,
 * the clock of time.perf_counter_ns) and, for work queued on a stream, two timing
 * events recorded on that stream before and after the op.  Events come from a pool
 * made at start.  Nothing is converted to Python objects while the trace runs.
 *
 * _trace_stop() detaches the recorder, waits for the end events and turns each
 * record into a tuple; GPU times are cuEventElapsedTime against the base event,
 * placed on the host clock at the base's host time.  Records whose events cannot
 * be timed against the base (another context's stream, a stream being captured
 * into a graph) keep host times only.
 *
 * Rule: one active trace per module (so per process, in practice); starting a
 * second raises RuntimeError.  All threads' operations are recorded, with their
 * thread id.  Records are appended with the GIL held.
 *
 * On the lowest floor, as every floor records into it: the one thing it needs
 * from above, making a context current for _trace_start(), src/context.c lends
 * it at module init (bc_trace_set_context_require). */
#include "barecuda/trace.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"


typedef struct {
    unsigned char kind, detail, failed, open, is_push;
    unsigned long tid;
    int64_t t0, t1;
    CUstream stream;
    CUevent ev0, ev1;
    unsigned long long bytes, key;
    unsigned int grid[3], block[3], shared;
    PyObject *name;    /* owned, or NULL: then the label or the copy direction */
    const char *label; /* static */
} rec;

struct bc_trace {
    unsigned int epoch;
    rec *recs;
    Py_ssize_t n, cap;
    CUevent *pool; /* free events */
    Py_ssize_t npool, cappool;
    CUevent base;
    int64_t base_ns;
};

#define POOL_START 256

static unsigned int trace_epoch;

static const char *const kind_names[] = {"kernel", "copy", "memset", "alloc",
                                         "sync",   "graph", "range", "mark"};
static const char *const copy_names[] = {"HtoD", "DtoH", "DtoD", "Peer", "HtoA", "AtoH",
                                         "DtoA", "AtoD", "AtoA", "2D",   "3D"};

/* ------------------------------------------------------------ recording */

static CUevent
take_event(bc_trace *t)
{
    if (t->npool > 0)
        return t->pool[--t->npool];
    CUevent e = NULL;
    if (bc_drv.cuEventCreate(&e, CU_EVENT_DEFAULT) != CUDA_SUCCESS)
        return NULL;
    return e;
}

static void
give_event(bc_trace *t, CUevent e)
{
    if (e == NULL)
        return;
    if (t->npool == t->cappool) {
        Py_ssize_t cap = t->cappool ? 2 * t->cappool : POOL_START;
        CUevent *p = PyMem_Realloc(t->pool, (size_t)cap * sizeof *p);
        if (p == NULL) {
            bc_drv.cuEventDestroy(e);
            return;
        }
        t->pool = p;
        t->cappool = cap;
    }
    t->pool[t->npool++] = e;
}

/* A new zeroed record (NULL when memory ran out: the op goes unrecorded). */
static rec *
append(bc_trace *t, int kind, bc_trace_tok *tok)
{
    if (t->n == t->cap) {
        Py_ssize_t cap = t->cap ? 2 * t->cap : 1024;
        rec *p = PyMem_Realloc(t->recs, (size_t)cap * sizeof *p);
        if (p == NULL)
            return NULL;
        t->recs = p;
        t->cap = cap;
    }
    rec *r = &t->recs[t->n];
    memset(r, 0, sizeof *r);
    r->kind = (unsigned char)kind;
    r->tid = PyThread_get_thread_ident();
    tok->index = t->n++;
    tok->epoch = t->epoch;
    return r;
}

/* The event before a GPU op; none on a stream being captured (an event recorded
 * there would become part of the graph) or when the stream cannot take it. */
static void
gpu_start(bc_trace *t, rec *r, CUstream s)
{
    r->stream = s;
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    if (bc_drv.cuStreamIsCapturing(s, &cs) != CUDA_SUCCESS || cs != CU_STREAM_CAPTURE_STATUS_NONE)
        return;
    CUevent e = take_event(t);
    if (e != NULL && bc_drv.cuEventRecord(e, s) != CUDA_SUCCESS) {
        give_event(t, e);
        e = NULL;
    }
    r->ev0 = e;
}

static bc_trace_tok
gpu_record(bc_State *st, int kind, int detail, CUstream s, unsigned long long bytes, rec **out)
{
    bc_trace_tok tok = BC_TRACE_NONE;
    bc_trace *t = st->trace;
    rec *r = t ? append(t, kind, &tok) : NULL;
    if (r == NULL)
        return BC_TRACE_NONE;
    r->detail = (unsigned char)detail;
    r->bytes = bytes;
    r->open = 1;
    if (out)
        *out = r;
    r->t0 = bc_monotonic_ns();
    gpu_start(t, r, s);
    return tok;
}

bc_trace_tok
bc_trace_kernel(bc_State *st, PyObject *name, const unsigned int g[3], const unsigned int b[3],
                unsigned int shared, CUstream s)
{
    rec *r = NULL;
    bc_trace_tok tok = gpu_record(st, BC_TRACE_KERNEL, 0, s, 0, &r);
    if (r != NULL) {
        r->name = Py_XNewRef(name);
        memcpy(r->grid, g, sizeof r->grid);
        memcpy(r->block, b, sizeof r->block);
        r->shared = shared;
    }
    return tok;
}

bc_trace_tok
bc_trace_copy(bc_State *st, int dir, CUstream s, unsigned long long bytes)
{
    return gpu_record(st, BC_TRACE_COPY, dir, s, bytes, NULL);
}

bc_trace_tok
bc_trace_memset(bc_State *st, CUstream s, unsigned long long bytes)
{
    return gpu_record(st, BC_TRACE_MEMSET, 0, s, bytes, NULL);
}

bc_trace_tok
bc_trace_graph(bc_State *st, CUstream s)
{
    return gpu_record(st, BC_TRACE_GRAPH, 0, s, 0, NULL);
}

bc_trace_tok
bc_trace_host(bc_State *st, int kind, const char *label, unsigned long long bytes)
{
    bc_trace_tok tok = BC_TRACE_NONE;
    bc_trace *t = st->trace;
    rec *r = t ? append(t, kind, &tok) : NULL;
    if (r == NULL)
        return BC_TRACE_NONE;
    r->label = label;
    r->bytes = bytes;
    r->open = 1;
    r->t0 = bc_monotonic_ns();
    return tok;
}

void
bc_trace_end(bc_State *st, bc_trace_tok tok, CUresult rc)
{
    bc_trace *t = st->trace;
    if (t == NULL || t->epoch != tok.epoch || tok.index < 0 || tok.index >= t->n)
        return;
    rec *r = &t->recs[tok.index];
    if (r->ev0 != NULL) {
        CUevent e = take_event(t);
        if (e != NULL && bc_drv.cuEventRecord(e, r->stream) != CUDA_SUCCESS) {
            give_event(t, e);
            e = NULL;
        }
        r->ev1 = e;
    }
    r->t1 = bc_monotonic_ns();
    r->failed = rc != CUDA_SUCCESS;
    r->open = 0;
}

void
bc_trace_range_open(bc_State *st, const char *name, unsigned long long key, int is_push)
{
    bc_trace_tok tok;
    bc_trace *t = st->trace;
    rec *r = t ? append(t, BC_TRACE_RANGE, &tok) : NULL;
    if (r == NULL)
        return;
    r->name = PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "replace");
    if (r->name == NULL)
        PyErr_Clear();
    r->key = key;
    r->is_push = (unsigned char)is_push;
    r->open = 1;
    r->t0 = bc_monotonic_ns();
}

void
bc_trace_range_close(bc_State *st, unsigned long long key, int is_push)
{
    bc_trace *t = st->trace;
    if (t == NULL)
        return;
    int64_t now = bc_monotonic_ns();
    for (Py_ssize_t i = t->n - 1; i >= 0; i--) {
        rec *r = &t->recs[i];
        if (r->kind == BC_TRACE_RANGE && r->open && r->key == key && r->is_push == is_push) {
            r->open = 0;
            r->t1 = now;
            return;
        }
    }
}

void
bc_trace_mark(bc_State *st, const char *name)
{
    bc_trace_tok tok;
    bc_trace *t = st->trace;
    rec *r = t ? append(t, BC_TRACE_MARK, &tok) : NULL;
    if (r == NULL)
        return;
    r->name = PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "replace");
    if (r->name == NULL)
        PyErr_Clear();
    r->t0 = r->t1 = bc_monotonic_ns();
}

/* ------------------------------------------------------------ start, stop */

static int (*context_require)(bc_State *st);

void
bc_trace_set_context_require(int (*fn)(bc_State *st))
{
    context_require = fn;
}

static void
trace_free(bc_trace *t)
{
    if (t == NULL)
        return;
    for (Py_ssize_t i = 0; i < t->n; i++) {
        rec *r = &t->recs[i];
        if (r->ev0)
            bc_drv.cuEventDestroy(r->ev0);
        if (r->ev1)
            bc_drv.cuEventDestroy(r->ev1);
        Py_CLEAR(r->name);
    }
    for (Py_ssize_t i = 0; i < t->npool; i++)
        bc_drv.cuEventDestroy(t->pool[i]);
    if (t->base)
        bc_drv.cuEventDestroy(t->base);
    PyMem_Free(t->recs);
    PyMem_Free(t->pool);
    PyMem_Free(t);
}

void
bc_trace_discard(bc_State *st)
{
    bc_trace *t = st->trace;
    st->trace = NULL;
    trace_free(t);
}

PyDoc_STRVAR(trace_start_doc,
"_trace_start()\n--\n\n"
"Private (see barecuda.tools.trace): synchronize the current context, record the\n"
"base event and start recording.  Returns the host time (perf_counter_ns) that\n"
"the base stands for.  RuntimeError when a trace is already active.");

static PyObject *
bc_trace_start(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_from_module(m);
    if (st->trace != NULL) {
        PyErr_SetString(PyExc_RuntimeError,
                        "a trace is already active: only one trace() can record at a time "
                        "(end the other one first)");
        return NULL;
    }
    BC_REQUIRE_DRIVER(st, NULL);
    if (context_require == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_trace_start(): contexts are not set up");
        return NULL;
    }
    if (context_require(st) < 0)
        return NULL;
    bc_trace *t = PyMem_Calloc(1, sizeof *t);
    if (t == NULL)
        return PyErr_NoMemory();
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuCtxSynchronize();
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, "cuCtxSynchronize") < 0 ||
        bc_check(st, bc_drv.cuEventCreate(&t->base, CU_EVENT_DEFAULT), "cuEventCreate") < 0 ||
        bc_check(st, bc_drv.cuEventRecord(t->base, NULL), "cuEventRecord") < 0)
        goto error;
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuEventSynchronize(t->base);
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, "cuEventSynchronize") < 0)
        goto error;
    t->base_ns = bc_monotonic_ns();
    for (int i = 0; i < POOL_START; i++) {
        CUevent e = NULL;
        if (bc_check(st, bc_drv.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate") < 0)
            goto error;
        give_event(t, e);
    }
    if (st->trace != NULL) { /* another thread started one while the GIL was released */
        PyErr_SetString(PyExc_RuntimeError, "a trace is already active");
        goto error;
    }
    t->epoch = ++trace_epoch;
    st->trace = t;
    return PyLong_FromLongLong(t->base_ns);
error:
    trace_free(t);
    return NULL;
}

static PyObject *
dims_tuple(const rec *r, const unsigned int d[3])
{
    if (r->kind != BC_TRACE_KERNEL)
        return Py_NewRef(Py_None);
    return Py_BuildValue("(III)", d[0], d[1], d[2]);
}

static PyObject *
gpu_time(bc_trace *t, CUevent e)
{
    float ms = 0;
    if (e == NULL || bc_drv.cuEventElapsedTime(&ms, t->base, e) != CUDA_SUCCESS)
        return NULL;
    return PyLong_FromLongLong(t->base_ns + (long long)((double)ms * 1e6));
}

static PyObject *
record_tuple(bc_trace *t, rec *r, int64_t stop_ns)
{
    PyObject *name = NULL, *g0 = NULL, *g1 = NULL, *grid = NULL, *block = NULL, *out = NULL;
    if (r->name != NULL)
        name = Py_NewRef(r->name);
    else if (r->kind == BC_TRACE_COPY)
        name = PyUnicode_FromString(copy_names[r->detail]);
    else
        name = PyUnicode_FromString(r->label ? r->label : kind_names[r->kind]);
    if (name == NULL)
        goto done;
    if (r->ev0 && r->ev1) {
        g0 = gpu_time(t, r->ev0);
        g1 = g0 ? gpu_time(t, r->ev1) : NULL;
        if (g1 == NULL)
            Py_CLEAR(g0);
    }
    if ((grid = dims_tuple(r, r->grid)) == NULL || (block = dims_tuple(r, r->block)) == NULL)
        goto done;
    out = Py_BuildValue("(sOKkLLOOKOOIO)", kind_names[r->kind], name,
                        (unsigned long long)(uintptr_t)r->stream, r->tid, (long long)r->t0,
                        (long long)(r->open ? stop_ns : r->t1), g0 ? g0 : Py_None,
                        g1 ? g1 : Py_None, r->bytes, grid, block,
                        r->shared, r->failed ? Py_True : Py_False);
done:
    Py_XDECREF(name);
    Py_XDECREF(g0);
    Py_XDECREF(g1);
    Py_XDECREF(grid);
    Py_XDECREF(block);
    return out;
}

PyDoc_STRVAR(trace_stop_doc,
"_trace_stop()\n--\n\n"
"Private (see barecuda.tools.trace): stop recording, wait for the recorded work\n"
"and return the records as a list of tuples (kind, name, stream, thread,\n"
"host_start_ns, host_end_ns, gpu_start_ns, gpu_end_ns, bytes, grid, block,\n"
"shared, failed).  RuntimeError when no trace is active.");

static PyObject *
bc_trace_stop(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_from_module(m);
    bc_trace *t = st->trace;
    if (t == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "no trace is active");
        return NULL;
    }
    st->trace = NULL; /* from here on no thread appends; stale tokens record nothing */
    int64_t stop_ns = bc_monotonic_ns();
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < t->n; i++)
        if (t->recs[i].ev1 != NULL)
            bc_drv.cuEventSynchronize(t->recs[i].ev1);
    Py_END_ALLOW_THREADS
    PyObject *list = PyList_New(t->n);
    if (list != NULL) {
        for (Py_ssize_t i = 0; i < t->n; i++) {
            PyObject *item = record_tuple(t, &t->recs[i], stop_ns);
            if (item == NULL) {
                Py_CLEAR(list);
                break;
            }
            PyList_SET_ITEM(list, i, item);
        }
    }
    trace_free(t);
    return list;
}

PyDoc_STRVAR(trace_active_doc,
"_trace_active()\n--\n\n"
"Private: True while a trace is recording.");

static PyObject *
bc_trace_active(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    return PyBool_FromLong(bc_state_from_module(m)->trace != NULL);
}

static PyMethodDef trace_methods[] = {
    {"_trace_start", bc_trace_start, METH_NOARGS, trace_start_doc},
    {"_trace_stop", bc_trace_stop, METH_NOARGS, trace_stop_doc},
    {"_trace_active", bc_trace_active, METH_NOARGS, trace_active_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_trace_setup(PyObject *m, bc_State *st)
{
    BC_UNUSED(st);
    return PyModule_AddFunctions(m, trace_methods);
}
