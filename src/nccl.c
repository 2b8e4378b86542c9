/* SPDX-License-Identifier: MIT */
/* NCCL: collective and point-to-point communication between GPUs, through a thin
 * call layer over libnccl.so.2 found at run time.
 *
 * No nccl.h is needed to build (include/barecuda/nccl_api.h declares what is
 * called) and libnccl is never linked: the first use searches $BARECUDA_LIBNCCL,
 * a libnccl already loaded in the process (torch, CuPy), NVIDIA's nvidia-nccl
 * wheels (nvidia/nccl/lib under sys.path), the toolkit directories and the system
 * loader, with the loader's shared search (src/loader.c).
 *
 * This file owns one type, NcclComm: an ncclComm_t holding a strong reference to
 * the Context it was made in, and the private functions barecuda.nccl builds its
 * public API on.  Methods take plain device pointers, counts and NCCL's enum
 * values: barecuda.nccl (Python) infers and checks those from the buffers.  Every
 * NCCL call runs with the GIL released and with the communicator's context
 * current; NCCL's runtime may switch the thread's current context (cudaSetDevice),
 * so the context stack is put back as it was after each call.  Results other
 * than ncclSuccess raise LogicError (invalid argument or usage) or RuntimeError,
 * with ncclGetErrorString's text and ncclGetLastError's detail, and .code, .name
 * and .routine as for driver errors. */
#include "barecuda/context.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"
#include "barecuda/nccl_api.h"
#include "barecuda/stream.h"

#include <dlfcn.h>
#include <string.h>

typedef struct {
#define BC_NCCL_MEMBER(name) __typeof__(&name) name;
    BC_NCCL_FUNCTIONS(BC_NCCL_MEMBER)
#undef BC_NCCL_MEMBER
} nccl_table;

static nccl_table nccl;
static int nccl_ready;
static char nccl_path[4096];
static char nccl_failure[8192];

static const char *const nccl_sonames[] = {"libnccl.so.2", NULL};
static const char *const nccl_wheel_dirs[] = {"/nvidia/nccl/lib", "/nvidia/cu13/lib", NULL};
static const bc_libspec nccl_spec = {
    .what = "NCCL",
    .sonames = nccl_sonames,
    .probe = "ncclCommInitRank",
    .wheel_dirs = nccl_wheel_dirs,
    .env = "BARECUDA_LIBNCCL",
    .hint = "Install NVIDIA's NCCL wheel (`pip install nvidia-nccl-cu13`, for CUDA 12 "
            "`nvidia-nccl-cu12`) or the libnccl2 system package",
};

/* 0 once libnccl is loaded, else -1 with barecuda.driver.Error set. */
static int
load_nccl(bc_State *st)
{
    if (nccl_ready)
        return 0;
    if (nccl_failure[0] == '\0') {
        void *h = bc_loader_find_library(&nccl_spec, nccl_failure, sizeof nccl_failure);
        if (h != NULL) {
            nccl_table t;
#define BC_NCCL_RESOLVE(fn) t.fn = (__typeof__(t.fn))dlsym(h, #fn);
            BC_NCCL_FUNCTIONS(BC_NCCL_RESOLVE)
#undef BC_NCCL_RESOLVE
            Dl_info info;
            if (dladdr((void *)t.ncclCommInitRank, &info) && info.dli_fname)
                snprintf(nccl_path, sizeof nccl_path, "%s", info.dli_fname);
            const char *missing = NULL;
#define BC_NCCL_NEEDED(fn) if (missing == NULL && t.fn == NULL && strcmp(#fn, "ncclGetLastError")) missing = #fn;
            BC_NCCL_FUNCTIONS(BC_NCCL_NEEDED)
#undef BC_NCCL_NEEDED
            if (missing == NULL) {
                nccl = t;
                nccl_ready = 1;
                return 0;
            }
            snprintf(nccl_failure, sizeof nccl_failure,
                     "%s is too old: it lacks %s (NCCL 2.10 or newer is needed)", nccl_path,
                     missing);
            dlclose(h);
        }
    }
    PyErr_SetString(st->Error, nccl_failure);
    return -1;
}

