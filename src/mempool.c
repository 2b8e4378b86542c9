/* SPDX-License-Identifier: MIT */
/* MemPool: a device's memory pool for stream-ordered allocation, named but never
 * destroyed by the object (MemPool.default(device), the device's default pool;
 * Context.array_pool, the array layer's own pool of src/blockcache.c, which
 * refuses to be used once its context is detached).  Its statistics and release
 * threshold as attributes, trim_to().  mem_alloc_async() (src/memory.c)
 * allocates from one. */
#include "barecuda/memory.h"
#include "barecuda/argparse.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"

PyObject *
bc_mempool_wrap(bc_State *st, CUmemoryPool pool, CUdevice dev, PyObject *owner)
{
    bc_MemPool *self = PyObject_GC_New(bc_MemPool, (PyTypeObject *)st->MemPoolType);
    if (self == NULL)
        return NULL;
    self->handle = pool;
    self->device = dev;
    self->owner = Py_XNewRef(owner);
    self->weakreflist = NULL;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static PyObject *
mempool_for(bc_State *st, CUdevice dev)
{
    CUmemoryPool pool;
    if (bc_check(st, bc_drv.cuDeviceGetDefaultMemPool(&pool, dev), "cuDeviceGetDefaultMemPool") < 0)
        return NULL;
    return bc_mempool_wrap(st, pool, dev, NULL);
}

/* A context's own pool is destroyed when the context is detached: its wrappers
 * then refuse to touch the stale handle. */
static int
mempool_check(bc_State *st, bc_MemPool *self)
{
    if (self->owner != NULL && ((bc_Context *)self->owner)->released)
        return bc_error_logic(st, "this MemPool belonged to a context that was detached");
    return 0;
}

PyDoc_STRVAR(mempool_default_doc,
"default($type, device=None)\n--\n\n"
"The default memory pool of `device` (a Device or an ordinal; None: the current\n"
"context's device), which mem_alloc_async() allocates from.");

static PyObject *
mempool_default(PyObject *type, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of_type((PyTypeObject *)type);
    static char *kwlist[] = {"device", NULL};
    PyObject *device = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:default", kwlist, &device))
        return NULL;
    CUdevice dev;
    if (bc_device_of(st, device, &dev) < 0)
        return NULL;
    return mempool_for(st, dev);
}

static int
mempool_traverse(bc_MemPool *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->owner);
    return 0;
}

static int
mempool_clear(bc_MemPool *self)
{
    Py_CLEAR(self->owner);
    return 0;
}

static void
mempool_dealloc(bc_MemPool *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    Py_CLEAR(self->owner);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
mempool_attr(bc_MemPool *self, void *closure)
{
    bc_State *st = bc_state_of((PyObject *)self);
    cuuint64_t v = 0;
    if (mempool_check(st, self) < 0)
        return NULL;
    if (bc_check(st, bc_drv.cuMemPoolGetAttribute(self->handle, (CUmemPool_attribute)(intptr_t)closure, &v),
                 "cuMemPoolGetAttribute") < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong((unsigned long long)v);
}

static int
mempool_set_threshold(bc_MemPool *self, PyObject *value, void *Py_UNUSED(closure))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "release_threshold cannot be deleted");
        return -1;
    }
    /* any 64-bit unsigned value: UINT64_MAX (2**64 - 1) is the driver's "keep everything" */
    if (!PyLong_Check(value)) {
        PyErr_Format(PyExc_TypeError, "MemPool.release_threshold must be an int, not %.100s",
                     Py_TYPE(value)->tp_name);
        return -1;
    }
    unsigned long long n = PyLong_AsUnsignedLongLong(value);
    if (n == (unsigned long long)-1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError,
                         "MemPool.release_threshold must be 0 to 2**64 - 1, not %R", value);
        }
        return -1;
    }
    if (mempool_check(st, self) < 0)
        return -1;
    cuuint64_t v = (cuuint64_t)n;
    return bc_check(st, bc_drv.cuMemPoolSetAttribute(self->handle, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &v),
                    "cuMemPoolSetAttribute");
}

PyDoc_STRVAR(trim_to_doc,
"trim_to($self, min_bytes_to_keep)\n--\n\n"
"Give unused memory of the pool back to the system, keeping at least\n"
"`min_bytes_to_keep` reserved (cuMemPoolTrimTo).");

