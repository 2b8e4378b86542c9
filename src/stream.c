/* SPDX-License-Identifier: MIT */
/* Stream: a CUstream of a context, and the conversions every async call uses.
 *
 * A Stream made here is destroyed on close() or collection, with its context made
 * current for the call from whatever thread releases it.  Objects handed to
 * asynchronous work (host buffers of async copies, say) are kept in the stream's
 * `keep` list until the stream is known to be idle. */
#include "barecuda/stream.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"

bc_Stream *
bc_stream_check(bc_State *st, PyObject *obj)
{
    return Py_TYPE(obj) == (PyTypeObject *)st->StreamType ? (bc_Stream *)obj : NULL;
}

static int
stream_usable(bc_State *st, bc_Stream *s)
{
    if (s->handle == NULL && s->owned)
        return bc_error_logic(st, "this Stream was closed");
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

int
bc_stream_keep_alive(bc_State *st, PyObject *stream, PyObject *obj)
{
    bc_Stream *s = stream ? bc_stream_check(st, stream) : NULL;
    if (s == NULL)
        return 0;
    if (s->keep == NULL && (s->keep = PyList_New(0)) == NULL)
        return -1;
    return PyList_Append(s->keep, obj);
}

static PyObject *
stream_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    bc_State *st = PyType_GetModuleState(type);
    static char *kwlist[] = {"flags", "priority", NULL};
    unsigned int flags = 0;
    int priority = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|Ii:Stream", kwlist, &flags, &priority))
        return NULL;
    if (flags & ~(unsigned int)CU_STREAM_NON_BLOCKING) {
        PyErr_Format(PyExc_ValueError, "Stream(): unknown flags 0x%x (stream_flags.DEFAULT or "
                                       "NON_BLOCKING)", flags);
        return NULL;
    }
    bc_Context *ctx = bc_context_current(st);
    if (ctx == NULL)
        return NULL;
    CUstream handle;
    if (bc_check(st, bc_drv.cuStreamCreateWithPriority(&handle, flags, priority),
                 "cuStreamCreateWithPriority") < 0) {
        Py_DECREF(ctx);
        return NULL;
    }
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
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static CUresult
stream_release(bc_Stream *self)
{
    CUresult rc = CUDA_SUCCESS;
    if (self->owned && self->handle != NULL && self->ctx != NULL && !self->ctx->released &&
        bc_drv_ready) {
        int entered = bc_context_enter(self->ctx);
        if (entered >= 0) {
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
    Py_VISIT(self->ctx);
    Py_VISIT(self->owner);
    Py_VISIT(self->keep);
    return 0;
}

static int
stream_clear(bc_Stream *self)
{
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
        bc_error_in_destructor(bc_state_of((PyObject *)self), stream_release(self),
                               "cuStreamDestroy", (PyObject *)self);
    stream_clear(self);
    Py_CLEAR(self->ctx);
    tp->tp_free(self);
    Py_DECREF(tp);
}

PyDoc_STRVAR(synchronize_doc,
"synchronize()\n--\n\nWait until all work queued on the stream is done (GIL released).");

static PyObject *
stream_synchronize(bc_Stream *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (stream_usable(st, self) < 0)
        return NULL;
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuStreamSynchronize(self->handle);
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, "cuStreamSynchronize") < 0)
        return NULL;
    Py_CLEAR(self->keep);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(is_done_doc, "is_done()\n--\n\nTrue when all work queued on the stream is done.");

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
"close()\n--\n\nDestroy the stream now (idempotent); work already queued still runs.");

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

static PyMethodDef stream_methods[] = {
    {"synchronize", (PyCFunction)stream_synchronize, METH_NOARGS, synchronize_doc},
    {"is_done", (PyCFunction)stream_is_done, METH_NOARGS, is_done_doc},
    {"close", (PyCFunction)stream_close, METH_NOARGS, close_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef stream_getset[] = {
    {"handle", (getter)stream_get_handle, NULL, "The CUstream as an int.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef stream_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_Stream, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(stream_doc,
"Stream(flags=0, priority=0)\n--\n\n"
"A CUDA stream in the current context (lower priority numbers run first).");

static PyType_Slot stream_slots[] = {
    {Py_tp_new, stream_new},
    {Py_tp_dealloc, stream_dealloc},
    {Py_tp_traverse, stream_traverse},
    {Py_tp_clear, stream_clear},
    {Py_tp_methods, stream_methods},
    {Py_tp_getset, stream_getset},
    {Py_tp_members, stream_members},
    {Py_tp_doc, (void *)stream_doc},
    {0, NULL},
};

static PyType_Spec stream_spec = {
    .name = "barecuda.driver.Stream",
    .basicsize = sizeof(bc_Stream),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = stream_slots,
};

int
bc_stream_setup(PyObject *m, bc_State *st)
{
    return bc_add_type(m, &stream_spec, NULL, &st->StreamType);
}