static const char *
result_name(ncclResult_t rc)
{
    switch ((int)rc) {
#define BC_NCCL_CASE(name, value) case value: return #name;
        BC_NCCL_RESULTS(BC_NCCL_CASE)
#undef BC_NCCL_CASE
    default:
        return "ncclUnknownResult";
    }
}

/* Raise the exception for a failed NCCL call (always -1).  `comm` may be NULL. */
static int
nccl_raise(bc_State *st, ncclResult_t rc, const char *routine, ncclComm_t comm)
{
    const char *text = nccl.ncclGetErrorString ? nccl.ncclGetErrorString(rc) : NULL;
    const char *last = nccl.ncclGetLastError ? nccl.ncclGetLastError(comm) : NULL;
    PyObject *cls = rc == ncclInvalidArgument || rc == ncclInvalidUsage ? st->LogicError
                                                                        : st->RuntimeError;
    PyObject *msg = PyUnicode_FromFormat("%s failed: %s: %s%s%s%s", routine, result_name(rc),
                                         text ? text : "unknown error",
                                         last && last[0] ? " (" : "",
                                         last && last[0] ? last : "",
                                         last && last[0] ? ")" : "");
    if (msg == NULL)
        return -1;
    PyObject *exc = PyObject_CallOneArg(cls, msg);
    Py_DECREF(msg);
    if (exc == NULL)
        return -1;
    PyObject *code = PyLong_FromLong((long)rc);
    PyObject *name = PyUnicode_FromString(result_name(rc));
    PyObject *rout = PyUnicode_FromString(routine);
    if (code && name && rout && PyObject_SetAttrString(exc, "code", code) == 0 &&
        PyObject_SetAttrString(exc, "name", name) == 0 &&
        PyObject_SetAttrString(exc, "routine", rout) == 0)
        PyErr_SetObject(cls, exc);
    Py_XDECREF(code);
    Py_XDECREF(name);
    Py_XDECREF(rout);
    Py_DECREF(exc);
    return -1;
}

static int
nccl_check(bc_State *st, ncclResult_t rc, const char *routine, ncclComm_t comm)
{
    return rc == ncclSuccess ? 0 : nccl_raise(st, rc, routine, comm);
}

/* ------------------------------------------------------------- NcclComm */

typedef struct {
    PyObject_HEAD
    ncclComm_t handle;
    bc_Context *ctx;
    int rank, size, device;
    int aborted;
    PyObject *weakreflist;
} bc_NcclComm;

/* Keeping the thread's context stack as it was around an NCCL call: enter()
 * makes ctx current (pushing it when it is not), leave() undoes whatever NCCL's
 * runtime changed and pops what enter() pushed.  Neither touches Python. */
typedef struct {
    CUcontext want;
    int entered;
} ctx_guard;

static int
guard_enter(ctx_guard *g, bc_Context *ctx)
{
    g->want = ctx ? ctx->handle : NULL;
    g->entered = 0;
    if (ctx == NULL)
        return bc_drv.cuCtxGetCurrent(&g->want) == CUDA_SUCCESS ? 0 : -1;
    g->entered = bc_context_enter(ctx);
    return g->entered < 0 ? -1 : 0;
}

static void
guard_leave(ctx_guard *g)
{
    CUcontext now = NULL;
    if (bc_drv.cuCtxGetCurrent(&now) == CUDA_SUCCESS && now != g->want)
        bc_drv.cuCtxSetCurrent(g->want);
    bc_context_leave(g->entered);
}

static int
comm_usable(bc_State *st, bc_NcclComm *c)
{
    if (c->handle == NULL)
        return bc_error_logic(st, "this NCCL communicator was %s",
                              c->aborted ? "aborted" : "destroyed");
    return bc_context_check_alive(st, c->ctx, "this NCCL communicator");
}

