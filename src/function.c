/* SPDX-License-Identifier: MIT */
/* Function: one kernel of a Module, its launches and its attributes.
 *
 * The launch path is all C: Function is called through vectorcall and the
 * prepared_* methods are METH_FASTCALL; the arguments are packed by
 * src/argpack.c straight into a stack buffer (heap only past BC_ARGS_STACK
 * bytes) and handed to cuLaunchKernel as one parameter buffer.  No Python
 * object is made per argument on the hot path.
 *
 * When the driver can describe the kernel's parameters (cuFuncGetParamInfo),
 * Function keeps their offsets and sizes, read once when it is made, so
 * argpack.c places each argument at the kernel's own offset and checks its
 * size.  What __call__ and prepare() accept is described in argpack.c.
 *
 * On the launch floor with argpack.c, above Module (src/cumodule.c), whose
 * get_function() makes Functions through bc_function_new, registered with it at
 * module init. */
#include "barecuda/module.h"
#include "barecuda/argpack.h"
#include "barecuda/argparse.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"
#include "barecuda/array.h"
#include "barecuda/memory.h"
#include "barecuda/stream.h"
#include "barecuda/trace.h"


/* Whether cuLaunchKernel runs with the GIL released.  A tuning knob chosen by
 * the launch benchmark (_bench_launch.py measures both); see _launch_release_gil. */
static int launch_release_gil = 0;

static int
module_ok(bc_State *st, bc_Function *f)
{
    if (f->module->handle == NULL || (f->module->ctx && f->module->ctx->released))
        return bc_module_usable(st, f->module);
    return 0;
}

/* PyCUDA's argument-handler protocol (driver.ArgumentHandler, In, Out, InOut, or
 * any object with get_device_alloc()).  `handlers` lists each handler followed
 * by the memory its get_device_alloc() gave.  Before the launch each handler's
 * pre_call(stream) runs; after it, post_call(stream) runs where a handler has
 * one (ArgumentHandler has none, Out and InOut do), the kernel finished first
 * when `stream` is None (the default stream), as PyCUDA synchronizes there; on
 * a stream, the memory stays alive until the stream is done (the kernel may
 * still read it). */
BC_COLD static int
call_handlers(bc_State *st, PyObject *handlers, int after, PyObject *stream, CUstream s)
{
    const char *name = after ? "post_call" : "pre_call";
    int finished = !after || stream != Py_None;
    for (Py_ssize_t i = 0; i + 1 < PyList_GET_SIZE(handlers); i += 2) {
        PyObject *h = PyList_GET_ITEM(handlers, i);
        PyObject *method = PyObject_GetAttrString(h, name);
        if (method == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                return -1;
            PyErr_Clear();
        } else {
            if (!finished) {
                CUresult rc;
                Py_BEGIN_ALLOW_THREADS
                rc = bc_drv.cuStreamSynchronize(s);
                Py_END_ALLOW_THREADS
                if (bc_check(st, rc, "cuStreamSynchronize") < 0) {
                    Py_DECREF(method);
                    return -1;
                }
                finished = 1;
            }
            PyObject *r = PyObject_CallOneArg(method, stream);
            Py_DECREF(method);
            if (r == NULL)
                return -1;
            Py_DECREF(r);
        }
        if (after && bc_stream_keep_alive(st, stream, PyList_GET_ITEM(handlers, i + 1)) < 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ the launch */

static CUresult
raw_launch(bc_Function *f, const unsigned int g[3], const unsigned int b[3], unsigned int shared,
           CUstream s, void *buf, size_t size)
{
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    return bc_drv.cuLaunchKernel(f->handle, g[0], g[1], g[2], b[0], b[1], b[2], shared, s, NULL,
                                 size ? extra : NULL);
}

/* Launch with the GIL as the knob says; when no (or another) context is current
 * on this thread, retry once with the module's context made current. */
BC_HOT static CUresult
do_launch(bc_State *st, bc_Function *f, const unsigned int g[3], const unsigned int b[3],
          unsigned int shared, CUstream s, void *buf, size_t size)
{
    CUresult rc;
    bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_kernel(st, f->name, g, b, shared, s));
    if (launch_release_gil) {
        Py_BEGIN_ALLOW_THREADS
        rc = raw_launch(f, g, b, shared, s, buf, size);
        Py_END_ALLOW_THREADS
    } else
        rc = raw_launch(f, g, b, shared, s, buf, size);
    if (rc == CUDA_ERROR_INVALID_CONTEXT || rc == CUDA_ERROR_INVALID_HANDLE) {
        int entered = f->module->ctx ? bc_context_enter(f->module->ctx) : -1;
        if (entered == 1) {
            rc = raw_launch(f, g, b, shared, s, buf, size);
            bc_context_leave(entered);
        }
    }
    BC_TRACE_END(st, tt, rc);
    return rc;
}

CUresult
bc_function_launch(bc_Function *f, const unsigned int g[3], const unsigned int b[3],
                   unsigned int shared, CUstream s, void *buf, size_t size)
{
    return do_launch(bc_state_of((PyObject *)f), f, g, b, shared, s, buf, size);
}

/* Elapsed seconds of a launch made between two events (synchronizes). */
typedef struct {
    CUevent start, end;
} timer;

BC_COLD static int
timer_start(bc_State *st, timer *t, CUstream s)
{
    t->start = t->end = NULL;
    if (bc_check(st, bc_drv.cuEventCreate(&t->start, CU_EVENT_DEFAULT), "cuEventCreate") < 0 ||
        bc_check(st, bc_drv.cuEventCreate(&t->end, CU_EVENT_DEFAULT), "cuEventCreate") < 0 ||
        bc_check(st, bc_drv.cuEventRecord(t->start, s), "cuEventRecord") < 0)
        return -1;
    return 0;
}

static void
timer_free(timer *t)
{
    if (t->start)
        bc_drv.cuEventDestroy(t->start);
    if (t->end)
        bc_drv.cuEventDestroy(t->end);
    t->start = t->end = NULL;
}

BC_COLD static PyObject *
timer_stop(bc_State *st, timer *t, CUstream s)
{
    if (bc_check(st, bc_drv.cuEventRecord(t->end, s), "cuEventRecord") < 0)
        return NULL;
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuEventSynchronize(t->end);
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, "cuEventSynchronize") < 0)
        return NULL;
    float ms = 0;
    if (bc_check(st, bc_drv.cuEventElapsedTime(&ms, t->start, t->end), "cuEventElapsedTime") < 0)
        return NULL;
    return PyFloat_FromDouble(ms * 1e-3);
}

