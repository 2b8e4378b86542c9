/* SPDX-License-Identifier: MIT */
/* barecuda's device-side helpers, on the include path of every SourceModule:
 *
 *     #include <barecuda_helpers.cuh>
 *
 *     __global__ void scale(float *y, const float *x, float a, long long n)
 *     {
 *         BC_GRID_STRIDE_LOOP(i, n)
 *             y[i] = a * x[i];
 *     }
 *
 * Plain C (no templates), so it may be included inside SourceModule's
 * extern "C" { } wrapper. */
#ifndef BARECUDA_HELPERS_CUH
#define BARECUDA_HELPERS_CUH

/* This thread's index in a 1-D grid, as a 64-bit value (no overflow past 2^31). */
static __device__ __forceinline__ long long
bc_global_thread_id(void)
{
    return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}

/* The number of threads in a 1-D grid. */
static __device__ __forceinline__ long long
bc_grid_size(void)
{
    return (long long)gridDim.x * blockDim.x;
}

/* Visit every i in [0, n) once across the whole grid, whatever its size:
 * thread t takes t, t + grid size, t + 2 * grid size, ... */
#define BC_GRID_STRIDE_LOOP(i, n)                                              \
    for (long long i = bc_global_thread_id(); i < (long long)(n); i += bc_grid_size())

/* The sum of v over the 32 lanes of a full warp, returned to every lane. */
static __device__ __forceinline__ float
bc_warp_sum_float(float v)
{
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

static __device__ __forceinline__ double
bc_warp_sum_double(double v)
{
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

/* Ceiling division, for grid sizes: bc_div_up(n, 256) blocks of 256 threads. */
#define BC_DIV_UP(a, b) (((a) + (b) - 1) / (b))

#endif
