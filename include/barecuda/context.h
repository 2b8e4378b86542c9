/* SPDX-License-Identifier: MIT */
/* Devices and contexts (src/device.c, src/context.c), and the hooks by which
 * the floors above hear of a context's life (bc_context_on). */
#ifndef BC_CONTEXT_H
#define BC_CONTEXT_H

#include "common.h"
#include "state.h"

typedef struct {
    PyObject_HEAD
    CUdevice handle; /* BC_DEVICE_UNSET until a subclass's __init__ calls Device's */
    PyObject *dict;  /* instance attributes (PyCUDA's objects take them) */
} bc_Device;

#define BC_DEVICE_UNSET ((CUdevice)-1)

enum bc_context_kind {
    BC_CTX_PRIMARY,  /* holds one cuDevicePrimaryCtxRetain, released on detach (or
                        when the last memory made in it is freed, if any lived on) */
    BC_CTX_OWNED,    /* made by make_context, destroyed on detach */
    BC_CTX_BORROWED, /* somebody else's context: never released by us */
};

/* Freed small stream-ordered blocks kept for reuse (src/blockcache.c). */
#define BC_BLOCK_SLOTS 64

typedef struct {
    CUdeviceptr ptr;
    size_t size; /* a size class of bc_block_class() */
} bc_CachedBlock;

typedef struct {
    PyObject_HEAD
    CUcontext handle;
    CUdevice device;
    int kind;
    int released;          /* detach() was called: objects made in it refuse to be used */
    int let_go;            /* the handle is not ours any more (retain given back, context
                              destroyed or reset): objects made in it skip their release */
    Py_ssize_t live_memory; /* allocations made in it not yet freed (bc_context_memory_*) */
    PyObject *kernels;     /* dict of compiled kernels of the array layer, or NULL */
    PyObject *keeping;     /* list of weak references to Streams made in it whose keep
                              lists hold objects (bc_stream_keep_alive), or NULL */
    int nblocks;           /* blocks[0:nblocks] are cached free blocks */
    bc_CachedBlock blocks[BC_BLOCK_SLOTS];
    CUmemoryPool array_pool; /* the array layer's own pool (src/blockcache.c), or NULL */
    int array_pool_failed;   /* 1 once creating it failed: use the device's current pool */
    PyObject *dict;        /* instance attributes (PyCUDA's objects take them) */
    PyObject *weakreflist;
} bc_Context;

/* New reference to the Context that is current on this thread.  When none is,
 * the default device's primary context is made current first (the runtime API's
 * behaviour), so a bare `mem_alloc(n)` just works.  NULL with an exception set. */
bc_Context *bc_context_current(bc_State *st);

/* 0 when a context is current on this thread, making the default primary context
 * current when none is (as bc_context_current, without returning it); -1 on error. */
int bc_context_require(bc_State *st);

/* Context object (new reference) for a driver handle, reusing a live wrapper. */
bc_Context *bc_context_wrap(bc_State *st, CUcontext handle);

/* LogicError "<what> belongs to a context that was detached" when ctx is released. */
int bc_context_check_alive(bc_State *st, bc_Context *ctx, const char *what);

/* Count memory made in ctx (device, managed and page-locked host allocations,
 * registered host memory, CUDA arrays, IPC mappings), GIL held for both.  A
 * primary context detached while some of it lives keeps its retain and its array
 * pool until the last of it is freed, so that memory is freed into a live pool
 * of a live context instead of leaking when another retain keeps the context
 * alive.  `counted` is the object's own flag: made sets it, freed (called once
 * the memory is released) clears it and counts the object off at most once. */
static inline void
bc_context_memory_made(bc_Context *ctx, int *counted)
{
    *counted = 1;
    ctx->live_memory++;
}
void bc_context_memory_freed(bc_Context *ctx, int *counted);

/* What the floors above keep for a context (stream keep lists, cached blocks and
 * the array pool, argument memos) hears of the context's life through hooks, so
 * that this floor never names them: each unit registers the hooks it needs at
 * module init (in its bc_<concept>_setup), as CPython modules register atexit
 * handlers.  Hooks of one event run in the order they were registered, GIL held,
 * and never raise.  The process has one table (the functions are the same in
 * every module instance). */
enum bc_context_event {
    BC_CTX_DETACHING,    /* detach() begins, the context still valid */
    BC_CTX_DROP_CACHES,  /* empty what is cached in it (after its kernel cache): arg 1
                            gives the memory back (the context stays valid), 0 may
                            forget it (the context goes, and its memory with it) */
    BC_CTX_RELEASED,     /* it was just marked released: what was made in it is refused */
    BC_CTX_KEEP_NOTHING, /* a primary context was detached while memory made in it
                            lives: keep nothing of what is freed into it from now on */
    BC_CTX_LETTING_GO,   /* its handle is about to be given up (the retain released,
                            the context destroyed): destroy what lives in it now */
    BC_CTX_NEVENTS
};
typedef void (*bc_context_hook)(bc_Context *ctx, int arg);

/* Register fn for ev; registering a function twice is a no-op.  0, or -1 with
 * RuntimeError when the event's table is full. */
int bc_context_on(enum bc_context_event ev, bc_context_hook fn);

/* Context.array_pool's value (new reference), from the unit that keeps the pool
 * (src/blockcache.c registers its getter at module init); None until one is. */
typedef PyObject *(*bc_context_getter)(bc_State *st, bc_Context *ctx);
void bc_context_set_array_pool_getter(bc_context_getter fn);

/* Make ctx current for one call if it is not already (for destructors and calls
 * on objects used from another context or thread).  Returns 1 when it pushed,
 * 0 when nothing was needed, -1 on failure (no exception set: the caller decides).
 * Pair every 1 with bc_context_leave. */
int bc_context_enter(bc_Context *ctx);
void bc_context_leave(int entered);
/* The same for a bare handle (a context known only from the driver, e.g. by
 * cuStreamGetCtx), which cannot be checked for having been let go of. */
int bc_context_enter_handle(CUcontext handle);

/* Device object (new reference) for an ordinal.  Inline, so that a Context
 * names its Device without calling src/device.c, which sits above it. */
static inline PyObject *
bc_device_new(bc_State *st, CUdevice dev)
{
    bc_Device *self = PyObject_GC_New(bc_Device, (PyTypeObject *)st->DeviceType);
    if (self == NULL)
        return NULL;
    self->handle = dev;
    self->dict = NULL;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

/* A device ordinal from None or NULL (the current context's device), a Device or
 * an int (src/device.c).  0, or -1 with an exception set. */
int bc_device_of(bc_State *st, PyObject *obj, CUdevice *out);

/* Context for device `dev`: its primary context retained (new reference), or a
 * new context made with cuCtxCreate(flags) and pushed, as PyCUDA's make_context. */
PyObject *bc_context_retain_primary(bc_State *st, CUdevice dev);
PyObject *bc_context_create(bc_State *st, CUdevice dev, unsigned int flags);
/* Release every wrapper of dev's primary context, then cuDevicePrimaryCtxReset. */
PyObject *bc_context_reset_primary(bc_State *st, CUdevice dev);
#endif
