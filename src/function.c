/* SPDX-License-Identifier: MIT */
/* Function: one kernel of a Module, its launches and its attributes.
 *
 * The launch path is all C: Function is called through vectorcall and the
 * prepared_* methods are METH_FASTCALL, arguments are packed straight into a
 * stack buffer (heap only past BC_ARGS_STACK bytes) and handed to cuLaunchKernel
 * as one parameter buffer.  No Python object is made per argument on the hot path.
 *
 * When the driver can describe the kernel's parameters (cuFuncGetParamInfo), each
 * argument is placed at the kernel's own offset and its size is checked against
 * the parameter's, so a wrong argument count or an int32 passed for a 64-bit
 * parameter is a TypeError instead of garbage in the kernel.
 *
 * __call__ packs PyCUDA-style: NumPy scalars with their exact C type, device
 * pointers (DeviceAllocation, ModuleGlobal, objects with gpudata or
 * __cuda_array_interface__), structs by value (numpy.void or size-1 arrays),
 * texture/surface objects (any object with an int `_kernel_arg_handle`
 * attribute: the CUtexObject/CUsurfObject) and argument handlers (In/Out/InOut,
 * or any object with get_device_alloc(), pre_call(stream), post_call(stream)).
 * A bare Python int is refused: it could be a value of any width or a pointer.
 * prepare() fixes a signature instead; then Python ints and floats convert. */
#include "barecuda/module.h"
#include "barecuda/argparse.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"
#include "barecuda/array.h"
#include "barecuda/memory.h"
#include "barecuda/stream.h"
#include "barecuda/trace.h"

#include <numpy/arrayscalars.h>

#include <float.h>
#include <math.h>
#include <time.h>

/* Whether cuLaunchKernel runs with the GIL released.  A tuning knob chosen by
 * the launch benchmark (_bench_launch.py measures both); see _launch_release_gil. */
static int launch_release_gil = 0;

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
}

static const scalar_kind *
scalar_lookup(PyTypeObject *tp)
{
    for (int i = 0; i < n_scalar_kinds; i++)
        if (scalar_kinds[i].type == tp)
            return &scalar_kinds[i];
    return NULL;
}

/* ------------------------------------------------------------ packing buffer */

typedef struct {
    char *buf;
    size_t size; /* bytes used */
    size_t cap;
    PyObject *handlers; /* list of argument handlers, or NULL */
    uint64_t stack[BC_ARGS_STACK / 8];
} packbuf;

static void
pack_init(packbuf *pb)
{
    pb->buf = (char *)pb->stack;
    pb->size = 0;
    pb->cap = sizeof pb->stack;
    pb->handlers = NULL;
}

static void
pack_free(packbuf *pb)
{
    if (pb->buf != (char *)pb->stack)
        PyMem_Free(pb->buf);
    pb->buf = (char *)pb->stack;
    Py_CLEAR(pb->handlers);
}

static int
pack_reserve(packbuf *pb, size_t need)
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

static size_t
align_up(size_t v, size_t a)
{
    return a > 1 ? (v + a - 1) / a * a : v;
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
static int
parse_dims(PyObject *obj, const char *what, unsigned int d[3])
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
parse_launch_dims(bc_Function *f, PyObject *grid, PyObject *block, unsigned int g[3],
                  unsigned int b[3])
{
    if (block == NULL) {
        PyErr_SetString(PyExc_ValueError, "must specify block size (block=(x, y, z))");
        return -1;
    }
    if (parse_dims(block, "block", b) < 0)
        return -1;
    if (grid == NULL || grid == Py_None)
        g[0] = g[1] = g[2] = 1;
    else if (parse_dims(grid, "grid", g) < 0)
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

static int
parse_shared(PyObject *obj, unsigned int *out)
{
    if (obj == NULL || obj == Py_None) {
        *out = 0;
        return 0;
    }
    long long v;
    if (bc_arg_long(obj, "shared memory size", 0, 0xFFFFFFFFLL, &v) < 0)
        return -1;
    *out = (unsigned int)v;
    return 0;
}

/* ------------------------------------------------------------ __call__ packing */

static int
module_ok(bc_State *st, bc_Function *f)
{
    if (f->module->handle == NULL || (f->module->ctx && f->module->ctx->released))
        return bc_module_usable(st, f->module);
    return 0;
}

static int
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
             size_t *size, size_t *align, packbuf *pb)
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
        Py_DECREF(alloc);
        if (rc < 0)
            return -1;
        if (pb->handlers == NULL && (pb->handlers = PyList_New(0)) == NULL)
            return -1;
        if (PyList_Append(pb->handlers, arg) < 0)
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

static int
size_mismatch(bc_Function *f, Py_ssize_t i, size_t got, PyObject *arg)
{
    PyErr_Format(PyExc_TypeError,
                 "parameter #%zd (0-based) of kernel %R is %u bytes, but the %.100s passed "
                 "is %zu bytes: pass the NumPy type of the kernel's parameter",
                 i, f->name, f->param_size[i], Py_TYPE(arg)->tp_name, got);
    return -1;
}

static int
arg_count_mismatch(bc_Function *f, Py_ssize_t got)
{
    PyErr_Format(PyExc_TypeError, "kernel %R takes %zd argument%s, got %zd", f->name,
                 f->nparams, f->nparams == 1 ? "" : "s", got);
    return -1;
}

/* Pack __call__ arguments into pb. */
static int
pack_call_args(bc_State *st, bc_Function *f, PyObject *const *args, Py_ssize_t n, packbuf *pb)
{
    if (f->nparams >= 0) {
        if (n != f->nparams)
            return arg_count_mismatch(f, n);
        if (n > 0 &&
            pack_reserve(pb, (size_t)f->param_offset[n - 1] + f->param_size[n - 1]) < 0)
            return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t tmp[2] = {0, 0};
        const void *src = tmp;
        size_t size = 0, align = 1, off;
        if (classify_arg(st, i, args[i], tmp, &src, &size, &align, pb) < 0)
            return -1;
        if (f->nparams >= 0) {
            if (size != f->param_size[i])
                return size_mismatch(f, i, size, args[i]);
            off = f->param_offset[i];
        } else {
            off = align_up(pb->size, align);
            if (pack_reserve(pb, off + size) < 0)
                return -1;
        }
        if (off > pb->size) /* padding: no stack garbage in the kernel's parameters */
            memset(pb->buf + pb->size, 0, off - pb->size);
        memcpy(pb->buf + off, src, size);
        if (off + size > pb->size)
            pb->size = off + size;
    }
    return 0;
}

static int
call_handlers(PyObject *handlers, const char *method, PyObject *stream)
{
    if (handlers == NULL)
        return 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(handlers); i++) {
        PyObject *r = PyObject_CallMethod(PyList_GET_ITEM(handlers, i), method, "O", stream);
        if (r == NULL)
            return -1;
        Py_DECREF(r);
    }
    return 0;
}

