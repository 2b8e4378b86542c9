/* SPDX-License-Identifier: MIT */
/* Stream: a CUstream of a context, and the conversions every async call uses.
 *
 * A Stream made here is destroyed on close() or collection, with its context made
 * current for the call from whatever thread releases it.  Objects handed to
 * asynchronous work (host buffers of async copies, say) are kept in the stream's
 * `keep` list until the stream is known to be idle. */
#include "barecuda/stream.h"
#include "barecuda/error.h"
#include "barecuda/argparse.h"
#include "barecuda/trace.h"
#include "barecuda/loader.h"

bc_Stream *
bc_stream_check(bc_State *st, PyObject *obj)
{
    /* exact type first (the launch path's common case), then subclasses */
    return PyObject_TypeCheck(obj, (PyTypeObject *)st->StreamType) ? (bc_Stream *)obj : NULL;
}

static int
stream_usable(bc_State *st, bc_Stream *s)
{
    if (s->handle == NULL && s->owned)
        return s->owned < 0 ? bc_error_logic(st, "this %.100s was not initialised: its __init__ "
                                                 "must call Stream.__init__(self, flags)",
                                             Py_TYPE(s)->tp_name)
                            : bc_error_logic(st, "this Stream was closed");
    return bc_context_check_alive(st, s->ctx, "this Stream");
}

int
bc_stream_convert(bc_State *st, PyObject *obj, CUstream *out)
{
    if (obj == NULL || obj == Py_None) {
        *out = NULL;
        return 0;
    }
    bc_Stream *s = bc_stream_check(st, obj);
    if (s != NULL) {
        if (stream_usable(st, s) < 0)
            return -1;
        *out = s->handle;
        return 0;
    }
    if (PyLong_Check(obj) && !PyBool_Check(obj)) {
        void *p = PyLong_AsVoidPtr(obj);
        if (p == NULL && PyErr_Occurred())
            return -1;
        *out = (CUstream)p;
        return 0;
    }
    PyObject *proto = PyObject_GetAttr(obj, st->str_cuda_stream);
    if (proto != NULL) {
        PyObject *res = PyObject_CallNoArgs(proto);
        Py_DECREF(proto);
        if (res == NULL)
            return -1;
        int ok = PyTuple_Check(res) && PyTuple_GET_SIZE(res) == 2 &&
                 PyLong_Check(PyTuple_GET_ITEM(res, 1));
        void *p = ok ? PyLong_AsVoidPtr(PyTuple_GET_ITEM(res, 1)) : NULL;
        Py_DECREF(res);
        if (!ok) {
            PyErr_SetString(PyExc_TypeError, "__cuda_stream__() must return (version, handle)");
            return -1;
        }
        if (p == NULL && PyErr_Occurred())
            return -1;
        *out = (CUstream)p;
        return 0;
    }
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError,
                 "stream must be a Stream, None, an int handle or an object with "
                 "__cuda_stream__, not %.100s",
                 Py_TYPE(obj)->tp_name);
    return -1;
}

/* Note s in its context's list of streams that keep objects, as its keep list
 * is made; entries of streams gone or no longer keeping anything (their own
 * earlier entry among them) are dropped first, so the list stays short. */
static int
note_keeping(bc_Stream *s)
{
    bc_Context *ctx = s->ctx;
    if (ctx == NULL)
        return 0;
    if (ctx->keeping == NULL && (ctx->keeping = PyList_New(0)) == NULL)
        return -1;
    PyObject *list = ctx->keeping;
    for (Py_ssize_t i = PyList_GET_SIZE(list) - 1; i >= 0; i--) {
        PyObject *other = bc_weakref_get(PyList_GET_ITEM(list, i));
        int stale = other == NULL || ((bc_Stream *)other)->keep == NULL;
        Py_XDECREF(other);
        if (stale && PySequence_DelItem(list, i) < 0)
            return -1;
    }
    PyObject *ref = PyWeakref_NewRef((PyObject *)s, NULL);
    int rc = ref ? PyList_Append(list, ref) : -1;
    Py_XDECREF(ref);
    return rc;
}

int
bc_stream_keep_alive(bc_State *st, PyObject *stream, PyObject *obj)
{
    bc_Stream *s = stream ? bc_stream_check(st, stream) : NULL;
    if (s == NULL)
        return 0;
    if (s->keep == NULL) {
        if (note_keeping(s) < 0 || (s->keep = PyList_New(0)) == NULL)
            return -1;
    }
    return PyList_Append(s->keep, obj);
}

