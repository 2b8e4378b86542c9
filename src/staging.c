/* SPDX-License-Identifier: MIT */
/* Staged copies between pageable host memory and the device, for GPUArray's
 * to_gpu/set/get.
 *
 * The driver copies pageable memory through one internal bounce buffer with
 * one CPU thread, and a copy into freshly allocated memory also pays a page
 * fault per 4 KiB page on that thread: about 3 GB/s into a new NumPy array.
 * Here the transfer is split between up to MAX_WORKERS threads; each owns two
 * pinned buffers of CHUNK bytes and overlaps its host memcpy (where the page
 * faults happen, now in parallel) with the DMA of the other buffer.  The DMA
 * runs in order on the caller's stream, and the call returns when every byte
 * has arrived, as cuMemcpyHtoD/cuMemcpyDtoH do.
 *
 * The pinned buffers (MAX_WORKERS * 2 * CHUNK bytes, allocated portable on the
 * first large copy) are shared by the process behind a mutex: a copy that
 * finds them busy, a small copy, and host memory the driver already knows
 * (pinned, registered or managed) go straight to the driver. */
#include "barecuda/argparse.h"
#include "barecuda/context.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"
#include "barecuda/memory.h"
#include "barecuda/stream.h"
#include "barecuda/trace.h"

#include <pthread.h>
#include <string.h>

#define CHUNK ((size_t)2 << 20)
#define MAX_WORKERS 8
#define PER_WORKER ((size_t)8 << 20)   /* bytes that justify one more thread */
#define MIN_STAGED ((size_t)1 << 20)   /* smaller copies go to the driver as they are */

enum { TO_DEVICE, TO_HOST };

static pthread_mutex_t stage_lock = PTHREAD_MUTEX_INITIALIZER;
static char *stage_mem;    /* MAX_WORKERS * 2 * CHUNK pinned bytes, or NULL */

typedef struct {
    int dir;
    CUcontext ctx;
    CUstream stream;
    CUdeviceptr dev;
    char *host;
    size_t len;
    char *buf[2];
    CUresult rc;
} worker;

/* Move w->len bytes, two chunks in flight: the host side of one chunk overlaps
 * the DMA of the other.  Returns with no DMA pending on the worker's buffers. */
static void *
worker_run(void *arg)
{
    worker *w = arg;
    CUevent ev[2] = {NULL, NULL};
    int pending[2] = {0, 0};
    CUresult rc = bc_drv.cuCtxSetCurrent(w->ctx);
    for (int k = 0; k < 2 && rc == CUDA_SUCCESS; k++)
        rc = bc_drv.cuEventCreate(&ev[k], CU_EVENT_DISABLE_TIMING);
    size_t nchunks = (w->len + CHUNK - 1) / CHUNK;
#define CHUNK_LEN(i) ((i) + 1 < nchunks ? CHUNK : w->len - (i) * CHUNK)
    if (w->dir == TO_DEVICE) {
        for (size_t i = 0; i < nchunks && rc == CUDA_SUCCESS; i++) {
            int k = (int)(i & 1);
            if (pending[k]) {
                pending[k] = 0;
                if ((rc = bc_drv.cuEventSynchronize(ev[k])) != CUDA_SUCCESS)
                    break;
            }
            memcpy(w->buf[k], w->host + i * CHUNK, CHUNK_LEN(i));
            rc = bc_drv.cuMemcpyHtoDAsync(w->dev + i * CHUNK, w->buf[k], CHUNK_LEN(i), w->stream);
            if (rc == CUDA_SUCCESS && (rc = bc_drv.cuEventRecord(ev[k], w->stream)) == CUDA_SUCCESS)
                pending[k] = 1;
        }
    } else {
        /* chunk i+1 is requested before chunk i is copied out */
        for (size_t i = 0; i <= nchunks && rc == CUDA_SUCCESS; i++) {
            if (i < nchunks) {
                int k = (int)(i & 1);
                rc = bc_drv.cuMemcpyDtoHAsync(w->buf[k], w->dev + i * CHUNK, CHUNK_LEN(i), w->stream);
                if (rc == CUDA_SUCCESS && (rc = bc_drv.cuEventRecord(ev[k], w->stream)) == CUDA_SUCCESS)
                    pending[k] = 1;
            }
            if (i > 0 && rc == CUDA_SUCCESS) {
                int k = (int)((i - 1) & 1);
                pending[k] = 0;
                if ((rc = bc_drv.cuEventSynchronize(ev[k])) == CUDA_SUCCESS)
                    memcpy(w->host + (i - 1) * CHUNK, w->buf[k], CHUNK_LEN(i - 1));
            }
        }
    }
#undef CHUNK_LEN
    for (int k = 0; k < 2; k++) {
        if (pending[k])
            bc_drv.cuEventSynchronize(ev[k]); /* the buffers are reused: drain even after an error */
        if (ev[k] != NULL)
            bc_drv.cuEventDestroy(ev[k]);
    }
    w->rc = rc;
    return NULL;
}

