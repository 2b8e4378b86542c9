/* SPDX-License-Identifier: MIT */
/* The driver and NVRTC entry points, resolved at first use (src/loader.c).
 *
 * BC_DRIVER_FUNCTIONS lists every driver function barecuda calls.  Each entry
 * becomes a member of the process-wide table `bc_drv`, typed from the header's own
 * declaration and resolved through cuGetProcAddress for the headers' CUDA_VERSION,
 * so `bc_drv.cuMemAlloc(...)` calls the ABI the headers describe.  The table is
 * filled once (under the GIL) and never changes afterwards.  A function the
 * installed driver lacks points at a stand-in returning CUDA_ERROR_NOT_SUPPORTED. */
#ifndef BC_LOADER_H
#define BC_LOADER_H

#include "common.h"
#include "state.h"
#include "nvrtc_api.h"

/* cudaProfiler.h's two functions, declared here: NVIDIA's cuda-runtime wheel (the
 * toolkit-free build's headers) ships cuda.h but not cudaProfiler.h. */
CUresult CUDAAPI cuProfilerStart(void);
CUresult CUDAAPI cuProfilerStop(void);

#define BC_DRIVER_FUNCTIONS(X)                                                  \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString)       \
    X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName) X(cuDeviceTotalMem)   \
    X(cuDeviceGetAttribute) X(cuDeviceGetPCIBusId) X(cuDeviceGetByPCIBusId)     \
    X(cuDeviceGetUuid) X(cuDeviceCanAccessPeer) X(cuDeviceGetP2PAttribute)      \
    X(cuDeviceGetDefaultMemPool) X(cuDeviceGetMemPool)                          \
    X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease)                    \
    X(cuDevicePrimaryCtxReset) X(cuDevicePrimaryCtxGetState)                    \
    X(cuDevicePrimaryCtxSetFlags)                                               \
    X(cuCtxCreate) X(cuCtxDestroy) X(cuCtxPushCurrent) X(cuCtxPopCurrent)       \
    X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxGetDevice) X(cuCtxSynchronize) \
    X(cuCtxSetLimit) X(cuCtxGetLimit) X(cuCtxSetCacheConfig)                    \
    X(cuCtxGetCacheConfig) X(cuCtxGetApiVersion) X(cuCtxGetFlags)               \
    X(cuCtxEnablePeerAccess) X(cuCtxDisablePeerAccess)                          \
    X(cuCtxGetStreamPriorityRange)                                              \
    X(cuCtxGetSharedMemConfig) X(cuCtxSetSharedMemConfig) /* deprecated */      \
    X(cuModuleLoadDataEx) X(cuModuleUnload) X(cuModuleGetFunction)              \
    X(cuModuleGetGlobal) X(cuLinkCreate) X(cuLinkAddData) X(cuLinkComplete)     \
    X(cuLinkDestroy) X(cuLinkAddFile)                                           \
    X(cuFuncGetAttribute) X(cuFuncSetAttribute) X(cuFuncSetCacheConfig)         \
    X(cuFuncGetName) X(cuFuncGetParamInfo) X(cuLaunchKernel) X(cuLaunchKernelEx) \
    X(cuLaunchCooperativeKernel) X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
    X(cuOccupancyMaxPotentialBlockSize) X(cuOccupancyMaxActiveClusters)         \
    X(cuStreamCreate) X(cuStreamCreateWithPriority) X(cuStreamDestroy)          \
    X(cuStreamSynchronize) X(cuStreamQuery) X(cuStreamWaitEvent)                \
    X(cuLaunchHostFunc) X(cuStreamAddCallback) X(cuStreamGetPriority) X(cuStreamGetFlags)              \
    X(cuStreamGetCtx) X(cuStreamBeginCapture) X(cuStreamEndCapture)             \
    X(cuStreamIsCapturing) X(cuStreamAttachMemAsync)                            \
    X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize)   \
    X(cuEventQuery) X(cuEventElapsedTime) X(cuIpcGetEventHandle)                \
    X(cuIpcOpenEventHandle)                                                     \
    X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphExecDestroy)       \
    X(cuGraphDestroy) X(cuGraphGetNodes) X(cuGraphUpload)                       \
    X(cuMemAlloc) X(cuMemFree) X(cuMemAllocPitch) X(cuMemGetInfo)               \
    X(cuMemAllocAsync) X(cuMemAllocFromPoolAsync) X(cuMemFreeAsync)             \
    X(cuMemPoolTrimTo) X(cuMemPoolGetAttribute) X(cuMemPoolSetAttribute)        \
    X(cuMemPoolCreate) X(cuMemPoolDestroy)                                      \
    X(cuMemHostAlloc) X(cuMemFreeHost) X(cuMemHostGetDevicePointer)             \
    X(cuMemHostGetFlags) X(cuMemHostRegister) X(cuMemHostUnregister)            \
    X(cuMemAllocManaged) X(cuMemPrefetchAsync) X(cuMemAdvise)                   \
    X(cuPointerGetAttribute) X(cuPointerGetAttributes) X(cuMemGetAddressRange)  \
    X(cuIpcGetMemHandle) X(cuIpcOpenMemHandle) X(cuIpcCloseMemHandle)           \
    X(cuMemsetD8) X(cuMemsetD16) X(cuMemsetD32) X(cuMemsetD8Async)             \
    X(cuMemsetD16Async) X(cuMemsetD32Async) X(cuMemsetD2D8) X(cuMemsetD2D16)    \
    X(cuMemsetD2D32) X(cuMemsetD2D8Async) X(cuMemsetD2D16Async)                 \
    X(cuMemsetD2D32Async)                                                       \
    X(cuMemcpy) X(cuMemcpyAsync) X(cuMemcpyHtoD) X(cuMemcpyDtoH)                \
    X(cuMemcpyDtoD) X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync)                   \
    X(cuMemcpyDtoDAsync) X(cuMemcpy2D) X(cuMemcpy2DUnaligned)                   \
    X(cuMemcpy2DAsync) X(cuMemcpy3D) X(cuMemcpy3DAsync) X(cuMemcpy3DPeer)       \
    X(cuMemcpy3DPeerAsync) X(cuMemcpyPeer) X(cuMemcpyPeerAsync)                 \
    X(cuMemcpyHtoA) X(cuMemcpyAtoH) X(cuMemcpyHtoAAsync) X(cuMemcpyAtoHAsync)   \
    X(cuMemcpyAtoA) X(cuMemcpyAtoD) X(cuMemcpyDtoA)                             \
    X(cuProfilerStart) X(cuProfilerStop)                                        \
    X(cuArrayCreate) X(cuArray3DCreate) X(cuArrayDestroy)                       \
    X(cuArrayGetDescriptor) X(cuArray3DGetDescriptor)                           \
    X(cuTexObjectCreate) X(cuTexObjectDestroy) X(cuTexObjectGetResourceDesc)    \
    X(cuSurfObjectCreate) X(cuSurfObjectDestroy)

