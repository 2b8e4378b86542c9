/* SPDX-License-Identifier: MIT */
/* Device, managed and IPC memory (src/memory.c); device pointers and host views
 * (src/pointer.c); memory pools (src/mempool.c); pinned, aligned and registered
 * host memory (src/hostmem.c). */
#ifndef BC_MEMORY_H
#define BC_MEMORY_H

#include "common.h"
#include "state.h"
#include "context.h"

enum bc_alloc_kind {
    BC_ALLOC_UNSET = -1, /* an IPCMemoryHandle subclass's object before the base's __init__
                            (freed set too: nothing to release) */
    BC_ALLOC_DEVICE,  /* cuMemAlloc / cuMemAllocPitch: cuMemFree */
    BC_ALLOC_ASYNC,   /* cuMemAllocFromPoolAsync: cuMemFreeAsync on `stream` */
    BC_ALLOC_MANAGED, /* cuMemAllocManaged: cuMemFree (type ManagedAllocation) */
    BC_ALLOC_IPC,     /* cuIpcOpenMemHandle: cuIpcCloseMemHandle (type IPCMemoryHandle) */
};

/* DeviceAllocation, ManagedAllocation and IPCMemoryHandle share this layout. */
typedef struct {
    PyObject_HEAD
    CUdeviceptr ptr;
    size_t size;
    bc_Context *ctx;
    PyObject *stream;       /* BC_ALLOC_ASYNC: the stream object it is freed on (or NULL) */
    CUstream stream_handle; /* BC_ALLOC_ASYNC: its handle, taken at allocation */
    int kind;
    int freed;
    int cached;             /* BC_ALLOC_ASYNC on stream 0: dealloc hands it to the
                               context's block cache (src/blockcache.c) */
    Py_ssize_t exports;     /* live host views (managed memory): free() refuses while any */
    int in_memo;            /* kept by a Function's argument memo: its end calls the hook
                               of bc_memory_on_watched_end (the memo epoch of argpack.h) */
    int counted;            /* in ctx->live_memory until its memory is freed */
    PyObject *dict;        /* instance attributes (PyCUDA's objects take them) */
    PyObject *weakreflist;
} bc_DeviceAllocation;

/* A block of a tools.DeviceMemoryPool handed out to a user. */
typedef struct {
    PyObject_HEAD
    CUdeviceptr ptr;
    size_t size;     /* bytes asked for (the block may be larger) */
    PyObject *block; /* the DeviceAllocation held by the pool */
    PyObject *pool;  /* its `_return_block(block)` takes the block back */
    int freed;
    PyObject *dict;        /* instance attributes (PyCUDA's objects take them) */
    PyObject *weakreflist;
} bc_PooledAllocation;

enum bc_host_kind {
    BC_HOST_PINNED,  /* cuMemHostAlloc: cuMemFreeHost */
    BC_HOST_ALIGNED, /* posix_memalign: free */
};

/* Host memory: pagelocked_* (pinned) and aligned_* (plain) arrays' base object. */
typedef struct {
    PyObject_HEAD
    void *ptr;
    size_t size;
    unsigned int flags; /* host_alloc_flags given to cuMemHostAlloc */
    int kind;
    int freed;
    Py_ssize_t exports; /* live buffer exports (free() refuses while any) */
    bc_Context *ctx;    /* NULL for aligned memory */
    int counted;        /* pinned: in ctx->live_memory until its memory is freed */
    PyObject *dict;        /* instance attributes (PyCUDA's objects take them) */
    PyObject *weakreflist;
} bc_HostAllocation;

/* LogicError naming the allocation when it was freed (closed) or its context
 * detached; else 0 (src/pointer.c). */
int bc_allocation_usable(bc_State *st, bc_DeviceAllocation *a);

/* Device pointer of a kernel/copy argument (src/pointer.c): a DeviceAllocation (not freed), a
 * ManagedAllocation, an IPCMemoryHandle, a pooled allocation, an int or an object
 * with __index__, or an object with `gpudata` or __cuda_array_interface__.
 * 0 on success, -1 with TypeError/LogicError set.  *size_out (may be NULL) gets
 * the bytes known to be addressable from the pointer, or SIZE_MAX if unknown. */
int bc_pointer_convert(bc_State *st, PyObject *obj, CUdeviceptr *out, size_t *size_out);

/* A new DeviceAllocation object for memory already allocated (new references to
 * ctx and stream; stream may be NULL or None). */
PyObject *bc_allocation_new(bc_State *st, bc_Context *ctx, CUdeviceptr ptr, size_t size,
                            int kind, PyObject *stream, CUstream stream_handle);

/* A stream-ordered memory pool (src/mempool.c). */
typedef struct {
    PyObject_HEAD
    CUmemoryPool handle; /* never destroyed by this object */
    CUdevice device;
    PyObject *owner;     /* the Context whose pool this is (Context.array_pool), or NULL */
    PyObject *weakreflist;
} bc_MemPool;

