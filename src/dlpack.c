/* SPDX-License-Identifier: MIT */
/* DLPack: export device memory as a DLPack capsule and consume one.
 *
 * _to_dlpack() wraps (pointer, shape, strides, dtype) in a DLManagedTensorVersioned
 * (capsule "dltensor_versioned") or a legacy DLManagedTensor ("dltensor"); the
 * managed tensor holds a strong reference to `owner` (the exporting array) until
 * its deleter runs.  A consumer renames the capsule "used_dltensor[_versioned]"
 * and calls the deleter when done, possibly from a thread without the GIL, so
 * the deleter takes the GIL itself.  A capsule collected unconsumed (still under
 * its original name) calls the deleter from its destructor.
 *
 * _from_dlpack() consumes a producer's capsule: it renames it "used_*" and hands
 * back a keepalive capsule that calls the producer's deleter when collected. */
#include "barecuda/common.h"
#include "barecuda/state.h"
#include "barecuda/dlpack.h"

static const char NAME_V[] = "dltensor_versioned";
static const char NAME_L[] = "dltensor";
static const char USED_V[] = "used_dltensor_versioned";
static const char USED_L[] = "used_dltensor";
static const char KEEP_V[] = "barecuda.dlpack_keepalive_versioned";
static const char KEEP_L[] = "barecuda.dlpack_keepalive";

/* ------------------------------------------------------------------ export */

/* One allocation per export: the managed tensor, the owner and shape+strides. */
typedef struct {
    union {
        DLManagedTensor legacy;
        DLManagedTensorVersioned versioned;
    } m;
    PyObject *owner;
    int64_t dims[]; /* shape[ndim] then strides[ndim] */
} export_block;

static void
release_block(export_block *b)
{
    if (b == NULL)
        return;
    if (b->owner != NULL && Py_IsInitialized() && !bc_is_finalizing()) {
        PyGILState_STATE g = PyGILState_Ensure();
        Py_CLEAR(b->owner);
        PyGILState_Release(g);
    }
    /* At interpreter shutdown the owner is leaked: no calls into Python then. */
    PyMem_RawFree(b);
}

static void
deleter_versioned(DLManagedTensorVersioned *self)
{
    if (self != NULL)
        release_block((export_block *)self->manager_ctx);
}

static void
deleter_legacy(DLManagedTensor *self)
{
    if (self != NULL)
        release_block((export_block *)self->manager_ctx);
}

/* Destructor of our exported capsule: frees only if nobody consumed it. */
static void
export_capsule_destructor(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, NAME_V)) {
        DLManagedTensorVersioned *t = PyCapsule_GetPointer(cap, NAME_V);
        if (t && t->deleter)
            t->deleter(t);
    } else if (PyCapsule_IsValid(cap, NAME_L)) {
        DLManagedTensor *t = PyCapsule_GetPointer(cap, NAME_L);
        if (t && t->deleter)
            t->deleter(t);
    }
    /* renamed "used_*": the consumer owns the managed tensor now */
}