/* ------------------------------------------------------------ __call__ */

/* Keyword names from call sites are interned, as ours are: then one pointer
 * compare decides, and only a name built at run time is compared by value. */
static int
kw_is(PyObject *key, PyObject *interned)
{
    return key == interned ||
           (!PyUnicode_CHECK_INTERNED(key) && PyUnicode_Compare(key, interned) == 0);
}

/* The launch of __call__ and launch(): pack `argv`, run the handlers around
 * it, time it when asked.  Inlined into both: as a call, it cost __call__ 29
 * instructions per launch (callgrind, 4 arguments: 401 -> 430). */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline PyObject *
call_launch(bc_State *st, bc_Function *f, PyObject *const *argv, Py_ssize_t n, PyObject *grid,
            PyObject *block, PyObject *stream, PyObject *shared, int timed)
{
    unsigned int g[3], b[3], sh;
    CUstream s = NULL;
    if (bc_args_launch_dims(f, grid, block, g, b) < 0 || bc_args_shared(shared, &sh) < 0 ||
        (stream != NULL && bc_stream_convert(st, stream, &s) < 0))
        return NULL;
    bc_packbuf pb;
    bc_packbuf_init(&pb);
    PyObject *out = NULL;
    timer t = {NULL, NULL};
    if (bc_args_pack_call_memo(st, f, argv, n, &pb) < 0 || module_ok(st, f) < 0)
        goto done;
    PyObject *stream_obj = stream ? stream : Py_None;
    if (pb.handlers && call_handlers(st, pb.handlers, 0, stream_obj, s) < 0)
        goto done;
    if (timed && timer_start(st, &t, s) < 0)
        goto done;
    if (bc_check(st, do_launch(st, f, g, b, sh, s, pb.buf, pb.size), "cuLaunchKernel") < 0)
        goto done;
    if (timed) {
        if ((out = timer_stop(st, &t, s)) == NULL)
            goto done;
    }
    if (pb.handlers && call_handlers(st, pb.handlers, 1, stream_obj, s) < 0) {
        Py_CLEAR(out);
        goto done;
    }
    if (out == NULL)
        out = Py_NewRef(Py_None);
done:
    timer_free(&t);
    bc_packbuf_free(&pb);
    return out;
}

BC_HOT static PyObject *
function_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    bc_Function *f = (bc_Function *)callable;
    bc_State *st = bc_state_of(callable);
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    PyObject *grid = NULL, *block = NULL, *stream = NULL, *shared = NULL, *time_kernel = NULL;
    if (kwnames != NULL) {
        Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t i = 0; i < nk; i++) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, i), *v = args[n + i];
            if (kw_is(key, st->str_block))
                block = v;
            else if (kw_is(key, st->str_grid))
                grid = v;
            else if (kw_is(key, st->str_stream))
                stream = v;
            else if (kw_is(key, st->str_shared))
                shared = v;
            else if (kw_is(key, st->str_time_kernel))
                time_kernel = v;
            else if (PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, "texrefs") == 0) {
                int empty = PySequence_Check(v) ? PySequence_Size(v) == 0 : 0;
                if (!empty) {
                    PyErr_SetString(PyExc_TypeError,
                                    "texture references are gone since CUDA 12: pass texture "
                                    "objects as kernel arguments instead of texrefs=");
                    return NULL;
                }
            } else {
                PyErr_Format(PyExc_TypeError,
                             "Function() got an unexpected keyword argument %R (expected block, "
                             "grid, stream, shared, time_kernel)", key);
                return NULL;
            }
        }
    }
    int timed = 0;
    if (time_kernel != NULL && (timed = PyObject_IsTrue(time_kernel)) < 0)
        return NULL;
    return call_launch(st, f, args, n, grid, block, stream, shared, timed);
}

PyDoc_STRVAR(launch_doc,
"launch($self, grid, block, args, /, stream=None, shared=0)\n--\n\n"
"Launch with the kernel's arguments in one tuple (or list), packed as __call__\n"
"packs them, argument handlers (In/Out/InOut) included.  The same launch as\n"
"f(*args, grid=grid, block=block, stream=stream, shared=shared), without what\n"
"CPython's call costs when it spreads a tuple into a call: a program that keeps\n"
"its arguments in a tuple, and passes the same tuple again, pays the least per\n"
"launch at any argument count.");

BC_HOT static PyObject *
function_launch(bc_Function *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "launch() takes grid, block and args, positionally "
                     "(%zd given)", nargs);
        return NULL;
    }
    PyObject *stream = NULL, *shared = NULL;
    if (kwnames != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, i);
            if (kw_is(key, st->str_stream))
                stream = args[nargs + i];
            else if (kw_is(key, st->str_shared))
                shared = args[nargs + i];
            else {
                PyErr_Format(PyExc_TypeError, "launch() got an unexpected keyword argument %R", key);
                return NULL;
            }
        }
    }
    PyObject *kargs = args[2];
    if (!PyTuple_Check(kargs) && !PyList_Check(kargs)) {
        PyErr_Format(PyExc_TypeError, "launch(): args must be a tuple or a list, not %.100s",
                     Py_TYPE(kargs)->tp_name);
        return NULL;
    }
    /* a list (or a tuple subclass) as a tuple of its own: code run while packing
     * (an __index__, a handler) cannot change it under us */
    PyObject *t = PyTuple_CheckExact(kargs) ? Py_NewRef(kargs) : PySequence_Tuple(kargs);
    if (t == NULL)
        return NULL;
    PyObject *out = call_launch(st, self, &PyTuple_GET_ITEM(t, 0), PyTuple_GET_SIZE(t), args[0],
                                args[1], stream, shared, 0);
    Py_DECREF(t);
    return out;
}

PyDoc_STRVAR(prepare_doc,
"prepare($self, arg_types)\n--\n\n"
"Fix the kernel's signature for prepared_call(): a struct-style string such as\n"
"\"PPi\" (P pointer, b/B int8/uint8, h/H, i/I, l/L, q/Q integers, e/f/d half,\n"
"float, double, F/D complex, '16s' a 16-byte struct) or a list of NumPy dtypes.\n"
"Returns self.");

