/* SPDX-License-Identifier: MIT */
/* Kernel-argument packing: what Function.__call__, prepare() and the prepared
 * calls turn their Python arguments into, the bytes of one cuLaunchKernel
 * parameter buffer.  Also the launch shape (grid, block, shared) they share.
 *
 * __call__ packs PyCUDA-style: NumPy scalars with their exact C type, device
 * pointers (DeviceAllocation, ModuleGlobal, objects with gpudata or
 * __cuda_array_interface__), structs by value (numpy.void or size-1 arrays),
 * texture/surface objects (any object with an int `_kernel_arg_handle`
 * attribute: the CUtexObject/CUsurfObject) and argument handlers (In/Out/InOut,
 * or any object with get_device_alloc(), pre_call(stream), post_call(stream)).
 * A bare Python int is refused: it could be a value of any width or a pointer.
 * prepare() fixes a signature instead (parsed by src/argsig.c); then Python ints
 * and floats convert.
 *
 * Packing is by table: the kernel's layout (offsets and sizes from
 * cuFuncGetParamInfo, or the prepare()d signature with a converter per
 * parameter) is worked out once per Function, and each call runs one tight loop
 * over it, trying the common exact types (DeviceAllocation, the NumPy scalar
 * types, int, float, GPUArray) by pointer compare before any generic
 * conversion. */
#include "barecuda/argpack.h"
#include "barecuda/argparse.h"
#include "barecuda/error.h"
#include "barecuda/array.h"
#include "barecuda/memory.h"

#include <numpy/arrayscalars.h>

#include <float.h>
#include <math.h>

/* ------------------------------------------------------------ NumPy scalars */

typedef struct {
    PyTypeObject *type;
    char code;
    unsigned char size, align;
    unsigned char offset; /* of obval in the scalar object */
} scalar_kind;