static int
dims_from(PyObject *seq, const char *what, int64_t *out, Py_ssize_t n)
{
    PyObject *fast = PySequence_Fast(seq, what);
    if (fast == NULL)
        return -1;
    if (PySequence_Fast_GET_SIZE(fast) != n) {
        PyErr_Format(PyExc_ValueError, "_to_dlpack(): %s has %zd items, shape %zd", what,
                     PySequence_Fast_GET_SIZE(fast), n);
        Py_DECREF(fast);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
        if (v == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
        out[i] = (int64_t)v;
    }
    Py_DECREF(fast);
    return 0;
}

PyDoc_STRVAR(to_dlpack_doc,
"_to_dlpack(owner, ptr, shape, strides, typecode, bits, device_id, versioned,\n"
"           read_only=False, copied=False, device_type=2)\n--\n\n"
"Private: a DLPack capsule for the memory at `ptr` (an int) of `shape`, with\n"
"`strides` in elements (None: C-contiguous), element type (typecode, bits) with\n"
"typecode kDLInt=0, kDLUInt=1, kDLFloat=2, kDLComplex=5, kDLBool=6, on device\n"
"(device_type, device_id).  `owner` is kept alive until the consumer calls the\n"
"deleter (or the capsule dies unconsumed).  versioned: a 'dltensor_versioned'\n"
"capsule (DLPack 1.0, with the READ_ONLY/IS_COPIED flags), else 'dltensor'.");

static PyObject *
to_dlpack(PyObject *Py_UNUSED(module), PyObject *args, PyObject *kwargs)
{
    static char *kwlist[] = {"owner", "ptr", "shape", "strides", "typecode", "bits",
                             "device_id", "versioned", "read_only", "copied", "device_type",
                             NULL};
    PyObject *owner, *ptr_obj, *shape, *strides;
    int typecode, bits, device_id, versioned, read_only = 0, copied = 0, device_type = kDLCUDA;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOiiip|ppi:_to_dlpack", kwlist, &owner,
                                     &ptr_obj, &shape, &strides, &typecode, &bits, &device_id,
                                     &versioned, &read_only, &copied, &device_type))
        return NULL;
    if (typecode < 0 || typecode > 255 || bits <= 0 || bits > 255) {
        PyErr_Format(PyExc_ValueError, "_to_dlpack(): bad dtype (code %d, bits %d)", typecode,
                     bits);
        return NULL;
    }
    unsigned long long ptr = PyLong_AsUnsignedLongLong(ptr_obj);
    if (ptr == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    Py_ssize_t ndim = PyObject_Length(shape);
    if (ndim < 0)
        return NULL;
    if (ndim > 64) {
        PyErr_Format(PyExc_ValueError, "_to_dlpack(): too many dimensions (%zd)", ndim);
        return NULL;
    }
    export_block *b = PyMem_RawCalloc(1, sizeof(export_block) + 2 * (size_t)ndim * sizeof(int64_t));
    if (b == NULL)
        return PyErr_NoMemory();
    int64_t *shp = b->dims, *str = b->dims + ndim;
    if (dims_from(shape, "shape", shp, ndim) < 0)
        goto error;
    if (strides == Py_None) {
        int64_t s = 1;
        for (Py_ssize_t i = ndim - 1; i >= 0; i--) {
            str[i] = s;
            s *= shp[i] ? shp[i] : 1;
        }
    } else if (dims_from(strides, "strides", str, ndim) < 0) {
        goto error;
    }
    DLTensor *t = versioned ? &b->m.versioned.dl_tensor : &b->m.legacy.dl_tensor;
    t->data = (void *)(uintptr_t)ptr;
    t->device.device_type = device_type;
    t->device.device_id = device_id;
    t->ndim = (int32_t)ndim;
    t->dtype.code = (uint8_t)typecode;
    t->dtype.bits = (uint8_t)bits;
    t->dtype.lanes = 1;
    t->shape = ndim ? shp : NULL;
    t->strides = ndim ? str : NULL;
    t->byte_offset = 0;
    b->owner = Py_NewRef(owner);
    PyObject *cap;
    if (versioned) {
        b->m.versioned.version.major = BC_DLPACK_MAJOR;
        b->m.versioned.version.minor = BC_DLPACK_MINOR;
        b->m.versioned.manager_ctx = b;
        b->m.versioned.deleter = deleter_versioned;
        b->m.versioned.flags = (read_only ? BC_DLPACK_FLAG_READ_ONLY : 0) |
                               (copied ? BC_DLPACK_FLAG_IS_COPIED : 0);
        cap = PyCapsule_New(&b->m.versioned, NAME_V, export_capsule_destructor);
    } else {
        b->m.legacy.manager_ctx = b;
        b->m.legacy.deleter = deleter_legacy;
        cap = PyCapsule_New(&b->m.legacy, NAME_L, export_capsule_destructor);
    }
    if (cap == NULL) {
        Py_CLEAR(b->owner);
        goto error;
    }
    return cap;
error:
    PyMem_RawFree(b);
    return NULL;
}

/* ------------------------------------------------------------------ import */

static void
keepalive_destructor(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, KEEP_V)) {
        DLManagedTensorVersioned *t = PyCapsule_GetPointer(cap, KEEP_V);
        if (t && t->deleter)
            t->deleter(t);
    } else if (PyCapsule_IsValid(cap, KEEP_L)) {
        DLManagedTensor *t = PyCapsule_GetPointer(cap, KEEP_L);
        if (t && t->deleter)
            t->deleter(t);
    }
}

static PyObject *
typestr_of(DLDataType dt)
{
    if (dt.lanes != 1) {
        PyErr_Format(PyExc_BufferError, "DLPack: vector dtypes (lanes=%u) are not supported",
                     (unsigned)dt.lanes);
        return NULL;
    }
    char kind;
    switch (dt.code) {
    case kDLInt: kind = 'i'; break;
    case kDLUInt: kind = 'u'; break;
    case kDLFloat: kind = 'f'; break;
    case kDLComplex: kind = 'c'; break;
    case kDLBool: kind = 'b'; break;
    default:
        PyErr_Format(PyExc_BufferError, "DLPack: dtype code %u (bits %u) is not supported "
                                        "(bfloat16 and opaque handles have no NumPy dtype)",
                     (unsigned)dt.code, (unsigned)dt.bits);
        return NULL;
    }
    if (dt.bits % 8 != 0 || dt.bits == 0 || (kind == 'b' && dt.bits != 8)) {
        PyErr_Format(PyExc_BufferError, "DLPack: %u-bit elements of code %u are not supported",
                     (unsigned)dt.bits, (unsigned)dt.code);
        return NULL;
    }
    unsigned nbytes = dt.bits / 8u;
    return PyUnicode_FromFormat("%c%c%u", nbytes == 1 ? '|' : '<', kind, nbytes);
}

