/* SPDX-License-Identifier: MIT */
/* <assert.h> for NVRTC.  No include guard on purpose: as in C, each inclusion
 * defines assert afresh from the NDEBUG in force at that point.  A failed
 * assert on the device reports the expression, file, line and function and
 * ends the kernel with an error (cudaErrorAssert / CUDA_ERROR_ASSERT), through
 * the device built-in __assertfail that NVRTC's own assert also calls. */
#undef assert
#ifdef NDEBUG
#define assert(expr) (static_cast<void>(0))
#else
#define assert(expr) \
    ((expr) ? static_cast<void>(0) : __assertfail(#expr, __FILE__, __LINE__, __PRETTY_FUNCTION__, sizeof(char)))
#endif
