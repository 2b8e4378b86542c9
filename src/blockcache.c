/* SPDX-License-Identifier: MIT */
/* The block cache: small stream-ordered allocations that a Context keeps after
 * they are freed, so the array layer's temporaries (the result of `a + b` on a
 * thousand elements) cost no driver call.
 *
 * Only memory allocated from the pool on the legacy default stream is cached:
 * a block freed there and handed out again on the same stream is ordered
 * behind every use of its previous owner, exactly as cuMemFreeAsync followed
 * by cuMemAllocAsync would be, and that stream never goes away.  The cache
 * lives in the Context (fixed slots, sizes up to BLOCK_MAX rounded to
 * BLOCK_ALIGN), is emptied into the pool when the context is detached or
 * collected, and on an out-of-memory error before the allocation is retried.
 *
 * Allocations the cache does not serve come from the Context's own stream-ordered
 * pool (cuMemPoolCreate, made at the first such allocation) whose release
 * threshold is UINT64_MAX: the device's default pool has threshold 0 and hands
 * its memory back to the system at every synchronize, so each large temporary
 * would be mapped again.  Keeping our own pool leaves the default pool's settings
 * (other libraries') untouched.  Where pools cannot be made, the default pool is
 * used as before.  On out-of-memory the cache is emptied and the pool trimmed
 * (then the context synchronized and the pool trimmed again) before giving up;
 * mem_alloc() does the same, so memory the array layer keeps never makes another
 * allocation fail.  The pool is destroyed when the context is let go, after its
 * caches are emptied; a detached primary context waits for its last allocation
 * first (src/context.c), and its pool then keeps nothing freed into it.
 *
 * The floors below hear of none of this by name: at module init this file
 * registers its hooks with src/context.c (emptying the cache, keeping nothing,
 * destroying the pool, Context.array_pool) and src/memory.c (a cached
 * allocation collected, mem_alloc() out of memory). */
#include "barecuda/blockcache.h"
#include "barecuda/argparse.h"
#include "barecuda/error.h"
#include "barecuda/loader.h"
#include "barecuda/trace.h"
#include "barecuda/memory.h"
#include "barecuda/stream.h"

#include <stdint.h>
#include <string.h>

#define BLOCK_ALIGN ((size_t)512)
#define BLOCK_MAX ((size_t)1 << 20)

size_t
bc_block_class(size_t nbytes)
{
    if (nbytes == 0 || nbytes > BLOCK_MAX)
        return 0;
    return (nbytes + BLOCK_ALIGN - 1) & ~(BLOCK_ALIGN - 1);
}

/* A cached block of size class `size` taken out of ctx's cache, or 0. */
static CUdeviceptr
block_take(bc_Context *ctx, size_t size)
{
    for (int i = ctx->nblocks - 1; i >= 0; i--) {
        if (ctx->blocks[i].size == size) {
            CUdeviceptr p = ctx->blocks[i].ptr;
            ctx->blocks[i] = ctx->blocks[--ctx->nblocks];
            return p;
        }
    }
    return 0;
}

int
bc_block_give(bc_Context *ctx, CUdeviceptr ptr, size_t nbytes)
{
    size_t size = bc_block_class(nbytes);
    if (size == 0 || ctx->nblocks >= BC_BLOCK_SLOTS || !bc_drv_ready || bc_forked_child)
        return 0;
    ctx->blocks[ctx->nblocks].ptr = ptr;
    ctx->blocks[ctx->nblocks].size = size;
    ctx->nblocks++;
    return 1;
}

void
bc_block_flush(bc_Context *ctx, int release)
{
    int n = ctx->nblocks;
    ctx->nblocks = 0;
    if (n == 0 || !release || ctx->let_go || !bc_drv_ready || bc_forked_child)
        return;
    int entered = bc_context_enter(ctx);
    if (entered < 0)
        return;
    for (int i = 0; i < n; i++)
        bc_drv.cuMemFreeAsync(ctx->blocks[i].ptr, NULL); /* in a destructor's path: no error to raise */
    bc_context_leave(entered);
}

/* Make ctx's pool (GIL held); on failure remember it and use the default pool. */
static void
pool_create(bc_Context *ctx)
{
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = (int)ctx->device;
    CUmemoryPool pool = NULL;
    if (bc_drv.cuMemPoolCreate(&pool, &props) != CUDA_SUCCESS || pool == NULL) {
        ctx->array_pool_failed = 1;
        return;
    }
    cuuint64_t keep = UINT64_MAX;
    if (bc_drv.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) != CUDA_SUCCESS) {
        bc_drv.cuMemPoolDestroy(pool);
        ctx->array_pool_failed = 1;
        return;
    }
    ctx->array_pool = pool;
}

/* One stream-ordered allocation of n bytes on s for ctx (current), from its pool
 * when it has one; *routine names the call for the error message. */