static PyObject *
comm_wrap(bc_State *st, ncclComm_t handle, bc_Context *ctx)
{
    bc_NcclComm *self = PyObject_GC_New(bc_NcclComm, (PyTypeObject *)st->NcclCommType);
    if (self == NULL)
        return NULL;
    self->handle = handle;
    self->ctx = (bc_Context *)Py_NewRef(ctx);
    self->rank = self->size = self->device = -1;
    self->aborted = 0;
    self->weakreflist = NULL;
    nccl.ncclCommUserRank(handle, &self->rank);
    nccl.ncclCommCount(handle, &self->size);
    nccl.ncclCommCuDevice(handle, &self->device);
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

/* Destroy or abort the communicator; runs without the GIL. */
static ncclResult_t
comm_release(bc_NcclComm *self, int abort)
{
    ncclComm_t h = self->handle;
    self->handle = NULL;
    if (h == NULL || self->ctx == NULL || self->ctx->let_go || !bc_drv_ready || bc_forked_child)
        return ncclSuccess;
    ctx_guard g;
    if (guard_enter(&g, self->ctx) < 0)
        return ncclSuccess; /* the context is gone: so is everything of the communicator */
    ncclResult_t rc = abort ? nccl.ncclCommAbort(h) : nccl.ncclCommDestroy(h);
    guard_leave(&g);
    return rc;
}

static int
comm_traverse(bc_NcclComm *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->ctx);
    return 0;
}

