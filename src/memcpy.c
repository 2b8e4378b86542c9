/* SPDX-License-Identifier: MIT */
/* Copies and fills: memset_*, memcpy_htod/dtoh/dtod (and _async; the
 * synchronous host copies of large pageable memory staged by src/staging.c), peer
 * copies and the Memcpy2D / Memcpy3D / Memcpy3DPeer descriptors (the C-loop copy
 * floor that the benchmark sets them against is src/copybench.c).
 *
 * Every byte count is checked before the driver sees it: against the host
 * buffer's length and, where the device end is one of our allocations, against
 * its size, so a too-large copy is a ValueError and never a corrupted heap.
 * The GIL is released around every copy.  An asynchronous copy on a Stream
 * keeps its host buffer alive until that stream is known to be complete; on
 * the default stream (stream=None) the caller must synchronize before
 * dropping or reusing the buffer (as with PyCUDA). */
#include "barecuda/memory.h"
#include "barecuda/argparse.h"
#include "barecuda/array.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"
#include "barecuda/stream.h"
#include "barecuda/trace.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* array.c provides this; weak so copies still build while it is absent. */
extern bc_Array *bc_array_convert(bc_State *st, PyObject *obj) __attribute__((weak));

/* ------------------------------------------------------------------ helpers */

/* Retry a copy that failed for want of a current context, after making the
 * default context current.  1: retry; 0: do not. */
