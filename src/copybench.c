/* SPDX-License-Identifier: MIT */
/* The C-loop copy floor: _bench_copy and _bench_peer_copy time cuMemcpy* in a
 * plain C loop (pinned and pageable host memory, device to device, peer), the
 * figure the benchmark (barecuda.bench.copies, .peer) sets the Python API's
 * copies against.  Private; not part of the public API. */
#include "barecuda/memory.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"

#include <stdlib.h>
#include <string.h>

enum { B_HTOD_PINNED, B_DTOH_PINNED, B_HTOD_PAGEABLE, B_DTOH_PAGEABLE, B_DTOD };

static CUresult
bench_one(int kind, CUdeviceptr d1, CUdeviceptr d2, void *h, size_t n)
{
    switch (kind) {
    case B_HTOD_PINNED:
    case B_HTOD_PAGEABLE:
        return bc_drv.cuMemcpyHtoD(d1, h, n);
    case B_DTOH_PINNED:
    case B_DTOH_PAGEABLE:
        return bc_drv.cuMemcpyDtoH(h, d1, n);
    default:
        return bc_drv.cuMemcpyDtoD(d2, d1, n);
    }
}

PyDoc_STRVAR(bench_copy_doc,
"_bench_copy(kind, nbytes, iterations)\n--\n\n"
"Private benchmark floor: seconds per copy of `nbytes` made by the bare driver\n"
"in a C loop (GIL released) with its own buffers.  kind: 'htod_pinned',\n"
"'dtoh_pinned', 'htod_pageable', 'dtoh_pageable' or 'dtod' (synchronized at\n"
"the end).");

static PyObject *
bc_bench_copy(PyObject *m, PyObject *args)
{
    bc_State *st = bc_state_from_module(m);
    const char *kname;
    Py_ssize_t nbytes, iters;
    if (!PyArg_ParseTuple(args, "snn:_bench_copy", &kname, &nbytes, &iters))
        return NULL;
    static const char *const kinds[] = {"htod_pinned", "dtoh_pinned", "htod_pageable",
                                        "dtoh_pageable", "dtod"};
    int kind = -1;
    for (int i = 0; i < 5; i++)
        if (strcmp(kname, kinds[i]) == 0)
            kind = i;
    if (kind < 0 || nbytes <= 0 || iters <= 0) {
        PyErr_Format(PyExc_ValueError, "_bench_copy(): bad kind %s or non-positive size/count",
                     kname);
        return NULL;
    }
    if (bc_context_require(st) < 0)
        return NULL;
    size_t n = (size_t)nbytes;
    CUdeviceptr d1 = 0, d2 = 0;
    void *h = NULL;
    int pinned = kind == B_HTOD_PINNED || kind == B_DTOH_PINNED;
    double t = 0;
    CUresult rc;
    const char *routine = "cuMemAlloc";
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuMemAlloc(&d1, n);
    if (rc == CUDA_SUCCESS && kind == B_DTOD)
        rc = bc_drv.cuMemAlloc(&d2, n);
    if (rc == CUDA_SUCCESS && kind != B_DTOD) {
        if (pinned) {
            routine = "cuMemHostAlloc";
            rc = bc_drv.cuMemHostAlloc(&h, n, 0);
        }
        else if ((h = malloc(n)) == NULL)
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        if (rc == CUDA_SUCCESS)
            memset(h, 1, n);
    }
    if (rc == CUDA_SUCCESS) {
        routine = "copy";
        for (int i = 0; i < 2 && rc == CUDA_SUCCESS; i++)
            rc = bench_one(kind, d1, d2, h, n);
        if (rc == CUDA_SUCCESS)
            rc = bc_drv.cuCtxSynchronize();
        double t0 = bc_monotonic_s();
        for (Py_ssize_t i = 0; i < iters && rc == CUDA_SUCCESS; i++)
            rc = bench_one(kind, d1, d2, h, n);
        if (rc == CUDA_SUCCESS)
            rc = bc_drv.cuCtxSynchronize();
        t = (bc_monotonic_s() - t0) / (double)iters;
    }
    if (h != NULL) {
        if (pinned)
            bc_drv.cuMemFreeHost(h);
        else
            free(h);
    }
    if (d1)
        bc_drv.cuMemFree(d1);
    if (d2)
        bc_drv.cuMemFree(d2);
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, routine) < 0)
        return NULL;
    return PyFloat_FromDouble(t);
}