/* A MemPool object naming `pool` of device dev, never destroying it; `owner` (a
 * Context, or NULL) is kept alive, and once it is detached the MemPool raises
 * LogicError instead of using the handle. */
PyObject *bc_mempool_wrap(bc_State *st, CUmemoryPool pool, CUdevice dev, PyObject *owner);

/* The Context of the memory behind obj when it is one of our allocation types
 * (borrowed), else NULL without an exception (src/pointer.c). */
bc_Context *bc_pointer_context(bc_State *st, PyObject *obj);

/* Address and size of the memory named by a host buffer (a managed array) or by
 * anything bc_pointer_convert takes.  0, or -1 with an exception set. */
int bc_memory_span(bc_State *st, PyObject *obj, CUdeviceptr *ptr, size_t *size);

/* A writable memoryview of `size` bytes at ptr + `offset` (offset may be NULL: 0)
 * for the CPU, keeping `owner` alive and counting itself in *exports (may be NULL)
 * while it lives.  `known` bounds the memory (SIZE_MAX: ask the driver).
 * LogicError unless the driver says the CPU can read the memory (managed or
 * page-locked host memory); ValueError when the span runs past it.  (src/pointer.c) */
PyObject *bc_host_view(bc_State *st, PyObject *owner, Py_ssize_t *exports, CUdeviceptr ptr,
                       size_t known, PyObject *size, PyObject *offset, const char *fn);

/* The shape, dtype and order of a host or managed array being made (src/hostmem.c). */
typedef struct {
    PyArray_Dims dims;
    PyArray_Descr *descr;
    int fortran;
    size_t nbytes;
} bc_ArraySpec;

/* Fill s from (shape, dtype, order) or from the ndarray `like` (order None/"A"/"K"
 * keeping its layout); `fn` names the caller in TypeError/ValueError messages.
 * 0, or -1 with an exception set and s cleared. */
int bc_array_spec_parse(const char *fn, PyObject *shape, PyObject *dtype, PyObject *order,
                        bc_ArraySpec *s);
int bc_array_spec_like(const char *fn, PyObject *like, PyObject *order, bc_ArraySpec *s);
void bc_array_spec_clear(bc_ArraySpec *s);

/* A writable ndarray of spec s over `data` with `base` (stolen) as its base; s's
 * descr is consumed.  NULL with an exception set. */
PyObject *bc_array_over(bc_ArraySpec *s, void *data, PyObject *base);

/* Whether the driver knows the host memory at p (pinned, registered or
 * managed), so that copies of it go straight to the DMA (src/staging.c). */
int bc_host_is_known(void *p);

/* A synchronous copy of n bytes between host memory and device memory `dev`
 * (to the host when to_host), in order on stream s (NULL: the legacy default
 * stream, as cuMemcpyHtoD/cuMemcpyDtoH), through the staging buffers of
 * src/staging.c; call with the GIL released.  Returns 1 when the copy was made
 * that way and has arrived (*rc its result, *routine the call that failed), 0
 * when it is better made by the driver directly, with nothing done: a copy under
 * 1 MiB, host memory the driver knows, the staging buffers busy or not to be had,
 * no current context. */
int bc_staged_try(int to_host, CUdeviceptr dev, void *host, size_t n, CUstream s, CUresult *rc,
                  const char **routine);

/* What memory.c tells the floors above, through the one hook of each kind that
 * they register at module init (none until then), so that it never names them:
 *  - an allocation whose `in_memo` is set ends (freed, closed or collected):
 *    src/argpack.c's memos start over.  Called from any thread, with or without
 *    the GIL;
 *  - a `cached` allocation is collected unfreed: the hook returns 1 when it kept
 *    the memory for reuse (src/blockcache.c), 0 when memory.c must free it; GIL
 *    held;
 *  - mem_alloc() ran out of memory in ctx (current; GIL held): the hook gives back
 *    memory kept above, step 0 then 1 (src/blockcache.c: bc_array_pool_reclaim),
 *    and returns 1 when a retry may succeed. */
void bc_memory_on_watched_end(void (*fn)(void));
void bc_memory_on_cached_end(int (*fn)(bc_Context *ctx, CUdeviceptr ptr, size_t size));
void bc_memory_on_out_of_memory(int (*fn)(bc_Context *ctx, int step));

/* register_host_memory() found the memory registered already: the hook that
 * src/hostpool.c registers at module init ends the host pool's own registration
 * of it when it holds one (1; then the program's registration is retried), else
 * returns 0.  Called with the GIL released. */
void bc_hostmem_on_register_clash(int (*fn)(const void *p));

/* IPC handles (memory.c): remember a handle (bytes) this process exported, and
 * raise LogicError naming `who` when asked to open one of them here (the driver
 * refuses that with an unhelpful code).  0 or -1. */
int bc_ipc_note_export(bc_State *st, PyObject *handle);
int bc_ipc_check_foreign(bc_State *st, const char *data, Py_ssize_t len, const char *who);

#endif