static int
want_retry(bc_State *st, CUresult rc)
{
    if (rc != CUDA_ERROR_INVALID_CONTEXT)
        return 0;
    CUcontext cur = NULL;
    if (bc_drv.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != NULL)
        return 0;
    bc_Context *ctx = bc_context_current(st);
    if (ctx == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(ctx);
    return 1;
}

/* Minimal fastcall argument matching: positional then keywords by name. */
static int
fast_args(const char *fn, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
          const char *const *names, int nreq, int nmax, PyObject **out)
{
    for (int i = 0; i < nmax; i++)
        out[i] = NULL;
    if (nargs > nmax) {
        PyErr_Format(PyExc_TypeError, "%s() takes at most %d arguments (%zd given)", fn, nmax,
                     nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        out[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        int found = -1;
        for (int i = 0; i < nmax; i++)
            if (PyUnicode_CompareWithASCIIString(key, names[i]) == 0) {
                found = i;
                break;
            }
        if (found < 0) {
            PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R", fn, key);
            return -1;
        }
        if (out[found] != NULL) {
            PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fn,
                         names[found]);
            return -1;
        }
        out[found] = args[nargs + k];
    }
    for (int i = 0; i < nreq; i++)
        if (out[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", fn, names[i]);
            return -1;
        }
    return 0;
}

/* A host buffer: NumPy arrays are read directly, anything else through the
 * buffer protocol. */
typedef struct {
    Py_buffer view;
    int has_view;
    void *buf;
    size_t len;
} host_buf;

static void
host_release(host_buf *hb)
{
    if (hb->has_view) {
        hb->has_view = 0;
        PyBuffer_Release(&hb->view);
    }
}

static int
host_get(const char *fn, const char *what, PyObject *obj, int writable, host_buf *hb)
{
    hb->has_view = 0;
    if (PyArray_Check(obj)) {
        PyArrayObject *a = (PyArrayObject *)obj;
        if (!PyArray_IS_C_CONTIGUOUS(a) && !PyArray_IS_F_CONTIGUOUS(a)) {
            PyErr_Format(PyExc_ValueError,
                         "%s(): %s is a non-contiguous array; copy it with "
                         "numpy.ascontiguousarray() first",
                         fn, what);
            return -1;
        }
        if (writable && !PyArray_ISWRITEABLE(a)) {
            PyErr_Format(PyExc_ValueError, "%s(): %s is a read-only array", fn, what);
            return -1;
        }
        if (bc_arg_plain_host(obj, NULL, fn, what) < 0)
            return -1;
        hb->buf = PyArray_DATA(a);
        hb->len = (size_t)PyArray_NBYTES(a);
        return 0;
    }
    if (!PyObject_CheckBuffer(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): %s must be host memory (a NumPy array or another object with the "
                     "buffer protocol), not %.100s",
                     fn, what, Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (PyObject_GetBuffer(obj, &hb->view,
                           PyBUF_ANY_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0) {
        PyErr_Clear();
        int contiguous = PyObject_GetBuffer(obj, &hb->view, PyBUF_ANY_CONTIGUOUS) == 0;
        if (contiguous)
            PyBuffer_Release(&hb->view);
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s(): %s is %s", fn, what,
                     contiguous ? "read-only" : "not a contiguous buffer");
        return -1;
    }
    if (bc_arg_plain_host(obj, &hb->view, fn, what) < 0) {
        PyBuffer_Release(&hb->view);
        return -1;
    }
    hb->has_view = 1;
    hb->buf = hb->view.buf;
    hb->len = (size_t)hb->view.len;
    return 0;
}

static int
too_large(const char *fn, size_t want, const char *what, size_t have)
{
    PyErr_Format(PyExc_ValueError, "%s(): copying %zu bytes, but the %s has only %zu bytes", fn,
                 want, what, have);
    return -1;
}

/* ------------------------------------------------------------------ memset */

enum { D8 = 1, D16 = 2, D32 = 4 };

static int
memset_value(PyObject *obj, int width, unsigned int *out)
{
    long long lo = -(1LL << (8 * width - 1)), hi = (1LL << (8 * width)) - 1, v;
    if (bc_arg_long(obj, "memset value", lo, hi, &v) < 0)
        return -1;
    *out = (unsigned int)((unsigned long long)v & (unsigned long long)hi);
    return 0;
}

static PyObject *
memset_1d(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int width,
          int async, const char *fn)
{
    bc_State *st = bc_state_from_module(m);
    static const char *const names[] = {"dest", "data", "size", "stream"}; /* PyCUDA's */
    PyObject *a[4];
    if (fast_args(fn, args, nargs, kwnames, names, 3, async ? 4 : 3, a) < 0)
        return NULL;
    CUdeviceptr d;
    size_t size, count, bytes;
    unsigned int value;
    CUstream s = NULL;
    if (bc_pointer_convert(st, a[0], &d, &size) < 0 || memset_value(a[1], width, &value) < 0 ||
        bc_arg_size(a[2], "count", &count) < 0 || (async && bc_stream_convert(st, a[3], &s) < 0))
        return NULL;
    if (__builtin_mul_overflow(count, (size_t)width, &bytes) || bytes > size)
        return too_large(fn, count * (size_t)width, "device memory", size), NULL;
    if (count == 0)
        Py_RETURN_NONE;
    BC_REQUIRE_DRIVER(st, NULL);
    CUresult rc;
    bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_memset(st, s, bytes));
    do {
        Py_BEGIN_ALLOW_THREADS
        switch (width * 2 + async) {
        case 2: rc = bc_drv.cuMemsetD8(d, (unsigned char)value, count); break;
        case 3: rc = bc_drv.cuMemsetD8Async(d, (unsigned char)value, count, s); break;
        case 4: rc = bc_drv.cuMemsetD16(d, (unsigned short)value, count); break;
        case 5: rc = bc_drv.cuMemsetD16Async(d, (unsigned short)value, count, s); break;
        case 8: rc = bc_drv.cuMemsetD32(d, value, count); break;
        default: rc = bc_drv.cuMemsetD32Async(d, value, count, s); break;
        }
        Py_END_ALLOW_THREADS
    } while (want_retry(st, rc));
    BC_TRACE_END(st, tt, rc);
    if (bc_check(st, rc, width == 1 ? "cuMemsetD8" : width == 2 ? "cuMemsetD16" : "cuMemsetD32") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
memset_2d(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int width,
          int async, const char *fn)
{
    bc_State *st = bc_state_from_module(m);
    static const char *const names[] = {"dest", "pitch", "data", "width", "height", "stream"};
    PyObject *a[6];
    if (fast_args(fn, args, nargs, kwnames, names, 5, async ? 6 : 5, a) < 0)
        return NULL;
    CUdeviceptr d;
    size_t size, pitch, w, h, row, end;
    unsigned int value;
    CUstream s = NULL;
    if (bc_pointer_convert(st, a[0], &d, &size) < 0 || bc_arg_size(a[1], "pitch", &pitch) < 0 ||
        memset_value(a[2], width, &value) < 0 || bc_arg_size(a[3], "width", &w) < 0 ||
        bc_arg_size(a[4], "height", &h) < 0 || (async && bc_stream_convert(st, a[5], &s) < 0))
        return NULL;
    if (w == 0 || h == 0)
        Py_RETURN_NONE;
    if (__builtin_mul_overflow(w, (size_t)width, &row) ||
        __builtin_mul_overflow(pitch, h - 1, &end) || __builtin_add_overflow(end, row, &end))
        return too_large(fn, SIZE_MAX, "device memory", size), NULL;
    if (h > 1 && row > pitch) {
        PyErr_Format(PyExc_ValueError, "%s(): a row of %zu bytes does not fit the pitch of %zu", fn,
                     row, pitch);
        return NULL;
    }
    if (end > size)
        return too_large(fn, end, "device memory", size), NULL;
    BC_REQUIRE_DRIVER(st, NULL);
    CUresult rc;
    bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_memset(st, s, (unsigned long long)row * h));
    do {
        Py_BEGIN_ALLOW_THREADS
        switch (width * 2 + async) {
        case 2: rc = bc_drv.cuMemsetD2D8(d, pitch, (unsigned char)value, w, h); break;
        case 3: rc = bc_drv.cuMemsetD2D8Async(d, pitch, (unsigned char)value, w, h, s); break;
        case 4: rc = bc_drv.cuMemsetD2D16(d, pitch, (unsigned short)value, w, h); break;
        case 5: rc = bc_drv.cuMemsetD2D16Async(d, pitch, (unsigned short)value, w, h, s); break;
        case 8: rc = bc_drv.cuMemsetD2D32(d, pitch, value, w, h); break;
        default: rc = bc_drv.cuMemsetD2D32Async(d, pitch, value, w, h, s); break;
        }
        Py_END_ALLOW_THREADS
    } while (want_retry(st, rc));
    BC_TRACE_END(st, tt, rc);
    if (bc_check(st, rc, width == 1 ? "cuMemsetD2D8" : width == 2 ? "cuMemsetD2D16" : "cuMemsetD2D32") < 0)
        return NULL;
    Py_RETURN_NONE;
}

#define BC_MEMSET(name, kind, width, async)                                                   \
    static PyObject *bc_##name(PyObject *m, PyObject *const *args, Py_ssize_t nargs,          \
                               PyObject *kwnames)                                             \
    {                                                                                         \
        return memset_##kind(m, args, nargs, kwnames, width, async, #name);                   \
    }
BC_MEMSET(memset_d8, 1d, D8, 0)
BC_MEMSET(memset_d16, 1d, D16, 0)
BC_MEMSET(memset_d32, 1d, D32, 0)
BC_MEMSET(memset_d8_async, 1d, D8, 1)
BC_MEMSET(memset_d16_async, 1d, D16, 1)
BC_MEMSET(memset_d32_async, 1d, D32, 1)
BC_MEMSET(memset_d2d8, 2d, D8, 0)
BC_MEMSET(memset_d2d16, 2d, D16, 0)
BC_MEMSET(memset_d2d32, 2d, D32, 0)
BC_MEMSET(memset_d2d8_async, 2d, D8, 1)
BC_MEMSET(memset_d2d16_async, 2d, D16, 1)
BC_MEMSET(memset_d2d32_async, 2d, D32, 1)
#undef BC_MEMSET

PyDoc_STRVAR(memset_d8_doc, "memset_d8(dest, data, size)\n--\n\n"
"Set `size` bytes at device memory `dest` to `data` (cuMemsetD8).");
PyDoc_STRVAR(memset_d16_doc, "memset_d16(dest, data, size)\n--\n\n"
"Set `size` 16-bit words at `dest` to `data` (cuMemsetD16).");
PyDoc_STRVAR(memset_d32_doc, "memset_d32(dest, data, size)\n--\n\n"
"Set `size` 32-bit words at `dest` to `data` (cuMemsetD32).");
PyDoc_STRVAR(memset_d8_async_doc, "memset_d8_async(dest, data, size, stream=None)\n--\n\n"
"memset_d8() in order on `stream`.");
PyDoc_STRVAR(memset_d16_async_doc, "memset_d16_async(dest, data, size, stream=None)\n--\n\n"
"memset_d16() in order on `stream`.");
PyDoc_STRVAR(memset_d32_async_doc, "memset_d32_async(dest, data, size, stream=None)\n--\n\n"
"memset_d32() in order on `stream`.");
PyDoc_STRVAR(memset_d2d8_doc, "memset_d2d8(dest, pitch, data, width, height)\n--\n\n"
"Set `height` rows of `width` bytes, `pitch` bytes apart, to `data` (cuMemsetD2D8).");
PyDoc_STRVAR(memset_d2d16_doc, "memset_d2d16(dest, pitch, data, width, height)\n--\n\n"
"Set `height` rows of `width` 16-bit words, `pitch` bytes apart (cuMemsetD2D16).");
PyDoc_STRVAR(memset_d2d32_doc, "memset_d2d32(dest, pitch, data, width, height)\n--\n\n"
"Set `height` rows of `width` 32-bit words, `pitch` bytes apart (cuMemsetD2D32).");
PyDoc_STRVAR(memset_d2d8_async_doc,
"memset_d2d8_async(dest, pitch, data, width, height, stream=None)\n--\n\n"
"memset_d2d8() in order on `stream`.");
PyDoc_STRVAR(memset_d2d16_async_doc,
"memset_d2d16_async(dest, pitch, data, width, height, stream=None)\n--\n\n"
"memset_d2d16() in order on `stream`.");
PyDoc_STRVAR(memset_d2d32_async_doc,
"memset_d2d32_async(dest, pitch, data, width, height, stream=None)\n--\n\n"
"memset_d2d32() in order on `stream`.");

/* ------------------------------------------------------------- 1D copies */

enum { HTOD, DTOH, DTOD };

static const char *const copy_routine[3][2] = {
    {"cuMemcpyHtoD", "cuMemcpyHtoDAsync"},
    {"cuMemcpyDtoH", "cuMemcpyDtoHAsync"},
    {"cuMemcpyDtoD", "cuMemcpyDtoDAsync"},
};

static PyObject *
copy_1d(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int dir,
        int async, const char *fn)
{
    bc_State *st = bc_state_from_module(m);
    static const char *const names2[] = {"dest", "src", "stream"};
    static const char *const names3[] = {"dest", "src", "size", "stream"};
    PyObject *a[4];
    int nfixed = dir == DTOD ? 3 : 2;
    if (fast_args(fn, args, nargs, kwnames, dir == DTOD ? names3 : names2, nfixed,
                  nfixed + async, a) < 0)
        return NULL;
    PyObject *stream = async ? a[nfixed] : NULL;
    CUstream s = NULL;
    if (async && bc_stream_convert(st, stream, &s) < 0)
        return NULL;
    CUdeviceptr dptr = 0, sptr = 0;
    size_t dsize, ssize, n;
    host_buf hb = {.has_view = 0};
    PyObject *host = NULL;
    switch (dir) {
    case HTOD:
        if (bc_pointer_convert(st, a[0], &dptr, &dsize) < 0 || host_get(fn, "src", a[1], 0, &hb) < 0)
            return NULL;
        n = hb.len;
        host = a[1];
        if (n > dsize) {
            host_release(&hb);
            return too_large(fn, n, "destination device memory", dsize), NULL;
        }
        break;
    case DTOH:
        if (bc_pointer_convert(st, a[1], &sptr, &ssize) < 0 || host_get(fn, "dest", a[0], 1, &hb) < 0)
            return NULL;
        n = hb.len;
        host = a[0];
        if (n > ssize) {
            host_release(&hb);
            return too_large(fn, n, "source device memory", ssize), NULL;
        }
        break;
    default:
        if (bc_pointer_convert(st, a[0], &dptr, &dsize) < 0 ||
            bc_pointer_convert(st, a[1], &sptr, &ssize) < 0 || bc_arg_size(a[2], "size", &n) < 0)
            return NULL;
        if (n > dsize)
            return too_large(fn, n, "destination device memory", dsize), NULL;
        if (n > ssize)
            return too_large(fn, n, "source device memory", ssize), NULL;
    }
    CUresult rc = CUDA_SUCCESS;
    const char *routine = copy_routine[dir][async];
    if (n > 0 && !bc_drv_ready && bc_loader_load_driver(st) < 0) {
        host_release(&hb);
        return NULL;
    }
    if (n > 0) {
        /* the enum above and trace.h's directions agree: HtoD, DtoH, DtoD */
        bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_copy(st, dir, s, n));
        do {
            routine = copy_routine[dir][async];
            Py_BEGIN_ALLOW_THREADS
            /* The synchronous host copies of large pageable memory are staged
             * (src/staging.c decides which: bc_staged_try), on the legacy
             * default stream as the driver's own; the rest go as they are. */
            switch (dir * 2 + async) {
            case 0:
                if (!bc_staged_try(0, dptr, hb.buf, n, NULL, &rc, &routine))
                    rc = bc_drv.cuMemcpyHtoD(dptr, hb.buf, n);
                break;
            case 1: rc = bc_drv.cuMemcpyHtoDAsync(dptr, hb.buf, n, s); break;
            case 2:
                if (!bc_staged_try(1, sptr, hb.buf, n, NULL, &rc, &routine))
                    rc = bc_drv.cuMemcpyDtoH(hb.buf, sptr, n);
                break;
            case 3: rc = bc_drv.cuMemcpyDtoHAsync(hb.buf, sptr, n, s); break;
            case 4: rc = bc_drv.cuMemcpyDtoD(dptr, sptr, n); break;
            default: rc = bc_drv.cuMemcpyDtoDAsync(dptr, sptr, n, s); break;
            }
            Py_END_ALLOW_THREADS
        } while (want_retry(st, rc));
        BC_TRACE_END(st, tt, rc);
    }
    host_release(&hb);
    if (bc_check(st, rc, routine) < 0)
        return NULL;
    if (async && host != NULL && bc_stream_keep_alive(st, stream, host) < 0)
        return NULL;
    Py_RETURN_NONE;
}

#define BC_COPY(name, dir, async)                                                             \
    static PyObject *bc_##name(PyObject *m, PyObject *const *args, Py_ssize_t nargs,          \
                               PyObject *kwnames)                                             \
    {                                                                                         \
        return copy_1d(m, args, nargs, kwnames, dir, async, #name);                           \
    }
BC_COPY(memcpy_htod, HTOD, 0)
BC_COPY(memcpy_dtoh, DTOH, 0)
BC_COPY(memcpy_dtod, DTOD, 0)
BC_COPY(memcpy_htod_async, HTOD, 1)
BC_COPY(memcpy_dtoh_async, DTOH, 1)
BC_COPY(memcpy_dtod_async, DTOD, 1)
#undef BC_COPY

PyDoc_STRVAR(memcpy_htod_doc, "memcpy_htod(dest, src)\n--\n\n"
"Copy all of the contiguous host buffer `src` (a NumPy array, bytes, ...) to\n"
"device memory `dest`, and return when it has arrived.  Ordered after earlier\n"
"work on the default stream, as cuMemcpyHtoD.  Pageable `src` of 1 MiB or more\n"
"goes through pinned staging buffers with several threads (as GPUArray.to_gpu);\n"
"smaller copies, page-locked, registered or managed memory, and copies made\n"
"while another one holds the staging buffers go straight to cuMemcpyHtoD.\n"
"ValueError when it does not fit or `src` is not contiguous.");
PyDoc_STRVAR(memcpy_dtoh_doc, "memcpy_dtoh(dest, src)\n--\n\n"
"Fill the writable contiguous host buffer `dest` from device memory `src`, and\n"
"return when every byte is there.  Ordered after earlier work on the default\n"
"stream, as cuMemcpyDtoH; staged as memcpy_htod() for pageable `dest` of 1 MiB\n"
"or more, else cuMemcpyDtoH.  ValueError when `src` is known to be smaller, or\n"
"`dest` is read-only or not contiguous.");
PyDoc_STRVAR(memcpy_dtod_doc, "memcpy_dtod(dest, src, size)\n--\n\n"
"Copy `size` bytes between device memories (cuMemcpyDtoD).");
PyDoc_STRVAR(memcpy_htod_async_doc, "memcpy_htod_async(dest, src, stream=None)\n--\n\n"
"memcpy_htod() in order on `stream`; asynchronous for page-locked `src`.\n"
"A Stream keeps `src` alive until it is known complete; with stream=None\n"
"synchronize before dropping or changing `src`.");
PyDoc_STRVAR(memcpy_dtoh_async_doc, "memcpy_dtoh_async(dest, src, stream=None)\n--\n\n"
"memcpy_dtoh() in order on `stream`; asynchronous for page-locked `dest`.\n"
"A Stream keeps `dest` alive until it is known complete; with stream=None\n"
"synchronize before reading or dropping `dest`.");
PyDoc_STRVAR(memcpy_dtod_async_doc, "memcpy_dtod_async(dest, src, size, stream=None)\n--\n\n"
"memcpy_dtod() in order on `stream`.");

/* ------------------------------------------------------------- peer copies */

static int
context_arg(bc_State *st, PyObject *obj, PyObject *mem, const char *what, CUcontext *out)
{
    if (obj == NULL || obj == Py_None) {
        bc_Context *c = bc_pointer_context(st, mem);
        if (c != NULL) {
            if (bc_context_check_alive(st, c, what) < 0)
                return -1;
            *out = c->handle;
            return 0;
        }
        c = bc_context_current(st);
        if (c == NULL)
            return -1;
        *out = c->handle;
        Py_DECREF(c);
        return 0;
    }
    if (Py_TYPE(obj) != (PyTypeObject *)st->ContextType) {
        PyErr_Format(PyExc_TypeError, "%s must be a Context or None, not %.100s", what,
                     Py_TYPE(obj)->tp_name);
        return -1;
    }
    if (bc_context_check_alive(st, (bc_Context *)obj, what) < 0)
        return -1;
    *out = ((bc_Context *)obj)->handle;
    return 0;
}

static PyObject *
copy_peer(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int async)
{
    bc_State *st = bc_state_from_module(m);
    const char *fn = async ? "memcpy_peer_async" : "memcpy_peer";
    static const char *const names[] = {"dest", "src", "size", "dest_context", "src_context",
                                        "stream"};
    PyObject *a[6];
    if (fast_args(fn, args, nargs, kwnames, names, 3, async ? 6 : 5, a) < 0)
        return NULL;
    CUdeviceptr d, s;
    size_t dsize, ssize, n;
    CUcontext dc, sc;
    CUstream hs = NULL;
    BC_REQUIRE_DRIVER(st, NULL);
    if (bc_pointer_convert(st, a[0], &d, &dsize) < 0 || bc_pointer_convert(st, a[1], &s, &ssize) < 0 ||
        bc_arg_size(a[2], "size", &n) < 0)
        return NULL;
    if (n > dsize)
        return too_large(fn, n, "destination device memory", dsize), NULL;
    if (n > ssize)
        return too_large(fn, n, "source device memory", ssize), NULL;
    if (context_arg(st, a[3], a[0], "dest_context", &dc) < 0 ||
        context_arg(st, a[4], a[1], "src_context", &sc) < 0 ||
        (async && bc_stream_convert(st, a[5], &hs) < 0))
        return NULL;
    if (n == 0)
        Py_RETURN_NONE;
    /* the driver wants some context current, as any copy (the default one if none) */
    if (bc_context_require(st) < 0)
        return NULL;
    CUresult rc;
    bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_copy(st, BC_TRACE_PEER, hs, n));
    Py_BEGIN_ALLOW_THREADS
    rc = async ? bc_drv.cuMemcpyPeerAsync(d, dc, s, sc, n, hs) : bc_drv.cuMemcpyPeer(d, dc, s, sc, n);
    Py_END_ALLOW_THREADS
    BC_TRACE_END(st, tt, rc);
    if (bc_check(st, rc, async ? "cuMemcpyPeerAsync" : "cuMemcpyPeer") < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *
bc_memcpy_peer(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return copy_peer(m, args, nargs, kwnames, 0);
}

static PyObject *
bc_memcpy_peer_async(PyObject *m, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    return copy_peer(m, args, nargs, kwnames, 1);
}

PyDoc_STRVAR(memcpy_peer_doc,
"memcpy_peer(dest, src, size, dest_context=None, src_context=None)\n--\n\n"
"Copy `size` bytes between device memories of two contexts (cuMemcpyPeer).\n"
"A context left None is the allocation's own, else the current one.");
PyDoc_STRVAR(memcpy_peer_async_doc,
"memcpy_peer_async(dest, src, size, dest_context=None, src_context=None, stream=None)\n--\n\n"
"memcpy_peer() in order on `stream` (cuMemcpyPeerAsync).");

/* ------------------------------------------------- Memcpy2D / 3D / 3DPeer */

enum { KIND_2D, KIND_3D, KIND_PEER };

typedef struct {
    PyObject *obj;  /* what the end points into, kept alive */
    Py_buffer view; /* host ends: held so the memory cannot move */
    int has_view;
    size_t size;    /* bytes known to be addressable, SIZE_MAX if unknown */
    CUDA_ARRAY3D_DESCRIPTOR desc; /* array ends */
    PyObject *ctx;  /* Memcpy3DPeer: the Context set for this end */
} copy_end;

typedef struct {
    PyObject_HEAD
    int kind; /* KIND_*; -1: a subclass's descriptor before the base's __init__ */
    CUDA_MEMCPY3D_PEER p;
    copy_end src, dst;
    PyObject *dict;        /* instance attributes (PyCUDA's objects take them) */
    PyObject *weakreflist;
} bc_Memcpy;

static void
end_clear(copy_end *e)
{
    if (e->has_view) {
        e->has_view = 0;
        PyBuffer_Release(&e->view);
    }
    Py_CLEAR(e->obj);
}

static const char *const kind_names[] = {"Memcpy2D", "Memcpy3D", "Memcpy3DPeer"};

/* The kind of copy a type (ours or a subclass) makes. */
static int
kind_of_type(bc_State *st, PyTypeObject *tp)
{
    if (PyType_IsSubtype(tp, (PyTypeObject *)st->Memcpy2DType))
        return KIND_2D;
    if (PyType_IsSubtype(tp, (PyTypeObject *)st->Memcpy3DType))
        return KIND_3D;
    return KIND_PEER;
}

/* Whether tp is Memcpy2D, Memcpy3D or Memcpy3DPeer itself (not a subclass). */
static int
is_base_type(bc_State *st, PyTypeObject *tp)
{
    return tp == (PyTypeObject *)st->Memcpy2DType || tp == (PyTypeObject *)st->Memcpy3DType ||
           tp == (PyTypeObject *)st->Memcpy3DPeerType;
}

static int
no_arguments(PyObject *args, PyObject *kwargs, const char *what)
{
    if ((args && PyTuple_GET_SIZE(args)) || (kwargs && PyDict_GET_SIZE(kwargs))) {
        PyErr_Format(PyExc_TypeError, "%s takes no arguments", what);
        return -1;
    }
    return 0;
}

/* Memcpy2D() and the others are ready from __new__.  A subclass (PyCUDA's
 * classes are built in __init__, so its own __init__ may take arguments) gets an
 * unset descriptor from __new__, whatever the arguments, and the base's
 * __init__ sets it. */
static PyObject *
memcpy_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of_type(type);
    if (st == NULL)
        return NULL;
    int exact = is_base_type(st, type);
    if (exact && no_arguments(args, kwargs, "this copy descriptor") < 0)
        return NULL;
    /* tp_alloc: zeroed (a subclass's __slots__ and __dict__ too) and tracked */
    bc_Memcpy *self = (bc_Memcpy *)type->tp_alloc(type, 0);
    if (self != NULL)
        self->kind = exact ? kind_of_type(st, type) : -1;
    return (PyObject *)self;
}

static int
memcpy_init(PyObject *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of(self);
    if (is_base_type(st, Py_TYPE(self)))
        return 0; /* set by __new__ */
    bc_Memcpy *c = (bc_Memcpy *)self;
    int kind = kind_of_type(st, Py_TYPE(self));
    if (c->kind >= 0) {
        PyErr_Format(PyExc_TypeError, "%s.__init__() called twice on this %.100s",
                     kind_names[kind], Py_TYPE(self)->tp_name);
        return -1;
    }
    char what[48];
    snprintf(what, sizeof what, "%s.__init__()", kind_names[kind]);
    if (no_arguments(args, kwargs, what) < 0)
        return -1;
    c->kind = kind;
    return 0;
}

/* 0, or -1 with LogicError for a subclass's descriptor whose __init__ never
 * called the base's. */
static int
memcpy_ready(bc_Memcpy *self)
{
    if (self->kind >= 0)
        return 0;
    bc_State *st = bc_state_of((PyObject *)self);
    return bc_error_logic(st, "this %.100s was not initialised: its __init__ must call "
                              "%s.__init__(self)", Py_TYPE(self)->tp_name,
                          kind_names[kind_of_type(st, Py_TYPE(self))]);
}

static int
memcpy_traverse(bc_Memcpy *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->dict);
    Py_VISIT(self->src.obj);
    Py_VISIT(self->dst.obj);
    Py_VISIT(self->src.ctx);
    Py_VISIT(self->dst.ctx);
    return 0;
}

static int
memcpy_clear(bc_Memcpy *self)
{
    Py_CLEAR(self->dict);
    end_clear(&self->src);
    end_clear(&self->dst);
    Py_CLEAR(self->src.ctx);
    Py_CLEAR(self->dst.ctx);
    return 0;
}

static void
memcpy_dealloc(bc_Memcpy *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL)
        PyObject_ClearWeakRefs((PyObject *)self);
    memcpy_clear(self);
    Py_CLEAR(self->dict);
    tp->tp_free(self);
    Py_DECREF(tp);
}

/* Field pointers of one end inside the CUDA_MEMCPY3D_PEER. */
typedef struct {
    CUmemorytype *type;
    const void **host;
    CUdeviceptr *device;
    CUarray *array;
} end_fields;

static end_fields
fields_of(bc_Memcpy *self, int dst)
{
    end_fields f;
    if (dst) {
        f.type = &self->p.dstMemoryType;
        f.host = (const void **)&self->p.dstHost;
        f.device = &self->p.dstDevice;
        f.array = &self->p.dstArray;
    }
    else {
        f.type = &self->p.srcMemoryType;
        f.host = &self->p.srcHost;
        f.device = &self->p.srcDevice;
        f.array = &self->p.srcArray;
    }
    return f;
}

static PyObject *
set_host(bc_Memcpy *self, PyObject *obj, int dst)
{
    copy_end *e = dst ? &self->dst : &self->src;
    host_buf hb;
    const char *fn = dst ? "set_dst_host" : "set_src_host";
    if (memcpy_ready(self) < 0)
        return NULL;
    if (PyArray_Check(obj)) {
        /* take a real buffer even for arrays: it pins the memory while set */
        if (host_get(fn, "the buffer", obj, dst, &hb) < 0)
            return NULL;
    }
    if (!PyObject_CheckBuffer(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s(): expected host memory (a NumPy array or another object with the "
                     "buffer protocol), not %.100s",
                     fn, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view,
                           PyBUF_ANY_CONTIGUOUS | PyBUF_FORMAT | (dst ? PyBUF_WRITABLE : 0)) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s(): the buffer is %s", fn,
                     dst ? "not contiguous and writable" : "not contiguous");
        return NULL;
    }
    if (bc_arg_plain_host(obj, &view, fn, "the buffer") < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    end_clear(e);
    e->view = view;
    e->has_view = 1;
    e->obj = Py_NewRef(obj);
    e->size = (size_t)view.len;
    end_fields f = fields_of(self, dst);
    *f.type = CU_MEMORYTYPE_HOST;
    *f.host = view.buf;
    *f.device = 0;
    *f.array = NULL;
    Py_RETURN_NONE;
}

static PyObject *
set_device(bc_Memcpy *self, PyObject *obj, int dst, CUmemorytype type)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (memcpy_ready(self) < 0)
        return NULL;
    CUdeviceptr ptr;
    size_t size;
    if (bc_pointer_convert(st, obj, &ptr, &size) < 0)
        return NULL;
    copy_end *e = dst ? &self->dst : &self->src;
    end_clear(e);
    e->obj = Py_NewRef(obj);
    e->size = size;
    end_fields f = fields_of(self, dst);
    *f.type = type;
    *f.host = NULL;
    *f.device = ptr;
    *f.array = NULL;
    Py_RETURN_NONE;
}

static PyObject *
set_array(bc_Memcpy *self, PyObject *obj, int dst)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (memcpy_ready(self) < 0)
        return NULL;
    if (!bc_array_convert) {
        PyErr_SetString(PyExc_NotImplementedError, "CUDA arrays are not available in this build");
        return NULL;
    }
    bc_Array *a = bc_array_convert(st, obj);
    if (a == NULL)
        return NULL;
    copy_end *e = dst ? &self->dst : &self->src;
    end_clear(e);
    e->obj = Py_NewRef(obj);
    e->size = SIZE_MAX;
    e->desc = a->desc;
    end_fields f = fields_of(self, dst);
    *f.type = CU_MEMORYTYPE_ARRAY;
    *f.host = NULL;
    *f.device = 0;
    *f.array = a->handle;
    Py_RETURN_NONE;
}

