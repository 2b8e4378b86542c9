/* SPDX-License-Identifier: MIT */
/* Device memory: DeviceAllocation and the pointer conversion every copy and
 * launch uses.
 *
 * A DeviceAllocation holds its Context; free() is idempotent and releases the
 * memory with that context current, from any thread.  After free() every use
 * raises LogicError instead of touching freed memory. */
#include "barecuda/memory.h"
#include "barecuda/argparse.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"
#include "barecuda/stream.h"

static int
allocation_usable(bc_State *st, bc_DeviceAllocation *a)
{
    if (a->freed)
        return bc_error_logic(st, "this DeviceAllocation was freed");
    return bc_context_check_alive(st, a->ctx, "this DeviceAllocation");
}

/* The pointer of an object exposing __cuda_array_interface__ (its 'data' item). */
static int
pointer_from_cai(PyObject *cai, CUdeviceptr *out)
{
    PyObject *data = PyDict_Check(cai) ? PyDict_GetItemString(cai, "data") : NULL;
    if (data == NULL || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) < 1 ||
        !PyLong_Check(PyTuple_GET_ITEM(data, 0))) {
        PyErr_SetString(PyExc_TypeError,
                        "__cuda_array_interface__ must be a dict with a 'data': (ptr, readonly) item");
        return -1;
    }
    unsigned long long p = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(data, 0));
    if (p == (unsigned long long)-1 && PyErr_Occurred())
        return -1;
    *out = (CUdeviceptr)p;
    return 0;
}

int
bc_pointer_convert(bc_State *st, PyObject *obj, CUdeviceptr *out, size_t *size_out)
{
    if (size_out)
        *size_out = SIZE_MAX;
    PyTypeObject *tp = Py_TYPE(obj);
    if (tp == (PyTypeObject *)st->DeviceAllocationType) {
        bc_DeviceAllocation *a = (bc_DeviceAllocation *)obj;
        if (allocation_usable(st, a) < 0)
            return -1;
        *out = a->ptr;
        if (size_out)
            *size_out = a->size;
        return 0;
    }
    if (PyLong_Check(obj) && !PyBool_Check(obj)) {
        unsigned long long p = PyLong_AsUnsignedLongLong(obj);
        if (p == (unsigned long long)-1 && PyErr_Occurred()) {
            if (PyErr_ExceptionMatches(PyExc_OverflowError))
                PyErr_Format(PyExc_ValueError, "device pointer out of range: %R", obj);
            return -1;
        }
        *out = (CUdeviceptr)p;
        return 0;
    }
    PyObject *inner = PyObject_GetAttr(obj, st->str_gpudata);
    if (inner != NULL) {
        int rc = bc_pointer_convert(st, inner, out, size_out);
        Py_DECREF(inner);
        return rc;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return -1;
    PyErr_Clear();
    PyObject *cai = PyObject_GetAttr(obj, st->str_cai);
    if (cai != NULL) {
        int rc = pointer_from_cai(cai, out);
        Py_DECREF(cai);
        return rc;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return -1;
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError,
                 "expected device memory (a DeviceAllocation, an object with gpudata or "
                 "__cuda_array_interface__, or an int pointer), not %.100s",
                 tp->tp_name);
    return -1;
}

static CUresult
allocation_release(bc_DeviceAllocation *self)
{
    CUresult rc = CUDA_SUCCESS;
    if (self->freed)
        return rc;
    self->freed = 1;
    if (self->ctx == NULL || self->ctx->released || !bc_drv_ready)
        return rc;
    int entered = bc_context_enter(self->ctx);
    if (entered < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    switch (self->kind) {
    case BC_ALLOC_ASYNC: {
        CUstream s = NULL;
        bc_Stream *so = self->stream ? bc_stream_check(bc_state_of((PyObject *)self), self->stream)
                                     : NULL;
        if (so != NULL && so->handle != NULL)
            s = so->handle;
        rc = bc_drv.cuMemFreeAsync(self->ptr, s);
        break;
    }
    case BC_ALLOC_IPC:
        rc = bc_drv.cuIpcCloseMemHandle(self->ptr);
        break;
    default:
        rc = bc_drv.cuMemFree(self->ptr);
    }
    bc_context_leave(entered);
    return rc;
}

static void
allocation_dealloc(bc_DeviceAllocation *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (!self->freed)
        bc_error_in_destructor(bc_state_of((PyObject *)self), allocation_release(self),
                               "cuMemFree", (PyObject *)self);
    Py_CLEAR(self->stream);
    Py_CLEAR(self->ctx);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static int
allocation_traverse(bc_DeviceAllocation *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->ctx);
    Py_VISIT(self->stream);
    return 0;
}

/* A new DeviceAllocation object for memory already allocated (steals nothing:
 * takes a new reference to ctx and stream). */
static PyObject *
allocation_wrap(bc_State *st, bc_Context *ctx, CUdeviceptr ptr, size_t size, int kind,
                PyObject *stream)
{
    bc_DeviceAllocation *self =
        PyObject_GC_New(bc_DeviceAllocation, (PyTypeObject *)st->DeviceAllocationType);
    if (self == NULL)
        return NULL;
    self->ptr = ptr;
    self->size = size;
    self->ctx = (bc_Context *)Py_NewRef(ctx);
    self->stream = Py_XNewRef(stream);
    self->kind = kind;
    self->freed = 0;
    self->weakreflist = NULL;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

PyDoc_STRVAR(mem_alloc_doc,
"mem_alloc(nbytes)\n--\n\n"
"Allocate `nbytes` of device memory in the current context (cuMemAlloc) and\n"
"return a DeviceAllocation.  MemoryError when the device is out of memory.");

static PyObject *
bc_mem_alloc(PyObject *m, PyObject *arg)
{
    bc_State *st = bc_state_from_module(m);
    size_t n;
    if (bc_arg_size(arg, "mem_alloc(): nbytes", &n) < 0)
        return NULL;
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "mem_alloc(): nbytes must be positive");
        return NULL;
    }
    bc_Context *ctx = bc_context_current(st);
    if (ctx == NULL)
        return NULL;
    CUdeviceptr ptr;
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuMemAlloc(&ptr, n);
    Py_END_ALLOW_THREADS
    PyObject *out = NULL;
    if (bc_check(st, rc, "cuMemAlloc") == 0) {
        out = allocation_wrap(st, ctx, ptr, n, BC_ALLOC_DEVICE, NULL);
        if (out == NULL)
            bc_drv.cuMemFree(ptr);
    }
    Py_DECREF(ctx);
    return out;
}

PyDoc_STRVAR(mem_get_info_doc,
"mem_get_info()\n--\n\n(free, total) bytes of device memory of the current context's device.");

static PyObject *
bc_mem_get_info(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_from_module(m);
    bc_Context *ctx = bc_context_current(st);
    if (ctx == NULL)
        return NULL;
    Py_DECREF(ctx);
    size_t free_b, total;
    if (bc_check(st, bc_drv.cuMemGetInfo(&free_b, &total), "cuMemGetInfo") < 0)
        return NULL;
    return Py_BuildValue("(nn)", (Py_ssize_t)free_b, (Py_ssize_t)total);
}

PyDoc_STRVAR(free_doc,
"free()\n--\n\nRelease the memory now (idempotent); later uses raise LogicError.");

static PyObject *
allocation_free(bc_DeviceAllocation *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = allocation_release(self);
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, "cuMemFree") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
allocation_int(bc_DeviceAllocation *self)
{
    if (allocation_usable(bc_state_of((PyObject *)self), self) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong((unsigned long long)self->ptr);
}

static PyObject *
allocation_repr(bc_DeviceAllocation *self)
{
    return PyUnicode_FromFormat("<barecuda.driver.DeviceAllocation 0x%llx, %zu bytes%s>",
                                (unsigned long long)self->ptr, self->size,
                                self->freed ? ", freed" : "");
}

static PyObject *
allocation_get_size(bc_DeviceAllocation *self, void *Py_UNUSED(closure))
{
    return PyLong_FromSize_t(self->size);
}

static PyObject *
allocation_get_context(bc_DeviceAllocation *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->ctx ? (PyObject *)self->ctx : Py_None);
}

static PyObject *
allocation_get_freed(bc_DeviceAllocation *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->freed);
}