/* Empty the keep lists of the streams in `list`.  With sync_each, every open
 * stream is synchronized first (one that fails keeps its list) and closed ones
 * are left alone, counted in the return value.  Without, the caller has made
 * the whole context idle, and every list is emptied. */
static int
let_go_kept(PyObject *list, int sync_each)
{
    int closed = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        bc_Stream *s = (bc_Stream *)bc_weakref_get(PyList_GET_ITEM(list, i));
        if (s == NULL || s->keep == NULL) {
            Py_XDECREF(s);
            continue;
        }
        CUresult rc = CUDA_SUCCESS;
        if (sync_each && s->handle != NULL) {
            Py_BEGIN_ALLOW_THREADS
            rc = bc_drv.cuStreamSynchronize(s->handle);
            Py_END_ALLOW_THREADS
        }
        if (sync_each && s->handle == NULL)
            closed++;
        else if (rc == CUDA_SUCCESS)
            Py_CLEAR(s->keep); /* may free host memory, counted off its context */
        Py_DECREF(s);
    }
    return closed;
}

/* What src/waker.c (a floor above) registers at module init. */
static bc_stream_closing_hook closing_hook;

void
bc_stream_on_close(bc_stream_closing_hook fn)
{
    closing_hook = fn;
}

/* The Graph maker src/graph.c (a floor above) registers at module init. */
static bc_graph_maker graph_maker;

void
bc_stream_set_graph_maker(bc_graph_maker fn)
{
    graph_maker = fn;
}

/* detach()'s first step (BC_CTX_DETACHING, registered with context.c at module
 * init): every Stream made in ctx whose keep list holds objects is synchronized
 * (GIL released) and lets them go, so that host memory they hold does not keep a
 * detached context waiting.  A stream whose synchronize fails keeps its list (its
 * copies may still read those buffers).  GIL held; never raises. */
static void
let_go_kept_in(bc_Context *ctx, int Py_UNUSED(arg))
{
    PyObject *list = ctx->keeping; /* ours now: a stream noted meanwhile starts a new one */
    ctx->keeping = NULL;
    if (list != NULL && !ctx->let_go && bc_drv_ready && let_go_kept(list, 1) > 0) {
        /* a closed stream's copies may still run: wait for the whole context */
        int entered = bc_context_enter(ctx);
        if (entered >= 0) {
            CUresult rc;
            Py_BEGIN_ALLOW_THREADS
            rc = bc_drv.cuCtxSynchronize();
            Py_END_ALLOW_THREADS
            bc_context_leave(entered);
            if (rc == CUDA_SUCCESS)
                let_go_kept(list, 0);
        }
    }
    Py_XDECREF(list);
}

/* Parse Stream's arguments and create the CUstream in the current context:
 * 0 with *handle and a new reference *ctx, or -1. */
static int
stream_create(bc_State *st, PyObject *args, PyObject *kwargs, CUstream *handle, bc_Context **ctx)
{
    static char *kwlist[] = {"flags", "priority", NULL};
    unsigned int flags = 0;
    int priority = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|Ii:Stream", kwlist, &flags, &priority))
        return -1;
    if (flags & ~(unsigned int)CU_STREAM_NON_BLOCKING) {
        PyErr_Format(PyExc_ValueError, "Stream(): unknown flags 0x%x (stream_flags.DEFAULT or "
                                       "NON_BLOCKING)", flags);
        return -1;
    }
    *ctx = bc_context_current(st);
    if (*ctx == NULL)
        return -1;
    if (bc_check(st, bc_drv.cuStreamCreateWithPriority(handle, flags, priority),
                 "cuStreamCreateWithPriority") < 0) {
        Py_CLEAR(*ctx);
        return -1;
    }
    return 0;
}

/* Stream(flags, priority) creates the stream in __new__.  A subclass (PyCUDA's
 * classes are built in __init__, so its own __init__ may take other arguments)
 * gets an unset stream from __new__ (owned -1, no handle) and Stream.__init__
 * creates it. */
static PyObject *
stream_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of_type(type);
    if (st == NULL)
        return NULL;
    if (type != (PyTypeObject *)st->StreamType) {
        bc_Stream *self = (bc_Stream *)type->tp_alloc(type, 0);
        if (self != NULL)
            self->owned = -1;
        return (PyObject *)self;
    }
    CUstream handle;
    bc_Context *ctx;
    if (stream_create(st, args, kwargs, &handle, &ctx) < 0)
        return NULL;
    bc_Stream *self = PyObject_GC_New(bc_Stream, type);
    if (self == NULL) {
        bc_drv.cuStreamDestroy(handle);
        Py_DECREF(ctx);
        return NULL;
    }
    self->handle = handle;
    self->ctx = ctx;
    self->owner = NULL;
    self->keep = NULL;
    self->owned = 1;
    self->weakreflist = NULL;
    self->dict = NULL;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static int