static PyObject *
m_set_src_host(bc_Memcpy *self, PyObject *o) { return set_host(self, o, 0); }
static PyObject *
m_set_dst_host(bc_Memcpy *self, PyObject *o) { return set_host(self, o, 1); }
static PyObject *
m_set_src_device(bc_Memcpy *self, PyObject *o) { return set_device(self, o, 0, CU_MEMORYTYPE_DEVICE); }
static PyObject *
m_set_dst_device(bc_Memcpy *self, PyObject *o) { return set_device(self, o, 1, CU_MEMORYTYPE_DEVICE); }
static PyObject *
m_set_src_unified(bc_Memcpy *self, PyObject *o) { return set_device(self, o, 0, CU_MEMORYTYPE_UNIFIED); }
static PyObject *
m_set_dst_unified(bc_Memcpy *self, PyObject *o) { return set_device(self, o, 1, CU_MEMORYTYPE_UNIFIED); }
static PyObject *
m_set_src_array(bc_Memcpy *self, PyObject *o) { return set_array(self, o, 0); }
static PyObject *
m_set_dst_array(bc_Memcpy *self, PyObject *o) { return set_array(self, o, 1); }

static PyObject *
set_context(bc_Memcpy *self, PyObject *obj, int dst)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (memcpy_ready(self) < 0)
        return NULL;
    if (Py_TYPE(obj) != (PyTypeObject *)st->ContextType) {
        PyErr_Format(PyExc_TypeError, "expected a Context, not %.100s", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    if (bc_context_check_alive(st, (bc_Context *)obj, "this Context") < 0)
        return NULL;
    copy_end *e = dst ? &self->dst : &self->src;
    Py_XSETREF(e->ctx, Py_NewRef(obj));
    if (dst)
        self->p.dstContext = ((bc_Context *)obj)->handle;
    else
        self->p.srcContext = ((bc_Context *)obj)->handle;
    Py_RETURN_NONE;
}

static PyObject *
m_set_src_context(bc_Memcpy *self, PyObject *o) { return set_context(self, o, 0); }
static PyObject *
m_set_dst_context(bc_Memcpy *self, PyObject *o) { return set_context(self, o, 1); }

/* Bytes of one array element, 0 when the format is not a plain one. */
static size_t
format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    default:
        return 0;
    }
}