static CUresult
pool_alloc(bc_Context *ctx, CUdeviceptr *ptr, size_t n, CUstream s, const char **routine)
{
    if (ctx->array_pool == NULL && !ctx->array_pool_failed && !ctx->released)
        pool_create(ctx);
    if (ctx->array_pool != NULL) {
        *routine = "cuMemAllocFromPoolAsync";
        return bc_drv.cuMemAllocFromPoolAsync(ptr, n, ctx->array_pool, s);
    }
    *routine = "cuMemAllocAsync";
    return bc_drv.cuMemAllocAsync(ptr, n, s);
}

int
bc_array_pool_reclaim(bc_Context *ctx, int step)
{
    if (ctx->let_go || !bc_drv_ready || bc_forked_child)
        return 0;
    if (step == 0) {
        if (ctx->nblocks == 0 && ctx->array_pool == NULL)
            return 0;
        bc_block_flush(ctx, 1);
    } else {
        int entered = bc_context_enter(ctx);
        if (entered < 0)
            return 0;
        CUresult rc;
        Py_BEGIN_ALLOW_THREADS
        rc = bc_drv.cuCtxSynchronize();
        Py_END_ALLOW_THREADS
        bc_context_leave(entered);
        if (rc != CUDA_SUCCESS || ctx->let_go) /* a sticky error, or let go meanwhile */
            return 0;
    }
    if (ctx->array_pool != NULL)
        bc_drv.cuMemPoolTrimTo(ctx->array_pool, 0);
    return 1;
}

void
bc_array_pool_destroy(bc_Context *ctx)
{
    CUmemoryPool pool = ctx->array_pool;
    ctx->array_pool = NULL;
    if (pool == NULL || ctx->let_go || !bc_drv_ready || bc_forked_child)
        return; /* nothing to do, or the driver state is gone: leave it be */
    int entered = bc_context_enter(ctx);
    if (entered < 0)
        return;
    /* Destroyed only when no free into it is pending (the caller has freed what
     * it could: the kernel cache's arrays, the cached blocks), so the driver
     * finishes it now, not inside a later call.  A detached primary context
     * comes here only once the arrays made in it are freed (src/context.c); other
     * kinds' arrays kept past detach() keep it until their context is gone, as
     * their release is skipped.  A context whose synchronize fails (a sticky
     * error) keeps its pool.  In a destructor's path: no error to raise. */
    CUresult rc;
    Py_BEGIN_ALLOW_THREADS
    rc = bc_drv.cuCtxSynchronize();
    Py_END_ALLOW_THREADS
    if (rc == CUDA_SUCCESS)
        bc_drv.cuMemPoolDestroy(pool);
    bc_context_leave(entered);
}

void
bc_array_pool_keep_nothing(bc_Context *ctx)
{
    if (ctx->array_pool == NULL || ctx->let_go || !bc_drv_ready || bc_forked_child)
        return;
    cuuint64_t keep = 0;
    bc_drv.cuMemPoolSetAttribute(ctx->array_pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
    bc_drv.cuMemPoolTrimTo(ctx->array_pool, 0);
}

PyObject *
bc_array_pool_get(bc_State *st, bc_Context *ctx)
{
    if (ctx->array_pool == NULL || ctx->released)
        Py_RETURN_NONE;
    return bc_mempool_wrap(st, ctx->array_pool, ctx->device, (PyObject *)ctx);
}

PyObject *
bc_array_alloc_in(bc_State *st, bc_Context *ctx, size_t n, PyObject *stream, CUstream s)
{
    size_t size = stream == Py_None ? bc_block_class(n) : 0;
    CUdeviceptr ptr = size ? block_take(ctx, size) : 0;
    if (ptr == 0) {
        bc_trace_tok tt = BC_TRACE_BEGIN(st, bc_trace_host(st, BC_TRACE_ALLOC, "GPUArray", n));
        const char *routine;
        CUresult rc = pool_alloc(ctx, &ptr, size ? size : n, s, &routine);
        for (int step = 0; rc == CUDA_ERROR_OUT_OF_MEMORY && step < 2; step++) {
            if (!bc_array_pool_reclaim(ctx, step))
                break;
            rc = pool_alloc(ctx, &ptr, size ? size : n, s, &routine);
        }
        BC_TRACE_END(st, tt, rc);
        if (bc_check(st, rc, routine) < 0)
            return NULL;
    }
    PyObject *out = bc_allocation_new(st, ctx, ptr, n, BC_ALLOC_ASYNC, stream, s);
    if (out == NULL) {
        if (!(size && bc_block_give(ctx, ptr, n)))
            bc_drv.cuMemFreeAsync(ptr, s);
    } else {
        ((bc_DeviceAllocation *)out)->cached = size != 0;
    }
    return out;
}

PyDoc_STRVAR(array_alloc_doc,
"_array_alloc(nbytes, stream=None)\n--\n\n"
"Device memory for a GPUArray: a DeviceAllocation from the current context's\n"
"own stream-ordered pool (Context.array_pool; cuMemAllocFromPoolAsync) on\n"
"`stream`.  On the legacy default stream (None), allocations up to 1 MiB come\n"
"from and return to the current context's block cache.  MemoryError when the\n"
"device is out of memory even after the cache was emptied and the pool trimmed.");

static PyObject *
bc_array_alloc(PyObject *m, PyObject *const *args, Py_ssize_t nargs)
{
    bc_State *st = bc_state_from_module(m);
    if (nargs < 1 || nargs > 2) {
        PyErr_Format(PyExc_TypeError, "_array_alloc() takes 1 or 2 arguments (%zd given)", nargs);
        return NULL;
    }
    size_t n;
    if (bc_arg_size(args[0], "_array_alloc(): nbytes", &n) < 0)
        return NULL;
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "_array_alloc(): nbytes must be positive");
        return NULL;
    }
    PyObject *stream = nargs > 1 ? args[1] : Py_None;
    CUstream s = NULL;
    if (stream != Py_None && bc_stream_convert(st, stream, &s) < 0)
        return NULL;
    bc_Context *ctx = bc_context_current(st);
    if (ctx == NULL)
        return NULL;
    PyObject *out = bc_array_alloc_in(st, ctx, n, stream, s);
    Py_DECREF(ctx);
    return out;
}

