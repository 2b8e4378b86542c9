/* SPDX-License-Identifier: MIT */
/* Host memory: pinned (cuMemHostAlloc) and aligned arrays, host memory registered
 * with the driver (cuMemHostRegister), and the shape/dtype/order parsing that
 * these and managed memory (src/memory.c) share.
 *
 * Every allocation holds its Context and is released with that context current,
 * from any thread; free()/unregister() are idempotent, and after a release every
 * use raises LogicError.  Memory handed out as NumPy arrays lives as long as the
 * array: the allocation object is the array's base.
 *
 * The host pool of src/hostpool.c (a floor above) page-locks buffers of its own;
 * when the program registers one of them, the pool's hook (registered here at
 * module init: bc_hostmem_on_register_clash) gives its registration up first. */
#include "barecuda/memory.h"
#include "barecuda/argparse.h"
#include "barecuda/error.h"
#include "barecuda/trace.h"
#include "barecuda/loader.h"
#include "barecuda/stream.h"

#include <stdlib.h>
#include <string.h>

static int (*on_register_clash)(const void *p);

void
bc_hostmem_on_register_clash(int (*fn)(const void *p))
{
    on_register_clash = fn;
}

/* --------------------------------------------- shapes, dtypes and orders */

void
bc_array_spec_clear(bc_ArraySpec *s)
{
    if (s->dims.ptr)
        PyDimMem_FREE(s->dims.ptr);
    s->dims.ptr = NULL;
    Py_CLEAR(s->descr);
}

/* order: "C" or "F"; with `like`, also "A"/"K"/None meaning like's layout. */
static int
parse_order(const char *fn, PyObject *order, PyArrayObject *like, int *fortran)
{
    int like_f = like != NULL && PyArray_IS_F_CONTIGUOUS(like) && !PyArray_IS_C_CONTIGUOUS(like);
    if (order == NULL || order == Py_None) {
        *fortran = like ? like_f : 0;
        return 0;
    }
    const char *s = PyUnicode_Check(order) ? PyUnicode_AsUTF8(order) : NULL;
    if (s != NULL && (strcmp(s, "C") == 0 || strcmp(s, "c") == 0)) {
        *fortran = 0;
        return 0;
    }
    if (s != NULL && (strcmp(s, "F") == 0 || strcmp(s, "f") == 0)) {
        *fortran = 1;
        return 0;
    }
    if (like != NULL && s != NULL && (strcmp(s, "A") == 0 || strcmp(s, "K") == 0)) {
        *fortran = like_f;
        return 0;
    }
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "%s(): order must be 'C' or 'F'%s, not %R", fn,
                 like ? " (or 'A', 'K')" : "", order);
    return -1;
}

static int
spec_finish(const char *fn, bc_ArraySpec *s)
{
    if (PyDataType_REFCHK(s->descr)) {
        PyErr_Format(PyExc_TypeError, "%s(): dtype %R holds Python objects; raw memory cannot", fn,
                     (PyObject *)s->descr);
        return -1;
    }
    size_t n = (size_t)PyDataType_ELSIZE(s->descr);
    for (int i = 0; i < s->dims.len; i++) {
        npy_intp d = s->dims.ptr[i];
        if (d < 0) {
            PyErr_Format(PyExc_ValueError, "%s(): negative dimension %zd in shape", fn, (Py_ssize_t)d);
            return -1;
        }
        if (__builtin_mul_overflow(n, (size_t)d, &n) || n > (size_t)PY_SSIZE_T_MAX) {
            PyErr_Format(PyExc_ValueError, "%s(): the array would be too large", fn);
            return -1;
        }
    }
    s->nbytes = n;
    return 0;
}

int
bc_array_spec_parse(const char *fn, PyObject *shape, PyObject *dtype, PyObject *order,
                    bc_ArraySpec *s)
{
    s->dims.ptr = NULL;
    s->dims.len = 0;
    s->descr = NULL;
    if (!PyArray_IntpConverter(shape, &s->dims)) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "%s(): shape must be an int or a tuple of ints", fn);
        return -1;
    }
    if (!PyArray_DescrConverter(dtype == NULL ? Py_None : dtype, &s->descr))
        goto error;
    if (parse_order(fn, order, NULL, &s->fortran) < 0 || spec_finish(fn, s) < 0)
        goto error;
    return 0;