/* Check that the region [x, x+w) x [y, y+h) x [z, z+d) of one end lies inside
 * what is known about it. */
static int
check_end(const char *fn, const char *side, const copy_end *e, CUmemorytype type, size_t x,
          size_t y, size_t z, size_t pitch, size_t slice_h, size_t w, size_t h, size_t d)
{
    if (type == 0) {
        PyErr_Format(PyExc_ValueError, "%s: no %s set (call set_%s_host, set_%s_device or "
                                       "set_%s_array first)", fn, side, side, side, side);
        return -1;
    }
    if (type == CU_MEMORYTYPE_ARRAY) {
        size_t elem = format_bytes(e->desc.Format) * e->desc.NumChannels;
        size_t rows = e->desc.Height ? e->desc.Height : 1;
        size_t slices = e->desc.Depth ? e->desc.Depth : 1;
        if (elem && (x > e->desc.Width * elem || w > e->desc.Width * elem - x)) {
            PyErr_Format(PyExc_ValueError,
                         "%s: %s_x_in_bytes + width_in_bytes = %zu exceeds the array's row of "
                         "%zu bytes", fn, side, x + w, e->desc.Width * elem);
            return -1;
        }
        if (y > rows || h > rows - y) {
            PyErr_Format(PyExc_ValueError, "%s: %s_y + height = %zu exceeds the array's %zu rows",
                         fn, side, y + h, rows);
            return -1;
        }
        if (z > slices || d > slices - z) {
            PyErr_Format(PyExc_ValueError, "%s: %s_z + depth = %zu exceeds the array's depth %zu",
                         fn, side, z + d, slices);
            return -1;
        }
        return 0;
    }
    if ((h > 1 || d > 1) && pitch < w) {
        PyErr_Format(PyExc_ValueError, "%s: %s_pitch (%zu) is less than width_in_bytes (%zu)", fn,
                     side, pitch, w);
        return -1;
    }
    if (d > 1 && slice_h < h) {
        PyErr_Format(PyExc_ValueError, "%s: %s_height (%zu) is less than height (%zu)", fn, side,
                     slice_h, h);
        return -1;
    }
    if (e->size == SIZE_MAX)
        return 0;
    size_t rows, end;
    if (__builtin_mul_overflow(z + d - 1, slice_h, &rows) ||
        __builtin_add_overflow(rows, y + h - 1, &rows) ||
        __builtin_mul_overflow(rows, pitch, &end) || __builtin_add_overflow(end, x, &end) ||
        __builtin_add_overflow(end, w, &end) || end > e->size) {
        PyErr_Format(PyExc_ValueError, "%s: the copy reaches past the end of the %s (%zu bytes)",
                     fn, side[0] == 's' ? "source" : "destination", e->size);
        return -1;
    }
    return 0;
}