#define BC_NVRTC_FUNCTIONS(X)                                                   \
    X(nvrtcVersion) X(nvrtcGetErrorString) X(nvrtcCreateProgram)                \
    X(nvrtcDestroyProgram) X(nvrtcCompileProgram) X(nvrtcGetPTXSize)           \
    X(nvrtcGetPTX) X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN)                        \
    X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog) X(nvrtcAddNameExpression)   \
    X(nvrtcGetLoweredName) X(nvrtcGetNumSupportedArchs) X(nvrtcGetSupportedArchs)

/* `name` expands to the header's versioned symbol (cuMemAlloc -> cuMemAlloc_v2),
 * so member and uses agree; __typeof__ takes the header's own prototype. */
/* Deprecated entries (cuCtxGet/SetSharedMemConfig, for PyCUDA's Context methods) are
 * listed too: naming them here is no use of theirs worth a warning. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
typedef struct {
#define BC_DRV_MEMBER(name) __typeof__(&name) name;
    BC_DRIVER_FUNCTIONS(BC_DRV_MEMBER)
#undef BC_DRV_MEMBER
} bc_driver_table;
#pragma GCC diagnostic pop

typedef struct {
#define BC_NVRTC_MEMBER(name) __typeof__(&name) name;
    BC_NVRTC_FUNCTIONS(BC_NVRTC_MEMBER)
#undef BC_NVRTC_MEMBER
} bc_nvrtc_table;

extern bc_driver_table bc_drv;
extern bc_nvrtc_table bc_nvrtc;
extern int bc_drv_ready;   /* 1 once libcuda is loaded and cuInit succeeded */
extern int bc_nvrtc_ready; /* 1 once libnvrtc is loaded */
extern int bc_forked_child; /* 1 in a child forked after the driver was initialised */

/* Load libcuda and call cuInit(0) if not done yet; 0 on success, else -1 with
 * barecuda.driver.Error set, naming what was searched. */
int bc_loader_load_driver(bc_State *st);
/* Load libnvrtc if not done yet; 0 or -1 with Error set. */
int bc_loader_load_nvrtc(bc_State *st);

/* A CUDA toolkit library found at run time (NVRTC, libcurand). */
typedef struct {
    const char *what;              /* "NVRTC", for messages */
    const char *const *sonames;    /* NULL-terminated, preferred first */
    const char *probe;             /* a symbol the library must export */
    const char *const *wheel_dirs; /* "/nvidia/cu13/lib", ... under sys.path entries */
    const char *env;               /* variable naming the file to load instead */
    const char *hint;              /* how to install it, for the failure message */
} bc_libspec;

/* dlopen the library: $env if set, else one already loaded, NVIDIA's pip wheels,
 * $CUDA_HOME and $CUDA_PATH (lib64, lib), /usr/local/cuda/lib64, the system loader.
 * Returns the handle, or NULL with `failure` saying everything searched. */
void *bc_loader_find_library(const bc_libspec *spec, char *failure, size_t cap);

/* Walk the directories where CUDA toolkit libraries are looked for: <entry><wheel dir>
 * for every sys.path entry holding NVIDIA's pip wheels (nvidia/), $CUDA_HOME and
 * $CUDA_PATH (lib64, lib), /usr/local/cuda/lib64.  visit(dir, arg) returns nonzero to
 * stop (found); each directory it declines is appended to `searched`.  Returns 1 when
 * a visit stopped the walk, else 0.  Needs the GIL (reads sys.path). */
typedef int (*bc_dir_visitor)(const char *dir, void *arg);
int bc_loader_search_toolkit(const char *const *wheel_dirs, bc_dir_visitor visit, void *arg,
                             char *searched, size_t cap);

#define BC_REQUIRE_DRIVER(st, fail)                                            \
    do {                                                                       \
        if ((!bc_drv_ready || bc_forked_child) && bc_loader_load_driver(st) < 0) \
            return fail;                                                       \
    } while (0)

#endif