static PyObject *
function_prepare(bc_Function *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs < 1 || nargs > 2 || (kwnames && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "prepare() takes one argument, arg_types");
        return NULL;
    }
    if (bc_args_prepare(self, args[0]) < 0)
        return NULL;
    return Py_NewRef(self);
}


/* prepared_call / prepared_async_call / prepared_timed_call share this. */
BC_HOT static PyObject *
prepared_launch(bc_Function *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                int has_stream, int timed, const char *name)
{
    bc_State *st = bc_state_of((PyObject *)self);
    Py_ssize_t fixed = has_stream ? 3 : 2;
    if (self->nprepared < 0)
        return bc_error_logic(st, "%s(): call prepare() first", name), NULL;
    if (nargs < fixed) {
        PyErr_Format(PyExc_TypeError, "%s() needs grid, block%s and the kernel's arguments",
                     name, has_stream ? ", stream" : "");
        return NULL;
    }
    PyObject *shared = NULL, *stream = has_stream ? args[2] : NULL;
    if (kwnames != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, i);
            if (kw_is(key, st->str_shared_size))
                shared = args[nargs + i];
            else if (!has_stream && kw_is(key, st->str_stream))
                stream = args[nargs + i];
            else {
                PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R",
                             name, key);
                return NULL;
            }
        }
    }
    unsigned int g[3], b[3], sh;
    CUstream s = NULL;
    if (bc_args_launch_dims(self, args[0], args[1], g, b) < 0 || bc_args_shared(shared, &sh) < 0 ||
        (stream != NULL && bc_stream_convert(st, stream, &s) < 0))
        return NULL;
    /* Packed into the Function's memo, or (while a launch on another thread
     * holds the memo, or while it rests) into a buffer of this call's own. */
    uint64_t stackbuf[BC_ARGS_STACK / 8];
    char *buf = (char *)stackbuf;
    PyObject *out = NULL;
    timer t = {NULL, NULL};
    bc_ArgMemo *memo;
    int rc = bc_args_pack_prepared_memo(st, self, args + fixed, nargs - fixed, &memo);
    if (rc < 0)
        return NULL;
    if (memo != NULL)
        buf = memo->buf;
    else if (rc == 1) {
        if (self->prepared_bytes > sizeof stackbuf &&
            (buf = PyMem_Malloc(self->prepared_bytes)) == NULL)
            return PyErr_NoMemory();
        if (bc_args_pack_prepared(st, self, args + fixed, nargs - fixed, buf) < 0)
            goto done;
    }
    if (module_ok(st, self) < 0)
        goto done;
    if (timed && timer_start(st, &t, s) < 0)
        goto done;
    if (bc_check(st, do_launch(st, self, g, b, sh, s, buf, self->prepared_bytes), "cuLaunchKernel") < 0)
        goto done;
    out = timed ? timer_stop(st, &t, s) : Py_NewRef(Py_None);
done:
    timer_free(&t);
    if (memo != NULL)
        bc_args_memo_done(memo);
    else if (buf != (char *)stackbuf)
        PyMem_Free(buf);
    return out;
}

PyDoc_STRVAR(prepared_call_doc,
"prepared_call($self, grid, block, *args, shared_size=0)\n--\n\n"
"Launch on the default stream with arguments converted to the prepare()d types.");

BC_HOT static PyObject *
function_prepared_call(bc_Function *self, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames)
{
    return prepared_launch(self, args, nargs, kwnames, 0, 0, "prepared_call");
}

PyDoc_STRVAR(prepared_async_call_doc,
"prepared_async_call($self, grid, block, stream, *args, shared_size=0)\n--\n\n"
"Launch on `stream` (None: the default stream) with prepare()d argument types.");

BC_HOT static PyObject *
function_prepared_async_call(bc_Function *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    return prepared_launch(self, args, nargs, kwnames, 1, 0, "prepared_async_call");
}

static PyObject *
timed_result(PyObject *seconds, PyObject *Py_UNUSED(ignored))
{
    return Py_NewRef(seconds);
}

static PyMethodDef timed_result_def = {"get_call_time", timed_result, METH_NOARGS,
                                       "get_call_time()\n--\n\nThe kernel's run time in seconds."};

PyDoc_STRVAR(prepared_timed_call_doc,
"prepared_timed_call($self, grid, block, *args, shared_size=0)\n--\n\n"
"Launch (timed with events) and return a callable giving the run time in seconds.");

static PyObject *
function_prepared_timed_call(bc_Function *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    PyObject *secs = prepared_launch(self, args, nargs, kwnames, 0, 1, "prepared_timed_call");
    if (secs == NULL)
        return NULL;
    PyObject *fn = PyCFunction_New(&timed_result_def, secs);
    Py_DECREF(secs);
    return fn;
}

/* ------------------------------------------------------------ launch_ex */

PyDoc_STRVAR(launch_ex_doc,
"launch_ex($self, grid, block, *args, stream=None, shared=0, cluster=None, cooperative=False,\n"
"          priority=None)\n--\n\n"
"Launch through cuLaunchKernelEx with launch attributes: a thread-block `cluster`\n"
"shape (grid must be a multiple of it), a `cooperative` launch (grid-wide sync),\n"
"and a scheduling `priority`.  Arguments pack as for __call__.");

