/* SPDX-License-Identifier: MIT */
/* <math.h> for NVRTC.  The math functions themselves (sinf, sin, the float
 * overloads of sin, isnan, ...) are NVRTC built-ins.  This header adds the
 * macros a kernel written for nvcc finds in glibc's <math.h> (M_PI and the
 * other M_* constants, INFINITY, NAN, HUGE_VAL, FP_*), float_t/double_t, and
 * the classification and comparison functions NVRTC lacks (fpclassify,
 * isnormal, isgreater, ...).  Each macro is defined only when not defined
 * already (CCCL's <cuda/std/cmath> defines INFINITY and NAN too). */
#ifndef BARECUDA_MATH_H
#define BARECUDA_MATH_H

/* Mathematical constants, to 21 significant digits (glibc's names). */
#ifndef M_PI
#define M_E        2.71828182845904523536   /* e */
#define M_LOG2E    1.44269504088896340736   /* log2(e) */
#define M_LOG10E   0.434294481903251827651  /* log10(e) */
#define M_LN2      0.693147180559945309417  /* ln(2) */
#define M_LN10     2.30258509299404568402   /* ln(10) */
#define M_PI       3.14159265358979323846   /* pi */
#define M_PI_2     1.57079632679489661923   /* pi/2 */
#define M_PI_4     0.785398163397448309616  /* pi/4 */
#define M_1_PI     0.318309886183790671538  /* 1/pi */
#define M_2_PI     0.636619772367581343076  /* 2/pi */
#define M_2_SQRTPI 1.12837916709551257390   /* 2/sqrt(pi) */
#define M_SQRT2    1.41421356237309504880   /* sqrt(2) */
#define M_SQRT1_2  0.707106781186547524401  /* 1/sqrt(2) */
#endif
/* The same as float constants (glibc's GNU extension). */
#ifndef M_PIf
#define M_Ef        2.71828182845904523536f
#define M_LOG2Ef    1.44269504088896340736f
#define M_LOG10Ef   0.434294481903251827651f
#define M_LN2f      0.693147180559945309417f
#define M_LN10f     2.30258509299404568402f
#define M_PIf       3.14159265358979323846f
#define M_PI_2f     1.57079632679489661923f
#define M_PI_4f     0.785398163397448309616f
#define M_1_PIf     0.318309886183790671538f
#define M_2_PIf     0.636619772367581343076f
#define M_2_SQRTPIf 1.12837916709551257390f
#define M_SQRT2f    1.41421356237309504880f
#define M_SQRT1_2f  0.707106781186547524401f
#endif

/* Infinities and NaN as constant expressions (NVRTC has no __builtin_inff):
 * the IEEE 754 bit patterns, reinterpreted at compile time. */
#ifndef INFINITY
#define INFINITY (__builtin_bit_cast(float, 0x7f800000U))
#endif
#ifndef NAN
#define NAN (__builtin_bit_cast(float, 0x7fc00000U))
#endif
#ifndef HUGE_VALF
#define HUGE_VALF (__builtin_bit_cast(float, 0x7f800000U))
#endif
#ifndef HUGE_VAL
#define HUGE_VAL (__builtin_bit_cast(double, 0x7ff0000000000000ULL))
#endif
#ifndef HUGE_VALL
#define HUGE_VALL HUGE_VAL
#endif

/* What fpclassify returns (glibc's values). */
#ifndef FP_NAN
#define FP_NAN 0
#define FP_INFINITE 1
#define FP_ZERO 2
#define FP_SUBNORMAL 3
#define FP_NORMAL 4
#endif
#ifndef FP_ILOGB0
#define FP_ILOGB0 (-2147483647 - 1)
#define FP_ILOGBNAN (-2147483647 - 1)
#endif
#ifndef MATH_ERRNO
#define MATH_ERRNO 1
#define MATH_ERREXCEPT 2
#endif

/* Floating-point evaluation is in the operands' own type (FLT_EVAL_METHOD 0). */
typedef float float_t;
typedef double double_t;

/* Overloaded for float and double, so outside any extern "C" the user's
 * source may be wrapped in. */
extern "C++" {

static __host__ __device__ __forceinline__ int fpclassify(float x)
{
    return isnan(x) ? FP_NAN : isinf(x) ? FP_INFINITE : x == 0.0f ? FP_ZERO
         : fabsf(x) < 1.17549435082228750797e-38F ? FP_SUBNORMAL : FP_NORMAL;
}
static __host__ __device__ __forceinline__ int fpclassify(double x)
{
    return isnan(x) ? FP_NAN : isinf(x) ? FP_INFINITE : x == 0.0 ? FP_ZERO
         : fabs(x) < 2.22507385850720138309e-308 ? FP_SUBNORMAL : FP_NORMAL;
}
static __host__ __device__ __forceinline__ bool isnormal(float x) { return fpclassify(x) == FP_NORMAL; }
static __host__ __device__ __forceinline__ bool isnormal(double x) { return fpclassify(x) == FP_NORMAL; }

/* Comparisons that are false, never signalling, when either side is NaN. */
template <typename A, typename B>
static __host__ __device__ __forceinline__ bool isunordered(A a, B b) { return isnan(a) || isnan(b); }
template <typename A, typename B>
static __host__ __device__ __forceinline__ bool isgreater(A a, B b) { return !isunordered(a, b) && a > b; }
template <typename A, typename B>
static __host__ __device__ __forceinline__ bool isgreaterequal(A a, B b) { return !isunordered(a, b) && a >= b; }
template <typename A, typename B>
static __host__ __device__ __forceinline__ bool isless(A a, B b) { return !isunordered(a, b) && a < b; }
template <typename A, typename B>
static __host__ __device__ __forceinline__ bool islessequal(A a, B b) { return !isunordered(a, b) && a <= b; }
template <typename A, typename B>
static __host__ __device__ __forceinline__ bool islessgreater(A a, B b) { return !isunordered(a, b) && a != b; }

}  /* extern "C++" */

#endif
