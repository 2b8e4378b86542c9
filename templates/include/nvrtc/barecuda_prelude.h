/* SPDX-License-Identifier: MIT */
/* Force-included into every NVRTC compile barecuda makes (--pre-include).
 *
 * nvcc compiles each .cu file with the host's C library in view: on Linux
 * glibc's <sys/types.h> arrives through cuda_runtime.h and declares the short
 * unsigned names below, which CUDA code written for nvcc (PyCUDA's examples
 * among it) uses without including anything.  NVRTC has no C library, so they
 * are declared here.  Redeclaring them with the same type, as a user's own
 * `typedef unsigned int uint;` does, is valid C++; define BARECUDA_NO_PRELUDE
 * (-DBARECUDA_NO_PRELUDE) to leave them out altogether. */
#ifndef BARECUDA_PRELUDE_H
#define BARECUDA_PRELUDE_H
#ifndef BARECUDA_NO_PRELUDE
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
#endif
#endif