static PyObject *
function_launch_ex(bc_Function *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, "launch_ex() needs grid, block and the kernel's arguments");
        return NULL;
    }
    PyObject *stream = NULL, *shared = NULL, *cluster = NULL, *coop = NULL, *prio = NULL;
    if (kwnames != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, i), *v = args[nargs + i];
            if (kw_is(key, st->str_stream))
                stream = v;
            else if (kw_is(key, st->str_shared))
                shared = v;
            else if (PyUnicode_CompareWithASCIIString(key, "cluster") == 0)
                cluster = v;
            else if (PyUnicode_CompareWithASCIIString(key, "cooperative") == 0)
                coop = v;
            else if (PyUnicode_CompareWithASCIIString(key, "priority") == 0)
                prio = v;
            else {
                PyErr_Format(PyExc_TypeError, "launch_ex() got an unexpected keyword argument %R",
                             key);
                return NULL;
            }
        }
    }
    unsigned int g[3], b[3], c[3], sh;
    CUstream s = NULL;
    if (bc_args_launch_dims(self, args[0], args[1], g, b) < 0 || bc_args_shared(shared, &sh) < 0 ||
        (stream != NULL && bc_stream_convert(st, stream, &s) < 0))
        return NULL;
    CUlaunchAttribute attrs[3];
    unsigned int nattrs = 0;
    memset(attrs, 0, sizeof attrs);
    if (cluster != NULL && cluster != Py_None) {
        if (bc_args_dims(cluster, "cluster", c) < 0)
            return NULL;
        if (g[0] % c[0] || g[1] % c[1] || g[2] % c[2]) {
            PyErr_Format(PyExc_ValueError,
                         "grid (%u, %u, %u) must be a multiple of cluster (%u, %u, %u)", g[0], g[1],
                         g[2], c[0], c[1], c[2]);
            return NULL;
        }
        attrs[nattrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attrs[nattrs].value.clusterDim.x = c[0];
        attrs[nattrs].value.clusterDim.y = c[1];
        attrs[nattrs].value.clusterDim.z = c[2];
        nattrs++;
    }
    if (coop != NULL) {
        int on = PyObject_IsTrue(coop);
        if (on < 0)
            return NULL;
        if (on) {
            attrs[nattrs].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
            attrs[nattrs].value.cooperative = 1;
            nattrs++;
        }
    }
    if (prio != NULL && prio != Py_None) {
        long long p;
        if (bc_arg_long(prio, "priority", INT_MIN, INT_MAX, &p) < 0)
            return NULL;
        attrs[nattrs].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
        attrs[nattrs].value.priority = (int)p;
        nattrs++;
    }
    bc_packbuf pb;
    bc_packbuf_init(&pb);
    PyObject *out = NULL;
    PyObject *stream_obj = stream ? stream : Py_None;
    if (bc_args_pack_call(st, self, args + 2, nargs - 2, &pb) < 0 || module_ok(st, self) < 0)
        goto done;
    if (pb.handlers && call_handlers(st, pb.handlers, 0, stream_obj, s) < 0)
        goto done;
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = g[0];
    cfg.gridDimY = g[1];
    cfg.gridDimZ = g[2];
    cfg.blockDimX = b[0];
    cfg.blockDimY = b[1];
    cfg.blockDimZ = b[2];
    cfg.sharedMemBytes = sh;
    cfg.hStream = s;
    cfg.attrs = nattrs ? attrs : NULL;
    cfg.numAttrs = nattrs;
    size_t size = pb.size;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, pb.buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_kernel(st, self->name, g, b, sh, s));
    CUresult rc = bc_drv.cuLaunchKernelEx(&cfg, self->handle, NULL, size ? extra : NULL);
    if (rc == CUDA_ERROR_INVALID_CONTEXT || rc == CUDA_ERROR_INVALID_HANDLE) {
        int entered = self->module->ctx ? bc_context_enter(self->module->ctx) : -1;
        if (entered == 1) {
            rc = bc_drv.cuLaunchKernelEx(&cfg, self->handle, NULL, size ? extra : NULL);
            bc_context_leave(entered);
        }
    }
    BC_TRACE_END(st, tt, rc);
    if (bc_check(st, rc, "cuLaunchKernelEx") < 0)
        goto done;
    if (pb.handlers && call_handlers(st, pb.handlers, 1, stream_obj, s) < 0)
        goto done;
    out = Py_NewRef(Py_None);
done:
    bc_packbuf_free(&pb);
    return out;
}

/* ------------------------------------------------------------ attributes, occupancy */

static PyObject *
get_attr(bc_Function *self, int attr)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (module_ok(st, self) < 0)
        return NULL;
    int v = 0;
    if (bc_check(st, bc_drv.cuFuncGetAttribute(&v, (CUfunction_attribute)attr, self->handle),
                 "cuFuncGetAttribute") < 0)
        return NULL;
    return PyLong_FromLong(v);
}

static PyObject *
function_attr_getter(bc_Function *self, void *closure)
{
    return get_attr(self, (int)(intptr_t)closure);
}

PyDoc_STRVAR(get_attribute_doc,
"get_attribute($self, attr)\n--\n\nThe function_attribute `attr` of the kernel (cuFuncGetAttribute).");

static PyObject *
function_get_attribute(bc_Function *self, PyObject *arg)
{
    long long a;
    if (bc_arg_long(arg, "function attribute", 0, CU_FUNC_ATTRIBUTE_MAX - 1, &a) < 0)
        return NULL;
    return get_attr(self, (int)a);
}

PyDoc_STRVAR(set_attribute_doc,
"set_attribute($self, attr, value)\n--\n\n"
"Set a function_attribute, e.g. MAX_DYNAMIC_SHARED_SIZE_BYTES (cuFuncSetAttribute).");

static PyObject *
function_set_attribute(bc_Function *self, PyObject *const *args, Py_ssize_t nargs)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "set_attribute() takes (attr, value)");
        return NULL;
    }
    long long a, v;
    if (bc_arg_long(args[0], "function attribute", 0, CU_FUNC_ATTRIBUTE_MAX - 1, &a) < 0 ||
        bc_arg_long(args[1], "attribute value", INT_MIN, INT_MAX, &v) < 0 || module_ok(st, self) < 0)
        return NULL;
    if (bc_check(st, bc_drv.cuFuncSetAttribute(self->handle, (CUfunction_attribute)a, (int)v),
                 "cuFuncSetAttribute") < 0)
        return NULL;
    int mt;
    if (bc_drv.cuFuncGetAttribute(&mt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, self->handle) ==
        CUDA_SUCCESS)
        self->max_threads = mt;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(set_cache_config_doc,
"set_cache_config($self, config)\n--\n\nPrefer shared memory or L1 for this kernel (func_cache.X).");

