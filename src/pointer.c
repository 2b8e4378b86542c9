/* SPDX-License-Identifier: MIT */
/* Plain addresses: the device pointer a kernel or copy argument stands for
 * (bc_pointer_convert: our allocations, ints, gpudata, __cuda_array_interface__),
 * what the driver knows of one (pointer_get_attributes), what range of an
 * allocation it falls in (mem_get_address_range), and host views of memory the
 * CPU can read (as_buffer on allocations and on driver.PointerHolderBase).
 * Below src/memory.c on its floor: it reads the allocation objects' structs
 * (memory.h) and calls nothing of memory.c.
 *
 * A host view is a memoryview over a small exporter object (_HostView) that holds
 * the owner of the memory, so dropping the owner while the view lives cannot free
 * it; an owner that is one of our allocations also counts the view, and its
 * free() refuses (BufferError) until the view is released.  Only managed memory
 * and page-locked host memory are viewed: the driver's pointer attributes are
 * checked first, and device-only memory is a LogicError instead of a crash on
 * first touch. */
#include "barecuda/memory.h"
#include "barecuda/argparse.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"

#include <string.h>

/* ------------------------------------------------------ pointer conversion */

static int
is_alloc_type(bc_State *st, PyTypeObject *tp)
{
    /* exact types first; of the subclasses only IPCMemoryHandle's can have
     * instances (the others are made by the library only) */
    return tp == (PyTypeObject *)st->DeviceAllocationType ||
           tp == (PyTypeObject *)st->ManagedAllocationType ||
           tp == (PyTypeObject *)st->IPCMemoryHandleType ||
           PyType_IsSubtype(tp, (PyTypeObject *)st->IPCMemoryHandleType);
}

/* A type's name without its module ("DeviceAllocation"). */
static const char *
short_name(PyObject *obj)
{
    const char *name = Py_TYPE(obj)->tp_name;
    const char *dot = strrchr(name, '.');
    return dot ? dot + 1 : name;
}

int
bc_allocation_usable(bc_State *st, bc_DeviceAllocation *a)
{
    if (a->kind == BC_ALLOC_UNSET)
        return bc_error_logic(st, "this %.100s was not initialised: its __init__ must call "
                                  "IPCMemoryHandle.__init__(self, handle)",
                              Py_TYPE(a)->tp_name);
    if (a->freed)
        return bc_error_logic(st, "this %s was %s", short_name((PyObject *)a),
                              a->kind == BC_ALLOC_IPC ? "closed" : "freed");
    return bc_context_check_alive(st, a->ctx, "this allocation");
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

static int
pointer_from_int(PyObject *obj, CUdeviceptr *out)
{
    PyObject *num = PyLong_CheckExact(obj) ? Py_NewRef(obj) : PyNumber_Index(obj);
    if (num == NULL)
        return -1;
    unsigned long long p = PyLong_AsUnsignedLongLong(num);
    Py_DECREF(num);
    if (p == (unsigned long long)-1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError))
            PyErr_Format(PyExc_ValueError, "device pointer out of range: %R", obj);
        return -1;
    }
    *out = (CUdeviceptr)p;
    return 0;
}