static int
memcpy_check(bc_Memcpy *self, const char *fn)
{
    const CUDA_MEMCPY3D_PEER *p = &self->p;
    int three = self->kind != KIND_2D;
    size_t d = three ? p->Depth : 1;
    if (p->WidthInBytes == 0 || p->Height == 0 || d == 0)
        return 0;
    if (check_end(fn, "src", &self->src, p->srcMemoryType, p->srcXInBytes, p->srcY,
                  three ? p->srcZ : 0, p->srcPitch, three ? p->srcHeight : p->Height,
                  p->WidthInBytes, p->Height, d) < 0 ||
        check_end(fn, "dst", &self->dst, p->dstMemoryType, p->dstXInBytes, p->dstY,
                  three ? p->dstZ : 0, p->dstPitch, three ? p->dstHeight : p->Height,
                  p->WidthInBytes, p->Height, d) < 0)
        return -1;
    return 0;
}

/* For trace(): the bytes a 2D/3D copy moves, and its direction by memory types. */
static unsigned long long
copy_bytes(const CUDA_MEMCPY3D_PEER *p)
{
    unsigned long long h = p->Height ? p->Height : 1, d = p->Depth ? p->Depth : 1;
    return (unsigned long long)p->WidthInBytes * h * d;
}

static int
copy_direction(const CUDA_MEMCPY3D_PEER *p, int kind)
{
    if (kind == KIND_PEER)
        return BC_TRACE_PEER;
    int src = p->srcMemoryType, dst = p->dstMemoryType;
    int sh = src == CU_MEMORYTYPE_HOST, dh = dst == CU_MEMORYTYPE_HOST;
    int sa = src == CU_MEMORYTYPE_ARRAY, da = dst == CU_MEMORYTYPE_ARRAY;
    if (sh && !dh)
        return da ? BC_TRACE_HTOA : BC_TRACE_HTOD;
    if (dh && !sh)
        return sa ? BC_TRACE_ATOH : BC_TRACE_DTOH;
    if (!sh && !dh)
        return sa && da ? BC_TRACE_ATOA : sa ? BC_TRACE_ATOD : da ? BC_TRACE_DTOA : BC_TRACE_DTOD;
    return kind == KIND_2D ? BC_TRACE_2D : BC_TRACE_3D;
}