static PyObject *
function_set_cache_config(bc_Function *self, PyObject *arg)
{
    bc_State *st = bc_state_of((PyObject *)self);
    long long c;
    if (bc_arg_long(arg, "cache config", 0, CU_FUNC_CACHE_PREFER_EQUAL, &c) < 0 ||
        module_ok(st, self) < 0)
        return NULL;
    if (bc_check(st, bc_drv.cuFuncSetCacheConfig(self->handle, (CUfunc_cache)c),
                 "cuFuncSetCacheConfig") < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(max_active_blocks_doc,
"max_active_blocks_per_multiprocessor($self, block_size, dynamic_smem=0)\n--\n\n"
"How many blocks of `block_size` threads can run at once on one multiprocessor.");

static PyObject *
function_max_active_blocks(bc_Function *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of((PyObject *)self);
    static char *kwlist[] = {"block_size", "dynamic_smem", NULL};
    PyObject *bs, *smem = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:max_active_blocks_per_multiprocessor",
                                     kwlist, &bs, &smem))
        return NULL;
    long long block;
    size_t dyn = 0;
    if (bc_arg_long(bs, "block_size", 1, 1024, &block) < 0 ||
        (smem && bc_arg_size(smem, "dynamic_smem", &dyn) < 0) || module_ok(st, self) < 0)
        return NULL;
    int n = 0;
    if (bc_check(st, bc_drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, self->handle,
                                                                         (int)block, dyn),
                 "cuOccupancyMaxActiveBlocksPerMultiprocessor") < 0)
        return NULL;
    return PyLong_FromLong(n);
}

PyDoc_STRVAR(max_potential_block_size_doc,
"max_potential_block_size($self, dynamic_smem=0, block_size_limit=0)\n--\n\n"
"(min_grid_size, block_size): the block size reaching the best occupancy, and the\n"
"smallest grid that fills the device with it.");

static PyObject *
function_max_potential_block_size(bc_Function *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of((PyObject *)self);
    static char *kwlist[] = {"dynamic_smem", "block_size_limit", NULL};
    PyObject *smem = NULL, *lim = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:max_potential_block_size", kwlist, &smem,
                                     &lim))
        return NULL;
    size_t dyn = 0;
    long long limit = 0;
    if ((smem && bc_arg_size(smem, "dynamic_smem", &dyn) < 0) ||
        (lim && bc_arg_long(lim, "block_size_limit", 0, 1024, &limit) < 0) ||
        module_ok(st, self) < 0)
        return NULL;
    int min_grid = 0, block = 0;
    if (bc_check(st, bc_drv.cuOccupancyMaxPotentialBlockSize(&min_grid, &block, self->handle, NULL,
                                                             dyn, (int)limit),
                 "cuOccupancyMaxPotentialBlockSize") < 0)
        return NULL;
    return Py_BuildValue("(ii)", min_grid, block);
}

/* ------------------------------------------------------------ the C floor */

PyDoc_STRVAR(bench_launch_doc,
"_bench_launch(function, grid, block, args, iterations, mode='enqueue', stream=None)\n--\n\n"
"Private: the launch floor.  Packs `args` (a tuple packed as __call__ does, or\n"
"bytes already packed) once, then launches `iterations` times in a C loop with\n"
"the GIL released and returns seconds per launch.  mode 'enqueue' synchronizes\n"
"the stream once at the end; 'sync' after every launch.");

static PyObject *
bc_bench_launch(PyObject *m, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_from_module(m);
    static char *kwlist[] = {"function", "grid", "block", "args", "iterations", "mode", "stream",
                             NULL};
    PyObject *fobj, *grid, *block, *fargs, *stream = NULL;
    Py_ssize_t iters;
    const char *mode = "enqueue";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OOOn|sO:_bench_launch", kwlist,
                                     (PyTypeObject *)st->FunctionType, &fobj, &grid, &block,
                                     &fargs, &iters, &mode, &stream))
        return NULL;
    bc_Function *f = (bc_Function *)fobj;
    int sync_each = strcmp(mode, "sync") == 0;
    if (!sync_each && strcmp(mode, "enqueue") != 0) {
        PyErr_Format(PyExc_ValueError, "_bench_launch(): mode must be 'enqueue' or 'sync', not %s",
                     mode);
        return NULL;
    }
    if (iters < 1) {
        PyErr_SetString(PyExc_ValueError, "_bench_launch(): iterations must be positive");
        return NULL;
    }
    unsigned int g[3], b[3];
    CUstream s = NULL;
    if (module_ok(st, f) < 0 || bc_args_launch_dims(f, grid, block, g, b) < 0 ||
        (stream && bc_stream_convert(st, stream, &s) < 0))
        return NULL;
    bc_packbuf pb;
    bc_packbuf_init(&pb);
    PyObject *out = NULL;
    if (PyBytes_Check(fargs)) {
        if (bc_packbuf_reserve(&pb, (size_t)PyBytes_GET_SIZE(fargs)) < 0)
            goto done;
        memcpy(pb.buf, PyBytes_AS_STRING(fargs), (size_t)PyBytes_GET_SIZE(fargs));
        pb.size = (size_t)PyBytes_GET_SIZE(fargs);
    } else if (PyTuple_Check(fargs)) {
        if (bc_args_pack_call(st, f, &PyTuple_GET_ITEM(fargs, 0), PyTuple_GET_SIZE(fargs), &pb) < 0)
            goto done;
        if (pb.handlers) {
            PyErr_SetString(PyExc_TypeError, "_bench_launch(): argument handlers are not allowed");
            goto done;
        }
    } else {
        PyErr_SetString(PyExc_TypeError, "_bench_launch(): args must be a tuple or bytes");
        goto done;
    }
    CUresult rc = CUDA_SUCCESS;
    double t0 = 0, t1 = 0;
    size_t size = pb.size;
    Py_BEGIN_ALLOW_THREADS
    t0 = bc_monotonic_s();
    for (Py_ssize_t i = 0; i < iters && rc == CUDA_SUCCESS; i++) {
        rc = raw_launch(f, g, b, 0, s, pb.buf, size);
        if (sync_each && rc == CUDA_SUCCESS)
            rc = bc_drv.cuStreamSynchronize(s);
    }
    if (rc == CUDA_SUCCESS && !sync_each)
        rc = bc_drv.cuStreamSynchronize(s);
    t1 = bc_monotonic_s();
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, "cuLaunchKernel") < 0)
        goto done;
    out = PyFloat_FromDouble((t1 - t0) / (double)iters);
done:
    bc_packbuf_free(&pb);
    return out;
}