int
bc_pointer_convert(bc_State *st, PyObject *obj, CUdeviceptr *out, size_t *size_out)
{
    if (size_out)
        *size_out = SIZE_MAX;
    PyTypeObject *tp = Py_TYPE(obj);
    if (is_alloc_type(st, tp)) {
        bc_DeviceAllocation *a = (bc_DeviceAllocation *)obj;
        if (bc_allocation_usable(st, a) < 0)
            return -1;
        *out = a->ptr;
        if (size_out)
            *size_out = a->size;
        return 0;
    }
    if (tp == (PyTypeObject *)st->PooledAllocationType) {
        bc_PooledAllocation *p = (bc_PooledAllocation *)obj;
        if (p->freed)
            return bc_error_logic(st, "this PooledDeviceAllocation was freed");
        if (bc_allocation_usable(st, (bc_DeviceAllocation *)p->block) < 0)
            return -1;
        *out = p->ptr;
        if (size_out)
            *size_out = p->size;
        return 0;
    }
    if (PyBool_Check(obj) || PyFloat_Check(obj)) {
        PyErr_Format(PyExc_TypeError, "expected device memory, not %.100s", tp->tp_name);
        return -1;
    }
    if (PyLong_Check(obj) || PyArray_IsScalar(obj, Integer))
        return pointer_from_int(obj, out);
    /* gpudata and __cuda_array_interface__ before __index__: GPUArrays and torch
     * tensors define __index__ (the value of a one-element integer array). */
    PyObject *inner = PyObject_GetAttr(obj, st->str_gpudata);
    if (inner != NULL) {
        if (Py_EnterRecursiveCall(" in device pointer conversion")) {
            Py_DECREF(inner);
            return -1;
        }
        int rc = bc_pointer_convert(st, inner, out, size_out);
        Py_LeaveRecursiveCall();
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
    if (tp->tp_as_number && tp->tp_as_number->nb_index)
        return pointer_from_int(obj, out);
    PyErr_Format(PyExc_TypeError,
                 "expected device memory (a DeviceAllocation, an object with gpudata or "
                 "__cuda_array_interface__, or an int pointer), not %.100s",
                 tp->tp_name);
    return -1;
}

bc_Context *
bc_pointer_context(bc_State *st, PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
    if (is_alloc_type(st, tp))
        return ((bc_DeviceAllocation *)obj)->ctx;
    if (tp == (PyTypeObject *)st->PooledAllocationType) {
        bc_PooledAllocation *p = (bc_PooledAllocation *)obj;
        return p->block ? ((bc_DeviceAllocation *)p->block)->ctx : NULL;
    }
    return NULL;
}

int
bc_memory_span(bc_State *st, PyObject *obj, CUdeviceptr *ptr, size_t *size)
{
    if (!is_alloc_type(st, Py_TYPE(obj)) && PyObject_CheckBuffer(obj)) {
        Py_buffer view;
        if (PyObject_GetBuffer(obj, &view, PyBUF_ANY_CONTIGUOUS) < 0)
            return -1;
        *ptr = (CUdeviceptr)(uintptr_t)view.buf;
        *size = (size_t)view.len;
        PyBuffer_Release(&view);
        return 0;
    }
    return bc_pointer_convert(st, obj, ptr, size);
}

/* ------------------------------------------------------------ host views */

typedef struct {
    PyObject_HEAD
    PyObject *owner;     /* keeps the memory's owner alive */
    Py_ssize_t *exports; /* the owner's export count, or NULL */
    void *buf;
    Py_ssize_t len;
} bc_HostView;

static int
view_getbuffer(bc_HostView *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->buf, self->len, 0, flags);
}

static int
view_traverse(bc_HostView *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->owner);
    return 0;
}

static int
view_clear(bc_HostView *self)
{
    if (self->exports != NULL) {
        (*self->exports)--;
        self->exports = NULL;
    }
    Py_CLEAR(self->owner);
    return 0;
}

