/* SPDX-License-Identifier: MIT */
/* The part of NCCL's C interface that barecuda calls, declared here so a build
 * needs no nccl.h (NVIDIA's nvidia-nccl wheels ship it, but a machine without them
 * must still build).  libnccl is never linked: src/nccl.c finds libnccl.so.2 at
 * first use and resolves these names with dlsym; the prototypes below only give
 * each table member its type.  NCCL keeps this interface stable across 2.x (codes
 * and enums only grow); tests/test_nccl.py compiles this header beside an
 * installed nccl.h to check that the two agree. */
#ifndef BC_NCCL_API_H
#define BC_NCCL_API_H

#include <stddef.h>

/* Result codes, data types and reduction operators: (name, value).  The values
 * are NCCL's ABI; barecuda.nccl maps NumPy dtypes and op names onto them. */
#define BC_NCCL_RESULTS(X)                                                      \
    X(ncclSuccess, 0) X(ncclUnhandledCudaError, 1) X(ncclSystemError, 2)         \
    X(ncclInternalError, 3) X(ncclInvalidArgument, 4) X(ncclInvalidUsage, 5)     \
    X(ncclRemoteError, 6) X(ncclInProgress, 7)

#define BC_NCCL_TYPES(X)                                                        \
    X(ncclInt8, 0) X(ncclUint8, 1) X(ncclInt32, 2) X(ncclUint32, 3)              \
    X(ncclInt64, 4) X(ncclUint64, 5) X(ncclFloat16, 6) X(ncclFloat32, 7)         \
    X(ncclFloat64, 8) X(ncclBfloat16, 9)

#define BC_NCCL_OPS(X) X(ncclSum, 0) X(ncclProd, 1) X(ncclMax, 2) X(ncclMin, 3) X(ncclAvg, 4)

#define BC_NCCL_UNIQUE_ID_BYTES 128

/* With nccl.h already included (the header check does that), its types are used
 * and only the prototypes below are repeated, which C accepts exactly when they
 * are compatible. */
#ifndef NCCL_H_
#define BC_NCCL_ENUMERATOR(name, value) name = value,
typedef enum { BC_NCCL_RESULTS(BC_NCCL_ENUMERATOR) ncclNumResults = 9 } ncclResult_t;
typedef enum { BC_NCCL_TYPES(BC_NCCL_ENUMERATOR) ncclNumTypes = 12 } ncclDataType_t;
typedef enum { BC_NCCL_OPS(BC_NCCL_ENUMERATOR) ncclNumOps = 5,
               ncclMaxRedOp = 0x7fffffff } ncclRedOp_t;
#undef BC_NCCL_ENUMERATOR

/* A communicator: an opaque handle (the tag is NCCL's own, so the types match). */
typedef struct ncclComm *ncclComm_t;
typedef struct { char internal[BC_NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;
/* cudaStream_t is the driver's CUstream (both are struct CUstream_st *). */
typedef struct CUstream_st *cudaStream_t;
#endif

#ifdef __cplusplus
extern "C" {
#endif

ncclResult_t ncclGetVersion(int *version);
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId);
const char *ncclGetErrorString(ncclResult_t result);
const char *ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t ncclCommInitAll(ncclComm_t *comm, int ndev, const int *devlist);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device);
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank);
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

#ifdef __cplusplus
}
#endif

/* Every entry point above, for the table of src/nccl.c. */
#define BC_NCCL_FUNCTIONS(X)                                                    \
    X(ncclGetVersion) X(ncclGetUniqueId) X(ncclGetErrorString) X(ncclGetLastError) \
    X(ncclCommInitRank) X(ncclCommInitAll) X(ncclCommDestroy) X(ncclCommAbort)   \
    X(ncclCommGetAsyncError) X(ncclCommCount) X(ncclCommCuDevice)               \
    X(ncclCommUserRank) X(ncclReduce) X(ncclBroadcast) X(ncclAllReduce)          \
    X(ncclReduceScatter) X(ncclAllGather) X(ncclSend) X(ncclRecv)               \
    X(ncclGroupStart) X(ncclGroupEnd)

#endif
