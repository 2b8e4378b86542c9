/* SPDX-License-Identifier: MIT */
/* Event: a CUevent of a context, for ordering streams and timing work.
 *
 * PyCUDA's semantics: record() and synchronize() return the event itself so they
 * chain, time_since()/time_till() give milliseconds.  An event made with
 * INTERPROCESS (and DISABLE_TIMING) can be shared with another process through
 * ipc_handle() / Event.from_ipc_handle().  Released on close() or collection with
 * its context made current. */
#include "barecuda/argparse.h"
#include "barecuda/error.h"
#include "barecuda/trace.h"
#include "barecuda/loader.h"
#include "barecuda/memory.h"
#include "barecuda/stream.h"

static int
event_usable(bc_State *st, bc_Event *e)
{
    if (e->handle == NULL)
        return e->owned < 0 ? bc_error_logic(st, "this %.100s was not initialised: its __init__ "
                                                 "must call Event.__init__(self, flags)",
                                             Py_TYPE(e)->tp_name)
                            : bc_error_logic(st, "this Event was closed");
    return bc_context_check_alive(st, e->ctx, "this Event");
}

bc_Event *
bc_event_check(bc_State *st, PyObject *obj, const char *what)
{
    if (!PyObject_TypeCheck(obj, (PyTypeObject *)st->EventType)) {
        PyErr_Format(PyExc_TypeError, "%s must be an Event, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    bc_Event *e = (bc_Event *)obj;
    return event_usable(st, e) < 0 ? NULL : e;
}

static PyObject *
event_wrap(bc_State *st, PyTypeObject *type, CUevent handle, bc_Context *ctx)
{
    /* tp_alloc: zeroed (a subclass's __slots__ and __dict__ too) and tracked */
    bc_Event *self = (bc_Event *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->handle = handle;
    self->ctx = (bc_Context *)Py_NewRef(ctx);
    self->owned = 1;
    BC_UNUSED(st);
    return (PyObject *)self;
}

/* Parse Event's arguments and create the CUevent in the current context:
 * 0 with *h and a new reference *ctx, or -1. */
static int
event_create(bc_State *st, PyObject *args, PyObject *kwargs, CUevent *h, bc_Context **ctx)
{
    static char *kwlist[] = {"flags", NULL};
    PyObject *flags_obj = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:Event", kwlist, &flags_obj))
        return -1;
    unsigned int flags = 0;
    if (flags_obj != NULL &&
        bc_arg_flags(flags_obj, "Event(): flags",
                     CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS,
                     &flags) < 0)
        return -1;
    if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)) {
        PyErr_SetString(PyExc_ValueError,
                        "Event(): INTERPROCESS events need event_flags.DISABLE_TIMING too");
        return -1;
    }
    *ctx = bc_context_current(st);
    if (*ctx == NULL)
        return -1;
    if (bc_check(st, bc_drv.cuEventCreate(h, flags), "cuEventCreate") < 0) {
        Py_CLEAR(*ctx);
        return -1;
    }
    return 0;
}

/* Event(flags) creates the event in __new__.  A subclass (PyCUDA's classes are
 * built in __init__, so its own __init__ may take other arguments) gets an unset
 * event from __new__ and Event.__init__ creates it. */
static PyObject *
event_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of_type(type);
    if (st == NULL)
        return NULL;
    if (type != (PyTypeObject *)st->EventType) {
        bc_Event *self = (bc_Event *)type->tp_alloc(type, 0);
        if (self != NULL)
            self->owned = -1; /* unset: handle NULL until __init__ */
        return (PyObject *)self;
    }
    CUevent h;
    bc_Context *ctx;
    if (event_create(st, args, kwargs, &h, &ctx) < 0)
        return NULL;
    PyObject *out = event_wrap(st, type, h, ctx);
    if (out == NULL)
        bc_drv.cuEventDestroy(h);
    Py_DECREF(ctx);
    return out;
}

static int
event_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of(self);
    if (Py_IS_TYPE(self, (PyTypeObject *)st->EventType))
        return 0; /* created by __new__ from the same arguments */
    bc_Event *e = (bc_Event *)self;
    if (e->owned >= 0) {
        PyErr_Format(PyExc_TypeError, "Event.__init__() called twice on this %.100s",
                     Py_TYPE(self)->tp_name);
        return -1;
    }
    CUevent h;
    bc_Context *ctx;
    if (event_create(st, args, kwargs, &h, &ctx) < 0)
        return -1;
    e->handle = h;
    e->ctx = ctx;
    e->owned = 1;
    return 0;
}

static CUresult
event_release(bc_Event *self)
{
    CUresult rc = CUDA_SUCCESS;
    CUevent h = self->handle;
    self->handle = NULL;
    if (h == NULL || !self->owned || self->ctx == NULL || self->ctx->let_go || !bc_drv_ready)
        return rc;
    int entered = bc_context_enter(self->ctx);
    if (entered < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    rc = bc_drv.cuEventDestroy(h);
    bc_context_leave(entered);
    return rc;
}

/* tp_clear: only the instance dict (the parents stay until dealloc). */
static int
event_clear(bc_Event *self)
{
    Py_CLEAR(self->dict);
    return 0;
}

static int
event_traverse(bc_Event *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->dict);
    Py_VISIT(self->ctx);
    return 0;
}