#define SCALAR(T, C, ctype, al)                                                    \
    {&Py##T##ArrType_Type, C, sizeof(ctype), al, offsetof(Py##T##ScalarObject, obval)}

static scalar_kind scalar_kinds[17];
static int n_scalar_kinds;

/* An open-addressing table of the kinds by type pointer (filled once; a quarter
 * full, so a lookup is one or two compares).  NumPy's scalar types are static
 * objects, so their addresses never change. */
#define KIND_SLOTS 64
static const scalar_kind *kind_table[KIND_SLOTS];

static inline unsigned int
kind_slot(PyTypeObject *tp)
{
    uintptr_t v = (uintptr_t)tp;
    return (unsigned int)((v >> 4) ^ (v >> 10)) % KIND_SLOTS;
}

static void
scalar_kinds_init(void)
{
    if (n_scalar_kinds)
        return;
    const scalar_kind k[] = {
        SCALAR(Int, 'i', npy_int, 4),           SCALAR(Float, 'f', npy_float, 4),
        SCALAR(Long, 'l', npy_long, sizeof(npy_long)),
        SCALAR(Double, 'd', npy_double, 8),     SCALAR(UInt, 'I', npy_uint, 4),
        SCALAR(ULong, 'L', npy_ulong, sizeof(npy_ulong)),
        SCALAR(LongLong, 'q', npy_longlong, 8), SCALAR(ULongLong, 'Q', npy_ulonglong, 8),
        SCALAR(Short, 'h', npy_short, 2),       SCALAR(UShort, 'H', npy_ushort, 2),
        SCALAR(Byte, 'b', npy_byte, 1),         SCALAR(UByte, 'B', npy_ubyte, 1),
        SCALAR(Bool, '?', npy_bool, 1),         SCALAR(Half, 'e', npy_half, 2),
        /* CUDA's float2/double2 (cuComplex, thrust::complex) align to their size */
        SCALAR(CFloat, 'F', npy_cfloat, 8),     SCALAR(CDouble, 'D', npy_cdouble, 16),
    };
    memcpy(scalar_kinds, k, sizeof k);
    n_scalar_kinds = (int)BC_COUNT(k);
    for (int i = 0; i < n_scalar_kinds; i++) {
        unsigned int slot = kind_slot(scalar_kinds[i].type);
        while (kind_table[slot] != NULL)
            slot = (slot + 1) % KIND_SLOTS;
        kind_table[slot] = &scalar_kinds[i];
    }
}

/* The kind of a NumPy scalar type, or NULL: one or two pointer compares. */
static inline const scalar_kind *
scalar_lookup(PyTypeObject *tp)
{
    for (unsigned int slot = kind_slot(tp);; slot = (slot + 1) % KIND_SLOTS) {
        const scalar_kind *k = kind_table[slot];
        if (k == NULL || k->type == tp)
            return k;
    }
}

/* ------------------------------------------------------------ packing buffer */

int
bc_packbuf_reserve(bc_packbuf *pb, size_t need)
{
    if (need <= pb->cap)
        return 0;
    size_t cap = need < 2 * pb->cap ? 2 * pb->cap : need;
    char *p;
    if (pb->buf == (char *)pb->stack) {
        p = PyMem_Malloc(cap);
        if (p != NULL)
            memcpy(p, pb->stack, pb->size);
    } else
        p = PyMem_Realloc(pb->buf, cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    pb->buf = p;
    pb->cap = cap;
    return 0;
}


/* ------------------------------------------------------------ dimensions */

static int
dim_value(PyObject *item, const char *what, unsigned int *out)
{
    long long v;
    if (PyLong_CheckExact(item)) {
        int overflow;
        v = PyLong_AsLongLongAndOverflow(item, &overflow);
        if (overflow)
            v = overflow > 0 ? LLONG_MAX : -1;
        else if (v == -1 && PyErr_Occurred())
            return -1;
    } else if (PyIndex_Check(item) && !PyBool_Check(item) && !PyFloat_Check(item)) {
        if (bc_arg_long(item, what, LLONG_MIN, LLONG_MAX, &v) < 0)
            return -1;
    } else if (PyFloat_Check(item)) {
        /* PyCUDA (through Boost.Python) refuses floats here too. */
        PyErr_Format(PyExc_TypeError,
                     "%s must be a tuple of ints, got the float %R: pass int(...) (or use //)",
                     what, item);
        return -1;
    } else {
        PyErr_Format(PyExc_TypeError, "%s must be a tuple of ints, got an item of type %.100s",
                     what, Py_TYPE(item)->tp_name);
        return -1;
    }
    if (v <= 0) {
        PyErr_Format(PyExc_ValueError, "%s dimensions must be positive, got %R", what, item);
        return -1;
    }
    if (v > 0x7FFFFFFFLL) {
        PyErr_Format(PyExc_ValueError, "%s dimension %R is too large", what, item);
        return -1;
    }
    *out = (unsigned int)v;
    return 0;
}

/* A (x[, y[, z]]) tuple or list (or a single int) into d[3], missing ones 1. */
int
bc_args_dims(PyObject *obj, const char *what, unsigned int d[3])
{
    d[0] = d[1] = d[2] = 1;
    PyObject *const *items;
    Py_ssize_t n;
    if (PyTuple_Check(obj)) {
        items = &PyTuple_GET_ITEM(obj, 0);
        n = PyTuple_GET_SIZE(obj);
    } else if (PyList_Check(obj)) {
        items = (PyObject *const *)&PyList_GET_ITEM(obj, 0);
        n = PyList_GET_SIZE(obj);
    } else if (!PyBool_Check(obj) && !PyFloat_Check(obj) && PyIndex_Check(obj)) {
        return dim_value(obj, what, &d[0]); /* one int (or NumPy integer): (x, 1, 1) */
    } else {
        PyErr_Format(PyExc_TypeError, "%s must be a tuple of 1 to 3 ints, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (n < 1 || n > 3) {
        PyErr_Format(PyExc_ValueError, "%s must have 1 to 3 dimensions, got %zd", what, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (dim_value(items[i], what, &d[i]) < 0)
            return -1;
    return 0;
}

/* Both grid and block, checked against the hardware limits every current GPU
 * shares and the function's own threads-per-block limit. */
static int
launch_dims(bc_Function *f, PyObject *grid, PyObject *block, unsigned int g[3],
            unsigned int b[3])
{
    if (block == NULL) {
        PyErr_SetString(PyExc_ValueError, "must specify block size (block=(x, y, z))");
        return -1;
    }
    if (bc_args_dims(block, "block", b) < 0)
        return -1;
    if (grid == NULL || grid == Py_None)
        g[0] = g[1] = g[2] = 1;
    else if (bc_args_dims(grid, "grid", g) < 0)
        return -1;
    if (b[0] > 1024 || b[1] > 1024 || b[2] > 64) {
        PyErr_Format(PyExc_ValueError,
                     "block (%u, %u, %u) is too large: at most (1024, 1024, 64) per dimension",
                     b[0], b[1], b[2]);
        return -1;
    }
    unsigned long long threads = (unsigned long long)b[0] * b[1] * b[2];
    if (threads > (unsigned long long)f->max_threads) {
        PyErr_Format(PyExc_ValueError,
                     "block (%u, %u, %u) has %llu threads but kernel %R allows at most %d per "
                     "block (max_threads_per_block)",
                     b[0], b[1], b[2], threads, f->name, f->max_threads);
        return -1;
    }
    if (g[1] > 65535 || g[2] > 65535) {
        PyErr_Format(PyExc_ValueError,
                     "grid (%u, %u, %u) is too large: y and z are at most 65535", g[0], g[1], g[2]);
        return -1;
    }
    return 0;
}

/* Whether `obj` parses the same every time: an exact int or an exact tuple of
 * exact ints (both immutable, and kept alive by the memo, so the same address
 * means the same object). */
static int
dims_memoable(PyObject *obj)
{
    if (PyLong_CheckExact(obj))
        return 1;
    if (!PyTuple_CheckExact(obj))
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(obj); i++)
        if (!PyLong_CheckExact(PyTuple_GET_ITEM(obj, i)))
            return 0;
    return 1;
}

/* Launches in a loop pass the same grid and block objects each time: the last
 * ones parsed here are remembered on the Function with their values, which
 * bc_args_launch_dims (argpack.h) reuses inline until they change (or the
 * kernel's thread limit did). */
int
bc_args_parse_launch_dims(bc_Function *f, PyObject *grid, PyObject *block, unsigned int g[3],
                          unsigned int b[3])
{
    if (launch_dims(f, grid, block, g, b) < 0)
        return -1;
    if (dims_memoable(block) && (grid == NULL || grid == Py_None || dims_memoable(grid))) {
        Py_XSETREF(f->dims_block, Py_NewRef(block));
        Py_XSETREF(f->dims_grid, Py_XNewRef(grid));
        memcpy(f->dims_g, g, sizeof f->dims_g);
        memcpy(f->dims_b, b, sizeof f->dims_b);
        f->dims_max_threads = f->max_threads;
    }
    return 0;
}

int
bc_args_shared_slow(PyObject *obj, unsigned int *out)
{
    long long v;
    if (bc_arg_long(obj, "shared memory size", 0, 0xFFFFFFFFLL, &v) < 0)
        return -1;
    *out = (unsigned int)v;
    return 0;
}

/* ------------------------------------------------------------ __call__ packing */

BC_COLD static int
bad_arg(Py_ssize_t i, PyObject *arg)
{
    PyErr_Format(PyExc_TypeError,
                 "invalid type on parameter #%zd (0-based): %.100s; pass NumPy scalars "
                 "(np.int32(x), np.float32(x), ...), device memory (DeviceAllocation, "
                 "GPUArray, __cuda_array_interface__), numpy.void structs, In/Out/InOut, "
                 "or texture objects",
                 i, Py_TYPE(arg)->tp_name);
    return -1;
}

/* Bytes of one __call__ argument: *src, *size, *align; `tmp` (16 bytes) holds
 * values made here.  Argument handlers are appended to pb->handlers. */
static int
classify_arg(bc_State *st, Py_ssize_t i, PyObject *arg, uint64_t tmp[2], const void **src,
             size_t *size, size_t *align, bc_packbuf *pb)
{
    PyTypeObject *tp = Py_TYPE(arg);
    if (tp == (PyTypeObject *)st->DeviceAllocationType) {
        bc_DeviceAllocation *a = (bc_DeviceAllocation *)arg;
        if (a->freed || (a->ctx && a->ctx->released)) {
            CUdeviceptr p;
            return bc_pointer_convert(st, arg, &p, NULL); /* raises the right error */
        }
        tmp[0] = (uint64_t)a->ptr;
        goto pointer;
    }
    const scalar_kind *k = scalar_lookup(tp);
    if (k != NULL) {
        *src = (const char *)arg + k->offset;
        *size = k->size;
        *align = k->align;
        return 0;
    }
    if (PyLong_Check(arg)) {
        PyErr_Format(PyExc_TypeError,
                     "parameter #%zd (0-based) is a Python %.50s, which does not say its C "
                     "type: pass np.int32(x) (or the NumPy type the kernel takes) for a value, "
                     "np.uintp(p) or a DeviceAllocation for a pointer, or prepare() a signature",
                     i, tp->tp_name);
        return -1;
    }
    if (PyFloat_Check(arg) || PyComplex_Check(arg)) {
        PyErr_Format(PyExc_TypeError,
                     "parameter #%zd (0-based) is a Python %.50s, which does not say its C "
                     "type: pass np.float32(x) or np.float64(x) (or prepare() a signature)",
                     i, tp->tp_name);
        return -1;
    }
    if (PyArray_IsScalar(arg, Void)) {
        PyVoidScalarObject *v = (PyVoidScalarObject *)arg;
        *src = v->obval;
        *size = (size_t)PyDataType_ELSIZE(v->descr);
        *align = (size_t)PyDataType_ALIGNMENT(v->descr);
        return 0;
    }
    if (PyArray_Check(arg)) {
        PyArrayObject *a = (PyArrayObject *)arg;
        if (PyArray_SIZE(a) != 1) {
            PyErr_Format(PyExc_TypeError,
                         "parameter #%zd (0-based) is a NumPy array of %zd elements; only "
                         "size-1 arrays (structs) pass by value: use In/Out/InOut or to_gpu "
                         "to pass an array's data",
                         i, (Py_ssize_t)PyArray_SIZE(a));
            return -1;
        }
        PyArray_Descr *d = PyArray_DESCR(a);
        if (PyDataType_REFCHK(d)) {
            PyErr_Format(PyExc_TypeError, "parameter #%zd (0-based): arrays holding Python "
                                          "objects cannot be passed to a kernel", i);
            return -1;
        }
        *src = PyArray_DATA(a);
        *size = (size_t)PyDataType_ELSIZE(d);
        *align = (size_t)PyDataType_ALIGNMENT(d);
        return 0;
    }
    if (tp == (PyTypeObject *)st->ModuleGlobalType || PyArray_IsScalar(arg, Generic)) {
        if (PyArray_IsScalar(arg, Generic)) {
            PyArray_Descr *d = PyArray_DescrFromScalar(arg);
            if (d == NULL)
                return -1;
            size_t n = (size_t)PyDataType_ELSIZE(d);
            int ok = !PyDataType_REFCHK(d) && n <= 16 &&
                     d->type_num != NPY_LONGDOUBLE && d->type_num != NPY_CLONGDOUBLE;
            if (ok) {
                *size = n;
                *align = (size_t)PyDataType_ALIGNMENT(d);
                PyArray_ScalarAsCtype(arg, tmp);
                *src = tmp;
            }
            Py_DECREF(d);
            if (!ok) {
                PyErr_Format(PyExc_TypeError,
                             "parameter #%zd (0-based): NumPy %.100s has no CUDA C type", i,
                             tp->tp_name);
                return -1;
            }
            return 0;
        }
        CUdeviceptr p;
        if (bc_pointer_convert(st, arg, &p, NULL) < 0)
            return -1;
        tmp[0] = (uint64_t)p;
        goto pointer;
    }
    if (tp->tp_base == (PyTypeObject *)st->ArrayBaseType ||
        tp == (PyTypeObject *)st->PooledAllocationType ||
        PyType_IsSubtype(tp, (PyTypeObject *)st->ArrayBaseType)) {
        /* GPUArray (or a library's subclass of it) or a pooled block: their
         * pointer (gpudata's), without first asking for attributes they lack. */
        CUdeviceptr p;
        if (bc_pointer_convert(st, arg, &p, NULL) < 0)
            return -1;
        tmp[0] = (uint64_t)p;
        goto pointer;
    }
    /* The slow kinds: texture objects, argument handlers, foreign device arrays. */
    PyObject *h = PyObject_GetAttrString(arg, "_kernel_arg_handle");
    if (h != NULL) {
        unsigned long long v = PyLong_Check(h) ? PyLong_AsUnsignedLongLong(h) : (unsigned long long)-1;
        int bad = !PyLong_Check(h);
        Py_DECREF(h);
        if (bad) {
            PyErr_Format(PyExc_TypeError, "parameter #%zd (0-based): _kernel_arg_handle must "
                                          "be an int", i);
            return -1;
        }
        if (v == (unsigned long long)-1 && PyErr_Occurred())
            return -1;
        tmp[0] = v;
        goto pointer;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return -1;
    PyErr_Clear();
    PyObject *get = PyObject_GetAttrString(arg, "get_device_alloc");
    if (get != NULL) {
        PyObject *alloc = PyObject_CallNoArgs(get);
        Py_DECREF(get);
        if (alloc == NULL)
            return -1;
        CUdeviceptr p;
        int rc = bc_pointer_convert(st, alloc, &p, NULL);
        if (rc == 0 && pb->handlers == NULL && (pb->handlers = PyList_New(0)) == NULL)
            rc = -1;
        /* the handler, then the memory it gave: kept until the stream is done */
        if (rc == 0 && (PyList_Append(pb->handlers, arg) < 0 ||
                        PyList_Append(pb->handlers, alloc) < 0))
            rc = -1;
        Py_DECREF(alloc);
        if (rc < 0)
            return -1;
        tmp[0] = (uint64_t)p;
        goto pointer;
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return -1;
    PyErr_Clear();
    {
        CUdeviceptr p;
        if (bc_pointer_convert(st, arg, &p, NULL) < 0) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError))
                return -1;
            PyErr_Clear();
            return bad_arg(i, arg);
        }
        tmp[0] = (uint64_t)p;
    }
pointer:
    *src = tmp;
    *size = sizeof(CUdeviceptr);
    *align = sizeof(CUdeviceptr);
    return 0;
}

BC_COLD static int
size_mismatch(bc_Function *f, Py_ssize_t i, size_t got, PyObject *arg)
{
    PyErr_Format(PyExc_TypeError,
                 "parameter #%zd (0-based) of kernel %R is %u bytes, but the %.100s passed "
                 "is %zu bytes: pass the NumPy type of the kernel's parameter",
                 i, f->name, f->param_size[i], Py_TYPE(arg)->tp_name, got);
    return -1;
}

BC_COLD static int
arg_count_mismatch(bc_Function *f, Py_ssize_t got)
{
    PyErr_Format(PyExc_TypeError, "kernel %R takes %zd argument%s, got %zd", f->name,
                 f->nparams, f->nparams == 1 ? "" : "s", got);
    return -1;
}

/* Copy `size` bytes; the common sizes as single moves. */
static inline void
put(char *dst, const void *src, size_t size)
{
    switch (size) {
    case 1: memcpy(dst, src, 1); break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    case 16: memcpy(dst, src, 16); break;
    default: memcpy(dst, src, size);
    }
}

/* One __call__ argument at its parameter's offset, its size checked against the
 * parameter's.  DeviceAllocations and NumPy scalars (*kind: the kind of *last,
 * the last scalar type met, which the next argument is likely to share) take a few
 * instructions; everything else goes through classify_arg.  -1 with an
 * exception, else what the argument memo may keep of it (memo_kind). */
enum memo_kind { KEEP_NOTHING, KEEP_ADDRESS, KEEP_REFERENCE };

static inline int
pack_call_one(bc_State *st, bc_Function *f, Py_ssize_t i, PyObject *arg, char *dst,
              unsigned int want, bc_packbuf *pb, PyTypeObject **last, const scalar_kind **kind)
{
    PyTypeObject *tp = Py_TYPE(arg);
    if (tp == (PyTypeObject *)st->DeviceAllocationType) {
        bc_DeviceAllocation *a = (bc_DeviceAllocation *)arg;
        if (want == sizeof(uint64_t) && !a->freed && !(a->ctx && a->ctx->released)) {
            uint64_t p = (uint64_t)a->ptr;
            memcpy(dst, &p, sizeof p);
            return KEEP_ADDRESS;
        }
    } else {
        const scalar_kind *k = tp == *last ? *kind : scalar_lookup(tp);
        if (k != NULL) {
            if (k->size != want)
                return size_mismatch(f, i, k->size, arg);
            put(dst, (const char *)arg + k->offset, k->size);
            *last = tp;
            *kind = k;
            return KEEP_REFERENCE;
        }
    }
    uint64_t tmp[2] = {0, 0};
    const void *src = tmp;
    size_t size = 0, align = 1;
    if (classify_arg(st, i, arg, tmp, &src, &size, &align, pb) < 0)
        return -1;
    if (size != want)
        return size_mismatch(f, i, size, arg);
    memcpy(dst, src, size);
    return KEEP_NOTHING;
}

/* The kernel's layout is known: each argument to its parameter's offset. */
static int
pack_call_table(bc_State *st, bc_Function *f, PyObject *const *args, Py_ssize_t n,
                bc_packbuf *pb)
{
    if (n != f->nparams)
        return arg_count_mismatch(f, n);
    size_t total = f->param_bytes;
    if (bc_packbuf_reserve(pb, total) < 0)
        return -1;
    char *buf = pb->buf;
    if (f->param_gaps) /* no stack garbage in the kernel's parameters */
        memset(buf, 0, total);
    /* The layout in locals: the stores through char pointers below could alias f. */
    const unsigned int *offset = f->param_offset, *size = f->param_size;
    PyTypeObject *last = NULL;
    const scalar_kind *kind = NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        if (pack_call_one(st, f, i, args[i], buf + offset[i], size[i], pb, &last, &kind) < 0)
            return -1;
    pb->size = total;
    return 0;
}

/* Pack __call__ arguments into pb: by the kernel's layout when the driver gave
 * it, else each aligned to its own alignment after the previous one. */
int
bc_args_pack_call(bc_State *st, bc_Function *f, PyObject *const *args, Py_ssize_t n, bc_packbuf *pb)
{
    if (f->nparams >= 0)
        return pack_call_table(st, f, args, n, pb);
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t tmp[2] = {0, 0};
        const void *src = tmp;
        size_t size = 0, align = 1, off;
        if (classify_arg(st, i, args[i], tmp, &src, &size, &align, pb) < 0)
            return -1;
        off = bc_align_up(pb->size, align);
        if (bc_packbuf_reserve(pb, off + size) < 0)
            return -1;
        if (off > pb->size) /* padding: no stack garbage in the kernel's parameters */
            memset(pb->buf + pb->size, 0, off - pb->size);
        memcpy(pb->buf + off, src, size);
        pb->size = off + size;
    }
    return 0;
}

void
bc_args_layout(bc_Function *f)
{
    size_t end = 0, sum = 0;
    for (Py_ssize_t i = 0; i < f->nparams; i++) {
        size_t e = (size_t)f->param_offset[i] + f->param_size[i];
        if (e > end)
            end = e;
        sum += f->param_size[i];
    }
    f->param_bytes = end;
    f->param_gaps = sum != end;
}

/* ------------------------------------------------------------ prepared packing */

static int
prep_error(Py_ssize_t i, char code, PyObject *arg, const char *want)
{
    PyErr_Format(PyExc_TypeError, "parameter #%zd (0-based, '%c'): expected %s, got %.100s", i,
                 code, want, Py_TYPE(arg)->tp_name);
    return -1;
}

static int
prep_range(Py_ssize_t i, char code, PyObject *arg)
{
    PyErr_Format(PyExc_OverflowError, "parameter #%zd (0-based, '%c'): %R is out of range", i,
                 code, arg);
    return -1;
}

/* An integer argument as (value, is_negative-aware) long long / unsigned. */
/* The integer struct codes, indexed by the code: size (0: not an integer code) and
 * range. */
static const struct {
    unsigned char size;
    long long lo;
    unsigned long long hi;
} int_codes[128] = {
    ['?'] = {1, 0, 1},                 ['b'] = {1, INT8_MIN, INT8_MAX},
    ['B'] = {1, 0, UINT8_MAX},         ['h'] = {2, INT16_MIN, INT16_MAX},
    ['H'] = {2, 0, UINT16_MAX},        ['i'] = {4, INT32_MIN, INT32_MAX},
    ['I'] = {4, 0, UINT32_MAX},        ['l'] = {8, INT64_MIN, INT64_MAX},
    ['q'] = {8, INT64_MIN, INT64_MAX}, ['L'] = {8, 0, UINT64_MAX},
    ['Q'] = {8, 0, UINT64_MAX},        ['P'] = {8, 0, UINT64_MAX},
};

int
bc_pack_integer(char code, int neg, long long v, unsigned long long u, void *dst)
{
    unsigned char c = (unsigned char)code;
    if (c >= BC_COUNT(int_codes) || int_codes[c].size == 0)
        return -1;
    if (neg ? v < int_codes[c].lo : u > int_codes[c].hi)
        return 1;
    uint64_t bits = neg ? (uint64_t)v : (uint64_t)u; /* two's complement */
    switch (int_codes[c].size) {
    case 1: *(uint8_t *)dst = (uint8_t)bits; break;
    case 2: *(uint16_t *)dst = (uint16_t)bits; break;
    case 4: *(uint32_t *)dst = (uint32_t)bits; break;
    default: *(uint64_t *)dst = bits; break;
    }
    return 0;
}

static int
prep_int(bc_State *st, Py_ssize_t i, const bc_ArgSpec *a, PyObject *arg, char *dst)
{
    long long v = 0;
    unsigned long long u = 0;
    int neg = 0;
    if (PyLong_Check(arg)) {
        int overflow;
        v = PyLong_AsLongLongAndOverflow(arg, &overflow);
        if (v == -1 && PyErr_Occurred())
            return -1;
        if (overflow < 0)
            return prep_range(i, a->code, arg);
        if (overflow > 0) {
            u = PyLong_AsUnsignedLongLong(arg);
            if (u == (unsigned long long)-1 && PyErr_Occurred()) {
                PyErr_Clear();
                return prep_range(i, a->code, arg);
            }
        } else {
            neg = v < 0;
            u = (unsigned long long)v;
        }
    } else {
        const scalar_kind *k = scalar_lookup(Py_TYPE(arg));
        if (k != NULL && strchr("bBhHiIlLqQ?", k->code)) {
            const char *p = (const char *)arg + k->offset;
            switch (k->code) {
            case 'b': v = *(const int8_t *)p; break;
            case 'B': case '?': v = *(const uint8_t *)p; break;
            case 'h': v = *(const int16_t *)p; break;
            case 'H': v = *(const uint16_t *)p; break;
            case 'i': v = *(const int32_t *)p; break;
            case 'I': v = *(const uint32_t *)p; break;
            case 'l': case 'q': v = *(const int64_t *)p; break;
            default: u = *(const uint64_t *)p; goto unsigned_value;
            }
            neg = v < 0;
            u = (unsigned long long)v;
        unsigned_value:;
        } else if (a->size == 8 && !PyFloat_Check(arg) && !PyArray_IsScalar(arg, Number)) {
            /* 64-bit integers double as pointers (np.intp signatures). */
            CUdeviceptr p;
            if (bc_pointer_convert(st, arg, &p, NULL) < 0) {
                if (!PyErr_ExceptionMatches(PyExc_TypeError))
                    return -1;
                PyErr_Clear();
                return prep_error(i, a->code, arg, "an int or device pointer");
            }
            u = (unsigned long long)p;
        } else if (PyIndex_Check(arg) && !PyFloat_Check(arg)) {
            PyObject *num = PyNumber_Index(arg);
            if (num == NULL)
                return -1;
            int rc = prep_int(st, i, a, num, dst);
            Py_DECREF(num);
            return rc;
        } else
            return prep_error(i, a->code, arg, "an int");
    }
    if (bc_pack_integer(a->code, neg, v, u, dst) != 0)
        return prep_range(i, a->code, arg);
    return 0;
}

static int
prep_double(Py_ssize_t i, const bc_ArgSpec *a, PyObject *arg, double *out)
{
    if (PyFloat_CheckExact(arg)) {
        *out = PyFloat_AS_DOUBLE(arg);
        return 0;
    }
    if (PyLong_Check(arg)) {
        *out = PyLong_AsDouble(arg);
        return *out == -1.0 && PyErr_Occurred() ? -1 : 0;
    }
    const scalar_kind *k = scalar_lookup(Py_TYPE(arg));
    if (k != NULL && k->code == 'f') {
        *out = *(const float *)((const char *)arg + k->offset);
        return 0;
    }
    if (k != NULL && k->code == 'd') {
        *out = *(const double *)((const char *)arg + k->offset);
        return 0;
    }
    if (PyComplex_Check(arg) || (k != NULL && (k->code == 'F' || k->code == 'D')))
        return prep_error(i, a->code, arg, "a real number");
    *out = PyFloat_AsDouble(arg);
    if (*out == -1.0 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            return prep_error(i, a->code, arg, "a float");
        }
        return -1;
    }
    return 0;
}

static int
prep_pointer(bc_State *st, Py_ssize_t i, const bc_ArgSpec *a, PyObject *arg, char *dst)
{
    PyTypeObject *tp = Py_TYPE(arg);
    if (tp == (PyTypeObject *)st->DeviceAllocationType) {
        bc_DeviceAllocation *al = (bc_DeviceAllocation *)arg;
        if (!al->freed && !(al->ctx && al->ctx->released)) {
            *(uint64_t *)dst = (uint64_t)al->ptr;
            return 0;
        }
    } else if (PyLong_CheckExact(arg)) {
        unsigned long long p = PyLong_AsUnsignedLongLong(arg);
        if (p == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return prep_range(i, a->code, arg);
        }
        *(uint64_t *)dst = p;
        return 0;
    } else if (scalar_lookup(tp) != NULL || PyArray_IsScalar(arg, Integer))
        return prep_int(st, i, a, arg, dst);
    unsigned long long handle; /* texture and surface objects go as their 64-bit handle */
    int is_texture = bc_texture_handle(st, arg, &handle);
    if (is_texture != 0) {
        if (is_texture < 0)
            return -1;
        *(uint64_t *)dst = handle;
        return 0;
    }
    CUdeviceptr p;
    if (bc_pointer_convert(st, arg, &p, NULL) < 0) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            return prep_error(i, a->code, arg, "a device pointer");
        }
        return -1;
    }
    *(uint64_t *)dst = (uint64_t)p;
    return 0;
}