/* ------------------------------------------------------------ the launch */

static CUresult
raw_launch(bc_Function *f, const unsigned int g[3], const unsigned int b[3], unsigned int shared,
           CUstream s, void *buf, size_t size)
{
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    return bc_drv.cuLaunchKernel(f->handle, g[0], g[1], g[2], b[0], b[1], b[2], shared, s, NULL,
                                 size ? extra : NULL);
}

/* Launch with the GIL as the knob says; when no (or another) context is current
 * on this thread, retry once with the module's context made current. */
static CUresult
do_launch(bc_State *st, bc_Function *f, const unsigned int g[3], const unsigned int b[3],
          unsigned int shared, CUstream s, void *buf, size_t size)
{
    CUresult rc;
    bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_kernel(st, f->name, g, b, shared, s));
    if (launch_release_gil) {
        Py_BEGIN_ALLOW_THREADS
        rc = raw_launch(f, g, b, shared, s, buf, size);
        Py_END_ALLOW_THREADS
    } else
        rc = raw_launch(f, g, b, shared, s, buf, size);
    if (rc == CUDA_ERROR_INVALID_CONTEXT || rc == CUDA_ERROR_INVALID_HANDLE) {
        int entered = f->module->ctx ? bc_context_enter(f->module->ctx) : -1;
        if (entered == 1) {
            rc = raw_launch(f, g, b, shared, s, buf, size);
            bc_context_leave(entered);
        }
    }
    BC_TRACE_END(st, tt, rc);
    return rc;
}

CUresult
bc_function_launch(bc_Function *f, const unsigned int g[3], const unsigned int b[3],
                   unsigned int shared, CUstream s, void *buf, size_t size)
{
    return do_launch(bc_state_of((PyObject *)f), f, g, b, shared, s, buf, size);
}

/* Elapsed seconds of a launch made between two events (synchronizes). */
typedef struct {
    CUevent start, end;
} timer;

static int
timer_start(bc_State *st, timer *t, CUstream s)
{
    t->start = t->end = NULL;
    if (bc_check(st, bc_drv.cuEventCreate(&t->start, CU_EVENT_DEFAULT), "cuEventCreate") < 0 ||
        bc_check(st, bc_drv.cuEventCreate(&t->end, CU_EVENT_DEFAULT), "cuEventCreate") < 0 ||
        bc_check(st, bc_drv.cuEventRecord(t->start, s), "cuEventRecord") < 0)
        return -1;
    return 0;
}

static void
timer_free(timer *t)
{
    if (t->start)
        bc_drv.cuEventDestroy(t->start);
    if (t->end)
        bc_drv.cuEventDestroy(t->end);
    t->start = t->end = NULL;
}

static PyObject *
timer_stop(bc_State *st, timer *t, CUstream s)
{
    if (bc_check(st, bc_drv.cuEventRecord(t->end, s), "cuEventRecord") < 0)
        return NULL;
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuEventSynchronize(t->end);
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, "cuEventSynchronize") < 0)
        return NULL;
    float ms = 0;
    if (bc_check(st, bc_drv.cuEventElapsedTime(&ms, t->start, t->end), "cuEventElapsedTime") < 0)
        return NULL;
    return PyFloat_FromDouble(ms * 1e-3);
}

/* ------------------------------------------------------------ __call__ */

static int
kw_is(PyObject *key, PyObject *interned)
{
    return key == interned || PyUnicode_Compare(key, interned) == 0;
}

static PyObject *
function_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    bc_Function *f = (bc_Function *)callable;
    bc_State *st = bc_state_of(callable);
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    PyObject *grid = NULL, *block = NULL, *stream = NULL, *shared = NULL, *time_kernel = NULL;
    if (kwnames != NULL) {
        Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t i = 0; i < nk; i++) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, i), *v = args[n + i];
            if (kw_is(key, st->str_block))
                block = v;
            else if (kw_is(key, st->str_grid))
                grid = v;
            else if (kw_is(key, st->str_stream))
                stream = v;
            else if (kw_is(key, st->str_shared))
                shared = v;
            else if (kw_is(key, st->str_time_kernel))
                time_kernel = v;
            else if (PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, "texrefs") == 0) {
                int empty = PySequence_Check(v) ? PySequence_Size(v) == 0 : 0;
                if (!empty) {
                    PyErr_SetString(PyExc_TypeError,
                                    "texture references are gone since CUDA 12: pass texture "
                                    "objects as kernel arguments instead of texrefs=");
                    return NULL;
                }
            } else {
                PyErr_Format(PyExc_TypeError,
                             "Function() got an unexpected keyword argument %R (expected block, "
                             "grid, stream, shared, time_kernel)", key);
                return NULL;
            }
        }
    }
    unsigned int g[3], b[3], sh;
    CUstream s = NULL;
    if (parse_launch_dims(f, grid, block, g, b) < 0 || parse_shared(shared, &sh) < 0 ||
        (stream != NULL && bc_stream_convert(st, stream, &s) < 0))
        return NULL;
    int timed = 0;
    if (time_kernel != NULL && (timed = PyObject_IsTrue(time_kernel)) < 0)
        return NULL;
    packbuf pb;
    pack_init(&pb);
    PyObject *out = NULL;
    timer t = {NULL, NULL};
    if (pack_call_args(st, f, args, n, &pb) < 0 || module_ok(st, f) < 0)
        goto done;
    PyObject *stream_obj = stream ? stream : Py_None;
    if (pb.handlers && call_handlers(pb.handlers, "pre_call", stream_obj) < 0)
        goto done;
    if (timed && timer_start(st, &t, s) < 0)
        goto done;
    if (bc_check(st, do_launch(st, f, g, b, sh, s, pb.buf, pb.size), "cuLaunchKernel") < 0)
        goto done;
    if (timed) {
        if ((out = timer_stop(st, &t, s)) == NULL)
            goto done;
    }
    if (pb.handlers && call_handlers(pb.handlers, "post_call", stream_obj) < 0) {
        Py_CLEAR(out);
        goto done;
    }
    if (out == NULL)
        out = Py_NewRef(Py_None);
done:
    timer_free(&t);
    pack_free(&pb);
    return out;
}

/* ------------------------------------------------------------ prepare */