static void
event_dealloc(bc_Event *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (self->handle != NULL)
        bc_error_in_destructor(event_release(self),
                               "cuEventDestroy", (PyObject *)self);
    Py_CLEAR(self->ctx);
    Py_CLEAR(self->dict);
    tp->tp_free(self);
    Py_DECREF(tp);
}

PyDoc_STRVAR(record_doc,
"record($self, stream=None)\n--\n\nRecord the event on `stream` (None: the default stream); returns self.");

static PyObject *
event_record(bc_Event *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    bc_State *st = bc_state_of((PyObject *)self);
    PyObject *stream = nargs > 0 ? args[0] : NULL;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "record() takes at most one argument (stream)");
        return NULL;
    }
    if (kwnames != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, i);
            if (stream == NULL && PyUnicode_Compare(key, st->str_stream) == 0)
                stream = args[nargs + i];
            else {
                PyErr_Format(PyExc_TypeError, "record() got an unexpected keyword argument %R",
                             key);
                return NULL;
            }
        }
    }
    CUstream s;
    if (event_usable(st, self) < 0 || bc_stream_convert(st, stream, &s) < 0)
        return NULL;
    if (bc_check(st, bc_drv.cuEventRecord(self->handle, s), "cuEventRecord") < 0)
        return NULL;
    return Py_NewRef(self);
}

PyDoc_STRVAR(synchronize_doc,
"synchronize($self)\n--\n\nWait until the recorded work is done (GIL released); returns self.");

static PyObject *
event_synchronize(bc_Event *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (event_usable(st, self) < 0)
        return NULL;
    CUresult rc;
    bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_host(st, BC_TRACE_SYNC, "Event.synchronize", 0));
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuEventSynchronize(self->handle);
    Py_END_ALLOW_THREADS
    BC_TRACE_END(st, tt, rc);
    if (bc_check(st, rc, "cuEventSynchronize") < 0)
        return NULL;
    return Py_NewRef(self);
}

PyDoc_STRVAR(query_doc,
"query($self)\n--\n\nTrue when the recorded work is done (or nothing was recorded).");

static PyObject *
event_query(bc_Event *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (event_usable(st, self) < 0)
        return NULL;
    CUresult rc = bc_drv.cuEventQuery(self->handle);
    if (rc == CUDA_ERROR_NOT_READY)
        Py_RETURN_FALSE;
    if (bc_check(st, rc, "cuEventQuery") < 0)
        return NULL;
    Py_RETURN_TRUE;
}

static PyObject *
elapsed(bc_Event *start, PyObject *end_obj, const char *what, int reverse)
{
    bc_State *st = bc_state_of((PyObject *)start);
    if (event_usable(st, start) < 0)
        return NULL;
    bc_Event *other = bc_event_check(st, end_obj, what);
    if (other == NULL)
        return NULL;
    float ms = 0;
    CUevent a = reverse ? start->handle : other->handle;
    CUevent b = reverse ? other->handle : start->handle;
    if (bc_check(st, bc_drv.cuEventElapsedTime(&ms, a, b), "cuEventElapsedTime") < 0)
        return NULL;
    return PyFloat_FromDouble(ms);
}

PyDoc_STRVAR(time_since_doc,
"time_since($self, event)\n--\n\nMilliseconds from `event` (recorded earlier) to this one.");

static PyObject *
event_time_since(bc_Event *self, PyObject *earlier)
{
    return elapsed(self, earlier, "time_since(): event", 0);
}

PyDoc_STRVAR(time_till_doc,
"time_till($self, event)\n--\n\nMilliseconds from this event to `event` (recorded later).");

static PyObject *
event_time_till(bc_Event *self, PyObject *later)
{
    return elapsed(self, later, "time_till(): event", 1);
}

PyDoc_STRVAR(ipc_handle_doc,
"ipc_handle($self)\n--\n\n"
"The 64-byte CUipcEventHandle of an INTERPROCESS event, as bytes, for another process\n"
"to open with Event.from_ipc_handle().");

static PyObject *
event_ipc_handle(bc_Event *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (event_usable(st, self) < 0)
        return NULL;
    CUipcEventHandle h;
    if (bc_check(st, bc_drv.cuIpcGetEventHandle(&h, self->handle), "cuIpcGetEventHandle") < 0)
        return NULL;
    PyObject *out = PyBytes_FromStringAndSize(h.reserved, sizeof h.reserved);
    if (out != NULL && bc_ipc_note_export(st, out) < 0)
        Py_CLEAR(out);
    return out;
}