static int
prep_blob(Py_ssize_t i, const bc_ArgSpec *a, PyObject *arg, char *dst)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_CONTIG_RO | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        return prep_error(i, 's', arg, "a struct (numpy.void, a size-1 array or bytes)");
    }
    int rc = 0;
    if (bc_arg_plain_host(arg, &view, "prepared_call", "a struct argument") < 0)
        rc = -1;
    else if ((size_t)view.len != a->size) {
        PyErr_Format(PyExc_ValueError, "parameter #%zd (0-based): struct of %u bytes expected, "
                                       "got %zd bytes", i, a->size, view.len);
        rc = -1;
    } else
        memcpy(dst, view.buf, a->size);
    PyBuffer_Release(&view);
    return rc;
}

/* One prepared argument by its struct letter: every conversion and check. */
static int
pack_prepared_one(bc_State *st, Py_ssize_t i, const bc_ArgSpec *a, PyObject *arg, char *dst)
{
    double d;
    switch (a->code) {
    case 'P':
        if (prep_pointer(st, i, a, arg, dst) < 0)
            return -1;
        break;
    case 'f':
        if (prep_double(i, a, arg, &d) < 0)
            return -1;
        if (isfinite(d) && fabs(d) > FLT_MAX) {
            PyErr_Format(PyExc_OverflowError,
                         "parameter #%zd (0-based, 'f'): %R is too large for float32", i, arg);
            return -1;
        }
        *(float *)dst = (float)d;
        break;
    case 'd':
        if (prep_double(i, a, arg, &d) < 0)
            return -1;
        *(double *)dst = d;
        break;
    case 'e':
        if (prep_double(i, a, arg, &d) < 0 || bc_float_pack2(d, dst) < 0)
            return -1;
        break;
    case 'F':
    case 'D': {
        Py_complex c;
        const scalar_kind *k = scalar_lookup(Py_TYPE(arg));
        if (k != NULL && k->code == 'F') {
            const float *p = (const float *)((const char *)arg + k->offset);
            c.real = p[0];
            c.imag = p[1];
        } else if (k != NULL && k->code == 'D') {
            const double *p = (const double *)((const char *)arg + k->offset);
            c.real = p[0];
            c.imag = p[1];
        } else {
            c = PyComplex_AsCComplex(arg);
            if (c.real == -1.0 && PyErr_Occurred()) {
                PyErr_Clear();
                return prep_error(i, a->code, arg, "a complex number");
            }
        }
        if (a->code == 'F') {
            ((float *)dst)[0] = (float)c.real;
            ((float *)dst)[1] = (float)c.imag;
        } else {
            ((double *)dst)[0] = c.real;
            ((double *)dst)[1] = c.imag;
        }
        break;
    }
    case 'V':
        if (prep_blob(i, a, arg, dst) < 0)
            return -1;
        break;
    default:
        if (prep_int(st, i, a, arg, dst) < 0)
            return -1;
    }
    return 0;
}