static void
comm_dealloc(bc_NcclComm *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    /* At interpreter shutdown the process is ending: NCCL's resources go with it,
     * and a destroy could wait for peers that are gone. */
    if (self->handle != NULL && !bc_is_finalizing()) {
        ncclResult_t rc;
        Py_BEGIN_ALLOW_THREADS
        rc = comm_release(self, 0);
        Py_END_ALLOW_THREADS
        if (rc != ncclSuccess &&
            PyErr_WarnFormat(PyExc_ResourceWarning, 1,
                             "ncclCommDestroy failed while releasing an NCCL communicator: %s",
                             result_name(rc)) < 0)
            PyErr_WriteUnraisable((PyObject *)self);
    }
    self->handle = NULL;
    Py_CLEAR(self->ctx);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
comm_end(bc_NcclComm *self, int abort)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (self->handle == NULL)
        Py_RETURN_NONE;
    self->aborted = abort;
    ncclResult_t rc;
    Py_BEGIN_ALLOW_THREADS
    rc = comm_release(self, abort);
    Py_END_ALLOW_THREADS
    if (nccl_check(st, rc, abort ? "ncclCommAbort" : "ncclCommDestroy", NULL) < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(destroy_doc,
"destroy($self)\n--\n\n"
"Release the communicator after its pending work (ncclCommDestroy, GIL released);\n"
"idempotent.  Later calls raise LogicError.");

static PyObject *
comm_destroy(bc_NcclComm *self, PyObject *Py_UNUSED(ignored))
{
    return comm_end(self, 0);
}

PyDoc_STRVAR(abort_doc,
"abort($self)\n--\n\n"
"Release the communicator at once, dropping pending work (ncclCommAbort), as after\n"
"a peer failed; idempotent.  Later calls raise LogicError.");

static PyObject *
comm_abort(bc_NcclComm *self, PyObject *Py_UNUSED(ignored))
{
    return comm_end(self, 1);
}

PyDoc_STRVAR(async_error_doc,
"async_error($self)\n--\n\n"
"ncclCommGetAsyncError: 0 (ncclSuccess), 7 (ncclInProgress) or the code of an\n"
"error that happened in the background (a failed peer).");

static PyObject *
comm_async_error(bc_NcclComm *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (comm_usable(st, self) < 0)
        return NULL;
    ncclResult_t err = ncclSuccess;
    if (nccl_check(st, nccl.ncclCommGetAsyncError(self->handle, &err), "ncclCommGetAsyncError",
                   self->handle) < 0)
        return NULL;
    return PyLong_FromLong((long)err);
}

/* The operations, by the arguments each takes after (send, recv). */
enum op_kind { K_ALL_REDUCE, K_BROADCAST, K_REDUCE, K_ALL_GATHER, K_REDUCE_SCATTER, K_SEND,
               K_RECV };

static const char *const op_routines[] = {"ncclAllReduce", "ncclBroadcast", "ncclReduce",
                                          "ncclAllGather", "ncclReduceScatter", "ncclSend",
                                          "ncclRecv"};

typedef struct {
    enum op_kind kind;
    CUdeviceptr send, recv;
    size_t count;
    int dtype, op, root; /* root: the root rank, or the peer of send/recv */
    CUstream stream;
} op_call;

static ncclResult_t
run_op(ncclComm_t c, const op_call *o)
{
    const void *s = (const void *)(uintptr_t)o->send;
    void *r = (void *)(uintptr_t)o->recv;
    ncclDataType_t t = (ncclDataType_t)o->dtype;
    ncclRedOp_t op = (ncclRedOp_t)o->op;
    cudaStream_t st = (cudaStream_t)o->stream;
    switch (o->kind) {
    case K_ALL_REDUCE:
        return nccl.ncclAllReduce(s, r, o->count, t, op, c, st);
    case K_BROADCAST:
        return nccl.ncclBroadcast(s, r, o->count, t, o->root, c, st);
    case K_REDUCE:
        return nccl.ncclReduce(s, r, o->count, t, op, o->root, c, st);
    case K_ALL_GATHER:
        return nccl.ncclAllGather(s, r, o->count, t, c, st);
    case K_REDUCE_SCATTER:
        return nccl.ncclReduceScatter(s, r, o->count, t, op, c, st);
    case K_SEND:
        return nccl.ncclSend(s, o->count, t, o->root, c, st);
    default:
        return nccl.ncclRecv(r, o->count, t, o->root, c, st);
    }
}

static int
as_ptr(PyObject *obj, CUdeviceptr *out, const char *what)
{
    if (!PyLong_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int device pointer, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    unsigned long long p = PyLong_AsUnsignedLongLong(obj);
    if (p == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *out = (CUdeviceptr)p;
    return 0;
}

/* comm._op(kind, send, recv, count, dtype, op, root, stream, keep): the one entry of
 * every collective; barecuda.nccl checked the arguments. */
PyDoc_STRVAR(op_doc,
"_op($self, kind, send, recv, count, dtype, op, root, stream, keep, /)\n--\n\n"
"Private: enqueue one NCCL operation.  kind: 0 all_reduce, 1 broadcast, 2 reduce,\n"
"3 all_gather, 4 reduce_scatter, 5 send, 6 recv; send/recv: int device pointers;\n"
"dtype, op: NCCL's enum values; root: the root or peer rank; stream: a Stream or\n"
"None; keep: an object kept alive until `stream` is known to be done.");

static PyObject *
comm_op(bc_NcclComm *self, PyObject *args)
{
    bc_State *st = bc_state_of((PyObject *)self);
    int kind;
    PyObject *send, *recv, *stream, *keep;
    Py_ssize_t count;
    op_call o;
    if (!PyArg_ParseTuple(args, "iOOniiiOO:_op", &kind, &send, &recv, &count, &o.dtype, &o.op,
                          &o.root, &stream, &keep))
        return NULL;
    if (kind < K_ALL_REDUCE || kind > K_RECV || count < 0 || o.dtype < 0 ||
        o.dtype >= ncclNumTypes || o.op < 0 || o.op >= ncclNumOps) {
        PyErr_Format(PyExc_ValueError, "_op(): bad kind %d, count %zd, dtype %d or op %d", kind,
                     count, o.dtype, o.op);
        return NULL;
    }
    o.kind = (enum op_kind)kind;
    o.count = (size_t)count;
    if (comm_usable(st, self) < 0 || as_ptr(send, &o.send, "send") < 0 ||
        as_ptr(recv, &o.recv, "recv") < 0 || bc_stream_convert(st, stream, &o.stream) < 0)
        return NULL;
    ctx_guard g;
    if (guard_enter(&g, self->ctx) < 0)
        return PyErr_Format(st->LogicError, "%s: the communicator's context cannot be made "
                            "current", op_routines[kind]);
    ncclResult_t rc;
    Py_BEGIN_ALLOW_THREADS
    rc = run_op(self->handle, &o);
    guard_leave(&g);
    Py_END_ALLOW_THREADS
    if (nccl_check(st, rc, op_routines[kind], self->handle) < 0)
        return NULL;
    if (keep != Py_None && bc_stream_keep_alive(st, stream, keep) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
comm_get_rank(bc_NcclComm *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLong(self->rank);
}

static PyObject *
comm_get_size(bc_NcclComm *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLong(self->size);
}

static PyObject *
comm_get_device(bc_NcclComm *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLong(self->device);
}

static PyObject *
comm_get_context(bc_NcclComm *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->ctx ? (PyObject *)self->ctx : Py_None);
}

static PyObject *
comm_get_handle(bc_NcclComm *self, void *Py_UNUSED(closure))
{
    return PyLong_FromVoidPtr((void *)self->handle);
}

static PyObject *
comm_get_closed(bc_NcclComm *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->handle == NULL);
}

static PyObject *
comm_repr(bc_NcclComm *self)
{
    return PyUnicode_FromFormat("<barecuda.driver._NcclComm rank %d of %d on device %d%s>",
                                self->rank, self->size, self->device,
                                self->handle ? "" : self->aborted ? " (aborted)" : " (destroyed)");
}

static PyMethodDef comm_methods[] = {
    {"_op", (PyCFunction)comm_op, METH_VARARGS, op_doc},
    {"destroy", (PyCFunction)comm_destroy, METH_NOARGS, destroy_doc},
    {"abort", (PyCFunction)comm_abort, METH_NOARGS, abort_doc},
    {"async_error", (PyCFunction)comm_async_error, METH_NOARGS, async_error_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef comm_getset[] = {
    {"rank", (getter)comm_get_rank, NULL, "This member's rank.", NULL},
    {"size", (getter)comm_get_size, NULL, "The number of ranks.", NULL},
    {"device", (getter)comm_get_device, NULL, "The CUDA device ordinal this rank uses.", NULL},
    {"context", (getter)comm_get_context, NULL, "The Context the communicator was made in.", NULL},
    {"handle", (getter)comm_get_handle, NULL, "The ncclComm_t as an int (0 once released).", NULL},
    {"closed", (getter)comm_get_closed, NULL, "Whether destroy() or abort() ran.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef comm_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_NcclComm, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(comm_doc,
"An NCCL communicator (ncclComm_t) of one rank, made by _nccl_comm_init_rank or\n"
"_nccl_comm_init_all; the public face is barecuda.nccl.Communicator.");

static PyType_Slot comm_slots[] = {
    {Py_tp_dealloc, comm_dealloc},
    {Py_tp_traverse, comm_traverse},
    {Py_tp_repr, comm_repr},
    {Py_tp_methods, comm_methods},
    {Py_tp_getset, comm_getset},
    {Py_tp_members, comm_members},
    {Py_tp_doc, (void *)comm_doc},
    {0, NULL},
};

static PyType_Spec comm_spec = {
    .name = "barecuda.driver._NcclComm",
    .basicsize = sizeof(bc_NcclComm),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = comm_slots,
};

/* ------------------------------------------------------------ functions */

PyDoc_STRVAR(nccl_version_doc,
"_nccl_version()\n--\n\n"
"ncclGetVersion() of the libnccl found at run time (23007 for 2.30.7), loading it\n"
"if needed; Error naming the places searched when there is none.");

static PyObject *
bc_nccl_version(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_from_module(m);
    if (load_nccl(st) < 0)
        return NULL;
    int v = 0;
    if (nccl_check(st, nccl.ncclGetVersion(&v), "ncclGetVersion", NULL) < 0)
        return NULL;
    return PyLong_FromLong(v);
}

PyDoc_STRVAR(nccl_info_doc,
"_nccl_info()\n--\n\n"
"(path of the loaded libnccl or None, the failure message or None).  Loads nothing.");

static PyObject *
bc_nccl_info(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    BC_UNUSED(m);
    return Py_BuildValue("(zz)", nccl_ready ? nccl_path : NULL,
                         nccl_failure[0] ? nccl_failure : NULL);
}

PyDoc_STRVAR(nccl_get_unique_id_doc,
"_nccl_get_unique_id()\n--\n\n"
"ncclGetUniqueId(): the 128 bytes every rank of a new communicator must share.");

static PyObject *
bc_nccl_get_unique_id(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_from_module(m);
    if (load_nccl(st) < 0)
        return NULL;
    ncclUniqueId id;
    ncclResult_t rc;
    Py_BEGIN_ALLOW_THREADS
    rc = nccl.ncclGetUniqueId(&id);
    Py_END_ALLOW_THREADS
    if (nccl_check(st, rc, "ncclGetUniqueId", NULL) < 0)
        return NULL;
    return PyBytes_FromStringAndSize(id.internal, sizeof id.internal);
}

PyDoc_STRVAR(nccl_comm_init_rank_doc,
"_nccl_comm_init_rank(nranks, unique_id, rank, /)\n--\n\n"
"ncclCommInitRank in the current context (GIL released: it waits for every rank).");

static PyObject *
bc_nccl_comm_init_rank(PyObject *m, PyObject *args)
{
    bc_State *st = bc_state_from_module(m);
    int nranks, rank;
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "iy*i:_nccl_comm_init_rank", &nranks, &view, &rank))
        return NULL;
    ncclUniqueId id;
    int bad = view.len != (Py_ssize_t)sizeof id.internal;
    if (!bad)
        memcpy(id.internal, view.buf, sizeof id.internal);
    Py_ssize_t len = view.len;
    PyBuffer_Release(&view);
    if (bad)
        return PyErr_Format(PyExc_ValueError, "an NCCL unique id is %d bytes, got %zd",
                            BC_NCCL_UNIQUE_ID_BYTES, len);
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return PyErr_Format(PyExc_ValueError, "rank %d is not in range(%d)", rank, nranks);
    if (load_nccl(st) < 0)
        return NULL;
    bc_Context *ctx = bc_context_current(st);
    if (ctx == NULL)
        return NULL;
    ncclComm_t comm = NULL;
    ncclResult_t rc;
    ctx_guard g;
    PyObject *out = NULL;
    if (guard_enter(&g, ctx) < 0) {
        PyErr_SetString(st->LogicError, "ncclCommInitRank: the current context cannot be used");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = nccl.ncclCommInitRank(&comm, nranks, id, rank);
    guard_leave(&g);
    Py_END_ALLOW_THREADS
    if (nccl_check(st, rc, "ncclCommInitRank", NULL) < 0)
        goto done;
    out = comm_wrap(st, comm, ctx);
    if (out == NULL)
        nccl.ncclCommDestroy(comm);
done:
    Py_DECREF(ctx);
    return out;
}

PyDoc_STRVAR(nccl_comm_init_all_doc,
"_nccl_comm_init_all(contexts, /)\n--\n\n"
"ncclCommInitAll over the devices of `contexts` (a sequence of primary Contexts, one\n"
"per device, in rank order): a list of communicators, rank i holding contexts[i].");

static PyObject *
bc_nccl_comm_init_all(PyObject *m, PyObject *arg)
{
    bc_State *st = bc_state_from_module(m);
    PyObject *seq = PySequence_Fast(arg, "_nccl_comm_init_all(): contexts must be a sequence");
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *out = NULL;
    int *devs = NULL;
    ncclComm_t *comms = NULL;
    if (n < 1 || n > 4096) {
        PyErr_Format(PyExc_ValueError, "_nccl_comm_init_all(): %zd contexts (1 to 4096 needed)", n);
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *c = PySequence_Fast_GET_ITEM(seq, i);
        if (Py_TYPE(c) != (PyTypeObject *)st->ContextType) {
            PyErr_Format(PyExc_TypeError, "_nccl_comm_init_all(): contexts[%zd] is a %.100s, "
                         "not a Context", i, Py_TYPE(c)->tp_name);
            goto done;
        }
        if (bc_context_check_alive(st, (bc_Context *)c, "a context of init_all") < 0)
            goto done;
    }
    if (load_nccl(st) < 0 || bc_context_require(st) < 0)
        goto done;
    devs = PyMem_Calloc((size_t)n, sizeof *devs);
    comms = PyMem_Calloc((size_t)n, sizeof *comms);
    if (devs == NULL || comms == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        devs[i] = (int)((bc_Context *)PySequence_Fast_GET_ITEM(seq, i))->device;
    ctx_guard g;
    ncclResult_t rc;
    if (guard_enter(&g, NULL) < 0) {
        PyErr_SetString(st->LogicError, "ncclCommInitAll: no current context");
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = nccl.ncclCommInitAll(comms, (int)n, devs);
    guard_leave(&g);
    Py_END_ALLOW_THREADS
    if (nccl_check(st, rc, "ncclCommInitAll", NULL) < 0)
        goto done;
    out = PyList_New(n);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *w = out ? comm_wrap(st, comms[i], (bc_Context *)PySequence_Fast_GET_ITEM(seq, i))
                          : NULL;
        if (w == NULL) {
            Py_CLEAR(out); /* destroys the ones already wrapped */
            nccl.ncclCommDestroy(comms[i]);
            continue;
        }
        PyList_SET_ITEM(out, i, w);
    }
done:
    PyMem_Free(devs);
    PyMem_Free(comms);
    Py_DECREF(seq);
    return out;
}

static PyObject *
group_call(PyObject *m, int end)
{
    bc_State *st = bc_state_from_module(m);
    if (load_nccl(st) < 0)
        return NULL;
    ncclResult_t rc;
    if (!end)
        rc = nccl.ncclGroupStart();
    else {
        ctx_guard g = {NULL, 0};
        int ok = bc_drv_ready && guard_enter(&g, NULL) == 0;
        Py_BEGIN_ALLOW_THREADS
        rc = nccl.ncclGroupEnd();
        if (ok)
            guard_leave(&g);
        Py_END_ALLOW_THREADS
    }
    if (nccl_check(st, rc, end ? "ncclGroupEnd" : "ncclGroupStart", NULL) < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(nccl_group_start_doc,
"_nccl_group_start()\n--\n\nncclGroupStart: operations until the matching end are fused.");

static PyObject *
bc_nccl_group_start(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    return group_call(m, 0);
}

PyDoc_STRVAR(nccl_group_end_doc,
"_nccl_group_end()\n--\n\nncclGroupEnd (GIL released): launches the grouped operations.");

static PyObject *
bc_nccl_group_end(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    return group_call(m, 1);
}

static PyMethodDef nccl_functions[] = {
    {"_nccl_version", bc_nccl_version, METH_NOARGS, nccl_version_doc},
    {"_nccl_info", bc_nccl_info, METH_NOARGS, nccl_info_doc},
    {"_nccl_get_unique_id", bc_nccl_get_unique_id, METH_NOARGS, nccl_get_unique_id_doc},
    {"_nccl_comm_init_rank", bc_nccl_comm_init_rank, METH_VARARGS, nccl_comm_init_rank_doc},
    {"_nccl_comm_init_all", bc_nccl_comm_init_all, METH_O, nccl_comm_init_all_doc},
    {"_nccl_group_start", bc_nccl_group_start, METH_NOARGS, nccl_group_start_doc},
    {"_nccl_group_end", bc_nccl_group_end, METH_NOARGS, nccl_group_end_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_nccl_setup(PyObject *m, bc_State *st)
{
    if (bc_add_type(m, &comm_spec, NULL, &st->NcclCommType) < 0)
        return -1;
    return PyModule_AddFunctions(m, nccl_functions);
}