PyDoc_STRVAR(from_ipc_handle_doc,
"from_ipc_handle($type, handle)\n--\n\n"
"Open an event another process shared with ipc_handle() (bytes of 64).");

static PyObject *
event_from_ipc_handle(PyObject *type, PyObject *arg)
{
    bc_State *st = bc_state_of_type((PyTypeObject *)type);
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_CONTIG_RO) < 0)
        return NULL;
    CUipcEventHandle h;
    if ((size_t)view.len != sizeof h.reserved) {
        PyErr_Format(PyExc_ValueError, "from_ipc_handle(): an IPC event handle is %zu bytes, got %zd",
                     sizeof h.reserved, view.len);
        PyBuffer_Release(&view);
        return NULL;
    }
    memcpy(h.reserved, view.buf, sizeof h.reserved);
    PyBuffer_Release(&view);
    if (bc_ipc_check_foreign(st, h.reserved, (Py_ssize_t)sizeof h.reserved,
                             "Event.from_ipc_handle()") < 0)
        return NULL;
    bc_Context *ctx = bc_context_current(st);
    if (ctx == NULL)
        return NULL;
    CUevent e;
    PyObject *out = NULL;
    if (bc_check(st, bc_drv.cuIpcOpenEventHandle(&e, h), "cuIpcOpenEventHandle") == 0) {
        out = event_wrap(st, (PyTypeObject *)type, e, ctx);
        if (out == NULL)
            bc_drv.cuEventDestroy(e);
    }
    Py_DECREF(ctx);
    return out;
}

PyDoc_STRVAR(close_doc, "close($self)\n--\n\nDestroy the event now (idempotent).");

static PyObject *
event_close(bc_Event *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (self->handle != NULL && bc_check(st, event_release(self), "cuEventDestroy") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
event_get_handle(bc_Event *self, void *Py_UNUSED(closure))
{
    return PyLong_FromVoidPtr((void *)self->handle);
}

static PyObject *
event_get_context(bc_Event *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->ctx ? (PyObject *)self->ctx : Py_None);
}

static PyObject *
event_repr(bc_Event *self)
{
    return PyUnicode_FromFormat("<barecuda.driver.Event %p%s>", (void *)self->handle,
                                self->handle ? "" : " (closed)");
}

PyDoc_STRVAR(event_done_doc,
"done($self)\n--\n\n"
"An asyncio future of the running loop, done (result: the event) once the work\n"
"before the event's last record() is; `await event` is the same.  Awaits of\n"
"events wake in the order the events complete (each waits on a stream of its own\n"
"from a pool of the loop).  Needs a running event loop.");

static PyObject *
event_done(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return bc_await_future(self);
}

static PyMethodDef event_methods[] = {
    {"done", (PyCFunction)event_done, METH_NOARGS, event_done_doc},
    {"record", (PyCFunction)(void (*)(void))event_record, METH_FASTCALL | METH_KEYWORDS,
     record_doc},
    {"synchronize", (PyCFunction)event_synchronize, METH_NOARGS, synchronize_doc},
    {"query", (PyCFunction)event_query, METH_NOARGS, query_doc},
    {"time_since", (PyCFunction)event_time_since, METH_O, time_since_doc},
    {"time_till", (PyCFunction)event_time_till, METH_O, time_till_doc},
    {"ipc_handle", (PyCFunction)event_ipc_handle, METH_NOARGS, ipc_handle_doc},
    {"from_ipc_handle", (PyCFunction)event_from_ipc_handle, METH_O | METH_CLASS,
     from_ipc_handle_doc},
    {"close", (PyCFunction)event_close, METH_NOARGS, close_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef event_getset[] = {
    BC_DICT_GETSET,
    {"handle", (getter)event_get_handle, NULL, "The CUevent as an int (0 once closed).", NULL},
    {"context", (getter)event_get_context, NULL, "The Context of the event.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef event_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_Event, weakreflist), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(bc_Event, dict), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(event_doc,
"Event(flags=0)\n--\n\n"
"A CUDA event in the current context; flags from event_flags (DEFAULT,\n"
"BLOCKING_SYNC, DISABLE_TIMING, INTERPROCESS).");

static PyType_Slot event_slots[] = {
    {Py_tp_new, event_new},
    {Py_tp_init, event_init},
    {Py_tp_dealloc, event_dealloc},
    {Py_tp_traverse, event_traverse},
    {Py_tp_clear, event_clear},
    {Py_tp_repr, event_repr},
    {Py_am_await, bc_await_iter},
    {Py_tp_methods, event_methods},
    {Py_tp_getset, event_getset},
    {Py_tp_members, event_members},
    {Py_tp_doc, (void *)event_doc},
    {0, NULL},
};

static PyType_Spec event_spec = {
    .name = "barecuda.driver.Event",
    .basicsize = sizeof(bc_Event),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_BASETYPE,
    .slots = event_slots,
};

int
bc_event_setup(PyObject *m, bc_State *st)
{
    return bc_add_type(m, &event_spec, NULL, &st->EventType);
}