/* An exact int's value: 1, or 0 when it does not fit a long long.  CPython 3.12
 * and later answer small values (|v| < 2**30) without a call. */
static inline int
exact_int(PyObject *arg, long long *v)
{
#if PY_VERSION_HEX >= 0x030C0000
    if (PyUnstable_Long_IsCompact((PyLongObject *)arg)) {
        *v = (long long)PyUnstable_Long_CompactValue((PyLongObject *)arg);
        return 1;
    }
#endif
    int overflow;
    *v = PyLong_AsLongLongAndOverflow(arg, &overflow);
    return !overflow;
}

/* The common exact types convert inline (an int, a float, a DeviceAllocation, a
 * NumPy scalar of the parameter's own type): when packed, how the memo may keep
 * the argument (KEEP_ADDRESS or KEEP_REFERENCE); 0 when not (any other type,
 * or a value out of range: pack_prepared_one converts or raises). */
static inline int
pack_prepared_fast(PyTypeObject *dalloc, const bc_ArgSpec *a, PyObject *arg, char *dst)
{
    PyTypeObject *tp = Py_TYPE(arg);
    long long v;
    switch (a->conv) {
    case BC_CONV_PTR:
        if (tp == dalloc) {
            bc_DeviceAllocation *al = (bc_DeviceAllocation *)arg;
            if (!al->freed && !(al->ctx && al->ctx->released)) {
                uint64_t p = (uint64_t)al->ptr;
                memcpy(dst, &p, sizeof p);
                return KEEP_ADDRESS;
            }
        } else if (tp == &PyLong_Type) {
            if (exact_int(arg, &v) && v >= 0) {
                uint64_t p = (uint64_t)v;
                memcpy(dst, &p, sizeof p);
                return KEEP_REFERENCE;
            }
        }
        return 0;
    case BC_CONV_INT:
        if (tp == &PyLong_Type)
            return exact_int(arg, &v) &&
                           bc_pack_integer(a->code, v < 0, v, (unsigned long long)v, dst) == 0
                       ? KEEP_REFERENCE
                       : 0;
        const scalar_kind *k = scalar_lookup(tp);
        if (k != NULL && k->code == a->code) {
            put(dst, (const char *)arg + k->offset, a->size);
            return KEEP_REFERENCE;
        }
        return 0;
    case BC_CONV_F32:
        if (tp == &PyFloat_Type) {
            double d = PyFloat_AS_DOUBLE(arg);
            if (fabs(d) > FLT_MAX && isfinite(d))
                return 0;
            float x = (float)d;
            memcpy(dst, &x, sizeof x);
            return KEEP_REFERENCE;
        }
        if (tp == &PyFloatArrType_Type) {
            memcpy(dst, &((PyFloatScalarObject *)arg)->obval, sizeof(float));
            return KEEP_REFERENCE;
        }
        return 0;
    case BC_CONV_F64:
        if (tp == &PyFloat_Type) {
            double d = PyFloat_AS_DOUBLE(arg);
            memcpy(dst, &d, sizeof d);
            return KEEP_REFERENCE;
        }
        if (tp == &PyDoubleArrType_Type) {
            memcpy(dst, &((PyDoubleScalarObject *)arg)->obval, sizeof(double));
            return KEEP_REFERENCE;
        }
        return 0;
    default:
        return 0;
    }
}