/* Whether the driver already knows this host memory (pinned, registered,
 * managed): then it is copied directly, at full speed. */
static int
host_is_known(void *p)
{
    unsigned int type = 0;
    return bc_drv.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                        (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS;
}

/* The staging buffers, (re)allocated in the current context; stage_lock held.
 * A context destroyed since frees them with it: cuMemHostGetFlags tells. */
static CUresult
stage_buffers(void)
{
    unsigned int flags;
    if (stage_mem != NULL && bc_drv.cuMemHostGetFlags(&flags, stage_mem) == CUDA_SUCCESS)
        return CUDA_SUCCESS;
    void *p = NULL;
    CUresult rc = bc_drv.cuMemHostAlloc(&p, MAX_WORKERS * 2 * CHUNK, CU_MEMHOSTALLOC_PORTABLE);
    stage_mem = rc == CUDA_SUCCESS ? p : NULL;
    return rc;
}

static size_t
worker_count(size_t n)
{
    size_t t = n / PER_WORKER;
    return t < 1 ? 1 : t > MAX_WORKERS ? MAX_WORKERS : t;
}

/* The copy itself, GIL released.  *routine names the call that failed. */
static CUresult
staged_copy(int dir, CUdeviceptr dev, char *host, size_t n, CUstream s, const char **routine)
{
    int direct = n < MIN_STAGED || host_is_known(host) || pthread_mutex_trylock(&stage_lock) != 0;
    if (direct) {
        *routine = dir == TO_DEVICE ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync";
        CUresult rc = dir == TO_DEVICE ? bc_drv.cuMemcpyHtoDAsync(dev, host, n, s)
                                       : bc_drv.cuMemcpyDtoHAsync(host, dev, n, s);
        if (rc == CUDA_SUCCESS) {
            *routine = "cuStreamSynchronize";
            rc = bc_drv.cuStreamSynchronize(s);
        }
        return rc;
    }
    CUcontext ctx = NULL;
    CUresult rc = bc_drv.cuCtxGetCurrent(&ctx);
    *routine = "cuMemHostAlloc";
    if (rc == CUDA_SUCCESS)
        rc = stage_buffers();
    if (rc != CUDA_SUCCESS) {
        pthread_mutex_unlock(&stage_lock);
        return rc;
    }
    size_t nw = worker_count(n);
    size_t part = ((n + nw - 1) / nw + 4095) & ~(size_t)4095; /* whole pages per thread */
    worker w[MAX_WORKERS];
    pthread_t tid[MAX_WORKERS];
    int started[MAX_WORKERS] = {0};
    size_t used = 0, parts = 0;
    for (; parts < nw && used < n; parts++) {
        size_t len = n - used < part ? n - used : part;
        w[parts] = (worker){dir, ctx, s, dev + used, host + used, len,
                            {stage_mem + 2 * parts * CHUNK, stage_mem + (2 * parts + 1) * CHUNK},
                            CUDA_SUCCESS};
        used += len;
    }
    nw = parts;
    for (size_t i = 1; i < nw; i++)
        started[i] = pthread_create(&tid[i], NULL, worker_run, &w[i]) == 0;
    worker_run(&w[0]);
    for (size_t i = 1; i < nw; i++) {
        if (started[i])
            pthread_join(tid[i], NULL);
        else
            worker_run(&w[i]); /* no thread to be had: do its part here */
    }
    pthread_mutex_unlock(&stage_lock);
    bc_drv.cuCtxSetCurrent(ctx); /* the calling thread ran a worker: keep its context */
    *routine = dir == TO_DEVICE ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync";
    for (size_t i = 0; i < nw; i++)
        if (w[i].rc != CUDA_SUCCESS)
            return w[i].rc;
    return CUDA_SUCCESS;
}

static PyObject *
staged_entry(PyObject *m, PyObject *const *args, Py_ssize_t nargs, int dir, const char *fn)
{
    bc_State *st = bc_state_from_module(m);
    if (nargs < 2 || nargs > 3) {
        PyErr_Format(PyExc_TypeError, "%s() takes 2 or 3 arguments (%zd given)", fn, nargs);
        return NULL;
    }
    PyObject *dev_obj = dir == TO_DEVICE ? args[0] : args[1];
    PyObject *host_obj = dir == TO_DEVICE ? args[1] : args[0];
    CUdeviceptr dev;
    size_t dev_size;
    CUstream s = NULL;
    if (bc_pointer_convert(st, dev_obj, &dev, &dev_size) < 0 ||
        (nargs > 2 && bc_stream_convert(st, args[2], &s) < 0))
        return NULL;
    Py_buffer view;
    int flags = PyBUF_ANY_CONTIGUOUS | PyBUF_FORMAT | (dir == TO_HOST ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(host_obj, &view, flags) < 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s(): the host side must be a contiguous%s buffer, not %.100s",
                     fn, dir == TO_HOST ? ", writable" : "", Py_TYPE(host_obj)->tp_name);
        return NULL;
    }
    if (bc_arg_plain_host(host_obj, &view, fn, "the host side") < 0) {
        PyBuffer_Release(&view);
        return NULL;
    }
    size_t n = (size_t)view.len;
    PyObject *out = NULL;
    if (n > dev_size) {
        PyErr_Format(PyExc_ValueError, "%s(): copying %zu bytes, but the device memory has only %zu bytes",
                     fn, n, dev_size);
        goto done;
    }
    if (n == 0 || bc_context_require(st) < 0) {
        out = n == 0 ? Py_NewRef(Py_None) : NULL;
        goto done;
    }
    const char *routine = NULL;
    CUresult rc;
    bc_trace_tok tt = BC_TRACE_BEGIN(
        st, bc_trace_copy(st, dir == TO_DEVICE ? BC_TRACE_HTOD : BC_TRACE_DTOH, s, n));
    Py_BEGIN_ALLOW_THREADS
    rc = staged_copy(dir, dev, view.buf, n, s, &routine);
    Py_END_ALLOW_THREADS
    BC_TRACE_END(st, tt, rc);
    if (bc_check(st, rc, routine) == 0)
        out = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return out;
}