static void
fill_2d(const CUDA_MEMCPY3D_PEER *p, CUDA_MEMCPY2D *c)
{
    memset(c, 0, sizeof *c);
    c->srcXInBytes = p->srcXInBytes;
    c->srcY = p->srcY;
    c->srcMemoryType = p->srcMemoryType;
    c->srcHost = p->srcHost;
    c->srcDevice = p->srcDevice;
    c->srcArray = p->srcArray;
    c->srcPitch = p->srcPitch;
    c->dstXInBytes = p->dstXInBytes;
    c->dstY = p->dstY;
    c->dstMemoryType = p->dstMemoryType;
    c->dstHost = p->dstHost;
    c->dstDevice = p->dstDevice;
    c->dstArray = p->dstArray;
    c->dstPitch = p->dstPitch;
    c->WidthInBytes = p->WidthInBytes;
    c->Height = p->Height;
}

static void
fill_3d(const CUDA_MEMCPY3D_PEER *p, CUDA_MEMCPY3D *c)
{
    memset(c, 0, sizeof *c);
    c->srcXInBytes = p->srcXInBytes;
    c->srcY = p->srcY;
    c->srcZ = p->srcZ;
    c->srcLOD = p->srcLOD;
    c->srcMemoryType = p->srcMemoryType;
    c->srcHost = p->srcHost;
    c->srcDevice = p->srcDevice;
    c->srcArray = p->srcArray;
    c->srcPitch = p->srcPitch;
    c->srcHeight = p->srcHeight;
    c->dstXInBytes = p->dstXInBytes;
    c->dstY = p->dstY;
    c->dstZ = p->dstZ;
    c->dstLOD = p->dstLOD;
    c->dstMemoryType = p->dstMemoryType;
    c->dstHost = p->dstHost;
    c->dstDevice = p->dstDevice;
    c->dstArray = p->dstArray;
    c->dstPitch = p->dstPitch;
    c->dstHeight = p->dstHeight;
    c->WidthInBytes = p->WidthInBytes;
    c->Height = p->Height;
    c->Depth = p->Depth;
}

static PyObject *
memcpy_call(bc_Memcpy *self, PyObject *args, PyObject *kwargs)
{
    bc_State *st = bc_state_of((PyObject *)self);
    if (memcpy_ready(self) < 0)
        return NULL;
    const char *fn = kind_names[self->kind];
    PyObject *first = NULL, *oaligned = NULL, *stream = NULL;
    static char *kwlist2[] = {"stream_or_aligned", "aligned", "stream", NULL};
    static char *kwlist3[] = {"stream", NULL};
    if (self->kind == KIND_2D) {
        if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O$OO", kwlist2, &first, &oaligned, &stream))
            return NULL;
        if (first != NULL && PyBool_Check(first)) {
            if (oaligned != NULL) {
                PyErr_SetString(PyExc_TypeError, "Memcpy2D(): aligned given twice");
                return NULL;
            }
            oaligned = first;
        }
        else if (first != NULL && first != Py_None) {
            if (stream != NULL) {
                PyErr_SetString(PyExc_TypeError, "Memcpy2D(): stream given twice");
                return NULL;
            }
            stream = first;
        }
    }
    else if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O", kwlist3, &stream))
        return NULL;
    int aligned = 0;
    if (oaligned != NULL && (aligned = PyObject_IsTrue(oaligned)) < 0)
        return NULL;
    int async = stream != NULL && stream != Py_None;
    CUstream s = NULL;
    if (async && bc_stream_convert(st, stream, &s) < 0)
        return NULL;
    if (memcpy_check(self, fn) < 0)
        return NULL;
    BC_REQUIRE_DRIVER(st, NULL);
    CUDA_MEMCPY3D_PEER peer = self->p;
    if (self->kind == KIND_PEER) {
        if (peer.srcContext == NULL &&
            context_arg(st, NULL, self->src.obj ? self->src.obj : Py_None, "src context",
                        &peer.srcContext) < 0)
            return NULL;
        if (peer.dstContext == NULL &&
            context_arg(st, NULL, self->dst.obj ? self->dst.obj : Py_None, "dst context",
                        &peer.dstContext) < 0)
            return NULL;
    }
    else if (bc_context_require(st) < 0)
        return NULL;
    CUresult rc;
    const char *routine;
    bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_copy(st, copy_direction(&peer, self->kind), s,
                                                       copy_bytes(&peer)));
    if (self->kind == KIND_2D) {
        CUDA_MEMCPY2D c;
        fill_2d(&peer, &c);
        routine = async ? "cuMemcpy2DAsync" : aligned ? "cuMemcpy2D" : "cuMemcpy2DUnaligned";
        Py_BEGIN_ALLOW_THREADS
        rc = async ? bc_drv.cuMemcpy2DAsync(&c, s)
                   : aligned ? bc_drv.cuMemcpy2D(&c) : bc_drv.cuMemcpy2DUnaligned(&c);
        Py_END_ALLOW_THREADS
    }
    else if (self->kind == KIND_3D) {
        CUDA_MEMCPY3D c;
        fill_3d(&peer, &c);
        routine = async ? "cuMemcpy3DAsync" : "cuMemcpy3D";
        Py_BEGIN_ALLOW_THREADS
        rc = async ? bc_drv.cuMemcpy3DAsync(&c, s) : bc_drv.cuMemcpy3D(&c);
        Py_END_ALLOW_THREADS
    }
    else {
        routine = async ? "cuMemcpy3DPeerAsync" : "cuMemcpy3DPeer";
        Py_BEGIN_ALLOW_THREADS
        rc = async ? bc_drv.cuMemcpy3DPeerAsync(&peer, s) : bc_drv.cuMemcpy3DPeer(&peer);
        Py_END_ALLOW_THREADS
    }
    BC_TRACE_END(st, tt, rc);
    if (bc_check(st, rc, routine) < 0)
        return NULL;
    if (async) {
        if (self->src.obj && bc_stream_keep_alive(st, stream, self->src.obj) < 0)
            return NULL;
        if (self->dst.obj && bc_stream_keep_alive(st, stream, self->dst.obj) < 0)
            return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
get_size_field(bc_Memcpy *self, void *closure)
{
    if (memcpy_ready(self) < 0)
        return NULL;
    return PyLong_FromSize_t(*(size_t *)((char *)self + (intptr_t)closure));
}

static int
set_size_field(bc_Memcpy *self, PyObject *value, void *closure)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "copy fields cannot be deleted");
        return -1;
    }
    if (memcpy_ready(self) < 0)
        return -1;
    size_t v;
    if (bc_arg_size(value, "copy field", &v) < 0)
        return -1;
    *(size_t *)((char *)self + (intptr_t)closure) = v;
    return 0;
}