static int
prepared_count_mismatch(bc_Function *f, Py_ssize_t n)
{
    PyErr_Format(PyExc_TypeError, "prepared kernel %R takes %zd argument%s (%U), got %zd",
                 f->name, f->nprepared, f->nprepared == 1 ? "" : "s", f->arg_format, n);
    return -1;
}

int
bc_args_pack_prepared(bc_State *st, bc_Function *f, PyObject *const *args, Py_ssize_t n, char *buf)
{
    if (n != f->nprepared)
        return prepared_count_mismatch(f, n);
    if (f->prepared_gaps)
        memset(buf, 0, f->prepared_bytes);
    PyTypeObject *dalloc = (PyTypeObject *)st->DeviceAllocationType;
    for (Py_ssize_t i = 0; i < n; i++) {
        const bc_ArgSpec *a = &f->prepared[i];
        char *dst = buf + a->offset;
        if (!pack_prepared_fast(dalloc, a, args[i], dst) &&
            pack_prepared_one(st, i, a, args[i], dst) < 0)
            return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ the argument memo */

_Atomic uint64_t bc_args_memo_epoch = 1; /* a new memo's 0 never matches */

static bc_ArgMemo *
memo_new(Py_ssize_t n, size_t bytes)
{
    size_t head = sizeof(bc_ArgMemo), slots = (size_t)n * sizeof(PyObject *);
    size_t flags = ((size_t)n + 15) & ~(size_t)15;
    bc_ArgMemo *m = PyMem_Calloc(1, head + slots + flags + bytes + 1);
    if (m == NULL)
        return (bc_ArgMemo *)PyErr_NoMemory();
    m->n = n;
    m->last = (PyObject **)((char *)m + head);
    m->owned = (unsigned char *)m->last + slots;
    m->buf = (char *)m->owned + flags;
    return m;
}

static inline void
memo_drop(bc_ArgMemo *m, Py_ssize_t i)
{
    PyObject *o = m->last[i];
    m->last[i] = NULL;
    if (m->owned[i]) {
        m->owned[i] = 0;
        Py_DECREF(o); /* an int, a float or a NumPy scalar: runs no Python code */
    }
}

/* How the memo may keep an argument of any type that packed: by address a
 * DeviceAllocation, by reference a value of an immutable type, else not at all
 * (its bytes could change while it lives: a struct view, a size-1 array). */
static int
memo_kind_of(bc_State *st, PyObject *arg)
{
    PyTypeObject *tp = Py_TYPE(arg);
    if (tp == (PyTypeObject *)st->DeviceAllocationType)
        return KEEP_ADDRESS;
    if (tp == &PyLong_Type || tp == &PyFloat_Type || scalar_lookup(tp) != NULL)
        return KEEP_REFERENCE;
    return KEEP_NOTHING;
}

/* Slot i remembers arg, just packed into it, as `keep` (memo_kind) says. */
static inline void
memo_put(bc_ArgMemo *m, Py_ssize_t i, PyObject *arg, int keep)
{
    PyObject *old = m->last[i];
    int owned = m->owned[i];
    m->last[i] = keep == KEEP_NOTHING ? NULL : arg;
    m->owned[i] = keep == KEEP_REFERENCE;
    if (keep == KEEP_REFERENCE)
        Py_INCREF(arg);
    else if (keep == KEEP_ADDRESS)
        ((bc_DeviceAllocation *)arg)->in_memo = 1;
    if (owned)
        Py_DECREF(old); /* an int, a float or a NumPy scalar: runs no Python code */
}

/* Take m for a launch: its slots emptied first when a kept object may have
 * ended since they were filled. */
static inline void
memo_take(bc_ArgMemo *m)
{
    uint64_t now = atomic_load_explicit(&bc_args_memo_epoch, memory_order_relaxed);
    if (m->epoch != now) {
        for (Py_ssize_t i = 0; i < m->n; i++)
            memo_drop(m, i);
        m->epoch = now;
    }
    m->busy = 1;
}

void
bc_args_memo_dead(bc_ArgMemo *m)
{
    for (Py_ssize_t i = 0; i < m->n; i++)
        memo_drop(m, i);
    PyMem_Free(m);
}

void
bc_args_memo_free(bc_ArgMemo **memo)
{
    bc_ArgMemo *m = *memo;
    *memo = NULL;
    if (m == NULL)
        return;
    if (m->busy)
        m->dead = 1;
    else
        bc_args_memo_dead(m);
}

/* Launches in a row in which most arguments were not the last launch's before
 * a memo rests (a loop alternating between two sets of arguments, or making
 * new values for most of them); launches it then leaves to the plain packing,
 * which costs a missed slot about 25 instructions less. */
#define MEMO_COLD_LAUNCHES 8
#define MEMO_REST_LAUNCHES 256

/* After a launch that packed `changed` of m's n slots anew. */
static inline void
memo_score(bc_ArgMemo *m, Py_ssize_t changed)
{
    if (2 * changed <= m->n)
        m->cold = 0;
    else if (++m->cold >= MEMO_COLD_LAUNCHES) {
        m->cold = 0;
        m->rest = MEMO_REST_LAUNCHES;
    }
}

BC_HOT int
bc_args_memo_pack_call(bc_State *st, bc_Function *f, bc_ArgMemo *m, PyObject *const *args,
                       Py_ssize_t n, bc_packbuf *pb)
{
    if (m == NULL && (m = f->call_memo = memo_new(n, f->param_bytes)) == NULL)
        return -1;
    memo_take(m);
    pb->memo = m; /* bc_packbuf_free gives it back, on error too */
    pb->buf = m->buf;
    pb->size = pb->cap = f->param_bytes;
    PyObject **last = m->last;
    if (memcmp(args, last, (size_t)n * sizeof *args) == 0) {
        m->cold = 0;
        return 0; /* the arguments of the last launch, every one */
    }
    const unsigned int *offset = f->param_offset, *size = f->param_size;
    char *buf = m->buf;
    PyTypeObject *last_tp = NULL;
    const scalar_kind *kind = NULL;
    Py_ssize_t changed = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *arg = args[i];
        if (arg == last[i])
            continue;
        int keep = pack_call_one(st, f, i, arg, buf + offset[i], size[i], pb, &last_tp, &kind);
        if (keep < 0) {
            memo_drop(m, i);
            return -1;
        }
        memo_put(m, i, arg, keep);
        changed++;
    }
    memo_score(m, changed);
    return 0;
}

BC_HOT int
bc_args_memo_pack_prepared(bc_State *st, bc_Function *f, bc_ArgMemo *m, PyObject *const *args,
                           Py_ssize_t n, bc_ArgMemo **memo)
{
    if (m == NULL && (m = f->prep_memo = memo_new(n, f->prepared_bytes)) == NULL)
        return -1;
    memo_take(m);
    PyTypeObject *dalloc = (PyTypeObject *)st->DeviceAllocationType;
    PyObject **last = m->last;
    Py_ssize_t changed = 0;
    if (memcmp(args, last, (size_t)n * sizeof *args) != 0) {
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *arg = args[i];
            if (arg == last[i])
                continue;
            const bc_ArgSpec *a = &f->prepared[i];
            char *dst = m->buf + a->offset;
            int keep = pack_prepared_fast(dalloc, a, arg, dst);
            if (keep == 0) {
                if (pack_prepared_one(st, i, a, arg, dst) < 0) {
                    memo_drop(m, i);
                    bc_args_memo_done(m);
                    return -1;
                }
                keep = memo_kind_of(st, arg);
            }
            memo_put(m, i, arg, keep);
            changed++;
        }
    }
    memo_score(m, changed);
    *memo = m;
    return 0;
}