PyDoc_STRVAR(htod_staged_doc,
"_htod_staged(dest, src, stream=None)\n--\n\n"
"Copy the host buffer `src` to device memory `dest`, in order on `stream`, and\n"
"return when it has arrived.  Pageable memory of 1 MiB or more goes through\n"
"pinned buffers with several threads; other memory straight to the driver.");

static PyObject *
bc_htod_staged(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    return staged_entry(m, args, nargs, TO_DEVICE, "_htod_staged");
}

PyDoc_STRVAR(dtoh_staged_doc,
"_dtoh_staged(dest, src, stream=None)\n--\n\n"
"Copy device memory `src` into the writable host buffer `dest` (its length is\n"
"the byte count), in order on `stream`; returns when the data is there.  Staged\n"
"as _htod_staged, so the page faults of a new array are taken in parallel.");

static PyObject *
bc_dtoh_staged(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    return staged_entry(m, args, nargs, TO_HOST, "_dtoh_staged");
}

static PyMethodDef staging_methods[] = {
    {"_htod_staged", (PyCFunction)(void (*)(void))bc_htod_staged, METH_FASTCALL, htod_staged_doc},
    {"_dtoh_staged", (PyCFunction)(void (*)(void))bc_dtoh_staged, METH_FASTCALL, dtoh_staged_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_staging_setup(PyObject *m, bc_State *Py_UNUSED(st))
{
    return PyModule_AddFunctions(m, staging_methods);
}