PyDoc_STRVAR(bench_peer_copy_doc,
"_bench_peer_copy(dest_context, src_context, nbytes, iterations)\n--\n\n"
"Private benchmark floor: seconds per cuMemcpyPeer of `nbytes` from a buffer of\n"
"src_context to one of dest_context, in a C loop (GIL released) with its own\n"
"buffers, both contexts synchronized at the end.");

/* Allocate n bytes in ctx (pushed for the call); runs without the GIL. */
static CUresult
alloc_in(CUcontext ctx, CUdeviceptr *out, size_t n)
{
    CUresult rc = bc_drv.cuCtxPushCurrent(ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = bc_drv.cuMemAlloc(out, n);
    CUcontext popped;
    bc_drv.cuCtxPopCurrent(&popped);
    return rc;
}

static void
free_in(CUcontext ctx, CUdeviceptr p)
{
    if (p && bc_drv.cuCtxPushCurrent(ctx) == CUDA_SUCCESS) {
        bc_drv.cuMemFree(p);
        CUcontext popped;
        bc_drv.cuCtxPopCurrent(&popped);
    }
}

static CUresult
sync_in(CUcontext ctx)
{
    CUresult rc = bc_drv.cuCtxPushCurrent(ctx);
    if (rc != CUDA_SUCCESS)
        return rc;
    rc = bc_drv.cuCtxSynchronize();
    CUcontext popped;
    bc_drv.cuCtxPopCurrent(&popped);
    return rc;
}

static PyObject *
bc_bench_peer_copy(PyObject *m, PyObject *args)
{
    bc_State *st = bc_state_from_module(m);
    PyObject *dobj, *sobj;
    Py_ssize_t nbytes, iters;
    if (!PyArg_ParseTuple(args, "O!O!nn:_bench_peer_copy", st->ContextType, &dobj,
                          st->ContextType, &sobj, &nbytes, &iters))
        return NULL;
    if (nbytes <= 0 || iters <= 0)
        return PyErr_Format(PyExc_ValueError, "_bench_peer_copy(): non-positive size or count");
    if (bc_context_check_alive(st, (bc_Context *)dobj, "dest_context") < 0 ||
        bc_context_check_alive(st, (bc_Context *)sobj, "src_context") < 0)
        return NULL;
    CUcontext dc = ((bc_Context *)dobj)->handle, sc = ((bc_Context *)sobj)->handle;
    size_t n = (size_t)nbytes;
    CUdeviceptr d = 0, s = 0;
    double t = 0;
    CUresult rc;
    const char *routine = "cuMemAlloc";
    Py_BEGIN_ALLOW_THREADS
    rc = alloc_in(dc, &d, n);
    if (rc == CUDA_SUCCESS)
        rc = alloc_in(sc, &s, n);
    if (rc == CUDA_SUCCESS) {
        routine = "cuMemcpyPeer";
        for (int i = 0; i < 2 && rc == CUDA_SUCCESS; i++)
            rc = bc_drv.cuMemcpyPeer(d, dc, s, sc, n);
        if (rc == CUDA_SUCCESS && (rc = sync_in(dc)) == CUDA_SUCCESS)
            rc = sync_in(sc);
        double t0 = bc_monotonic_s();
        for (Py_ssize_t i = 0; i < iters && rc == CUDA_SUCCESS; i++)
            rc = bc_drv.cuMemcpyPeer(d, dc, s, sc, n);
        if (rc == CUDA_SUCCESS && (rc = sync_in(dc)) == CUDA_SUCCESS)
            rc = sync_in(sc);
        t = (bc_monotonic_s() - t0) / (double)iters;
    }
    free_in(dc, d);
    free_in(sc, s);
    Py_END_ALLOW_THREADS
    if (bc_check(st, rc, routine) < 0)
        return NULL;
    return PyFloat_FromDouble(t);
}

static PyMethodDef copybench_functions[] = {
    {"_bench_copy", bc_bench_copy, METH_VARARGS, bench_copy_doc},
    {"_bench_peer_copy", bc_bench_peer_copy, METH_VARARGS, bench_peer_copy_doc},
    {NULL, NULL, 0, NULL},
};

int
bc_copybench_setup(PyObject *m, bc_State *st)
{
    BC_UNUSED(st);
    return PyModule_AddFunctions(m, copybench_functions);
}