PyDoc_STRVAR(pack_args_doc,
"_pack_args(function, *args)\n--\n\n"
"Private: the bytes __call__ would hand to the kernel for `args` (for tests and\n"
"_bench_launch).");

static PyObject *
bc_pack_args(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    bc_State *st = bc_state_from_module(m);
    if (nargs < 1 || Py_TYPE(args[0]) != (PyTypeObject *)st->FunctionType) {
        PyErr_SetString(PyExc_TypeError, "_pack_args(function, *args)");
        return NULL;
    }
    bc_packbuf pb;
    bc_packbuf_init(&pb);
    PyObject *out = NULL;
    if (bc_args_pack_call(st, (bc_Function *)args[0], args + 1, nargs - 1, &pb) == 0)
        out = PyBytes_FromStringAndSize(pb.buf, (Py_ssize_t)pb.size);
    bc_packbuf_free(&pb);
    return out;
}

PyDoc_STRVAR(pack_prepared_doc,
"_pack_prepared(function, *args)\n--\n\n"
"Private: the bytes prepared_call would hand to the kernel for `args`.");

static PyObject *
bc_pack_prepared_py(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    bc_State *st = bc_state_from_module(m);
    if (nargs < 1 || Py_TYPE(args[0]) != (PyTypeObject *)st->FunctionType) {
        PyErr_SetString(PyExc_TypeError, "_pack_prepared(function, *args)");
        return NULL;
    }
    bc_Function *f = (bc_Function *)args[0];
    if (f->nprepared < 0)
        return bc_error_logic(st, "call prepare() first"), NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)f->prepared_bytes);
    if (out == NULL)
        return NULL;
    memset(PyBytes_AS_STRING(out), 0, f->prepared_bytes);
    if (bc_args_pack_prepared(st, f, args + 1, nargs - 1, PyBytes_AS_STRING(out)) < 0)
        Py_CLEAR(out);
    return out;
}

