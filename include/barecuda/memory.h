/* SPDX-License-Identifier: MIT */
/* Device, pinned, registered and managed memory (src/memory.c). */
#ifndef BC_MEMORY_H
#define BC_MEMORY_H

#include "common.h"
#include "state.h"
#include "context.h"

enum bc_alloc_kind {
    BC_ALLOC_DEVICE,  /* cuMemAlloc / cuMemAllocPitch: cuMemFree */
    BC_ALLOC_ASYNC,   /* cuMemAllocFromPoolAsync: cuMemFreeAsync on `stream` */
    BC_ALLOC_MANAGED, /* cuMemAllocManaged: cuMemFree */
    BC_ALLOC_IPC,     /* cuIpcOpenMemHandle: cuIpcCloseMemHandle */
};

typedef struct {
    PyObject_HEAD
    CUdeviceptr ptr;
    size_t size;
    bc_Context *ctx;
    PyObject *stream; /* BC_ALLOC_ASYNC: the Stream it is freed on (or None) */
    int kind;
    int freed;
    PyObject *weakreflist;
} bc_DeviceAllocation;

/* Device pointer of a kernel/copy argument: a DeviceAllocation (not freed), an
 * object with `gpudata` or __cuda_array_interface__, or a non-negative int.
 * 0 on success, -1 with TypeError/LogicError set.  *size_out (may be NULL) gets
 * the bytes known to be addressable from the pointer, or SIZE_MAX if unknown. */
int bc_pointer_convert(bc_State *st, PyObject *obj, CUdeviceptr *out, size_t *size_out);

#endif