static PyObject *
get_type_field(bc_Memcpy *self, void *closure)
{
    if (memcpy_ready(self) < 0)
        return NULL;
    CUmemorytype t = *(CUmemorytype *)((char *)self + (intptr_t)closure);
    if (t == 0)
        Py_RETURN_NONE;
    return PyLong_FromLong((long)t);
}

/* src_memory_type / dst_memory_type = t (PyCUDA's fields are plain): the end's own
 * type again, or DEVICE <-> UNIFIED over a device pointer (the same field of the
 * descriptor).  Any other change would leave the descriptor naming memory that was
 * never set: ValueError pointing at set_src_* / set_dst_*. */
static int
set_type_field(bc_Memcpy *self, PyObject *value, void *closure)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "copy fields cannot be deleted");
        return -1;
    }
    if (memcpy_ready(self) < 0)
        return -1;
    int dst = (intptr_t)closure ==
              (intptr_t)(offsetof(bc_Memcpy, p) + offsetof(CUDA_MEMCPY3D_PEER, dstMemoryType));
    const char *end = dst ? "dst" : "src";
    long t = PyLong_AsLong(value);
    if (t == -1 && PyErr_Occurred())
        return -1;
    end_fields f = fields_of(self, dst);
    CUmemorytype now = *f.type;
    if ((long)now == t)
        return 0;
    if ((now == CU_MEMORYTYPE_DEVICE || now == CU_MEMORYTYPE_UNIFIED) &&
        (t == CU_MEMORYTYPE_DEVICE || t == CU_MEMORYTYPE_UNIFIED)) {
        *f.type = (CUmemorytype)t;
        return 0;
    }
    PyErr_Format(PyExc_ValueError,
                 "%s_memory_type: this end is %s; it can be switched between DEVICE and "
                 "UNIFIED only (set the end with set_%s_host/device/array/unified, which "
                 "set the memory type too)",
                 end, now == 0 ? "not set" : now == CU_MEMORYTYPE_HOST ? "host memory"
                      : now == CU_MEMORYTYPE_ARRAY ? "an array" : "device memory", end);
    return -1;
}

/* src_device / dst_device: the end's device pointer (None for other ends); setting
 * it is set_src_device / set_dst_device. */
static PyObject *
get_device_field(bc_Memcpy *self, void *closure)
{
    if (memcpy_ready(self) < 0)
        return NULL;
    end_fields f = fields_of(self, closure != NULL);
    if (*f.type != CU_MEMORYTYPE_DEVICE && *f.type != CU_MEMORYTYPE_UNIFIED)
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong((unsigned long long)*f.device);
}

static int
set_device_field(bc_Memcpy *self, PyObject *value, void *closure)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "copy fields cannot be deleted");
        return -1;
    }
    PyObject *r = set_device(self, value, closure != NULL, CU_MEMORYTYPE_DEVICE);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

#define BC_OFF(field) ((void *)(intptr_t)(offsetof(bc_Memcpy, p) + offsetof(CUDA_MEMCPY3D_PEER, field)))
#define BC_FIELD(name, field, doc) {name, (getter)get_size_field, (setter)set_size_field, doc, BC_OFF(field)}
#define BC_COMMON_FIELDS                                                                      \
    BC_FIELD("src_x_in_bytes", srcXInBytes, "Source start column in bytes."),                 \
    BC_FIELD("src_y", srcY, "Source start row."),                                             \
    BC_FIELD("src_pitch", srcPitch, "Source row pitch in bytes (host/device ends)."),        \
    BC_FIELD("dst_x_in_bytes", dstXInBytes, "Destination start column in bytes."),            \
    BC_FIELD("dst_y", dstY, "Destination start row."),                                        \
    BC_FIELD("dst_pitch", dstPitch, "Destination row pitch in bytes (host/device ends)."),   \
    BC_FIELD("width_in_bytes", WidthInBytes, "Bytes per row to copy."),                       \
    BC_FIELD("height", Height, "Rows to copy."),                                              \
    {"src_memory_type", (getter)get_type_field, (setter)set_type_field,                       \
     "memorytype of the source end (DEVICE and UNIFIED interchange).", BC_OFF(srcMemoryType)}, \
    {"dst_memory_type", (getter)get_type_field, (setter)set_type_field,                       \
     "memorytype of the destination end (DEVICE and UNIFIED interchange).",                   \
     BC_OFF(dstMemoryType)},                                                                  \
    {"src_device", (getter)get_device_field, (setter)set_device_field,                        \
     "Device pointer of the source end (None for others); setting it is set_src_device.",     \
     NULL},                                                                                   \
    {"dst_device", (getter)get_device_field, (setter)set_device_field,                        \
     "Device pointer of the destination end (None for others); setting it is set_dst_device.",\
     (void *)1}

static PyGetSetDef memcpy2d_getset[] = {
    BC_DICT_GETSET,
    BC_COMMON_FIELDS,
    {NULL, NULL, NULL, NULL, NULL},
};

static PyGetSetDef memcpy3d_getset[] = {
    BC_DICT_GETSET,
    BC_COMMON_FIELDS,
    BC_FIELD("src_z", srcZ, "Source start slice."),
    BC_FIELD("src_lod", srcLOD, "Source mipmap level (must be 0)."),
    BC_FIELD("src_height", srcHeight, "Rows per slice of the source (host/device ends)."),
    BC_FIELD("dst_z", dstZ, "Destination start slice."),
    BC_FIELD("dst_lod", dstLOD, "Destination mipmap level (must be 0)."),
    BC_FIELD("dst_height", dstHeight, "Rows per slice of the destination (host/device ends)."),
    BC_FIELD("depth", Depth, "Slices to copy."),
    {NULL, NULL, NULL, NULL, NULL},
};
#undef BC_COMMON_FIELDS
#undef BC_FIELD