PyDoc_STRVAR(pack_memo_doc,
"_pack_memo(function, prepared, *args)\n--\n\n"
"Private: the bytes a launch would hand to the kernel for `args`, packed through\n"
"the Function's argument memo as __call__ (or, with `prepared` true, the\n"
"prepared calls) packs them.");

static PyObject *
bc_pack_memo(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    bc_State *st = bc_state_from_module(m);
    if (nargs < 2 || Py_TYPE(args[0]) != (PyTypeObject *)st->FunctionType) {
        PyErr_SetString(PyExc_TypeError, "_pack_memo(function, prepared, *args)");
        return NULL;
    }
    bc_Function *f = (bc_Function *)args[0];
    int prepared = PyObject_IsTrue(args[1]);
    if (prepared < 0)
        return NULL;
    PyObject *out = NULL;
    if (prepared) {
        if (f->nprepared < 0)
            return bc_error_logic(st, "call prepare() first"), NULL;
        bc_ArgMemo *memo;
        int rc = bc_args_pack_prepared_memo(st, f, args + 2, nargs - 2, &memo);
        if (rc < 0)
            return NULL;
        out = PyBytes_FromStringAndSize(memo ? memo->buf : NULL, (Py_ssize_t)f->prepared_bytes);
        if (memo != NULL)
            bc_args_memo_done(memo);
        else if (out != NULL) { /* as a launch does then: a buffer of its own */
            memset(PyBytes_AS_STRING(out), 0, f->prepared_bytes);
            if (rc == 1 && bc_args_pack_prepared(st, f, args + 2, nargs - 2, PyBytes_AS_STRING(out)) < 0)
                Py_CLEAR(out);
        }
        return out;
    }
    bc_packbuf pb;
    bc_packbuf_init(&pb);
    if (bc_args_pack_call_memo(st, f, args + 2, nargs - 2, &pb) == 0)
        out = PyBytes_FromStringAndSize(pb.buf, (Py_ssize_t)pb.size);
    bc_packbuf_free(&pb);
    return out;
}