PyDoc_STRVAR(from_dlpack_doc,
"_from_dlpack(capsule)\n--\n\n"
"Private: consume a DLPack capsule ('dltensor_versioned' or 'dltensor'; it is\n"
"renamed 'used_...').  Returns (ptr, shape, strides_in_bytes, typestr,\n"
"device_type, device_id, keepalive, read_only): the producer's memory stays valid\n"
"while `keepalive` lives; its deleter runs when keepalive is collected.");

static PyObject *
from_dlpack(PyObject *Py_UNUSED(module), PyObject *cap)
{
    if (!PyCapsule_CheckExact(cap)) {
        PyErr_Format(PyExc_TypeError, "_from_dlpack(): expected a DLPack capsule, not %.100s",
                     Py_TYPE(cap)->tp_name);
        return NULL;
    }
    const char *name = PyCapsule_GetName(cap);
    if (name == NULL && PyErr_Occurred())
        return NULL;
    int versioned;
    if (name != NULL && strcmp(name, NAME_V) == 0) {
        versioned = 1;
    } else if (name != NULL && strcmp(name, NAME_L) == 0) {
        versioned = 0;
    } else if (name != NULL && strncmp(name, "used_", 5) == 0) {
        PyErr_SetString(PyExc_BufferError,
                        "_from_dlpack(): this DLPack capsule was already consumed");
        return NULL;
    } else {
        PyErr_Format(PyExc_TypeError, "_from_dlpack(): not a DLPack capsule (name %s)",
                     name ? name : "NULL");
        return NULL;
    }
    void *p = PyCapsule_GetPointer(cap, name);
    if (p == NULL)
        return NULL;
    DLTensor *t;
    int read_only = 0;
    if (versioned) {
        DLManagedTensorVersioned *m = p;
        if (m->version.major > BC_DLPACK_MAJOR) {
            PyErr_Format(PyExc_BufferError, "_from_dlpack(): DLPack version %u.%u is newer "
                                            "than the %d.x understood here",
                         m->version.major, m->version.minor, BC_DLPACK_MAJOR);
            return NULL;
        }
        t = &m->dl_tensor;
        read_only = (m->flags & BC_DLPACK_FLAG_READ_ONLY) != 0;
    } else {
        t = &((DLManagedTensor *)p)->dl_tensor;
    }
    if (t->ndim < 0 || (t->ndim > 0 && t->shape == NULL)) {
        PyErr_SetString(PyExc_BufferError, "_from_dlpack(): malformed DLTensor");
        return NULL;
    }
    PyObject *typestr = NULL, *shape = NULL, *strides = NULL, *keep = NULL;
    typestr = typestr_of(t->dtype);
    if (typestr == NULL)
        return NULL;
    int64_t itemsize = t->dtype.bits / 8;
    shape = PyTuple_New(t->ndim);
    strides = PyTuple_New(t->ndim);
    if (shape == NULL || strides == NULL)
        goto error;
    int64_t c = itemsize;
    for (int32_t i = t->ndim - 1; i >= 0; i--) {
        int64_t st = t->strides ? t->strides[i] * itemsize : c;
        PyObject *a = PyLong_FromLongLong(t->shape[i]);
        PyObject *b = PyLong_FromLongLong(st);
        if (a == NULL || b == NULL) {
            Py_XDECREF(a);
            Py_XDECREF(b);
            goto error;
        }
        PyTuple_SET_ITEM(shape, i, a);
        PyTuple_SET_ITEM(strides, i, b);
        c *= t->shape[i] ? t->shape[i] : 1;
    }
    keep = PyCapsule_New(p, versioned ? KEEP_V : KEEP_L, keepalive_destructor);
    if (keep == NULL)
        goto error;
    /* Consumed from here on: the keepalive calls the deleter. */
    if (PyCapsule_SetName(cap, versioned ? USED_V : USED_L) < 0) {
        PyCapsule_SetName(keep, "barecuda.dlpack_unowned"); /* do not delete twice */
        goto error;
    }
    uintptr_t ptr = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
    return Py_BuildValue("(NNNNiiNO)", PyLong_FromVoidPtr((void *)ptr), shape, strides, typestr,
                         (int)t->device.device_type, (int)t->device.device_id, keep,
                         read_only ? Py_True : Py_False);
error:
    Py_XDECREF(typestr);
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    Py_XDECREF(keep);
    return NULL;
}

static PyMethodDef dlpack_functions[] = {
    {"_to_dlpack", (PyCFunction)(void (*)(void))to_dlpack, METH_VARARGS | METH_KEYWORDS,
     to_dlpack_doc},
    {"_from_dlpack", (PyCFunction)from_dlpack, METH_O, from_dlpack_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_dlpack_setup(PyObject *m, bc_State *st)
{
    BC_UNUSED(st);
    if (PyModule_AddIntConstant(m, "_DLPACK_MAJOR", BC_DLPACK_MAJOR) < 0 ||
        PyModule_AddIntConstant(m, "_DLPACK_MINOR", BC_DLPACK_MINOR) < 0)
        return -1;
    return PyModule_AddFunctions(m, dlpack_functions);
}