PyDoc_STRVAR(bench_noop_doc,
"_bench_noop(*args, **kwargs)\n--\n\n"
"Private: does nothing and returns None.  Called the way __call__ and the prepared\n"
"calls are (METH_FASTCALL with keywords), it times what CPython's call site costs\n"
"alone: with more than 30 arguments (positional plus twice the keywords) CPython\n"
"builds a tuple and a dict for every call (CALL_FUNCTION_EX).");

static PyObject *
bc_bench_noop(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    BC_UNUSED(m);
    BC_UNUSED(args);
    BC_UNUSED(nargs);
    BC_UNUSED(kwnames);
    Py_RETURN_NONE;
}

/* The launch _bench_fire makes, packed once by _bench_arm: dims and the
 * argument bytes in one bytes object, beside the Function that owns them. */
typedef struct {
    unsigned int g[3], b[3];
    size_t size;
    char buf[];
} armed_launch;

PyDoc_STRVAR(bench_arm_doc,
"_bench_arm(function, grid=None, block=None, args=None, /)\n--\n\n"
"Private: pack `args` as __call__ would, once, for _bench_fire().  None disarms.");

static PyObject *
bc_bench_arm(PyObject *m, PyObject *args)
{
    bc_State *st = bc_state_from_module(m);
    PyObject *fobj, *grid = NULL, *block = NULL, *fargs = NULL;
    if (!PyArg_ParseTuple(args, "O|OOO!:_bench_arm", &fobj, &grid, &block, &PyTuple_Type, &fargs))
        return NULL;
    if (fobj == Py_None) {
        Py_CLEAR(st->bench_armed);
        Py_RETURN_NONE;
    }
    if (!PyObject_TypeCheck(fobj, (PyTypeObject *)st->FunctionType) || fargs == NULL) {
        PyErr_SetString(PyExc_TypeError, "_bench_arm(function, grid, block, args) or _bench_arm(None)");
        return NULL;
    }
    bc_Function *f = (bc_Function *)fobj;
    armed_launch a;
    if (bc_args_launch_dims(f, grid, block, a.g, a.b) < 0)
        return NULL;
    bc_packbuf pb;
    bc_packbuf_init(&pb);
    PyObject *bytes = NULL, *out = NULL;
    if (bc_args_pack_call(st, f, &PyTuple_GET_ITEM(fargs, 0), PyTuple_GET_SIZE(fargs), &pb) < 0)
        goto done;
    if (pb.handlers) {
        PyErr_SetString(PyExc_TypeError, "_bench_arm(): argument handlers are not allowed");
        goto done;
    }
    a.size = pb.size;
    if ((bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(sizeof a + pb.size))) == NULL)
        goto done;
    memcpy(PyBytes_AS_STRING(bytes), &a, sizeof a);
    memcpy(PyBytes_AS_STRING(bytes) + sizeof a, pb.buf, pb.size);
    Py_XSETREF(st->bench_armed, PyTuple_Pack(2, fobj, bytes));
    if (st->bench_armed != NULL)
        out = Py_NewRef(Py_None);
done:
    Py_XDECREF(bytes);
    bc_packbuf_free(&pb);
    return out;
}

PyDoc_STRVAR(bench_fire_doc,
"_bench_fire(*args, **kwargs)\n--\n\n"
"Private: makes the launch _bench_arm() packed, ignoring its arguments.  Called\n"
"from the call site of __call__, it is the least any binding can cost there: the\n"
"call and one cuLaunchKernel, with no argument handled.");

static PyObject *
bc_bench_fire(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    BC_UNUSED(args);
    BC_UNUSED(nargs);
    BC_UNUSED(kwnames);
    bc_State *st = bc_state_from_module(m);
    if (st->bench_armed == NULL)
        return bc_error_logic(st, "_bench_fire(): call _bench_arm() first"), NULL;
    bc_Function *f = (bc_Function *)PyTuple_GET_ITEM(st->bench_armed, 0);
    const armed_launch *a = (const armed_launch *)(const void *)PyBytes_AS_STRING(
        PyTuple_GET_ITEM(st->bench_armed, 1));
    if (module_ok(st, f) < 0)
        return NULL;
    if (bc_check(st, raw_launch(f, a->g, a->b, 0, NULL, (void *)a->buf, a->size),
                 "cuLaunchKernel") < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(launch_release_gil_doc,
"_launch_release_gil(flag=None)\n--\n\n"
"Private tuning knob: whether cuLaunchKernel runs with the GIL released.  Sets it\n"
"when `flag` is given; returns the previous setting.");

static PyObject *
bc_launch_release_gil(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    BC_UNUSED(m);
    int prev = launch_release_gil;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "_launch_release_gil(flag=None)");
        return NULL;
    }
    if (nargs == 1 && args[0] != Py_None) {
        int v = PyObject_IsTrue(args[0]);
        if (v < 0)
            return NULL;
        launch_release_gil = v;
    }
    return PyBool_FromLong(prev);
}

PyDoc_STRVAR(test_function_doc,
"_test_function(name, params=None, max_threads=1024)\n--\n\n"
"Private, for CPU tests: a Function of an unloaded stand-in Module, with the\n"
"parameter layout `params` ((offset, size), ...) or unknown.  Everything up to the\n"
"launch works (validation, packing, prepare); launching raises LogicError.");