stream_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of(self);
    if (Py_IS_TYPE(self, (PyTypeObject *)st->StreamType))
        return 0; /* created by __new__ from the same arguments */
    bc_Stream *s = (bc_Stream *)self;
    if (s->owned >= 0) {
        PyErr_Format(PyExc_TypeError, "Stream.__init__() called twice on this %.100s",
                     Py_TYPE(self)->tp_name);
        return -1;
    }
    CUstream handle;
    bc_Context *ctx;
    if (stream_create(st, args, kwargs, &handle, &ctx) < 0)
        return -1;
    s->handle = handle;
    s->ctx = ctx;
    s->owned = 1;
    return 0;
}

static CUresult
stream_release(bc_Stream *self)
{
    CUresult rc = CUDA_SUCCESS;
    if (self->owned && self->handle != NULL && self->ctx != NULL && !self->ctx->let_go &&
        bc_drv_ready) {
        if (closing_hook != NULL)
            closing_hook(self->handle);
        int entered = bc_context_enter(self->ctx);
        if (entered >= 0) {
            /* A capture left open (an exception between begin_capture and
             * end_capture) would block every allocation of the process: end it
             * and drop what it recorded. */
            CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
            if (bc_drv.cuStreamIsCapturing(self->handle, &status) == CUDA_SUCCESS &&
                status != CU_STREAM_CAPTURE_STATUS_NONE) {
                CUgraph partial = NULL;
                if (bc_drv.cuStreamEndCapture(self->handle, &partial) == CUDA_SUCCESS && partial)
                    bc_drv.cuGraphDestroy(partial);
            }
            rc = bc_drv.cuStreamDestroy(self->handle);
            bc_context_leave(entered);
        }
    }
    self->handle = NULL;
    return rc;
}

static int
stream_traverse(bc_Stream *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->dict);
    Py_VISIT(self->ctx);
    Py_VISIT(self->owner);
    Py_VISIT(self->keep);
    return 0;
}

static int
stream_clear(bc_Stream *self)
{
    Py_CLEAR(self->dict);
    Py_CLEAR(self->owner);
    Py_CLEAR(self->keep);
    return 0;
}

static void
stream_dealloc(bc_Stream *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (self->owned && self->handle != NULL)
        bc_error_in_destructor(stream_release(self),
                               "cuStreamDestroy", (PyObject *)self);
    stream_clear(self);
    Py_CLEAR(self->ctx);
    Py_CLEAR(self->dict);
    tp->tp_free(self);
    Py_DECREF(tp);
}

PyDoc_STRVAR(synchronize_doc,
"synchronize($self)\n--\n\nWait until all work queued on the stream is done (GIL released).");

static PyObject *
stream_synchronize(bc_Stream *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (stream_usable(st, self) < 0)
        return NULL;
    CUresult rc;
    bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_host(st, BC_TRACE_SYNC, "Stream.synchronize", 0));
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuStreamSynchronize(self->handle);
    Py_END_ALLOW_THREADS
    BC_TRACE_END(st, tt, rc);
    if (bc_check(st, rc, "cuStreamSynchronize") < 0)
        return NULL;
    Py_CLEAR(self->keep);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(is_done_doc, "is_done($self)\n--\n\nTrue when all work queued on the stream is done.");

static PyObject *
stream_is_done(bc_Stream *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (stream_usable(st, self) < 0)
        return NULL;
    CUresult rc = bc_drv.cuStreamQuery(self->handle);
    if (rc == CUDA_ERROR_NOT_READY)
        Py_RETURN_FALSE;
    if (bc_check(st, rc, "cuStreamQuery") < 0)
        return NULL;
    Py_CLEAR(self->keep);
    Py_RETURN_TRUE;
}

PyDoc_STRVAR(close_doc,
"close($self)\n--\n\nDestroy the stream now (idempotent); work already queued still runs.");

