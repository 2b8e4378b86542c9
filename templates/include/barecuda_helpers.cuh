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

/* Index modes, as NumPy's take(mode=): what an index outside an axis means. */
#define BC_INDEX_RAISE 0    /* an error: the caller reports it, touching no memory */
#define BC_INDEX_WRAP 1     /* modulo the axis length, with Python's sign rule */
#define BC_INDEX_CLIP 2     /* clamped to the first or last element */

/* The element that index k names along an axis of n elements, under `mode`:
 * RAISE: -n <= k < n (a negative k counts from the end), else -1;
 * WRAP: k modulo n, always 0..n-1;  CLIP: k clamped to 0..n-1 (a negative k
 * gives 0, as in NumPy).  An empty axis (n <= 0) gives -1 in every mode. */
static __device__ __forceinline__ long long
bc_index_signed(long long k, long long n, int mode)
{
    if (n <= 0)
        return -1;
    if (mode == BC_INDEX_WRAP) {
        long long r = k % n;
        return r < 0 ? r + n : r;
    }
    if (mode == BC_INDEX_CLIP)
        return k < 0 ? 0 : (k >= n ? n - 1 : k);
    if (k < 0)
        k += n;
    return (k >= 0 && k < n) ? k : -1;
}

/* The same for an unsigned index type (every value counts from the start). */
static __device__ __forceinline__ long long
bc_index_unsigned(unsigned long long k, long long n, int mode)
{
    if (n <= 0)
        return -1;
    if (mode == BC_INDEX_WRAP)
        return (long long)(k % (unsigned long long)n);
    if (mode == BC_INDEX_CLIP)
        return k >= (unsigned long long)n ? n - 1 : (long long)k;
    return k < (unsigned long long)n ? (long long)k : -1;
}

/* Note position i as holding a bad index: *first keeps the smallest such
 * position (set it to ~0ULL before the launch; ~0ULL after it: none). */
static __device__ __forceinline__ void
bc_index_report(unsigned long long *first, long long i)
{
    atomicMin(first, (unsigned long long)i);
}

#endif
