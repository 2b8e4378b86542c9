/* SPDX-License-Identifier: MIT */
/* Small stream-ordered blocks that a Context keeps for reuse (src/blockcache.c). */
#ifndef BC_BLOCKCACHE_H
#define BC_BLOCKCACHE_H

#include "common.h"
#include "context.h"

/* The size class of an allocation of `nbytes` (a multiple of 512), or 0 when
 * allocations of that size are not cached. */
size_t bc_block_class(size_t nbytes);

/* Keep a freed block of `nbytes` (allocated from the pool on the legacy default
 * stream) in ctx's cache; 1 when kept, 0 when the caller must free it.  GIL held. */
int bc_block_give(bc_Context *ctx, CUdeviceptr ptr, size_t nbytes);

/* Empty ctx's cache; `release` frees the blocks in stream order (the context must
 * still be valid), 0 just forgets them (the context is being destroyed). */
void bc_block_flush(bc_Context *ctx, int release);

/* A DeviceAllocation of n > 0 bytes in ctx (which must be current) from the pool
 * on `stream` (None or the Stream object whose handle is s); on the legacy default
 * stream small blocks come from ctx's cache.  NULL with MemoryError (or another
 * driver error) set. */
PyObject *bc_array_alloc_in(bc_State *st, bc_Context *ctx, size_t n, PyObject *stream,
                            CUstream s);

/* Give back memory the array layer keeps, before an allocation that ran out of
 * memory in ctx (current, GIL held) is retried: step 0 empties the block cache and
 * trims ctx's pool, step 1 synchronizes the context (GIL released) and trims
 * again.  1 when the step was taken and a retry may succeed, 0 otherwise. */
int bc_array_pool_reclaim(bc_Context *ctx, int step);

/* Destroy ctx's pool (after bc_block_flush; the context still valid), or just
 * forget it when the context cannot be entered.  Never raises. */
void bc_array_pool_destroy(bc_Context *ctx);

/* Make ctx's pool hand freed memory back to the device at every synchronize
 * (release threshold 0) and trim it now: a detached context waiting for its last
 * allocations must not keep the memory of those already freed. */
void bc_array_pool_keep_nothing(bc_Context *ctx);

/* Context.array_pool: a MemPool wrapping (not owning) ctx's pool, or None. */
PyObject *bc_array_pool_get(bc_State *st, bc_Context *ctx);

#endif