static int
code_info(char c, unsigned int *size, unsigned int *align)
{
    switch (c) {
    case 'b': case 'B': case '?': case 'c': *size = 1; break;
    case 'h': case 'H': case 'e': *size = 2; break;
    case 'i': case 'I': case 'f': *size = 4; break;
    case 'l': case 'L': *size = sizeof(long); break;
    case 'q': case 'Q': case 'd': case 'P': case 'n': case 'N': *size = 8; break;
    case 'F': *size = 8; *align = 8; return 0;
    case 'D': *size = 16; *align = 16; return 0;
    default: return -1;
    }
    *align = *size;
    return 0;
}

static int
add_spec(bc_ArgSpec **specs, Py_ssize_t *n, Py_ssize_t *cap, char code, unsigned int size,
         unsigned int align)
{
    if (*n == *cap) {
        Py_ssize_t nc = *cap ? 2 * *cap : 8;
        bc_ArgSpec *p = PyMem_Realloc(*specs, (size_t)nc * sizeof **specs);
        if (p == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        *specs = p;
        *cap = nc;
    }
    bc_ArgSpec *a = &(*specs)[(*n)++];
    a->code = code;
    a->size = size;
    a->align = (unsigned char)(align ? (align > 128 ? 128 : align) : 1);
    a->pad = 0;
    a->offset = 0;
    return 0;
}

/* "PPi", "3P2i", "16s" (a 16-byte blob) -> specs. */
static int
parse_format(const char *fmt, bc_ArgSpec **specs, Py_ssize_t *n, Py_ssize_t *cap)
{
    for (const char *p = fmt; *p;) {
        if (*p == ' ' || *p == '@' || *p == '=' || *p == '<') {
            p++;
            continue;
        }
        unsigned long count = 1;
        int has_count = 0;
        if (*p >= '0' && *p <= '9') {
            count = 0;
            while (*p >= '0' && *p <= '9' && count < 1000000)
                count = count * 10 + (unsigned long)(*p++ - '0');
            has_count = 1;
        }
        char c = *p++;
        if (c == 's' || c == 'x') {
            if (!has_count || count == 0) {
                PyErr_SetString(PyExc_ValueError, "prepare(): 's' needs a byte count, e.g. '16s'");
                return -1;
            }
            if (add_spec(specs, n, cap, c == 's' ? 'V' : 'x', (unsigned int)count, 1) < 0)
                return -1;
            continue;
        }
        unsigned int size, align;
        if (code_info(c, &size, &align) < 0) {
            PyErr_Format(PyExc_ValueError, "prepare(): unknown type letter '%c' in \"%s\"",
                         c ? c : '?', fmt);
            return -1;
        }
        if (c == 'n')
            c = 'q';
        if (c == 'N')
            c = 'Q';
        if (count > 65536) {
            PyErr_SetString(PyExc_ValueError, "prepare(): repeat count too large");
            return -1;
        }
        for (unsigned long k = 0; k < count; k++)
            if (add_spec(specs, n, cap, c, size, align) < 0)
                return -1;
    }
    return 0;
}

/* One dtype-like item of a list signature. */
static int
parse_dtype_item(PyObject *item, bc_ArgSpec **specs, Py_ssize_t *n, Py_ssize_t *cap)
{
    if (PyUnicode_Check(item)) {
        const char *s = PyUnicode_AsUTF8(item);
        if (s == NULL)
            return -1;
        if (strlen(s) == 1 && strchr("bBhHiIlLqQefdFDP?", s[0]))
            return parse_format(s, specs, n, cap);
    }
    PyArray_Descr *d = NULL;
    if (!PyArray_DescrConverter(item, &d))
        return -1;
    int rc = 0;
    unsigned int size, align;
    if (PyDataType_HASFIELDS(d) || d->type_num == NPY_VOID)
        rc = add_spec(specs, n, cap, 'V', (unsigned int)PyDataType_ELSIZE(d),
                      (unsigned int)PyDataType_ALIGNMENT(d));
    else if (d->type_num == NPY_LONGDOUBLE || d->type_num == NPY_CLONGDOUBLE ||
             code_info(d->type == 'p' ? 'q' : d->type, &size, &align) < 0) {
        PyErr_Format(PyExc_TypeError, "prepare(): dtype %R has no CUDA C type", (PyObject *)d);
        rc = -1;
    } else {
        char c = d->type;
        if (c == 'p')
            c = 'q';
        rc = add_spec(specs, n, cap, c, size, align);
    }
    Py_DECREF(d);
    return rc;
}

PyDoc_STRVAR(prepare_doc,
"prepare($self, arg_types)\n--\n\n"
"Fix the kernel's signature for prepared_call(): a struct-style string such as\n"
"\"PPi\" (P pointer, b/B int8/uint8, h/H, i/I, l/L, q/Q integers, e/f/d half,\n"
"float, double, F/D complex, '16s' a 16-byte struct) or a list of NumPy dtypes.\n"
"Returns self.");

static PyObject *
function_prepare(bc_Function *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    if (nargs < 1 || nargs > 2 || (kwnames && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "prepare() takes one argument, arg_types");
        return NULL;
    }
    PyObject *types = args[0];
    bc_ArgSpec *specs = NULL;
    Py_ssize_t n = 0, cap = 0;
    PyObject *fmt = NULL;
    if (PyUnicode_Check(types) || PyBytes_Check(types)) {
        fmt = PyUnicode_Check(types) ? Py_NewRef(types)
                                     : PyUnicode_FromEncodedObject(types, "ascii", "strict");
        const char *s = fmt ? PyUnicode_AsUTF8(fmt) : NULL;
        if (s == NULL || parse_format(s, &specs, &n, &cap) < 0)
            goto error;
    } else {
        PyObject *seq = PySequence_Fast(types, "prepare(): arg_types must be a struct-style "
                                               "string or a list of dtypes");
        if (seq == NULL)
            goto error;
        for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); i++)
            if (parse_dtype_item(PySequence_Fast_ITEMS(seq)[i], &specs, &n, &cap) < 0) {
                Py_DECREF(seq);
                goto error;
            }
        Py_DECREF(seq);
        /* The equivalent format string, for `arg_format`. */
        PyObject *parts = PyList_New(0);
        for (Py_ssize_t i = 0; parts && i < n; i++) {
            PyObject *p = specs[i].code == 'V' ? PyUnicode_FromFormat("%us", specs[i].size)
                                               : PyUnicode_FromOrdinal((unsigned char)specs[i].code);
            if (p == NULL || PyList_Append(parts, p) < 0)
                Py_CLEAR(parts);
            Py_XDECREF(p);
        }
        PyObject *empty = parts ? PyUnicode_FromString("") : NULL;
        fmt = empty ? PyUnicode_Join(empty, parts) : NULL;
        Py_XDECREF(empty);
        Py_XDECREF(parts);
        if (fmt == NULL)
            goto error;
    }
    /* Drop 'x' padding entries: they only move the next offset. */
    size_t off = 0;
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (specs[i].code == 'x') {
            off += specs[i].size;
            continue;
        }
        off = align_up(off, specs[i].align);
        specs[k] = specs[i];
        specs[k].offset = (unsigned int)off;
        off += specs[i].size;
        k++;
    }
    n = k;
    if (self->nparams >= 0) {
        if (n != self->nparams) {
            PyErr_Format(PyExc_ValueError,
                         "prepare(): kernel %R takes %zd argument%s, the signature %R has %zd",
                         self->name, self->nparams, self->nparams == 1 ? "" : "s", fmt, n);
            goto error;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            if (specs[i].size != self->param_size[i]) {
                PyErr_Format(PyExc_ValueError,
                             "prepare(): parameter #%zd (0-based) of kernel %R is %u bytes, "
                             "the signature %R gives it %u",
                             i, self->name, self->param_size[i], fmt, specs[i].size);
                goto error;
            }
            specs[i].offset = self->param_offset[i];
        }
        off = n ? (size_t)self->param_offset[n - 1] + self->param_size[n - 1] : 0;
    }
    PyMem_Free(self->prepared);
    self->prepared = specs;
    self->nprepared = n;
    self->prepared_bytes = off;
    Py_XSETREF(self->arg_format, fmt);
    return Py_NewRef(self);