static PyObject *
stream_close(bc_Stream *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (self->owned && self->handle != NULL &&
        bc_check(st, stream_release(self), "cuStreamDestroy") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
stream_get_handle(bc_Stream *self, void *Py_UNUSED(closure))
{
    return PyLong_FromVoidPtr((void *)self->handle);
}

PyDoc_STRVAR(wait_for_event_doc,
"wait_for_event($self, event)\n--\n\n"
"Make later work on this stream wait until `event` (recorded on any stream) is done.");

static PyObject *
stream_wait_for_event(bc_Stream *self, PyObject *evt)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (!PyObject_TypeCheck(evt, (PyTypeObject *)st->EventType)) {
        PyErr_Format(PyExc_TypeError, "wait_for_event(): expected an Event, not %.100s",
                     Py_TYPE(evt)->tp_name);
        return NULL;
    }
    bc_Event *e = (bc_Event *)evt;
    if (stream_usable(st, self) < 0)
        return NULL;
    if (e->handle == NULL)
        return (e->owned < 0 ? bc_error_logic(st, "wait_for_event(): the %.100s was not "
                                                  "initialised (Event.__init__ never called)",
                                              Py_TYPE(e)->tp_name)
                             : bc_error_logic(st, "wait_for_event(): the Event was closed")),
               NULL;
    if (bc_context_check_alive(st, e->ctx, "the Event") < 0)
        return NULL;
    if (bc_check(st, bc_drv.cuStreamWaitEvent(self->handle, e->handle, 0), "cuStreamWaitEvent") < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* Runs on the driver's callback thread.  Never touches Python during shutdown
 * (the callable is leaked then rather than risk a crash). */
static void CUDA_CB
host_callback(void *data)
{
    PyObject *fn = (PyObject *)data;
    if (bc_is_finalizing())
        return;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *res = PyObject_CallNoArgs(fn);
    if (res == NULL)
        PyErr_WriteUnraisable(fn);
    Py_XDECREF(res);
    Py_DECREF(fn);
    PyGILState_Release(g);
}

PyDoc_STRVAR(add_callback_doc,
"add_callback($self, fn)\n--\n\n"
"Call fn() (with the GIL, on the driver's callback thread) once all work queued\n"
"so far on this stream is done; later work waits for it (cuLaunchHostFunc).\n"
"fn must not make CUDA calls (the driver forbids it in host functions) and must\n"
"not wait for this stream.  Exceptions are reported as unraisable.");

static PyObject *
stream_add_callback(bc_Stream *self, PyObject *fn)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "add_callback(): fn must be callable, not %.100s",
                     Py_TYPE(fn)->tp_name);
        return NULL;
    }
    if (stream_usable(st, self) < 0)
        return NULL;
    Py_INCREF(fn);
    CUresult rc = bc_drv.cuLaunchHostFunc(self->handle, host_callback, fn);
    if (rc != CUDA_SUCCESS) {
        Py_DECREF(fn);
        bc_error_raise(st, rc, "cuLaunchHostFunc");
        return NULL;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(begin_capture_doc,
"begin_capture($self, mode=0)\n--\n\n"
"Start recording the work queued on this stream into a graph instead of running it.\n"
"mode is a stream_capture_mode (default GLOBAL, 0).");

static PyObject *
stream_begin_capture(bc_Stream *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of((PyObject *)self);
    static char *kwlist[] = {"mode", NULL};
    PyObject *mode_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:begin_capture", kwlist, &mode_obj))
        return NULL;
    long long mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (mode_obj && bc_arg_long(mode_obj, "begin_capture(): mode", 0,
                                CU_STREAM_CAPTURE_MODE_RELAXED, &mode) < 0)
        return NULL;
    if (stream_usable(st, self) < 0)
        return NULL;
    if (self->handle == NULL)
        return bc_error_logic(st, "begin_capture(): the legacy default stream cannot be "
                                  "captured; use a Stream()"), NULL;
    if (bc_check(st, bc_drv.cuStreamBeginCapture(self->handle, (CUstreamCaptureMode)mode),
                 "cuStreamBeginCapture") < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(end_capture_doc,
"end_capture($self)\n--\n\nStop capturing and return the recorded work as a Graph.");

static PyObject *
stream_end_capture(bc_Stream *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (stream_usable(st, self) < 0)
        return NULL;
    CUgraph g = NULL;
    if (bc_check(st, bc_drv.cuStreamEndCapture(self->handle, &g), "cuStreamEndCapture") < 0)
        return NULL;
    bc_Context *ctx = self->ctx ? (bc_Context *)Py_NewRef(self->ctx) : bc_context_current(st);
    if (ctx == NULL) {
        bc_drv.cuGraphDestroy(g);
        return NULL;
    }
    PyObject *out;
    if (graph_maker != NULL) {
        out = graph_maker(st, g, ctx);
    } else {
        bc_drv.cuGraphDestroy(g);
        out = NULL;
        PyErr_SetString(PyExc_RuntimeError, "end_capture(): graphs are not set up");
    }
    Py_DECREF(ctx);
    return out;
}

PyDoc_STRVAR(is_capturing_doc,
"is_capturing($self)\n--\n\nTrue while begin_capture() is recording this stream.");

static PyObject *
stream_is_capturing(bc_Stream *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (stream_usable(st, self) < 0)
        return NULL;
    CUstreamCaptureStatus status;
    if (bc_check(st, bc_drv.cuStreamIsCapturing(self->handle, &status), "cuStreamIsCapturing") < 0)
        return NULL;
    return PyBool_FromLong(status == CU_STREAM_CAPTURE_STATUS_ACTIVE);
}

static PyObject *
stream_cuda_stream(bc_Stream *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (stream_usable(st, self) < 0)
        return NULL;
    return Py_BuildValue("(iN)", 0, PyLong_FromVoidPtr((void *)self->handle));
}

PyDoc_STRVAR(from_handle_doc,
"from_handle($type, handle, owner=None)\n--\n\n"
"A Stream for a CUstream made elsewhere (an int).  It is never destroyed here;\n"
"`owner` is kept alive as long as the Stream is.");

static PyObject *
stream_from_handle(PyObject *type, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of_type((PyTypeObject *)type);
    static char *kwlist[] = {"handle", "owner", NULL};
    PyObject *h, *owner = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:from_handle", kwlist, &h, &owner))
        return NULL;
    if (!PyLong_Check(h) || PyBool_Check(h)) {
        PyErr_Format(PyExc_TypeError, "from_handle(): handle must be an int, not %.100s",
                     Py_TYPE(h)->tp_name);
        return NULL;
    }
    void *p = PyLong_AsVoidPtr(h);
    if (p == NULL && PyErr_Occurred())
        return NULL;
    BC_REQUIRE_DRIVER(st, NULL);
    bc_Context *ctx = NULL;
    CUcontext c = NULL;
    if (bc_drv.cuStreamGetCtx((CUstream)p, &c) == CUDA_SUCCESS && c != NULL) {
        ctx = bc_context_wrap(st, c);
        if (ctx == NULL)
            return NULL;
    }
    /* tp_alloc: zeroed (a subclass's __slots__ and __dict__ too) and tracked */
    bc_Stream *self = (bc_Stream *)((PyTypeObject *)type)->tp_alloc((PyTypeObject *)type, 0);
    if (self == NULL) {
        Py_XDECREF(ctx);
        return NULL;
    }
    self->handle = (CUstream)p;
    self->ctx = ctx;
    self->owner = owner && owner != Py_None ? Py_NewRef(owner) : NULL;
    self->owned = 0;
    return (PyObject *)self;
}

static PyObject *
stream_get_priority(bc_Stream *self, void *Py_UNUSED(closure))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (stream_usable(st, self) < 0)
        return NULL;
    int prio = 0;
    if (bc_check(st, bc_drv.cuStreamGetPriority(self->handle, &prio), "cuStreamGetPriority") < 0)
        return NULL;
    return PyLong_FromLong(prio);
}

static PyObject *
stream_get_flags(bc_Stream *self, void *Py_UNUSED(closure))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (stream_usable(st, self) < 0)
        return NULL;
    unsigned int flags = 0;
    if (bc_check(st, bc_drv.cuStreamGetFlags(self->handle, &flags), "cuStreamGetFlags") < 0)
        return NULL;
    return PyLong_FromUnsignedLong(flags);
}

static PyObject *
stream_get_context(bc_Stream *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->ctx ? (PyObject *)self->ctx : Py_None);
}

static Py_hash_t
stream_hash(bc_Stream *self)
{
    uintptr_t v = (uintptr_t)self->handle;
    Py_hash_t h = (Py_hash_t)((v >> 4) | (v << (8 * sizeof v - 4)));
    return h == -1 ? -2 : h;
}

static PyObject *
stream_richcompare(PyObject *a, PyObject *b, int op)
{
    bc_State *st = bc_state_of(a);
    if ((op != Py_EQ && op != Py_NE) || bc_stream_check(st, b) == NULL)
        Py_RETURN_NOTIMPLEMENTED;
    int eq = ((bc_Stream *)a)->handle == ((bc_Stream *)b)->handle;
    return PyBool_FromLong(op == Py_EQ ? eq : !eq);
}

static PyObject *
stream_repr(bc_Stream *self)
{
    return PyUnicode_FromFormat("<barecuda.driver.Stream %p%s%s>", (void *)self->handle,
                                self->owned ? "" : " (borrowed)",
                                self->owned < 0 ? " (not initialised)"
                                : self->owned && self->handle == NULL ? " (closed)" : "");
}

static PyObject *
stream_keep(bc_Stream *self, PyObject *obj)
{
    if (bc_stream_keep_alive(bc_state_of((PyObject *)self), (PyObject *)self, obj) < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(stream_done_doc,
"done($self)\n--\n\n"
"An asyncio future of the running loop, done (result None) once the work queued\n"
"so far on this stream is; `await stream` is the same.  No thread waits and\n"
"nothing polls: a stream callback wakes the loop.  A device fault raises its\n"
"driver error in every awaiting task; closing the stream or detaching its context\n"
"while awaited raises LogicError there.  Cancelling the future leaves the GPU work\n"
"alone.  Needs a running event loop.");

static PyObject *
stream_done(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return bc_await_future(self);
}

static PyMethodDef stream_methods[] = {
    {"done", (PyCFunction)stream_done, METH_NOARGS, stream_done_doc},
    {"_keep_alive", (PyCFunction)stream_keep, METH_O,
     "_keep_alive($self, obj)\n--\n\nPrivate: keep obj alive until the stream is next known idle."},
    {"wait_for_event", (PyCFunction)stream_wait_for_event, METH_O, wait_for_event_doc},
    {"add_callback", (PyCFunction)stream_add_callback, METH_O, add_callback_doc},
    {"begin_capture", (PyCFunction)(void (*)(void))stream_begin_capture,
     METH_VARARGS | METH_KEYWORDS, begin_capture_doc},
    {"end_capture", (PyCFunction)stream_end_capture, METH_NOARGS, end_capture_doc},
    {"is_capturing", (PyCFunction)stream_is_capturing, METH_NOARGS, is_capturing_doc},
    {"__cuda_stream__", (PyCFunction)stream_cuda_stream, METH_NOARGS,
     "__cuda_stream__($self)\n--\n\n(0, handle): the CUDA stream protocol."},
    {"from_handle", (PyCFunction)(void (*)(void))stream_from_handle,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, from_handle_doc},
    {"synchronize", (PyCFunction)stream_synchronize, METH_NOARGS, synchronize_doc},
    {"is_done", (PyCFunction)stream_is_done, METH_NOARGS, is_done_doc},
    {"close", (PyCFunction)stream_close, METH_NOARGS, close_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef stream_getset[] = {
    BC_DICT_GETSET,
    {"handle", (getter)stream_get_handle, NULL, "The CUstream as an int.", NULL},
    {"priority", (getter)stream_get_priority, NULL, "Scheduling priority (lower runs first).",
     NULL},
    {"flags", (getter)stream_get_flags, NULL, "stream_flags the stream was made with.", NULL},
    {"context", (getter)stream_get_context, NULL, "The Context of the stream (or None).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef stream_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_Stream, weakreflist), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(bc_Stream, dict), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(stream_doc,
"Stream(flags=0, priority=0)\n--\n\n"
"A CUDA stream in the current context (lower priority numbers run first).");

static PyType_Slot stream_slots[] = {
    {Py_tp_new, stream_new},
    {Py_tp_init, stream_init},
    {Py_tp_dealloc, stream_dealloc},
    {Py_tp_traverse, stream_traverse},
    {Py_tp_clear, stream_clear},
    {Py_tp_methods, stream_methods},
    {Py_tp_getset, stream_getset},
    {Py_tp_members, stream_members},
    {Py_tp_hash, stream_hash},
    {Py_tp_richcompare, stream_richcompare},
    {Py_tp_repr, stream_repr},
    {Py_am_await, bc_await_iter},
    {Py_tp_doc, (void *)stream_doc},
    {0, NULL},
};

static PyType_Spec stream_spec = {
    .name = "barecuda.driver.Stream",
    .basicsize = sizeof(bc_Stream),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_BASETYPE,
    .slots = stream_slots,
};

int
bc_stream_setup(PyObject *m, bc_State *st)
{
    if (bc_context_on(BC_CTX_DETACHING, let_go_kept_in) < 0)
        return -1;
    return bc_add_type(m, &stream_spec, NULL, &st->StreamType);
}