PyDoc_STRVAR(set_src_host_doc, "set_src_host($self, buffer)\n--\n\nCopy from a contiguous host buffer.");
PyDoc_STRVAR(set_dst_host_doc, "set_dst_host($self, buffer)\n--\n\nCopy into a writable contiguous host buffer.");
PyDoc_STRVAR(set_src_device_doc, "set_src_device($self, ptr)\n--\n\nCopy from device memory.");
PyDoc_STRVAR(set_dst_device_doc, "set_dst_device($self, ptr)\n--\n\nCopy into device memory.");
PyDoc_STRVAR(set_src_unified_doc, "set_src_unified($self, ptr)\n--\n\nCopy from a unified-address pointer.");
PyDoc_STRVAR(set_dst_unified_doc, "set_dst_unified($self, ptr)\n--\n\nCopy into a unified-address pointer.");
PyDoc_STRVAR(set_src_array_doc, "set_src_array($self, ary)\n--\n\nCopy from a CUDA Array.");
PyDoc_STRVAR(set_dst_array_doc, "set_dst_array($self, ary)\n--\n\nCopy into a CUDA Array.");
PyDoc_STRVAR(set_src_context_doc, "set_src_context($self, ctx)\n--\n\nThe Context of the source.");
PyDoc_STRVAR(set_dst_context_doc, "set_dst_context($self, ctx)\n--\n\nThe Context of the destination.");

#define BC_SETTERS                                                                            \
    {"set_src_host", (PyCFunction)m_set_src_host, METH_O, set_src_host_doc},                  \
    {"set_dst_host", (PyCFunction)m_set_dst_host, METH_O, set_dst_host_doc},                  \
    {"set_src_device", (PyCFunction)m_set_src_device, METH_O, set_src_device_doc},            \
    {"set_dst_device", (PyCFunction)m_set_dst_device, METH_O, set_dst_device_doc},            \
    {"set_src_unified", (PyCFunction)m_set_src_unified, METH_O, set_src_unified_doc},         \
    {"set_dst_unified", (PyCFunction)m_set_dst_unified, METH_O, set_dst_unified_doc},         \
    {"set_src_array", (PyCFunction)m_set_src_array, METH_O, set_src_array_doc},               \
    {"set_dst_array", (PyCFunction)m_set_dst_array, METH_O, set_dst_array_doc}

static PyMethodDef memcpy_methods[] = {
    BC_SETTERS,
    {NULL, NULL, 0, NULL},
};

static PyMethodDef memcpy_peer_methods[] = {
    BC_SETTERS,
    {"set_src_context", (PyCFunction)m_set_src_context, METH_O, set_src_context_doc},
    {"set_dst_context", (PyCFunction)m_set_dst_context, METH_O, set_dst_context_doc},
    {NULL, NULL, 0, NULL},
};
#undef BC_SETTERS

static PyMemberDef memcpy_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(bc_Memcpy, weakreflist), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(bc_Memcpy, dict), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyDoc_STRVAR(memcpy2d_doc,
"Memcpy2D()\n--\n\n"
"A 2D copy between host buffers, device memory and CUDA arrays: set the ends\n"
"with set_src_*/set_dst_*, the offsets, pitches, width_in_bytes and height,\n"
"then call it: c() or c(aligned=True) copies now (cuMemcpy2DUnaligned, or\n"
"cuMemcpy2D when aligned), c(stream) in order on a stream.  Regions are\n"
"checked against the known sizes of the ends (ValueError).");
PyDoc_STRVAR(memcpy3d_doc,
"Memcpy3D()\n--\n\n"
"A 3D copy (cuMemcpy3D): Memcpy2D's fields plus src_z, dst_z, src_height,\n"
"dst_height (rows per slice), src_lod, dst_lod and depth.  c() copies now,\n"
"c(stream) in order on a stream.");
PyDoc_STRVAR(memcpy3dpeer_doc,
"Memcpy3DPeer()\n--\n\n"
"A 3D copy between contexts (cuMemcpy3DPeer): Memcpy3D plus\n"
"set_src_context(ctx) and set_dst_context(ctx) (default: each end's own\n"
"context, else the current one).");

#define BC_MEMCPY_SLOTS(getset, methods, doc)                                                 \
    {Py_tp_new, memcpy_new},             {Py_tp_init, memcpy_init},                           \
    {Py_tp_dealloc, memcpy_dealloc},                                                          \
    {Py_tp_traverse, memcpy_traverse},   {Py_tp_clear, memcpy_clear},                         \
    {Py_tp_call, memcpy_call},           {Py_tp_getset, getset},                              \
    {Py_tp_methods, methods},            {Py_tp_members, memcpy_members},                     \
    {Py_tp_doc, (void *)doc},            {0, NULL}

static PyType_Slot memcpy2d_slots[] = {BC_MEMCPY_SLOTS(memcpy2d_getset, memcpy_methods, memcpy2d_doc)};
static PyType_Slot memcpy3d_slots[] = {BC_MEMCPY_SLOTS(memcpy3d_getset, memcpy_methods, memcpy3d_doc)};
static PyType_Slot memcpy3dpeer_slots[] = {
    BC_MEMCPY_SLOTS(memcpy3d_getset, memcpy_peer_methods, memcpy3dpeer_doc)};
#undef BC_MEMCPY_SLOTS

#define BC_MEMCPY_SPEC(cname, table)                                                          \
    {.name = "barecuda.driver." cname, .basicsize = sizeof(bc_Memcpy),                        \
     .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_GC |            \
              Py_TPFLAGS_BASETYPE,                                                            \
     .slots = table}

static PyType_Spec memcpy2d_spec = BC_MEMCPY_SPEC("Memcpy2D", memcpy2d_slots);
static PyType_Spec memcpy3d_spec = BC_MEMCPY_SPEC("Memcpy3D", memcpy3d_slots);
static PyType_Spec memcpy3dpeer_spec = BC_MEMCPY_SPEC("Memcpy3DPeer", memcpy3dpeer_slots);
#undef BC_MEMCPY_SPEC

/* ------------------------------------------------------------------ setup */

#define BC_FAST(name, doc) {#name, (PyCFunction)(void (*)(void))bc_##name, METH_FASTCALL | METH_KEYWORDS, doc}

static PyMethodDef memcpy_functions[] = {
    BC_FAST(memset_d8, memset_d8_doc),
    BC_FAST(memset_d16, memset_d16_doc),
    BC_FAST(memset_d32, memset_d32_doc),
    BC_FAST(memset_d8_async, memset_d8_async_doc),
    BC_FAST(memset_d16_async, memset_d16_async_doc),
    BC_FAST(memset_d32_async, memset_d32_async_doc),
    BC_FAST(memset_d2d8, memset_d2d8_doc),
    BC_FAST(memset_d2d16, memset_d2d16_doc),
    BC_FAST(memset_d2d32, memset_d2d32_doc),
    BC_FAST(memset_d2d8_async, memset_d2d8_async_doc),
    BC_FAST(memset_d2d16_async, memset_d2d16_async_doc),
    BC_FAST(memset_d2d32_async, memset_d2d32_async_doc),
    BC_FAST(memcpy_htod, memcpy_htod_doc),
    BC_FAST(memcpy_dtoh, memcpy_dtoh_doc),
    BC_FAST(memcpy_dtod, memcpy_dtod_doc),
    BC_FAST(memcpy_htod_async, memcpy_htod_async_doc),
    BC_FAST(memcpy_dtoh_async, memcpy_dtoh_async_doc),
    BC_FAST(memcpy_dtod_async, memcpy_dtod_async_doc),
    BC_FAST(memcpy_peer, memcpy_peer_doc),
    BC_FAST(memcpy_peer_async, memcpy_peer_async_doc),
    {NULL, NULL, 0, NULL},
};
#undef BC_FAST

int
bc_memcpy_setup(PyObject *m, bc_State *st)
{
    if (bc_add_type(m, &memcpy2d_spec, NULL, &st->Memcpy2DType) < 0 ||
        bc_add_type(m, &memcpy3d_spec, NULL, &st->Memcpy3DType) < 0 ||
        bc_add_type(m, &memcpy3dpeer_spec, NULL, &st->Memcpy3DPeerType) < 0)
        return -1;
    return PyModule_AddFunctions(m, memcpy_functions);
}