error:
    PyMem_Free(specs);
    Py_XDECREF(fmt);
    return NULL;
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

static int
pack_prepared(bc_State *st, bc_Function *f, PyObject *const *args, Py_ssize_t n, char *buf)
{
    if (n != f->nprepared) {
        PyErr_Format(PyExc_TypeError, "prepared kernel %R takes %zd argument%s (%U), got %zd",
                     f->name, f->nprepared, f->nprepared == 1 ? "" : "s", f->arg_format, n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const bc_ArgSpec *a = &f->prepared[i];
        char *dst = buf + a->offset;
        PyObject *arg = args[i];
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
            if (prep_double(i, a, arg, &d) < 0 || PyFloat_Pack2(d, dst, 1) < 0)
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
    }
    return 0;
}

/* prepared_call / prepared_async_call / prepared_timed_call share this. */
static PyObject *
prepared_launch(bc_Function *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                int has_stream, int timed, const char *name)
{
    bc_State *st = bc_state_of((PyObject *)self);
    Py_ssize_t fixed = has_stream ? 3 : 2;
    if (self->nprepared < 0)
        return bc_error_logic(st, "%s(): call prepare() first", name), NULL;
    if (nargs < fixed) {
        PyErr_Format(PyExc_TypeError, "%s() needs grid, block%s and the kernel's arguments",
                     name, has_stream ? ", stream" : "");
        return NULL;
    }
    PyObject *shared = NULL, *stream = has_stream ? args[2] : NULL;
    if (kwnames != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, i);
            if (kw_is(key, st->str_shared_size))
                shared = args[nargs + i];
            else if (!has_stream && kw_is(key, st->str_stream))
                stream = args[nargs + i];
            else {
                PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R",
                             name, key);
                return NULL;
            }
        }
    }
    unsigned int g[3], b[3], sh;
    CUstream s = NULL;
    if (parse_launch_dims(self, args[0], args[1], g, b) < 0 || parse_shared(shared, &sh) < 0 ||
        (stream != NULL && bc_stream_convert(st, stream, &s) < 0))
        return NULL;
    uint64_t stackbuf[BC_ARGS_STACK / 8];
    char *buf = (char *)stackbuf;
    if (self->prepared_bytes > sizeof stackbuf && (buf = PyMem_Malloc(self->prepared_bytes)) == NULL)
        return PyErr_NoMemory();
    PyObject *out = NULL;
    timer t = {NULL, NULL};
    if (pack_prepared(st, self, args + fixed, nargs - fixed, buf) < 0 || module_ok(st, self) < 0)
        goto done;
    if (timed && timer_start(st, &t, s) < 0)
        goto done;
    if (bc_check(st, do_launch(st, self, g, b, sh, s, buf, self->prepared_bytes), "cuLaunchKernel") < 0)
        goto done;
    out = timed ? timer_stop(st, &t, s) : Py_NewRef(Py_None);
done:
    timer_free(&t);
    if (buf != (char *)stackbuf)
        PyMem_Free(buf);
    return out;
}

PyDoc_STRVAR(prepared_call_doc,
"prepared_call($self, grid, block, *args, shared_size=0)\n--\n\n"
"Launch on the default stream with arguments converted to the prepare()d types.");

static PyObject *
function_prepared_call(bc_Function *self, PyObject *const *args, Py_ssize_t nargs,
                       PyObject *kwnames)
{
    return prepared_launch(self, args, nargs, kwnames, 0, 0, "prepared_call");
}

PyDoc_STRVAR(prepared_async_call_doc,
"prepared_async_call($self, grid, block, stream, *args, shared_size=0)\n--\n\n"
"Launch on `stream` (None: the default stream) with prepare()d argument types.");

static PyObject *
function_prepared_async_call(bc_Function *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    return prepared_launch(self, args, nargs, kwnames, 1, 0, "prepared_async_call");
}

static PyObject *
timed_result(PyObject *seconds, PyObject *Py_UNUSED(ignored))
{
    return Py_NewRef(seconds);
}

static PyMethodDef timed_result_def = {"get_call_time", timed_result, METH_NOARGS,
                                       "get_call_time()\n--\n\nThe kernel's run time in seconds."};

PyDoc_STRVAR(prepared_timed_call_doc,
"prepared_timed_call($self, grid, block, *args, shared_size=0)\n--\n\n"
"Launch (timed with events) and return a callable giving the run time in seconds.");

static PyObject *
function_prepared_timed_call(bc_Function *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    PyObject *secs = prepared_launch(self, args, nargs, kwnames, 0, 1, "prepared_timed_call");
    if (secs == NULL)
        return NULL;
    PyObject *fn = PyCFunction_New(&timed_result_def, secs);
    Py_DECREF(secs);
    return fn;
}

/* ------------------------------------------------------------ launch_ex */

PyDoc_STRVAR(launch_ex_doc,
"launch_ex($self, grid, block, *args, stream=None, shared=0, cluster=None, cooperative=False,\n"
"          priority=None)\n--\n\n"
"Launch through cuLaunchKernelEx with launch attributes: a thread-block `cluster`\n"
"shape (grid must be a multiple of it), a `cooperative` launch (grid-wide sync),\n"
"and a scheduling `priority`.  Arguments pack as for __call__.");