static PyObject *
mempool_trim_to(bc_MemPool *self, PyObject *arg)
{
    bc_State *st = bc_state_of((PyObject *)self);
    size_t n;
    if (bc_arg_size(arg, "trim_to(): min_bytes_to_keep", &n) < 0 || mempool_check(st, self) < 0)
        return NULL;
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuMemPoolTrimTo(self->handle, n);
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, "cuMemPoolTrimTo") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
mempool_get_handle(bc_MemPool *self, void *Py_UNUSED(closure))
{
    return PyLong_FromVoidPtr((void *)self->handle);
}

static PyObject *
mempool_get_device(bc_MemPool *self, void *Py_UNUSED(closure))
{
    return bc_device_new(bc_state_of((PyObject *)self), self->device);
}

static PyObject *
mempool_repr(bc_MemPool *self)
{
    return PyUnicode_FromFormat("<barecuda.driver.MemPool %p of device %d>", (void *)self->handle,
                                (int)self->device);
}

static PyMethodDef mempool_methods[] = {
    {"default", (PyCFunction)(void (*)(void))mempool_default,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, mempool_default_doc},
    {"trim_to", (PyCFunction)mempool_trim_to, METH_O, trim_to_doc},
    {NULL, NULL, 0, NULL},
};

#define BC_POOL_ATTR(name, attr, doc)                                                   \
    {name, (getter)mempool_attr, NULL, doc, (void *)(intptr_t)(attr)}

static PyGetSetDef mempool_getset[] = {
    BC_POOL_ATTR("used", CU_MEMPOOL_ATTR_USED_MEM_CURRENT, "Bytes allocated from the pool now."),
    BC_POOL_ATTR("used_high", CU_MEMPOOL_ATTR_USED_MEM_HIGH, "High-water mark of `used`."),
    BC_POOL_ATTR("reserved", CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
                 "Bytes of device memory the pool holds now."),
    BC_POOL_ATTR("reserved_high", CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
                 "High-water mark of `reserved`."),
    BC_POOL_ATTR("used_mem_current", CU_MEMPOOL_ATTR_USED_MEM_CURRENT, "Same as `used`."),
    BC_POOL_ATTR("used_mem_high", CU_MEMPOOL_ATTR_USED_MEM_HIGH, "Same as `used_high`."),
    BC_POOL_ATTR("reserved_mem_current", CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
                 "Same as `reserved`."),
    BC_POOL_ATTR("reserved_mem_high", CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
                 "Same as `reserved_high`."),
    {"release_threshold", (getter)mempool_attr, (setter)mempool_set_threshold,
     "Bytes the pool keeps reserved at a synchronize instead of releasing them.",
     (void *)(intptr_t)CU_MEMPOOL_ATTR_RELEASE_THRESHOLD},
    {"handle", (getter)mempool_get_handle, NULL, "The CUmemoryPool as an int.", NULL},
    {"device", (getter)mempool_get_device, NULL, "The Device of the pool.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef mempool_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_MemPool, weakreflist), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(mempool_doc,
"A device's memory pool for stream-ordered allocation; get one with\n"
"MemPool.default(device), or Context.array_pool for the pool GPUArray memory\n"
"comes from.  A MemPool never destroys the pool it names.");

static PyType_Slot mempool_slots[] = {
    {Py_tp_dealloc, mempool_dealloc},
    {Py_tp_traverse, mempool_traverse},
    {Py_tp_clear, mempool_clear},
    {Py_tp_repr, mempool_repr},
    {Py_tp_methods, mempool_methods},
    {Py_tp_getset, mempool_getset},
    {Py_tp_members, mempool_members},
    {Py_tp_doc, (void *)mempool_doc},
    {0, NULL},
};

static PyType_Spec mempool_spec = {
    .name = "barecuda.driver.MemPool",
    .basicsize = sizeof(bc_MemPool),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION |
             Py_TPFLAGS_HAVE_GC,
    .slots = mempool_slots,
};

int
bc_mempool_setup(PyObject *m, bc_State *st)
{
    return bc_add_type(m, &mempool_spec, NULL, &st->MemPoolType);
}