static PyMethodDef allocation_methods[] = {
    {"free", (PyCFunction)allocation_free, METH_NOARGS, free_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef allocation_getset[] = {
    {"size", (getter)allocation_get_size, NULL, "Size in bytes.", NULL},
    {"context", (getter)allocation_get_context, NULL, "The Context owning the memory.", NULL},
    {"freed", (getter)allocation_get_freed, NULL, "Whether free() was called.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef allocation_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_DeviceAllocation, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(allocation_doc,
"Device memory from mem_alloc() and friends.  int(a) is the device pointer;\n"
"pass it to kernels and copies directly.");

static PyType_Slot allocation_slots[] = {
    {Py_tp_dealloc, allocation_dealloc},
    {Py_tp_traverse, allocation_traverse},
    {Py_tp_repr, allocation_repr},
    {Py_nb_int, allocation_int},
    {Py_nb_index, allocation_int},
    {Py_tp_methods, allocation_methods},
    {Py_tp_getset, allocation_getset},
    {Py_tp_members, allocation_members},
    {Py_tp_doc, (void *)allocation_doc},
    {0, NULL},
};

static PyType_Spec allocation_spec = {
    .name = "barecuda.driver.DeviceAllocation",
    .basicsize = sizeof(bc_DeviceAllocation),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = allocation_slots,
};

static PyMethodDef memory_methods[] = {
    {"mem_alloc", bc_mem_alloc, METH_O, mem_alloc_doc},
    {"mem_get_info", bc_mem_get_info, METH_NOARGS, mem_get_info_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_memory_setup(PyObject *m, bc_State *st)
{
    if (bc_add_type(m, &allocation_spec, NULL, &st->DeviceAllocationType) < 0)
        return -1;
    return PyModule_AddFunctions(m, memory_methods);
}