static PyObject *
function_launch_ex(bc_Function *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, "launch_ex() needs grid, block and the kernel's arguments");
        return NULL;
    }
    PyObject *stream = NULL, *shared = NULL, *cluster = NULL, *coop = NULL, *prio = NULL;
    if (kwnames != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, i), *v = args[nargs + i];
            if (kw_is(key, st->str_stream))
                stream = v;
            else if (kw_is(key, st->str_shared))
                shared = v;
            else if (PyUnicode_CompareWithASCIIString(key, "cluster") == 0)
                cluster = v;
            else if (PyUnicode_CompareWithASCIIString(key, "cooperative") == 0)
                coop = v;
            else if (PyUnicode_CompareWithASCIIString(key, "priority") == 0)
                prio = v;
            else {
                PyErr_Format(PyExc_TypeError, "launch_ex() got an unexpected keyword argument %R",
                             key);
                return NULL;
            }
        }
    }
    unsigned int g[3], b[3], c[3], sh;
    CUstream s = NULL;
    if (parse_launch_dims(self, args[0], args[1], g, b) < 0 || parse_shared(shared, &sh) < 0 ||
        (stream != NULL && bc_stream_convert(st, stream, &s) < 0))
        return NULL;
    CUlaunchAttribute attrs[3];
    unsigned int nattrs = 0;
    memset(attrs, 0, sizeof attrs);
    if (cluster != NULL && cluster != Py_None) {
        if (parse_dims(cluster, "cluster", c) < 0)
            return NULL;
        if (g[0] % c[0] || g[1] % c[1] || g[2] % c[2]) {
            PyErr_Format(PyExc_ValueError,
                         "grid (%u, %u, %u) must be a multiple of cluster (%u, %u, %u)", g[0], g[1],
                         g[2], c[0], c[1], c[2]);
            return NULL;
        }
        attrs[nattrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        attrs[nattrs].value.clusterDim.x = c[0];
        attrs[nattrs].value.clusterDim.y = c[1];
        attrs[nattrs].value.clusterDim.z = c[2];
        nattrs++;
    }
    if (coop != NULL) {
        int on = PyObject_IsTrue(coop);
        if (on < 0)
            return NULL;
        if (on) {
            attrs[nattrs].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
            attrs[nattrs].value.cooperative = 1;
            nattrs++;
        }
    }
    if (prio != NULL && prio != Py_None) {
        long long p;
        if (bc_arg_long(prio, "priority", INT_MIN, INT_MAX, &p) < 0)
            return NULL;
        attrs[nattrs].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
        attrs[nattrs].value.priority = (int)p;
        nattrs++;
    }
    packbuf pb;
    pack_init(&pb);
    PyObject *out = NULL;
    PyObject *stream_obj = stream ? stream : Py_None;
    if (pack_call_args(st, self, args + 2, nargs - 2, &pb) < 0 || module_ok(st, self) < 0)
        goto done;
    if (pb.handlers && call_handlers(pb.handlers, "pre_call", stream_obj) < 0)
        goto done;
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = g[0];
    cfg.gridDimY = g[1];
    cfg.gridDimZ = g[2];
    cfg.blockDimX = b[0];
    cfg.blockDimY = b[1];
    cfg.blockDimZ = b[2];
    cfg.sharedMemBytes = sh;
    cfg.hStream = s;
    cfg.attrs = nattrs ? attrs : NULL;
    cfg.numAttrs = nattrs;
    size_t size = pb.size;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, pb.buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_kernel(st, self->name, g, b, sh, s));
    CUresult rc = bc_drv.cuLaunchKernelEx(&cfg, self->handle, NULL, size ? extra : NULL);
    if (rc == CUDA_ERROR_INVALID_CONTEXT || rc == CUDA_ERROR_INVALID_HANDLE) {
        int entered = self->module->ctx ? bc_context_enter(self->module->ctx) : -1;
        if (entered == 1) {
            rc = bc_drv.cuLaunchKernelEx(&cfg, self->handle, NULL, size ? extra : NULL);
            bc_context_leave(entered);
        }
    }
    BC_TRACE_END(st, tt, rc);
    if (bc_check(st, rc, "cuLaunchKernelEx") < 0)
        goto done;
    if (pb.handlers && call_handlers(pb.handlers, "post_call", stream_obj) < 0)
        goto done;
    out = Py_NewRef(Py_None);
done:
    pack_free(&pb);
    return out;
}

/* ------------------------------------------------------------ attributes, occupancy */

static PyObject *
get_attr(bc_Function *self, int attr)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (module_ok(st, self) < 0)
        return NULL;
    int v = 0;
    if (bc_check(st, bc_drv.cuFuncGetAttribute(&v, (CUfunction_attribute)attr, self->handle),
                 "cuFuncGetAttribute") < 0)
        return NULL;
    return PyLong_FromLong(v);
}

static PyObject *
function_attr_getter(bc_Function *self, void *closure)
{
    return get_attr(self, (int)(intptr_t)closure);
}

PyDoc_STRVAR(get_attribute_doc,
"get_attribute($self, attr)\n--\n\nThe function_attribute `attr` of the kernel (cuFuncGetAttribute).");

static PyObject *
function_get_attribute(bc_Function *self, PyObject *arg)
{
    long long a;
    if (bc_arg_long(arg, "function attribute", 0, CU_FUNC_ATTRIBUTE_MAX - 1, &a) < 0)
        return NULL;
    return get_attr(self, (int)a);
}

PyDoc_STRVAR(set_attribute_doc,
"set_attribute($self, attr, value)\n--\n\n"
"Set a function_attribute, e.g. MAX_DYNAMIC_SHARED_SIZE_BYTES (cuFuncSetAttribute).");

static PyObject *
function_set_attribute(bc_Function *self, PyObject *const *args, Py_ssize_t nargs)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "set_attribute() takes (attr, value)");
        return NULL;
    }
    long long a, v;
    if (bc_arg_long(args[0], "function attribute", 0, CU_FUNC_ATTRIBUTE_MAX - 1, &a) < 0 ||
        bc_arg_long(args[1], "attribute value", INT_MIN, INT_MAX, &v) < 0 || module_ok(st, self) < 0)
        return NULL;
    if (bc_check(st, bc_drv.cuFuncSetAttribute(self->handle, (CUfunction_attribute)a, (int)v),
                 "cuFuncSetAttribute") < 0)
        return NULL;
    int mt;
    if (bc_drv.cuFuncGetAttribute(&mt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, self->handle) ==
        CUDA_SUCCESS)
        self->max_threads = mt;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(set_cache_config_doc,
"set_cache_config($self, config)\n--\n\nPrefer shared memory or L1 for this kernel (func_cache.X).");

