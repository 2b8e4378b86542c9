/* SPDX-License-Identifier: MIT */
/* DLPack ABI (src/dlpack.c): the structs of the DLPack specification, version 1.x,
 * written from the published spec (dmlc/dlpack, "C API").  Layouts must match the
 * spec exactly: they cross library boundaries through PyCapsules named
 * "dltensor_versioned" (DLManagedTensorVersioned) or "dltensor" (DLManagedTensor). */
#ifndef BC_DLPACK_H
#define BC_DLPACK_H

#include <stdint.h>

#define BC_DLPACK_MAJOR 1
#define BC_DLPACK_MINOR 0

/* DLDeviceType values used here. */
enum { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13 };

/* DLDataTypeCode values. */
enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLOpaqueHandle = 3, kDLBfloat = 4,
       kDLComplex = 5, kDLBool = 6 };

/* DLManagedTensorVersioned.flags bits. */
#define BC_DLPACK_FLAG_READ_ONLY ((uint64_t)1 << 0)
#define BC_DLPACK_FLAG_IS_COPIED ((uint64_t)1 << 1)

typedef struct {
    uint32_t major;
    uint32_t minor;
} DLPackVersion;

typedef struct {
    int32_t device_type; /* a C enum in the spec: int-sized */
    int32_t device_id;
} DLDevice;

typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} DLDataType;

typedef struct {
    void *data;
    DLDevice device;
    int32_t ndim;
    DLDataType dtype;
    int64_t *shape;
    int64_t *strides; /* in elements; NULL means compact row-major */
    uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
    DLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

typedef struct DLManagedTensorVersioned {
    DLPackVersion version;
    void *manager_ctx;
    void (*deleter)(struct DLManagedTensorVersioned *self);
    uint64_t flags;
    DLTensor dl_tensor;
} DLManagedTensorVersioned;

#endif