static void
view_dealloc(bc_HostView *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    view_clear(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

static PyType_Slot view_slots[] = {
    {Py_tp_dealloc, view_dealloc},
    {Py_tp_traverse, view_traverse},
    {Py_tp_clear, view_clear},
    {Py_bf_getbuffer, view_getbuffer},
    {Py_tp_doc, (void *)"Exporter behind the memoryview that as_buffer() returns."},
    {0, NULL},
};

static PyType_Spec view_spec = {
    .name = "barecuda.driver._HostView",
    .basicsize = sizeof(bc_HostView),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = view_slots,
};

/* Where the CPU can read `ptr`: the host address, or NULL with LogicError set
 * saying why it cannot.  A context must be current. */
static void *
host_address(bc_State *st, CUdeviceptr ptr, const char *fn)
{
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                   CU_POINTER_ATTRIBUTE_HOST_POINTER};
    unsigned int memtype = 0;
    unsigned int managed = 0; /* the driver writes a bool-sized value; start zeroed */
    void *host = NULL;
    void *data[] = {&memtype, &managed, &host};
    CUresult rc = bc_drv.cuPointerGetAttributes(3, attrs, data, ptr);
    if (rc != CUDA_SUCCESS || memtype == 0) {
        bc_error_logic(st, "%s(): address 0x%llx is not memory CUDA knows of, so it cannot be "
                           "viewed from the host", fn, (unsigned long long)ptr);
        return NULL;
    }
    if (managed)
        return (void *)(uintptr_t)ptr;
    if (memtype == CU_MEMORYTYPE_HOST && host != NULL)
        return host;
    bc_error_logic(st, "%s(): the memory at 0x%llx is %s memory, which the CPU cannot read "
                       "directly; copy it to the host (memcpy_dtoh) or allocate managed "
                       "(managed_empty) or page-locked (pagelocked_empty) memory",
                   fn, (unsigned long long)ptr,
                   memtype == CU_MEMORYTYPE_ARRAY ? "CUDA-array" : "device-only");
    return NULL;
}

PyObject *
bc_host_view(bc_State *st, PyObject *owner, Py_ssize_t *exports, CUdeviceptr ptr, size_t known,
             PyObject *size_obj, PyObject *offset_obj, const char *fn)
{
    char what[64];
    size_t size, offset = 0;
    snprintf(what, sizeof what, "%s(): size", fn);
    if (bc_arg_size(size_obj, what, &size) < 0)
        return NULL;
    snprintf(what, sizeof what, "%s(): offset", fn);
    if (offset_obj != NULL && bc_arg_size(offset_obj, what, &offset) < 0)
        return NULL;
    if (bc_context_require(st) < 0)
        return NULL;
    if (known == SIZE_MAX) {
        /* an address of unknown extent: bound it by its allocation, when CUDA knows it */
        CUdeviceptr base;
        size_t range;
        if (bc_drv.cuMemGetAddressRange(&base, &range, ptr) == CUDA_SUCCESS)
            known = range - (size_t)(ptr - base);
    }
    if (offset > known || size > known - offset) {
        PyErr_Format(PyExc_ValueError, "%s(): %zu bytes at offset %zu run past the memory's "
                     "%zu bytes", fn, size, offset, known);
        return NULL;
    }
    char *host = host_address(st, ptr, fn);
    if (host == NULL)
        return NULL;
    bc_HostView *v = PyObject_GC_New(bc_HostView, (PyTypeObject *)st->HostViewType);
    if (v == NULL)
        return NULL;
    v->owner = Py_XNewRef(owner);
    v->exports = exports;
    if (exports != NULL)
        (*exports)++;
    v->buf = host + offset;
    v->len = (Py_ssize_t)size;
    PyObject_GC_Track(v);
    PyObject *out = PyMemoryView_FromObject((PyObject *)v);
    Py_DECREF(v);
    return out;
}

/* ---------------------------------------------------- pointer attributes */

PyDoc_STRVAR(pointer_get_attributes_doc,
"pointer_get_attributes(ptr)\n--\n\n"
"What the driver knows about a pointer (cuPointerGetAttributes), as a dict:\n"
"memory_type (a memorytype value, None for memory unknown to CUDA),\n"
"device_ordinal, context (a Context or None), is_managed, mapped,\n"
"device_pointer, host_pointer, range_start, range_size, buffer_id.\n"
"`ptr` is device memory (anything a copy takes) or a host buffer.");

static PyObject *
bc_pointer_get_attributes(PyObject *m, PyObject *arg)
{
    bc_State *st = bc_state_from_module(m);
    CUdeviceptr ptr;
    size_t known;
    if (bc_memory_span(st, arg, &ptr, &known) < 0 || bc_context_require(st) < 0)
        return NULL;
    CUpointer_attribute attrs[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,     CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_CONTEXT,         CU_POINTER_ATTRIBUTE_IS_MANAGED,
        CU_POINTER_ATTRIBUTE_MAPPED,          CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
        CU_POINTER_ATTRIBUTE_HOST_POINTER,    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
        CU_POINTER_ATTRIBUTE_RANGE_SIZE,      CU_POINTER_ATTRIBUTE_BUFFER_ID,
    };
    enum { N = sizeof attrs / sizeof attrs[0] };
    unsigned long long slots[N];
    void *data[N];
    memset(slots, 0, sizeof slots);
    for (int i = 0; i < N; i++)
        data[i] = &slots[i];
    slots[1] = (unsigned long long)-1; /* device ordinal: -1 unless written */
    if (bc_check(st, bc_drv.cuPointerGetAttributes(N, attrs, data, ptr), "cuPointerGetAttributes") < 0)
        return NULL;
    unsigned int memtype;
    int ordinal;
    CUcontext cctx;
    memcpy(&memtype, &slots[0], sizeof memtype);
    memcpy(&ordinal, &slots[1], sizeof ordinal);
    memcpy(&cctx, &slots[2], sizeof cctx);
    PyObject *ctx = NULL;
    if (cctx != NULL) {
        ctx = (PyObject *)bc_context_wrap(st, cctx);
        if (ctx == NULL)
            return NULL;
    }
    else
        ctx = Py_NewRef(Py_None);
    PyObject *mt = memtype ? PyLong_FromUnsignedLong(memtype) : Py_NewRef(Py_None);
    PyObject *ord = (memtype && ordinal >= 0) ? PyLong_FromLong(ordinal) : Py_NewRef(Py_None);
    PyObject *out = Py_BuildValue(
        "{sNsNsNsNsNsKsKsKsKsK}", "memory_type", mt, "device_ordinal", ord, "context", ctx,
        "is_managed", PyBool_FromLong(slots[3] != 0), "mapped", PyBool_FromLong(slots[4] != 0),
        "device_pointer", slots[5], "host_pointer", slots[6], "range_start", slots[7],
        "range_size", slots[8], "buffer_id", slots[9]);
    return out;
}

/* ------------------------------------------------------------ functions */

PyDoc_STRVAR(host_buffer_doc,
"_host_buffer(owner, ptr, size, offset=0)\n--\n\n"
"A writable memoryview of `size` bytes at `ptr` + `offset` that keeps `owner`\n"
"alive (PointerHolderBase.as_buffer).  LogicError unless the memory is managed or\n"
"page-locked host memory.");

static PyObject *
bc_host_buffer(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    bc_State *st = bc_state_from_module(m);
    if (nargs < 3 || nargs > 4) {
        PyErr_Format(PyExc_TypeError, "_host_buffer() takes 3 or 4 arguments (%zd given)", nargs);
        return NULL;
    }
    CUdeviceptr ptr;
    size_t known;
    if (bc_pointer_convert(st, args[1], &ptr, &known) < 0)
        return NULL;
    return bc_host_view(st, args[0], NULL, ptr, known, args[2], nargs > 3 ? args[3] : NULL,
                        "as_buffer");
}

PyDoc_STRVAR(mem_get_address_range_doc,
"mem_get_address_range(ptr)\n--\n\n"
"(base, size): the allocation that device address `ptr` lies in\n"
"(cuMemGetAddressRange).  `ptr` is anything a copy takes as device memory.\n"
"driver.LogicError (CUDA_ERROR_NOT_FOUND) when no allocation holds it.");

static PyObject *
bc_mem_get_address_range(PyObject *m, PyObject *arg)
{
    bc_State *st = bc_state_from_module(m);
    CUdeviceptr ptr, base = 0;
    size_t size = 0;
    if (bc_pointer_convert(st, arg, &ptr, NULL) < 0 || bc_context_require(st) < 0)
        return NULL;
    if (bc_check(st, bc_drv.cuMemGetAddressRange(&base, &size, ptr), "cuMemGetAddressRange") < 0)
        return NULL;
    return Py_BuildValue("(Kn)", (unsigned long long)base, (Py_ssize_t)size);
}

static PyMethodDef pointer_functions[] = {
    {"_host_buffer", (PyCFunction)(void (*)(void))bc_host_buffer, METH_FASTCALL, host_buffer_doc},
    {"mem_get_address_range", bc_mem_get_address_range, METH_O, mem_get_address_range_doc},
    {"pointer_get_attributes", bc_pointer_get_attributes, METH_O, pointer_get_attributes_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_pointer_setup(PyObject *m, bc_State *st)
{
    if (bc_add_type(m, &view_spec, NULL, &st->HostViewType) < 0)
        return -1;
    return PyModule_AddFunctions(m, pointer_functions);
}