static PyObject *
function_set_cache_config(bc_Function *self, PyObject *arg)
{
    bc_State *st = bc_state_of((PyObject *)self);
    long long c;
    if (bc_arg_long(arg, "cache config", 0, CU_FUNC_CACHE_PREFER_EQUAL, &c) < 0 ||
        module_ok(st, self) < 0)
        return NULL;
    if (bc_check(st, bc_drv.cuFuncSetCacheConfig(self->handle, (CUfunc_cache)c),
                 "cuFuncSetCacheConfig") < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(max_active_blocks_doc,
"max_active_blocks_per_multiprocessor($self, block_size, dynamic_smem=0)\n--\n\n"
"How many blocks of `block_size` threads can run at once on one multiprocessor.");

static PyObject *
function_max_active_blocks(bc_Function *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of((PyObject *)self);
    static char *kwlist[] = {"block_size", "dynamic_smem", NULL};
    PyObject *bs, *smem = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:max_active_blocks_per_multiprocessor",
                                     kwlist, &bs, &smem))
        return NULL;
    long long block;
    size_t dyn = 0;
    if (bc_arg_long(bs, "block_size", 1, 1024, &block) < 0 ||
        (smem && bc_arg_size(smem, "dynamic_smem", &dyn) < 0) || module_ok(st, self) < 0)
        return NULL;
    int n = 0;
    if (bc_check(st, bc_drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, self->handle,
                                                                         (int)block, dyn),
                 "cuOccupancyMaxActiveBlocksPerMultiprocessor") < 0)
        return NULL;
    return PyLong_FromLong(n);
}

PyDoc_STRVAR(max_potential_block_size_doc,
"max_potential_block_size($self, dynamic_smem=0, block_size_limit=0)\n--\n\n"
"(min_grid_size, block_size): the block size reaching the best occupancy, and the\n"
"smallest grid that fills the device with it.");

static PyObject *
function_max_potential_block_size(bc_Function *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of((PyObject *)self);
    static char *kwlist[] = {"dynamic_smem", "block_size_limit", NULL};
    PyObject *smem = NULL, *lim = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:max_potential_block_size", kwlist, &smem,
                                     &lim))
        return NULL;
    size_t dyn = 0;
    long long limit = 0;
    if ((smem && bc_arg_size(smem, "dynamic_smem", &dyn) < 0) ||
        (lim && bc_arg_long(lim, "block_size_limit", 0, 1024, &limit) < 0) ||
        module_ok(st, self) < 0)
        return NULL;
    int min_grid = 0, block = 0;
    if (bc_check(st, bc_drv.cuOccupancyMaxPotentialBlockSize(&min_grid, &block, self->handle, NULL,
                                                             dyn, (int)limit),
                 "cuOccupancyMaxPotentialBlockSize") < 0)
        return NULL;
    return Py_BuildValue("(ii)", min_grid, block);
}

/* ------------------------------------------------------------ the C floor */

static double
now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

PyDoc_STRVAR(bench_launch_doc,
"_bench_launch(function, grid, block, args, iterations, mode='enqueue', stream=None)\n--\n\n"
"Private: the launch floor.  Packs `args` (a tuple packed as __call__ does, or\n"
"bytes already packed) once, then launches `iterations` times in a C loop with\n"
"the GIL released and returns seconds per launch.  mode 'enqueue' synchronizes\n"
"the stream once at the end; 'sync' after every launch.");

static PyObject *
bc_bench_launch(PyObject *m, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_from_module(m);
    static char *kwlist[] = {"function", "grid", "block", "args", "iterations", "mode", "stream",
                             NULL};
    PyObject *fobj, *grid, *block, *fargs, *stream = NULL;
    Py_ssize_t iters;
    const char *mode = "enqueue";
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OOOn|sO:_bench_launch", kwlist,
                                     (PyTypeObject *)st->FunctionType, &fobj, &grid, &block,
                                     &fargs, &iters, &mode, &stream))
        return NULL;
    bc_Function *f = (bc_Function *)fobj;
    int sync_each = strcmp(mode, "sync") == 0;
    if (!sync_each && strcmp(mode, "enqueue") != 0) {
        PyErr_Format(PyExc_ValueError, "_bench_launch(): mode must be 'enqueue' or 'sync', not %s",
                     mode);
        return NULL;
    }
    if (iters < 1) {
        PyErr_SetString(PyExc_ValueError, "_bench_launch(): iterations must be positive");
        return NULL;
    }
    unsigned int g[3], b[3];
    CUstream s = NULL;
    if (module_ok(st, f) < 0 || parse_launch_dims(f, grid, block, g, b) < 0 ||
        (stream && bc_stream_convert(st, stream, &s) < 0))
        return NULL;
    packbuf pb;
    pack_init(&pb);
    PyObject *out = NULL;
    if (PyBytes_Check(fargs)) {
        if (pack_reserve(&pb, (size_t)PyBytes_GET_SIZE(fargs)) < 0)
            goto done;
        memcpy(pb.buf, PyBytes_AS_STRING(fargs), (size_t)PyBytes_GET_SIZE(fargs));
        pb.size = (size_t)PyBytes_GET_SIZE(fargs);
    } else if (PyTuple_Check(fargs)) {
        if (pack_call_args(st, f, &PyTuple_GET_ITEM(fargs, 0), PyTuple_GET_SIZE(fargs), &pb) < 0)
            goto done;
        if (pb.handlers) {
            PyErr_SetString(PyExc_TypeError, "_bench_launch(): argument handlers are not allowed");
            goto done;
        }
    } else {
        PyErr_SetString(PyExc_TypeError, "_bench_launch(): args must be a tuple or bytes");
        goto done;
    }
    CUresult rc = CUDA_SUCCESS;
    double t0 = 0, t1 = 0;
    size_t size = pb.size;
    Py_BEGIN_ALLOW_THREADS
    t0 = now_seconds();
    for (Py_ssize_t i = 0; i < iters && rc == CUDA_SUCCESS; i++) {
        rc = raw_launch(f, g, b, 0, s, pb.buf, size);
        if (sync_each && rc == CUDA_SUCCESS)
            rc = bc_drv.cuStreamSynchronize(s);
    }
    if (rc == CUDA_SUCCESS && !sync_each)
        rc = bc_drv.cuStreamSynchronize(s);
    t1 = now_seconds();
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, "cuLaunchKernel") < 0)
        goto done;
    out = PyFloat_FromDouble((t1 - t0) / (double)iters);
done:
    pack_free(&pb);
    return out;
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
    packbuf pb;
    pack_init(&pb);
    PyObject *out = NULL;
    if (pack_call_args(st, (bc_Function *)args[0], args + 1, nargs - 1, &pb) == 0)
        out = PyBytes_FromStringAndSize(pb.buf, (Py_ssize_t)pb.size);
    pack_free(&pb);
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
    if (pack_prepared(st, f, args + 1, nargs - 1, PyBytes_AS_STRING(out)) < 0)
        Py_CLEAR(out);
    return out;
}

