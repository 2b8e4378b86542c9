/* SPDX-License-Identifier: MIT */
/* The part of NVRTC's C interface that barecuda calls, declared here so a build
 * needs no nvrtc.h (NVIDIA's cuda-runtime wheel, which the toolkit-free build takes
 * cuda.h from, has none).  libnvrtc is never linked: src/loader.c resolves these
 * names with dlsym into bc_nvrtc, and the prototypes below only give each table
 * member its type.  NVRTC keeps this interface stable across releases (the
 * result codes only grow); tests/test_build.py compiles this header beside a
 * toolkit's nvrtc.h to check that the two agree. */
#ifndef BC_NVRTC_API_H
#define BC_NVRTC_API_H

#include <stddef.h>

/* Result codes: (name, value).  Only NVRTC_SUCCESS and a few errors are tested for
 * by name; the rest are here so messages and the header check cover them. */
#define BC_NVRTC_RESULTS(X)                                                     \
    X(NVRTC_SUCCESS, 0) X(NVRTC_ERROR_OUT_OF_MEMORY, 1)                          \
    X(NVRTC_ERROR_PROGRAM_CREATION_FAILURE, 2) X(NVRTC_ERROR_INVALID_INPUT, 3)   \
    X(NVRTC_ERROR_INVALID_PROGRAM, 4) X(NVRTC_ERROR_INVALID_OPTION, 5)           \
    X(NVRTC_ERROR_COMPILATION, 6) X(NVRTC_ERROR_BUILTIN_OPERATION_FAILURE, 7)    \
    X(NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION, 8)                      \
    X(NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION, 9)                        \
    X(NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID, 10) X(NVRTC_ERROR_INTERNAL_ERROR, 11)

/* With a toolkit's nvrtc.h already included (the header check does that), its
 * types are used and only the prototypes below are repeated, which C accepts
 * exactly when they are compatible. */
#ifndef __NVRTC_H__
typedef enum {
#define BC_NVRTC_ENUMERATOR(name, value) name = value,
    BC_NVRTC_RESULTS(BC_NVRTC_ENUMERATOR)
#undef BC_NVRTC_ENUMERATOR
} nvrtcResult;

/* An NVRTC program: an opaque handle (the tag is NVRTC's own, so the types match). */
typedef struct _nvrtcProgram *nvrtcProgram;
#endif

#ifdef __cplusplus
extern "C" {
#endif

const char *nvrtcGetErrorString(nvrtcResult result);
nvrtcResult nvrtcVersion(int *major, int *minor);
nvrtcResult nvrtcGetNumSupportedArchs(int *numArchs);
nvrtcResult nvrtcGetSupportedArchs(int *supportedArchs);
nvrtcResult nvrtcCreateProgram(nvrtcProgram *prog, const char *src, const char *name,
                               int numHeaders, const char *const *headers,
                               const char *const *includeNames);
nvrtcResult nvrtcDestroyProgram(nvrtcProgram *prog);
nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int numOptions, const char *const *options);
nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t *ptxSizeRet);
nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char *ptx);
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t *cubinSizeRet);
nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char *cubin);
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t *logSizeRet);
nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char *log);
nvrtcResult nvrtcAddNameExpression(nvrtcProgram prog, const char *const name_expression);
nvrtcResult nvrtcGetLoweredName(nvrtcProgram prog, const char *const name_expression,
                                const char **lowered_name);

#ifdef __cplusplus
}
#endif

#endif