static PyObject *
bc_test_function(PyObject *m, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_from_module(m);
    static char *kwlist[] = {"name", "params", "max_threads", NULL};
    PyObject *name, *params = Py_None;
    int mt = 1024;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U|Oi:_test_function", kwlist, &name, &params,
                                     &mt))
        return NULL;
    bc_Module *mod = PyObject_GC_New(bc_Module, (PyTypeObject *)st->ModuleType);
    if (mod == NULL)
        return NULL;
    mod->handle = NULL;
    mod->ctx = NULL;
    mod->weakreflist = NULL;
    mod->dict = NULL;
    PyObject_GC_Track(mod);
    bc_Function *self = PyObject_GC_New(bc_Function, (PyTypeObject *)st->FunctionType);
    if (self == NULL) {
        Py_DECREF(mod);
        return NULL;
    }
    self->vectorcall = function_vectorcall;
    self->handle = NULL;
    self->module = mod;
    self->name = Py_NewRef(name);
    self->max_threads = mt;
    self->nparams = -1;
    self->param_offset = self->param_size = NULL;
    self->param_bytes = 0;
    self->param_gaps = 0;
    self->nprepared = -1;
    self->prepared = NULL;
    self->prepared_bytes = 0;
    self->arg_format = NULL;
    self->prepared_gaps = 0;
    self->dims_grid = self->dims_block = NULL;
    self->dims_max_threads = 0;
    self->call_memo = self->prep_memo = NULL;
    self->weakreflist = NULL;
    self->dict = NULL;
    PyObject_GC_Track(self);
    if (params != Py_None) {
        PyObject *seq = PySequence_Fast(params, "params must be a sequence of (offset, size)");
        if (seq == NULL)
            goto error;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        self->param_offset = PyMem_Calloc((size_t)n + 1, sizeof(unsigned int));
        self->param_size = PyMem_Calloc((size_t)n + 1, sizeof(unsigned int));
        for (Py_ssize_t i = 0; i < n; i++) {
            unsigned int o, z;
            if (!PyArg_ParseTuple(PySequence_Fast_ITEMS(seq)[i], "II", &o, &z)) {
                Py_DECREF(seq);
                goto error;
            }
            self->param_offset[i] = o;
            self->param_size[i] = z;
        }
        self->nparams = n;
        bc_args_layout(self);
        Py_DECREF(seq);
    }
    return (PyObject *)self;
error:
    Py_DECREF(self);
    return NULL;
}

/* ------------------------------------------------------------ the type */

PyObject *
bc_function_new(bc_State *st, bc_Module *module, PyObject *name)
{
    const char *cname = PyUnicode_AsUTF8(name);
    if (cname == NULL)
        return NULL;
    CUfunction h;
    CUresult rc = bc_drv.cuModuleGetFunction(&h, module->handle, cname);
    if (rc == CUDA_ERROR_NOT_FOUND) {
        bc_error_logic(st, "module has no function named %R (is it extern \"C\" or "
                           "__global__? C++ names are mangled)", name);
        return NULL;
    }
    if (bc_check(st, rc, "cuModuleGetFunction") < 0)
        return NULL;
    int mt = 1024;
    if (bc_check(st, bc_drv.cuFuncGetAttribute(&mt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, h),
                 "cuFuncGetAttribute") < 0)
        return NULL;
    bc_Function *self = PyObject_GC_New(bc_Function, (PyTypeObject *)st->FunctionType);
    if (self == NULL)
        return NULL;
    self->vectorcall = function_vectorcall;
    self->handle = h;
    self->module = (bc_Module *)Py_NewRef(module);
    self->name = Py_NewRef(name);
    self->max_threads = mt;
    self->nparams = -1;
    self->param_offset = self->param_size = NULL;
    self->param_bytes = 0;
    self->param_gaps = 0;
    self->nprepared = -1;
    self->prepared = NULL;
    self->prepared_bytes = 0;
    self->arg_format = NULL;
    self->prepared_gaps = 0;
    self->dims_grid = self->dims_block = NULL;
    self->dims_max_threads = 0;
    self->call_memo = self->prep_memo = NULL;
    self->weakreflist = NULL;
    self->dict = NULL;
    PyObject_GC_Track(self);
    /* The kernel's parameter layout, when the driver can tell (CUDA 12.4+). */
    size_t cap = 0, n = 0;
    for (;;) {
        size_t off, size;
        rc = bc_drv.cuFuncGetParamInfo(h, n, &off, &size);
        if (rc != CUDA_SUCCESS)
            break;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            unsigned int *po = PyMem_Realloc(self->param_offset, cap * sizeof *po);
            if (po != NULL)
                self->param_offset = po;
            unsigned int *ps = po ? PyMem_Realloc(self->param_size, cap * sizeof *ps) : NULL;
            if (ps != NULL)
                self->param_size = ps;
            if (po == NULL || ps == NULL) {
                Py_DECREF(self);
                return PyErr_NoMemory();
            }
        }
        self->param_offset[n] = (unsigned int)off;
        self->param_size[n] = (unsigned int)size;
        n++;
    }
    /* Past the last parameter the driver answers CUDA_ERROR_INVALID_VALUE; any
     * other answer (an old driver) means we cannot check arguments. */
    if (rc == CUDA_ERROR_INVALID_VALUE) {
        self->nparams = (Py_ssize_t)n;
        bc_args_layout(self);
    }
    return (PyObject *)self;
}

/* tp_clear: only the instance dict (the parents stay until dealloc). */
static int
function_clear(bc_Function *self)
{
    Py_CLEAR(self->dict);
    return 0;
}

static int
function_traverse(bc_Function *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->dict);
    Py_VISIT(self->module);
    Py_VISIT(self->dims_grid);
    Py_VISIT(self->dims_block);
    return 0;
}

static void
function_dealloc(bc_Function *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    PyMem_Free(self->param_offset);
    PyMem_Free(self->param_size);
    PyMem_Free(self->prepared);
    bc_args_memo_free(&self->call_memo);
    bc_args_memo_free(&self->prep_memo);
    Py_CLEAR(self->arg_format);
    Py_CLEAR(self->dims_grid);
    Py_CLEAR(self->dims_block);
    Py_CLEAR(self->name);
    Py_CLEAR(self->module);
    Py_CLEAR(self->dict);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
function_repr(bc_Function *self)
{
    return PyUnicode_FromFormat("<barecuda.driver.Function %U>", self->name);
}

static PyObject *
function_get_handle(bc_Function *self, void *Py_UNUSED(closure))
{
    return PyLong_FromVoidPtr((void *)self->handle);
}

static PyObject *
function_get_num_params(bc_Function *self, void *Py_UNUSED(closure))
{
    if (self->nparams < 0)
        Py_RETURN_NONE;
    return PyLong_FromSsize_t(self->nparams);
}

static PyObject *
function_get_param_info(bc_Function *self, void *Py_UNUSED(closure))
{
    if (self->nparams < 0)
        Py_RETURN_NONE;
    PyObject *out = PyTuple_New(self->nparams);
    for (Py_ssize_t i = 0; out && i < self->nparams; i++) {
        PyObject *p = Py_BuildValue("(II)", self->param_offset[i], self->param_size[i]);
        if (p == NULL)
            Py_CLEAR(out);
        else
            PyTuple_SET_ITEM(out, i, p);
    }
    return out;
}

static PyObject *
function_get_arg_format(bc_Function *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->arg_format ? self->arg_format : Py_None);
}