PyDoc_STRVAR(launch_release_gil_doc,
"_launch_release_gil(flag=None)\n--\n\n"
"Private tuning knob: whether cuLaunchKernel runs with the GIL released.  Sets it\n"
"when `flag` is given; returns the previous setting.");

static PyObject *
bc_launch_release_gil(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    BC_UNUSED(m);
    int prev = launch_release_gil;
    if (nargs > 1) {
        PyErr_SetString(PyExc_TypeError, "_launch_release_gil(flag=None)");
        return NULL;
    }
    if (nargs == 1 && args[0] != Py_None) {
        int v = PyObject_IsTrue(args[0]);
        if (v < 0)
            return NULL;
        launch_release_gil = v;
    }
    return PyBool_FromLong(prev);
}

PyDoc_STRVAR(test_function_doc,
"_test_function(name, params=None, max_threads=1024)\n--\n\n"
"Private, for CPU tests: a Function of an unloaded stand-in Module, with the\n"
"parameter layout `params` ((offset, size), ...) or unknown.  Everything up to the\n"
"launch works (validation, packing, prepare); launching raises LogicError.");

static PyObject *
bc_test_function(PyObject *m, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_from_module(m);
    static char *kwlist[] = {"name", "params", "max_threads", NULL};
    PyObject *name, *params = Py_None;
    int mt = 1024;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U|Oi:_test_function", kwlist, &name, &params,
                                     &mt))
        return NULL;
    bc_Module *mod = PyObject_GC_New(bc_Module, (PyTypeObject *)st->ModuleType);
    if (mod == NULL)
        return NULL;
    mod->handle = NULL;
    mod->ctx = NULL;
    mod->weakreflist = NULL;
    PyObject_GC_Track(mod);
    bc_Function *self = PyObject_GC_New(bc_Function, (PyTypeObject *)st->FunctionType);
    if (self == NULL) {
        Py_DECREF(mod);
        return NULL;
    }
    self->vectorcall = function_vectorcall;
    self->handle = NULL;
    self->module = mod;
    self->name = Py_NewRef(name);
    self->max_threads = mt;
    self->nparams = -1;
    self->param_offset = self->param_size = NULL;
    self->nprepared = -1;
    self->prepared = NULL;
    self->prepared_bytes = 0;
    self->arg_format = NULL;
    self->weakreflist = NULL;
    PyObject_GC_Track(self);
    if (params != Py_None) {
        PyObject *seq = PySequence_Fast(params, "params must be a sequence of (offset, size)");
        if (seq == NULL)
            goto error;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
        self->param_offset = PyMem_Calloc((size_t)n + 1, sizeof(unsigned int));
        self->param_size = PyMem_Calloc((size_t)n + 1, sizeof(unsigned int));
        for (Py_ssize_t i = 0; i < n; i++) {
            unsigned int o, z;
            if (!PyArg_ParseTuple(PySequence_Fast_ITEMS(seq)[i], "II", &o, &z)) {
                Py_DECREF(seq);
                goto error;
            }
            self->param_offset[i] = o;
            self->param_size[i] = z;
        }
        self->nparams = n;
        Py_DECREF(seq);
    }
    return (PyObject *)self;
error:
    Py_DECREF(self);
    return NULL;
}

/* ------------------------------------------------------------ the type */

PyObject *
bc_function_new(bc_State *st, bc_Module *module, PyObject *name)
{
    const char *cname = PyUnicode_AsUTF8(name);
    if (cname == NULL)
        return NULL;
    CUfunction h;
    CUresult rc = bc_drv.cuModuleGetFunction(&h, module->handle, cname);
    if (rc == CUDA_ERROR_NOT_FOUND) {
        bc_error_logic(st, "module has no function named %R (is it extern \"C\" or "
                           "__global__? C++ names are mangled)", name);
        return NULL;
    }
    if (bc_check(st, rc, "cuModuleGetFunction") < 0)
        return NULL;
    int mt = 1024;
    if (bc_check(st, bc_drv.cuFuncGetAttribute(&mt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, h),
                 "cuFuncGetAttribute") < 0)
        return NULL;
    bc_Function *self = PyObject_GC_New(bc_Function, (PyTypeObject *)st->FunctionType);
    if (self == NULL)
        return NULL;
    self->vectorcall = function_vectorcall;
    self->handle = h;
    self->module = (bc_Module *)Py_NewRef(module);
    self->name = Py_NewRef(name);
    self->max_threads = mt;
    self->nparams = -1;
    self->param_offset = self->param_size = NULL;
    self->nprepared = -1;
    self->prepared = NULL;
    self->prepared_bytes = 0;
    self->arg_format = NULL;
    self->weakreflist = NULL;
    PyObject_GC_Track(self);
    /* The kernel's parameter layout, when the driver can tell (CUDA 12.4+). */
    size_t cap = 0, n = 0;
    for (;;) {
        size_t off, size;
        rc = bc_drv.cuFuncGetParamInfo(h, n, &off, &size);
        if (rc != CUDA_SUCCESS)
            break;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            unsigned int *po = PyMem_Realloc(self->param_offset, cap * sizeof *po);
            if (po != NULL)
                self->param_offset = po;
            unsigned int *ps = po ? PyMem_Realloc(self->param_size, cap * sizeof *ps) : NULL;
            if (ps != NULL)
                self->param_size = ps;
            if (po == NULL || ps == NULL) {
                Py_DECREF(self);
                return PyErr_NoMemory();
            }
        }
        self->param_offset[n] = (unsigned int)off;
        self->param_size[n] = (unsigned int)size;
        n++;
    }
    /* Past the last parameter the driver answers CUDA_ERROR_INVALID_VALUE; any
     * other answer (an old driver) means we cannot check arguments. */
    if (rc == CUDA_ERROR_INVALID_VALUE)
        self->nparams = (Py_ssize_t)n;
    return (PyObject *)self;
}

static int
function_traverse(bc_Function *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->module);
    return 0;
}

static void
function_dealloc(bc_Function *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    PyMem_Free(self->param_offset);
    PyMem_Free(self->param_size);
    PyMem_Free(self->prepared);
    Py_CLEAR(self->arg_format);
    Py_CLEAR(self->name);
    Py_CLEAR(self->module);
    tp->tp_free(self);
    Py_DECREF(tp);
}

static PyObject *
function_repr(bc_Function *self)
{
    return PyUnicode_FromFormat("<barecuda.driver.Function %U>", self->name);
}