PyDoc_STRVAR(memo_slots_doc,
"_memo_slots(function, prepared=False)\n--\n\n"
"Private: for each parameter of the Function's argument memo (of __call__, or of\n"
"the prepared calls), whether its next launch would take that parameter's\n"
"bytes as they are when passed the same object again.  Empty before the first\n"
"launch.");

static PyObject *
bc_memo_slots(PyObject *m, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_from_module(m);
    static char *kwlist[] = {"function", "prepared", NULL};
    PyObject *fobj;
    int prepared = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!|p:_memo_slots", kwlist,
                                     (PyTypeObject *)st->FunctionType, &fobj, &prepared))
        return NULL;
    bc_Function *f = (bc_Function *)fobj;
    bc_ArgMemo *memo = prepared ? f->prep_memo : f->call_memo;
    Py_ssize_t n = memo ? memo->n : 0;
    int stale = memo && memo->epoch != atomic_load(&bc_args_memo_epoch);
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t i = 0; out != NULL && i < n; i++)
        PyTuple_SET_ITEM(out, i, PyBool_FromLong(!stale && memo->last[i] != NULL));
    return out;
}

PyDoc_STRVAR(bench_pack_doc,
"_bench_pack(function, args, iterations, prepared=False)\n--\n\n"
"Private: seconds per packing of the tuple `args` as __call__ (or, with\n"
"`prepared`, prepared_call) packs it, over `iterations` packings in a C loop.\n"
"Measures the packing alone, without the Python call around it.");

static PyObject *
bc_bench_pack(PyObject *m, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_from_module(m);
    static char *kwlist[] = {"function", "args", "iterations", "prepared", NULL};
    PyObject *fobj, *fargs;
    Py_ssize_t iters;
    int prepared = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!n|p:_bench_pack", kwlist,
                                     (PyTypeObject *)st->FunctionType, &fobj, &PyTuple_Type,
                                     &fargs, &iters, &prepared))
        return NULL;
    bc_Function *f = (bc_Function *)fobj;
    if (iters < 1) {
        PyErr_SetString(PyExc_ValueError, "_bench_pack(): iterations must be positive");
        return NULL;
    }
    if (prepared && f->nprepared < 0)
        return bc_error_logic(st, "call prepare() first"), NULL;
    PyObject *const *items = &PyTuple_GET_ITEM(fargs, 0);
    Py_ssize_t n = PyTuple_GET_SIZE(fargs);
    double t0 = bc_monotonic_s();
    for (Py_ssize_t i = 0; i < iters; i++) {
        bc_packbuf pb;
        bc_packbuf_init(&pb);
        int rc;
        if (prepared) {
            rc = bc_packbuf_reserve(&pb, f->prepared_bytes);
            if (rc == 0)
                rc = bc_args_pack_prepared(st, f, items, n, pb.buf);
        } else
            rc = bc_args_pack_call(st, f, items, n, &pb);
        bc_packbuf_free(&pb);
        if (rc < 0)
            return NULL;
    }
    return PyFloat_FromDouble((bc_monotonic_s() - t0) / (double)iters);
}

static PyMethodDef argpack_functions[] = {
    {"_bench_pack", (PyCFunction)(void (*)(void))bc_bench_pack, METH_VARARGS | METH_KEYWORDS,
     bench_pack_doc},
    {"_pack_args", (PyCFunction)(void (*)(void))bc_pack_args, METH_FASTCALL, pack_args_doc},
    {"_pack_prepared", (PyCFunction)(void (*)(void))bc_pack_prepared_py, METH_FASTCALL,
     pack_prepared_doc},
    {"_pack_memo", (PyCFunction)(void (*)(void))bc_pack_memo, METH_FASTCALL, pack_memo_doc},
    {"_memo_slots", (PyCFunction)(void (*)(void))bc_memo_slots, METH_VARARGS | METH_KEYWORDS,
     memo_slots_doc},
    {NULL, NULL, 0, NULL},
};

/* A context released (its allocations are no longer valid arguments): every
 * memo starts over (registered with src/context.c). */
static void
on_context_released(bc_Context *Py_UNUSED(ctx), int Py_UNUSED(arg))
{
    bc_args_memo_invalidate();
}

int
bc_argpack_setup(PyObject *m, bc_State *st)
{
    BC_UNUSED(st);
    scalar_kinds_init();
    /* what the floors below tell the memos, through their hooks */
    if (bc_context_on(BC_CTX_RELEASED, on_context_released) < 0)
        return -1;
    bc_memory_on_watched_end(bc_args_memo_invalidate);
    return PyModule_AddFunctions(m, argpack_functions);
}