static PyMethodDef function_methods[] = {
    {"prepare", (PyCFunction)(void (*)(void))function_prepare, METH_FASTCALL | METH_KEYWORDS,
     prepare_doc},
    {"prepared_call", (PyCFunction)(void (*)(void))function_prepared_call,
     METH_FASTCALL | METH_KEYWORDS, prepared_call_doc},
    {"prepared_async_call", (PyCFunction)(void (*)(void))function_prepared_async_call,
     METH_FASTCALL | METH_KEYWORDS, prepared_async_call_doc},
    {"prepared_timed_call", (PyCFunction)(void (*)(void))function_prepared_timed_call,
     METH_FASTCALL | METH_KEYWORDS, prepared_timed_call_doc},
    {"launch", (PyCFunction)(void (*)(void))function_launch, METH_FASTCALL | METH_KEYWORDS,
     launch_doc},
    {"launch_ex", (PyCFunction)(void (*)(void))function_launch_ex, METH_FASTCALL | METH_KEYWORDS,
     launch_ex_doc},
    {"get_attribute", (PyCFunction)function_get_attribute, METH_O, get_attribute_doc},
    {"set_attribute", (PyCFunction)(void (*)(void))function_set_attribute, METH_FASTCALL,
     set_attribute_doc},
    {"set_cache_config", (PyCFunction)function_set_cache_config, METH_O, set_cache_config_doc},
    {"max_active_blocks_per_multiprocessor", (PyCFunction)(void (*)(void))function_max_active_blocks,
     METH_VARARGS | METH_KEYWORDS, max_active_blocks_doc},
    {"max_potential_block_size", (PyCFunction)(void (*)(void))function_max_potential_block_size,
     METH_VARARGS | METH_KEYWORDS, max_potential_block_size_doc},
    {NULL, NULL, 0, NULL},
};

#define ATTR(name, id, doc) {name, (getter)function_attr_getter, NULL, doc, (void *)(intptr_t)(id)}

static PyGetSetDef function_getset[] = {
    BC_DICT_GETSET,
    ATTR("max_threads_per_block", CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
         "Most threads a block of this kernel may have."),
    ATTR("shared_size_bytes", CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "Static shared memory (bytes)."),
    ATTR("const_size_bytes", CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, "Constant memory (bytes)."),
    ATTR("local_size_bytes", CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "Local memory per thread (bytes)."),
    ATTR("num_regs", CU_FUNC_ATTRIBUTE_NUM_REGS, "Registers per thread."),
    ATTR("ptx_version", CU_FUNC_ATTRIBUTE_PTX_VERSION, "PTX virtual architecture, e.g. 90."),
    ATTR("binary_version", CU_FUNC_ATTRIBUTE_BINARY_VERSION, "Binary architecture, e.g. 90."),
    ATTR("max_dynamic_shared_size_bytes", CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
         "Largest dynamic shared memory a launch may ask for."),
    {"handle", (getter)function_get_handle, NULL, "The CUfunction as an int.", NULL},
    {"num_params", (getter)function_get_num_params, NULL,
     "Number of kernel parameters (None when the driver cannot tell).", NULL},
    {"param_info", (getter)function_get_param_info, NULL,
     "((offset, size), ...) of the kernel's parameters, or None.", NULL},
    {"arg_format", (getter)function_get_arg_format, NULL,
     "The prepare()d signature as a struct-style string, or None.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef function_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_Function, weakreflist), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(bc_Function, dict), READONLY, NULL},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(bc_Function, vectorcall), READONLY, NULL},
    {"name", T_OBJECT, offsetof(bc_Function, name), READONLY, "The kernel's name."},
    {"module", T_OBJECT, offsetof(bc_Function, module), READONLY, "The Module holding the code."},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(function_doc,
"A kernel of a Module.  Call it as\n"
"    f(*args, block=(x, y, z), grid=(x, y[, z]), stream=None, shared=0, time_kernel=False)\n"
"with NumPy scalars (np.int32(n), np.float32(a) ...), device memory, structs\n"
"(numpy.void or size-1 arrays), texture objects or In/Out/InOut(ndarray); with\n"
"time_kernel=True it returns the run time in seconds.");

static PyType_Slot function_slots[] = {
    {Py_tp_dealloc, function_dealloc},
    {Py_tp_traverse, function_traverse},
    {Py_tp_clear, function_clear},
    {Py_tp_repr, function_repr},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_methods, function_methods},
    {Py_tp_getset, function_getset},
    {Py_tp_members, function_members},
    {Py_tp_doc, (void *)function_doc},
    {0, NULL},
};

static PyType_Spec function_spec = {
    .name = "barecuda.driver.Function",
    .basicsize = sizeof(bc_Function),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_DISALLOW_INSTANTIATION | Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = function_slots,
};

static PyMethodDef function_functions[] = {
    {"_bench_launch", (PyCFunction)(void (*)(void))bc_bench_launch, METH_VARARGS | METH_KEYWORDS,
     bench_launch_doc},
    {"_bench_noop", (PyCFunction)(void (*)(void))bc_bench_noop, METH_FASTCALL | METH_KEYWORDS,
     bench_noop_doc},
    {"_bench_arm", (PyCFunction)bc_bench_arm, METH_VARARGS, bench_arm_doc},
    {"_bench_fire", (PyCFunction)(void (*)(void))bc_bench_fire, METH_FASTCALL | METH_KEYWORDS,
     bench_fire_doc},
    {"_test_function", (PyCFunction)(void (*)(void))bc_test_function, METH_VARARGS | METH_KEYWORDS,
     test_function_doc},
    {"_launch_release_gil", (PyCFunction)(void (*)(void))bc_launch_release_gil, METH_FASTCALL,
     launch_release_gil_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_function_setup(PyObject *m, bc_State *st)
{
    if (bc_add_type(m, &function_spec, NULL, &st->FunctionType) < 0 ||
        bc_argpack_setup(m, st) < 0)
        return -1;
    bc_module_set_function_maker(bc_function_new); /* Module.get_function() */
    return PyModule_AddFunctions(m, function_functions);
}