error:
    bc_array_spec_clear(s);
    return -1;
}

int
bc_array_spec_like(const char *fn, PyObject *like, PyObject *order, bc_ArraySpec *s)
{
    s->dims.ptr = NULL;
    s->descr = NULL;
    if (!PyArray_Check(like)) {
        PyErr_Format(PyExc_TypeError, "%s(): expected a numpy.ndarray, not %.100s", fn,
                     Py_TYPE(like)->tp_name);
        return -1;
    }
    PyArrayObject *a = (PyArrayObject *)like;
    int nd = PyArray_NDIM(a);
    size_t cells = nd > 0 ? (size_t)nd : 1;
    s->dims.ptr = PyDimMem_NEW(cells);
    if (s->dims.ptr == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    s->dims.len = nd;
    memcpy(s->dims.ptr, PyArray_DIMS(a), (size_t)nd * sizeof(npy_intp));
    s->descr = (PyArray_Descr *)Py_NewRef(PyArray_DESCR(a));
    if (parse_order(fn, order, a, &s->fortran) < 0 || spec_finish(fn, s) < 0) {
        bc_array_spec_clear(s);
        return -1;
    }
    return 0;
}

/* A writable array over `data` with `base` (stolen) as its base; spec's descr
 * is consumed. */
PyObject *
bc_array_over(bc_ArraySpec *s, void *data, PyObject *base)
{
    PyArray_Descr *descr = s->descr;
    s->descr = NULL;
    PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, descr, s->dims.len, s->dims.ptr, NULL, data,
                                         NPY_ARRAY_WRITEABLE |
                                             (s->fortran ? NPY_ARRAY_F_CONTIGUOUS : 0),
                                         NULL);
    if (arr == NULL) {
        Py_DECREF(base);
        return NULL;
    }
    if (PyArray_SetBaseObject((PyArrayObject *)arr, base) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    return arr;
}

/* --------------------------------------------------- pinned / aligned host */

static CUresult
host_release(bc_HostAllocation *self)
{
    CUresult rc = CUDA_SUCCESS;
    if (self->freed)
        return rc;
    self->freed = 1;
    if (self->kind == BC_HOST_ALIGNED) {
        free(self->ptr);
        return rc;
    }
    if (self->ctx == NULL || self->ctx->let_go || !bc_drv_ready)
        return rc;
    int entered = bc_context_enter(self->ctx);
    if (entered < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    rc = bc_drv.cuMemFreeHost(self->ptr);
    bc_context_leave(entered);
    return rc;
}

static void
host_dealloc(bc_HostAllocation *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (!self->freed)
        bc_error_in_destructor(host_release(self), "cuMemFreeHost",
                               (PyObject *)self);
    if (self->ctx != NULL) /* pinned; aligned memory has none */
        bc_context_memory_freed(self->ctx, &self->counted);
    Py_CLEAR(self->ctx);
    Py_CLEAR(self->dict);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* tp_clear: only the instance dict (the parents stay until dealloc). */
static int
host_clear(bc_HostAllocation *self)
{
    Py_CLEAR(self->dict);
    return 0;
}

static int
host_traverse(bc_HostAllocation *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->dict);
    Py_VISIT(self->ctx);
    return 0;
}

static int
host_usable(bc_State *st, bc_HostAllocation *self)
{
    if (self->freed)
        return bc_error_logic(st, "this HostAllocation was freed");
    return bc_context_check_alive(st, self->ctx, "this HostAllocation");
}

static int
host_getbuffer(bc_HostAllocation *self, Py_buffer *view, int flags)
{
    if (host_usable(bc_state_of((PyObject *)self), self) < 0)
        return -1;
    if (PyBuffer_FillInfo(view, (PyObject *)self, self->ptr, (Py_ssize_t)self->size, 0, flags) < 0)
        return -1;
    self->exports++;
    return 0;
}

static void
host_releasebuffer(bc_HostAllocation *self, Py_buffer *Py_UNUSED(view))
{
    self->exports--;
}

PyDoc_STRVAR(host_free_doc,
"free($self)\n--\n\n"
"Release the host memory now (idempotent).  Arrays built on it must not be\n"
"used afterwards; BufferError while a memoryview of it is alive.");

static PyObject *
host_free(bc_HostAllocation *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (self->exports > 0) {
        PyErr_SetString(PyExc_BufferError, "HostAllocation.free(): a buffer of it is still in use");
        return NULL;
    }
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = host_release(self);
    Py_END_ALLOW_THREADS
    if (self->ctx != NULL)
        bc_context_memory_freed(self->ctx, &self->counted);
    if (bc_check(st, rc, "cuMemFreeHost") < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* Device pointer of pinned/registered host memory (cuMemHostGetDevicePointer). */
static PyObject *
host_device_pointer(bc_State *st, void *ptr)
{
    if (bc_context_require(st) < 0)
        return NULL;
    CUdeviceptr d;
    if (bc_check(st, bc_drv.cuMemHostGetDevicePointer(&d, ptr, 0), "cuMemHostGetDevicePointer") < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong((unsigned long long)d);
}

PyDoc_STRVAR(host_get_device_pointer_doc,
"get_device_pointer($self)\n--\n\n"
"The device pointer of this memory (allocated with host_alloc_flags.DEVICEMAP).");

static PyObject *
host_get_device_pointer(bc_HostAllocation *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (host_usable(st, self) < 0)
        return NULL;
    if (self->kind != BC_HOST_PINNED)
        return bc_error_logic(st, "get_device_pointer(): this memory is not page-locked"), NULL;
    return host_device_pointer(st, self->ptr);
}

PyDoc_STRVAR(host_get_flags_doc,
"get_flags($self)\n--\n\n"
"The host_alloc_flags this page-locked memory was allocated with (PyCUDA's\n"
"get_flags; the `flags` attribute holds the same).");

static PyObject *
host_get_flags_method(bc_HostAllocation *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (host_usable(st, self) < 0)
        return NULL;
    if (self->kind != BC_HOST_PINNED)
        return bc_error_logic(st, "get_flags(): this memory is not page-locked"), NULL;
    return PyLong_FromUnsignedLong(self->flags);
}

static PyObject *
host_get_size(bc_HostAllocation *self, void *Py_UNUSED(c))
{
    return PyLong_FromSize_t(self->size);
}

static PyObject *
host_get_flags(bc_HostAllocation *self, void *Py_UNUSED(c))
{
    return PyLong_FromUnsignedLong(self->flags);
}

static PyObject *
host_get_address(bc_HostAllocation *self, void *Py_UNUSED(c))
{
    return PyLong_FromVoidPtr(self->ptr);
}

static PyObject *
host_get_context(bc_HostAllocation *self, void *Py_UNUSED(c))
{
    return Py_NewRef(self->ctx ? (PyObject *)self->ctx : Py_None);
}

static PyObject *
host_get_freed(bc_HostAllocation *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(self->freed);
}

static PyObject *
host_get_pagelocked(bc_HostAllocation *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(self->kind == BC_HOST_PINNED);
}

static PyObject *
host_repr(bc_HostAllocation *self)
{
    return PyUnicode_FromFormat("<barecuda.driver.HostAllocation %p, %zu bytes, %s%s>", self->ptr,
                                self->size, self->kind == BC_HOST_PINNED ? "page-locked" : "aligned",
                                self->freed ? ", freed" : "");
}

static PyMethodDef host_methods[] = {
    {"free", (PyCFunction)host_free, METH_NOARGS, host_free_doc},
    {"get_device_pointer", (PyCFunction)host_get_device_pointer, METH_NOARGS,
     host_get_device_pointer_doc},
    {"get_flags", (PyCFunction)host_get_flags_method, METH_NOARGS, host_get_flags_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef host_getset[] = {
    BC_DICT_GETSET,
    {"size", (getter)host_get_size, NULL, "Size in bytes.", NULL},
    {"flags", (getter)host_get_flags, NULL, "The host_alloc_flags it was allocated with.", NULL},
    {"address", (getter)host_get_address, NULL, "The host address as an int.", NULL},
    {"context", (getter)host_get_context, NULL, "The Context it was allocated in (or None).", NULL},
    {"freed", (getter)host_get_freed, NULL, "Whether free() was called.", NULL},
    {"pagelocked", (getter)host_get_pagelocked, NULL, "Whether the memory is page-locked.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef host_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_HostAllocation, weakreflist), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(bc_HostAllocation, dict), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(host_doc,
"Host memory behind the arrays of pagelocked_*() (page-locked, cuMemHostAlloc)\n"
"and aligned_*() (plain, aligned).  It is each array's .base and lives as long\n"
"as the array.  Supports the buffer protocol.");

static PyType_Slot host_slots[] = {
    {Py_tp_dealloc, host_dealloc},
    {Py_tp_traverse, host_traverse},
    {Py_tp_clear, host_clear},
    {Py_tp_repr, host_repr},
    {Py_bf_getbuffer, host_getbuffer},
    {Py_bf_releasebuffer, host_releasebuffer},
    {Py_tp_methods, host_methods},
    {Py_tp_getset, host_getset},
    {Py_tp_members, host_members},
    {Py_tp_doc, (void *)host_doc},
    {0, NULL},
};

static PyType_Spec host_spec = {
    .name = "barecuda.driver.HostAllocation",
    .basicsize = sizeof(bc_HostAllocation),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = host_slots,
};

#define BC_HOST_ALLOC_FLAGS (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | \
                             CU_MEMHOSTALLOC_WRITECOMBINED)

/* Pinned memory for spec as an array (consumes spec). */
static PyObject *
pinned_array(bc_State *st, bc_ArraySpec *s, unsigned int flags, int zero)
{
    PyObject *out = NULL;
    bc_Context *ctx = bc_context_current(st);
    if (ctx == NULL)
        goto done;
    size_t n = s->nbytes ? s->nbytes : 1;
    void *ptr = NULL;
    CUresult rc;
    bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_host(st, BC_TRACE_ALLOC, "pagelocked_empty", n));
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuMemHostAlloc(&ptr, n, flags);
    if (rc == CUDA_SUCCESS && zero)
        memset(ptr, 0, n);
    Py_END_ALLOW_THREADS
    BC_TRACE_END(st, tt, rc);
    if (bc_check(st, rc, "cuMemHostAlloc") < 0)
        goto done;
    bc_HostAllocation *h = PyObject_GC_New(bc_HostAllocation, (PyTypeObject *)st->HostAllocationType);
    if (h == NULL) {
        bc_drv.cuMemFreeHost(ptr);
        goto done;
    }
    h->ptr = ptr;
    h->size = s->nbytes;
    h->flags = flags;
    h->kind = BC_HOST_PINNED;
    h->freed = 0;
    h->exports = 0;
    h->ctx = (bc_Context *)Py_NewRef(ctx);
    bc_context_memory_made(ctx, &h->counted);
    h->weakreflist = NULL;
    h->dict = NULL;
    PyObject_GC_Track(h);
    out = bc_array_over(s, ptr, (PyObject *)h);
done:
    Py_XDECREF(ctx);
    bc_array_spec_clear(s);
    return out;
}

static PyObject *
pagelocked_common(PyObject *m, PyObject *args, PyObject *kwargs, const char *fn, int zero)
{
    bc_State *st = bc_state_from_module(m);
    static char *kwlist[] = {"shape", "dtype", "order", "mem_flags", NULL};
    PyObject *shape, *dtype = NULL, *order = NULL, *oflags = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OOO", kwlist, &shape, &dtype, &order, &oflags))
        return NULL;
    unsigned int flags = 0;
    if (oflags != NULL && bc_arg_flags(oflags, "mem_flags", BC_HOST_ALLOC_FLAGS, &flags) < 0)
        return NULL;
    bc_ArraySpec s;
    if (bc_array_spec_parse(fn, shape, dtype, order, &s) < 0)
        return NULL;
    return pinned_array(st, &s, flags, zero);
}

static PyObject *
pagelocked_like_common(PyObject *m, PyObject *args, PyObject *kwargs, const char *fn, int zero)
{
    bc_State *st = bc_state_from_module(m);
    static char *kwlist[] = {"array", "mem_flags", NULL};
    PyObject *like, *oflags = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O", kwlist, &like, &oflags))
        return NULL;
    unsigned int flags = 0;
    if (oflags != NULL && bc_arg_flags(oflags, "mem_flags", BC_HOST_ALLOC_FLAGS, &flags) < 0)
        return NULL;
    bc_ArraySpec s;
    if (bc_array_spec_like(fn, like, NULL, &s) < 0)
        return NULL;
    return pinned_array(st, &s, flags, zero);
}

PyDoc_STRVAR(pagelocked_empty_doc,
"pagelocked_empty(shape, dtype=None, order='C', mem_flags=0)\n--\n\n"
"A NumPy array in page-locked host memory (cuMemHostAlloc with\n"
"host_alloc_flags `mem_flags`); its .base is the HostAllocation.  dtype None\n"
"means float64.");
PyDoc_STRVAR(pagelocked_zeros_doc,
"pagelocked_zeros(shape, dtype=None, order='C', mem_flags=0)\n--\n\n"
"As pagelocked_empty(), filled with zeros.");
PyDoc_STRVAR(pagelocked_empty_like_doc,
"pagelocked_empty_like(array, mem_flags=0)\n--\n\n"
"pagelocked_empty() with the shape, dtype and layout of `array`.");
PyDoc_STRVAR(pagelocked_zeros_like_doc,
"pagelocked_zeros_like(array, mem_flags=0)\n--\n\n"
"pagelocked_zeros() with the shape, dtype and layout of `array`.");

static PyObject *
bc_pagelocked_empty(PyObject *m, PyObject *a, PyObject *k)
{
    return pagelocked_common(m, a, k, "pagelocked_empty", 0);
}
static PyObject *
bc_pagelocked_zeros(PyObject *m, PyObject *a, PyObject *k)
{
    return pagelocked_common(m, a, k, "pagelocked_zeros", 1);
}
static PyObject *
bc_pagelocked_empty_like(PyObject *m, PyObject *a, PyObject *k)
{
    return pagelocked_like_common(m, a, k, "pagelocked_empty_like", 0);
}
static PyObject *
bc_pagelocked_zeros_like(PyObject *m, PyObject *a, PyObject *k)
{
    return pagelocked_like_common(m, a, k, "pagelocked_zeros_like", 1);
}

/* Plain aligned host memory for spec (consumes spec). */
static PyObject *
aligned_array(bc_State *st, bc_ArraySpec *s, size_t alignment, int zero)
{
    void *ptr = NULL;
    size_t n = s->nbytes ? s->nbytes : 1;
    if (posix_memalign(&ptr, alignment, n) != 0) {
        bc_array_spec_clear(s);
        return PyErr_NoMemory();
    }
    if (zero)
        memset(ptr, 0, n);
    bc_HostAllocation *h = PyObject_GC_New(bc_HostAllocation, (PyTypeObject *)st->HostAllocationType);
    if (h == NULL) {
        free(ptr);
        bc_array_spec_clear(s);
        return NULL;
    }
    h->ptr = ptr;
    h->size = s->nbytes;
    h->flags = 0;
    h->kind = BC_HOST_ALIGNED;
    h->freed = 0;
    h->exports = 0;
    h->ctx = NULL;
    h->counted = 0;
    h->weakreflist = NULL;
    h->dict = NULL;
    PyObject_GC_Track(h);
    PyObject *out = bc_array_over(s, ptr, (PyObject *)h);
    bc_array_spec_clear(s);
    return out;
}

static int
parse_alignment(const char *fn, PyObject *obj, size_t *out)
{
    *out = 4096;
    if (obj == NULL)
        return 0;
    if (bc_arg_size(obj, "alignment", out) < 0)
        return -1;
    if (*out < sizeof(void *) || (*out & (*out - 1)) != 0) {
        PyErr_Format(PyExc_ValueError, "%s(): alignment must be a power of two >= %d, got %zu", fn,
                     (int)sizeof(void *), *out);
        return -1;
    }
    return 0;
}

static PyObject *
aligned_common(PyObject *m, PyObject *args, PyObject *kwargs, const char *fn, int zero)
{
    bc_State *st = bc_state_from_module(m);
    static char *kwlist[] = {"shape", "dtype", "order", "alignment", NULL};
    PyObject *shape, *dtype = NULL, *order = NULL, *oalign = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OOO", kwlist, &shape, &dtype, &order, &oalign))
        return NULL;
    size_t alignment;
    if (parse_alignment(fn, oalign, &alignment) < 0)
        return NULL;
    bc_ArraySpec s;
    if (bc_array_spec_parse(fn, shape, dtype, order, &s) < 0)
        return NULL;
    return aligned_array(st, &s, alignment, zero);
}

PyDoc_STRVAR(aligned_empty_doc,
"aligned_empty(shape, dtype=None, order='C', alignment=4096)\n--\n\n"
"A NumPy array in plain host memory whose address is a multiple of\n"
"`alignment` (a power of two); its .base (a HostAllocation) keeps it alive.");
PyDoc_STRVAR(aligned_zeros_doc,
"aligned_zeros(shape, dtype=None, order='C', alignment=4096)\n--\n\n"
"As aligned_empty(), filled with zeros.");
PyDoc_STRVAR(aligned_empty_like_doc,
"aligned_empty_like(array, alignment=4096)\n--\n\n"
"aligned_empty() with the shape, dtype and layout of `array`.");

static PyObject *
bc_aligned_empty(PyObject *m, PyObject *a, PyObject *k)
{
    return aligned_common(m, a, k, "aligned_empty", 0);
}
static PyObject *
bc_aligned_zeros(PyObject *m, PyObject *a, PyObject *k)
{
    return aligned_common(m, a, k, "aligned_zeros", 1);
}
static PyObject *
bc_aligned_empty_like(PyObject *m, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_from_module(m);
    static char *kwlist[] = {"array", "alignment", NULL};
    PyObject *like, *oalign = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O", kwlist, &like, &oalign))
        return NULL;
    size_t alignment;
    if (parse_alignment("aligned_empty_like", oalign, &alignment) < 0)
        return NULL;
    bc_ArraySpec s;
    if (bc_array_spec_like("aligned_empty_like", like, NULL, &s) < 0)
        return NULL;
    return aligned_array(st, &s, alignment, 0);
}

/* ------------------------------------------------ registered host memory */

typedef struct {
    PyObject_HEAD
    void *ptr;
    size_t size;
    unsigned int flags;
    int registered;
    int readonly;
    PyObject *base;   /* the object whose memory is registered */
    Py_buffer view;   /* held while registered, so the memory cannot move */
    int has_view;
    bc_Context *ctx;
    int counted;      /* in ctx->live_memory until unregistered */
    PyObject *dict;        /* instance attributes (PyCUDA's objects take them) */
    PyObject *weakreflist;
} bc_RegisteredHostMemory;

static CUresult
registered_release(bc_RegisteredHostMemory *self)
{
    CUresult rc = CUDA_SUCCESS;
    if (!self->registered)
        return rc;
    self->registered = 0;
    if (self->ctx == NULL || self->ctx->let_go || !bc_drv_ready)
        return rc;
    int entered = bc_context_enter(self->ctx);
    if (entered < 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    rc = bc_drv.cuMemHostUnregister(self->ptr);
    bc_context_leave(entered);
    return rc;
}

static void
registered_drop_view(bc_RegisteredHostMemory *self)
{
    if (self->has_view) {
        self->has_view = 0;
        PyBuffer_Release(&self->view);
    }
}

static void
registered_dealloc(bc_RegisteredHostMemory *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (self->registered)
        bc_error_in_destructor(registered_release(self),
                               "cuMemHostUnregister", (PyObject *)self);
    bc_context_memory_freed(self->ctx, &self->counted);
    registered_drop_view(self);
    Py_CLEAR(self->base);
    Py_CLEAR(self->ctx);
    Py_CLEAR(self->dict);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* tp_clear: only the instance dict (the parents stay until dealloc). */
static int
registered_clear(bc_RegisteredHostMemory *self)
{
    Py_CLEAR(self->dict);
    return 0;
}

static int
registered_traverse(bc_RegisteredHostMemory *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->dict);
    Py_VISIT(self->base);
    Py_VISIT(self->ctx);
    return 0;
}

static int
registered_getbuffer(bc_RegisteredHostMemory *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->ptr, (Py_ssize_t)self->size,
                             self->readonly, flags);
}

PyDoc_STRVAR(unregister_doc,
"unregister($self)\n--\n\n"
"Unpin the memory now (idempotent); the arrays stay valid as ordinary memory.");

static PyObject *
registered_unregister(bc_RegisteredHostMemory *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = registered_release(self);
    Py_END_ALLOW_THREADS
    bc_context_memory_freed(self->ctx, &self->counted);
    if (bc_check(st, rc, "cuMemHostUnregister") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
registered_get_device_pointer(bc_RegisteredHostMemory *self, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (!self->registered)
        return bc_error_logic(st, "this RegisteredHostMemory was unregistered"), NULL;
    if (bc_context_check_alive(st, self->ctx, "this RegisteredHostMemory") < 0)
        return NULL;
    return host_device_pointer(st, self->ptr);
}

static PyObject *
registered_get_base(bc_RegisteredHostMemory *self, void *Py_UNUSED(c))
{
    return Py_NewRef(self->base);
}

static PyObject *
registered_get_registered(bc_RegisteredHostMemory *self, void *Py_UNUSED(c))
{
    return PyBool_FromLong(self->registered);
}

static PyObject *
registered_get_size(bc_RegisteredHostMemory *self, void *Py_UNUSED(c))
{
    return PyLong_FromSize_t(self->size);
}

static PyObject *
registered_get_flags(bc_RegisteredHostMemory *self, void *Py_UNUSED(c))
{
    return PyLong_FromUnsignedLong(self->flags);
}

static PyObject *
registered_get_address(bc_RegisteredHostMemory *self, void *Py_UNUSED(c))
{
    return PyLong_FromVoidPtr(self->ptr);
}

static PyMethodDef registered_methods[] = {
    {"unregister", (PyCFunction)registered_unregister, METH_NOARGS, unregister_doc},
    {"get_device_pointer", (PyCFunction)registered_get_device_pointer, METH_NOARGS,
     host_get_device_pointer_doc},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef registered_getset[] = {
    BC_DICT_GETSET,
    {"base", (getter)registered_get_base, NULL, "The object whose memory is registered.", NULL},
    {"registered", (getter)registered_get_registered, NULL, "False after unregister().", NULL},
    {"size", (getter)registered_get_size, NULL, "Size in bytes.", NULL},
    {"flags", (getter)registered_get_flags, NULL, "The mem_host_register_flags used.", NULL},
    {"address", (getter)registered_get_address, NULL, "The host address as an int.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef registered_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_RegisteredHostMemory, weakreflist), READONLY,
     NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(bc_RegisteredHostMemory, dict), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(registered_doc,
"Host memory page-locked in place by register_host_memory(); the base of the\n"
"array that function returns.  .base is the original object.");

static PyType_Slot registered_slots[] = {
    {Py_tp_dealloc, registered_dealloc},
    {Py_tp_traverse, registered_traverse},
    {Py_tp_clear, registered_clear},
    {Py_bf_getbuffer, registered_getbuffer},
    {Py_tp_methods, registered_methods},
    {Py_tp_getset, registered_getset},
    {Py_tp_members, registered_members},
    {Py_tp_doc, (void *)registered_doc},
    {0, NULL},
};

static PyType_Spec registered_spec = {
    .name = "barecuda.driver.RegisteredHostMemory",
    .basicsize = sizeof(bc_RegisteredHostMemory),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = registered_slots,
};

#define BC_HOST_REGISTER_FLAGS (CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | \
                                CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)

PyDoc_STRVAR(register_host_memory_doc,
"register_host_memory(ary, flags=0)\n--\n\n"
"Page-lock the memory of the contiguous array `ary` in place\n"
"(cuMemHostRegister with mem_host_register_flags) and return a NumPy view of it\n"
"whose .base is a RegisteredHostMemory; `ary` stays alive as its .base.");

static PyObject *
bc_register_host_memory(PyObject *m, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_from_module(m);
    static char *kwlist[] = {"ary", "flags", NULL};
    PyObject *obj, *oflags = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:register_host_memory", kwlist, &obj, &oflags))
        return NULL;
    unsigned int flags = 0;
    if (oflags != NULL &&
        bc_arg_flags(oflags, "register_host_memory(): flags", BC_HOST_REGISTER_FLAGS, &flags) < 0)
        return NULL;
    if (!PyObject_CheckBuffer(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "register_host_memory(): expected a NumPy array or another buffer, not %.100s",
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    PyArrayObject *arr = (PyArrayObject *)PyArray_FromAny(obj, NULL, 0, 0, 0, NULL);
    if (arr == NULL)
        return NULL;
    bc_RegisteredHostMemory *self = NULL;
    PyObject *out = NULL;
    bc_Context *ctx = NULL;
    if (!PyArray_IS_C_CONTIGUOUS(arr) && !PyArray_IS_F_CONTIGUOUS(arr)) {
        PyErr_SetString(PyExc_ValueError,
                        "register_host_memory(): the array is not contiguous "
                        "(use numpy.ascontiguousarray first)");
        goto done;
    }
    if (PyArray_NBYTES(arr) == 0) {
        PyErr_SetString(PyExc_ValueError, "register_host_memory(): the array is empty");
        goto done;
    }
    ctx = bc_context_current(st);
    if (ctx == NULL)
        goto done;
    self = PyObject_GC_New(bc_RegisteredHostMemory, (PyTypeObject *)st->RegisteredHostMemoryType);
    if (self == NULL)
        goto done;
    self->registered = 0;
    self->counted = 0;
    self->has_view = 0;
    self->base = Py_NewRef(obj);
    self->ctx = (bc_Context *)Py_NewRef(ctx);
    self->weakreflist = NULL;
    self->dict = NULL;
    self->flags = flags;
    self->readonly = !PyArray_ISWRITEABLE(arr);
    PyObject_GC_Track(self);
    if (PyObject_GetBuffer((PyObject *)arr, &self->view, PyBUF_ANY_CONTIGUOUS) < 0)
        goto done;
    self->has_view = 1;
    self->ptr = self->view.buf;
    self->size = (size_t)self->view.len;
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuMemHostRegister(self->ptr, self->size, flags);
    if (rc == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED && on_register_clash != NULL &&
        on_register_clash(self->ptr))
        rc = bc_drv.cuMemHostRegister(self->ptr, self->size, flags); /* get()'s array */
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, "cuMemHostRegister") < 0)
        goto done;
    self->registered = 1;
    bc_context_memory_made(ctx, &self->counted);
    PyArray_Descr *descr = PyArray_DESCR(arr);
    Py_INCREF(descr);
    out = PyArray_NewFromDescr(&PyArray_Type, descr, PyArray_NDIM(arr), PyArray_DIMS(arr),
                               PyArray_STRIDES(arr), PyArray_DATA(arr),
                               PyArray_ISWRITEABLE(arr) ? NPY_ARRAY_WRITEABLE : 0, NULL);
    if (out != NULL && PyArray_SetBaseObject((PyArrayObject *)out, Py_NewRef(self)) < 0)
        Py_CLEAR(out);
done:
    Py_XDECREF(self);
    Py_XDECREF(ctx);
    Py_DECREF(arr);
    return out;
}

/* ------------------------------------------------------------------ setup */

static PyMethodDef hostmem_methods[] = {
#define BC_KW(name, fn, doc) {name, (PyCFunction)(void (*)(void))fn, METH_VARARGS | METH_KEYWORDS, doc}
    BC_KW("pagelocked_empty", bc_pagelocked_empty, pagelocked_empty_doc),
    BC_KW("pagelocked_zeros", bc_pagelocked_zeros, pagelocked_zeros_doc),
    BC_KW("pagelocked_empty_like", bc_pagelocked_empty_like, pagelocked_empty_like_doc),
    BC_KW("pagelocked_zeros_like", bc_pagelocked_zeros_like, pagelocked_zeros_like_doc),
    BC_KW("aligned_empty", bc_aligned_empty, aligned_empty_doc),
    BC_KW("aligned_zeros", bc_aligned_zeros, aligned_zeros_doc),
    BC_KW("aligned_empty_like", bc_aligned_empty_like, aligned_empty_like_doc),
    BC_KW("register_host_memory", bc_register_host_memory, register_host_memory_doc),
#undef BC_KW
    {NULL, NULL, 0, NULL},
};

int
bc_hostmem_setup(PyObject *m, bc_State *st)
{
    if (bc_add_type(m, &host_spec, NULL, &st->HostAllocationType) < 0 ||
        bc_add_type(m, &registered_spec, NULL, &st->RegisteredHostMemoryType) < 0)
        return -1;
    return PyModule_AddFunctions(m, hostmem_methods);
}
