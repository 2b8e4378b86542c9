/* SPDX-License-Identifier: MIT */
/* <stdlib.h> for NVRTC.  malloc, free, abs, labs and llabs are device
 * built-ins (malloc/free use the device heap, sized by the context's
 * CU_LIMIT_MALLOC_HEAP_SIZE).  Added here: the constants, div_t and friends,
 * and div/ldiv/lldiv, which NVRTC lacks. */
#ifndef BARECUDA_STDLIB_H
#define BARECUDA_STDLIB_H

#include <stddef.h>

#ifndef EXIT_SUCCESS
#define EXIT_SUCCESS 0
#define EXIT_FAILURE 1
#endif
#ifndef RAND_MAX
#define RAND_MAX 2147483647
#endif
#ifndef MB_CUR_MAX
#define MB_CUR_MAX 1
#endif

typedef struct { int quot; int rem; } div_t;
typedef struct { long quot; long rem; } ldiv_t;
typedef struct { long long quot; long long rem; } lldiv_t;

/* Quotient truncated toward zero, remainder with the sign of the dividend,
 * as C's division does. */
static __host__ __device__ __forceinline__ div_t div(int n, int d)
{
    div_t r;
    r.quot = n / d;
    r.rem = n % d;
    return r;
}
static __host__ __device__ __forceinline__ ldiv_t ldiv(long n, long d)
{
    ldiv_t r;
    r.quot = n / d;
    r.rem = n % d;
    return r;
}
static __host__ __device__ __forceinline__ lldiv_t lldiv(long long n, long long d)
{
    lldiv_t r;
    r.quot = n / d;
    r.rem = n % d;
    return r;
}

#endif