PyDoc_STRVAR(block_cache_info_doc,
"_block_cache_info()\n--\n\n"
"(blocks, bytes) held in the current context's block cache.");

static PyObject *
bc_block_cache_info(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_from_module(m);
    bc_Context *ctx = bc_context_current(st);
    if (ctx == NULL)
        return NULL;
    size_t bytes = 0;
    for (int i = 0; i < ctx->nblocks; i++)
        bytes += ctx->blocks[i].size;
    PyObject *out = Py_BuildValue("(in)", ctx->nblocks, (Py_ssize_t)bytes);
    Py_DECREF(ctx);
    return out;
}

PyDoc_STRVAR(block_cache_clear_doc,
"_block_cache_clear()\n--\n\n"
"Give the current context's cached blocks back to the pool (cuMemFreeAsync on the\n"
"legacy default stream).");

static PyObject *
bc_block_cache_clear(PyObject *m, PyObject *Py_UNUSED(ignored))
{
    bc_State *st = bc_state_from_module(m);
    bc_Context *ctx = bc_context_current(st);
    if (ctx == NULL)
        return NULL;
    bc_block_flush(ctx, 1);
    Py_DECREF(ctx);
    Py_RETURN_NONE;
}

static PyMethodDef blockcache_methods[] = {
    {"_array_alloc", (PyCFunction)(void (*)(void))bc_array_alloc, METH_FASTCALL, array_alloc_doc},
    {"_block_cache_info", bc_block_cache_info, METH_NOARGS, block_cache_info_doc},
    {"_block_cache_clear", bc_block_cache_clear, METH_NOARGS, block_cache_clear_doc},
    {NULL, NULL, 0, NULL},
};

/* ------------------------------------------------------------ hooks */

/* BC_CTX_DROP_CACHES: `release` frees the cached blocks (the context stays
 * valid: a primary context somebody else may still retain); otherwise they go
 * with the context, except when they came from the array pool, a device-wide
 * object: then they are freed into it before it is destroyed.  Freeing memory
 * into a pool after cuMemPoolDestroy killed test processes with SIGFPE inside
 * the driver's next cuMemAllocFromPoolAsync (H100, driver 580). */
static void
on_drop_caches(bc_Context *ctx, int release)
{
    bc_block_flush(ctx, release || ctx->array_pool != NULL);
}

static void
on_keep_nothing(bc_Context *ctx, int Py_UNUSED(arg))
{
    bc_array_pool_keep_nothing(ctx);
}

static void
on_letting_go(bc_Context *ctx, int Py_UNUSED(arg))
{
    bc_array_pool_destroy(ctx);
}

int
bc_blockcache_setup(PyObject *m, bc_State *Py_UNUSED(st))
{
    if (bc_context_on(BC_CTX_DROP_CACHES, on_drop_caches) < 0 ||
        bc_context_on(BC_CTX_KEEP_NOTHING, on_keep_nothing) < 0 ||
        bc_context_on(BC_CTX_LETTING_GO, on_letting_go) < 0)
        return -1;
    bc_context_set_array_pool_getter(bc_array_pool_get);
    bc_memory_on_cached_end(bc_block_give);
    bc_memory_on_out_of_memory(bc_array_pool_reclaim);
    return PyModule_AddFunctions(m, blockcache_methods);
}