static PyObject *
function_get_handle(bc_Function *self, void *Py_UNUSED(closure))
{
    return PyLong_FromVoidPtr((void *)self->handle);
}

static PyObject *
function_get_num_params(bc_Function *self, void *Py_UNUSED(closure))
{
    if (self->nparams < 0)
        Py_RETURN_NONE;
    return PyLong_FromSsize_t(self->nparams);
}

static PyObject *
function_get_param_info(bc_Function *self, void *Py_UNUSED(closure))
{
    if (self->nparams < 0)
        Py_RETURN_NONE;
    PyObject *out = PyTuple_New(self->nparams);
    for (Py_ssize_t i = 0; out && i < self->nparams; i++) {
        PyObject *p = Py_BuildValue("(II)", self->param_offset[i], self->param_size[i]);
        if (p == NULL)
            Py_CLEAR(out);
        else
            PyTuple_SET_ITEM(out, i, p);
    }
    return out;
}

static PyObject *
function_get_arg_format(bc_Function *self, void *Py_UNUSED(closure))
{
    return Py_NewRef(self->arg_format ? self->arg_format : Py_None);
}

static PyMethodDef function_methods[] = {
    {"prepare", (PyCFunction)(void (*)(void))function_prepare, METH_FASTCALL | METH_KEYWORDS,
     prepare_doc},
    {"prepared_call", (PyCFunction)(void (*)(void))function_prepared_call,
     METH_FASTCALL | METH_KEYWORDS, prepared_call_doc},
    {"prepared_async_call", (PyCFunction)(void (*)(void))function_prepared_async_call,
     METH_FASTCALL | METH_KEYWORDS, prepared_async_call_doc},
    {"prepared_timed_call", (PyCFunction)(void (*)(void))function_prepared_timed_call,
     METH_FASTCALL | METH_KEYWORDS, prepared_timed_call_doc},
    {"launch_ex", (PyCFunction)(void (*)(void))function_launch_ex, METH_FASTCALL | METH_KEYWORDS,
     launch_ex_doc},
    {"get_attribute", (PyCFunction)function_get_attribute, METH_O, get_attribute_doc},
    {"set_attribute", (PyCFunction)(void (*)(void))function_set_attribute, METH_FASTCALL,
     set_attribute_doc},
    {"set_cache_config", (PyCFunction)function_set_cache_config, METH_O, set_cache_config_doc},
    {"max_active_blocks_per_multiprocessor", (PyCFunction)(void (*)(void))function_max_active_blocks,
     METH_VARARGS | METH_KEYWORDS, max_active_blocks_doc},
    {"max_potential_block_size", (PyCFunction)(void (*)(void))function_max_potential_block_size,
     METH_VARARGS | METH_KEYWORDS, max_potential_block_size_doc},
    {NULL, NULL, 0, NULL},
};

#define ATTR(name, id, doc) {name, (getter)function_attr_getter, NULL, doc, (void *)(intptr_t)(id)}

static PyGetSetDef function_getset[] = {
    ATTR("max_threads_per_block", CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
         "Most threads a block of this kernel may have."),
    ATTR("shared_size_bytes", CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "Static shared memory (bytes)."),
    ATTR("const_size_bytes", CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, "Constant memory (bytes)."),
    ATTR("local_size_bytes", CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "Local memory per thread (bytes)."),
    ATTR("num_regs", CU_FUNC_ATTRIBUTE_NUM_REGS, "Registers per thread."),
    ATTR("ptx_version", CU_FUNC_ATTRIBUTE_PTX_VERSION, "PTX virtual architecture, e.g. 90."),
    ATTR("binary_version", CU_FUNC_ATTRIBUTE_BINARY_VERSION, "Binary architecture, e.g. 90."),
    ATTR("max_dynamic_shared_size_bytes", CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
         "Largest dynamic shared memory a launch may ask for."),
    {"handle", (getter)function_get_handle, NULL, "The CUfunction as an int.", NULL},
    {"num_params", (getter)function_get_num_params, NULL,
     "Number of kernel parameters (None when the driver cannot tell).", NULL},
    {"param_info", (getter)function_get_param_info, NULL,
     "((offset, size), ...) of the kernel's parameters, or None.", NULL},
    {"arg_format", (getter)function_get_arg_format, NULL,
     "The prepare()d signature as a struct-style string, or None.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef function_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_Function, weakreflist), READONLY, NULL},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(bc_Function, vectorcall), READONLY, NULL},
    {"name", T_OBJECT, offsetof(bc_Function, name), READONLY, "The kernel's name."},
    {"module", T_OBJECT, offsetof(bc_Function, module), READONLY, "The Module holding the code."},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(function_doc,
"A kernel of a Module.  Call it as\n"
"    f(*args, block=(x, y, z), grid=(x, y[, z]), stream=None, shared=0, time_kernel=False)\n"
"with NumPy scalars (np.int32(n), np.float32(a) ...), device memory, structs\n"
"(numpy.void or size-1 arrays), texture objects or In/Out/InOut(ndarray); with\n"
"time_kernel=True it returns the run time in seconds.");

static PyType_Slot function_slots[] = {
    {Py_tp_dealloc, function_dealloc},
    {Py_tp_traverse, function_traverse},
    {Py_tp_repr, function_repr},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_methods, function_methods},
    {Py_tp_getset, function_getset},
    {Py_tp_members, function_members},
    {Py_tp_doc, (void *)function_doc},
    {0, NULL},
};

static PyType_Spec function_spec = {
    .name = "barecuda.driver.Function",
    .basicsize = sizeof(bc_Function),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |
             Py_TPFLAGS_DISALLOW_INSTANTIATION | Py_TPFLAGS_HAVE_VECTORCALL,
    .slots = function_slots,
};

static PyMethodDef function_functions[] = {
    {"_bench_launch", (PyCFunction)(void (*)(void))bc_bench_launch, METH_VARARGS | METH_KEYWORDS,
     bench_launch_doc},
    {"_pack_args", (PyCFunction)(void (*)(void))bc_pack_args, METH_FASTCALL, pack_args_doc},
    {"_pack_prepared", (PyCFunction)(void (*)(void))bc_pack_prepared_py, METH_FASTCALL,
     pack_prepared_doc},
    {"_test_function", (PyCFunction)(void (*)(void))bc_test_function, METH_VARARGS | METH_KEYWORDS,
     test_function_doc},
    {"_launch_release_gil", (PyCFunction)(void (*)(void))bc_launch_release_gil, METH_FASTCALL,
     launch_release_gil_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_function_setup(PyObject *m, bc_State *st)
{
    scalar_kinds_init();
    if (bc_add_type(m, &function_spec, NULL, &st->FunctionType) < 0)
        return -1;
    return PyModule_AddFunctions(m, function_functions);
}
