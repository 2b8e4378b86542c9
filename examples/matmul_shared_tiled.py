# SPDX-License-Identifier: MIT
"""Matrix multiply with shared-memory tiles, timed with CUDA events.

Teaches: why shared memory helps (each element of A and B is read from global
memory once per tile instead of once per product), ``__shared__`` arrays,
``__syncthreads()`` between loading a tile and using it, and timing GPU work
with ``cuda.Event``: ``record()`` before and after, ``synchronize()``, then
``time_till()``.  A naive kernel (no shared memory) is timed for comparison.

Run: python examples/matmul_shared_tiled.py [n]
Exit status 0 when both kernels agree with NumPy's ``A @ B`` (to float32 rounding).
"""

import sys
from typing import Any

import numpy as np

import barecuda.autoinit  # noqa: F401
import barecuda.driver as cuda
from barecuda.compiler import SourceModule

TILE = 16
KERNEL = r"""
#define TILE 16

/* C = A @ B for n x n row-major matrices, one thread per element of C. */
__global__ void matmul_naive(float *C, const float *A, const float *B, int n)
{
    int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
    if (row >= n || col >= n) return;
    float sum = 0.0f;
    for (int k = 0; k < n; ++k)
        sum += A[row * n + k] * B[k * n + col];      /* 2n global reads per element */
    C[row * n + col] = sum;
}

__global__ void matmul_tiled(float *C, const float *A, const float *B, int n)
{
    __shared__ float As[TILE][TILE];   /* one tile of A and one of B, shared by the block */
    __shared__ float Bs[TILE][TILE];
    int tx = threadIdx.x, ty = threadIdx.y;
    int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float sum = 0.0f;
    for (int t = 0; t < (n + TILE - 1) / TILE; ++t) {
        /* Each thread loads one element of each tile (zero outside the matrix). */
        int ka = t * TILE + tx, kb = t * TILE + ty;
        As[ty][tx] = (row < n && ka < n) ? A[row * n + ka] : 0.0f;
        Bs[ty][tx] = (kb < n && col < n) ? B[kb * n + col] : 0.0f;
        __syncthreads();                       /* the tiles are complete ...      */
        for (int k = 0; k < TILE; ++k)
            sum += As[ty][k] * Bs[k][tx];      /* ... so read them from shared memory */
        __syncthreads();                       /* done with them before the next load */
    }
    if (row < n && col < n)
        C[row * n + col] = sum;
}
"""


def time_kernel(func: cuda.Function, args: tuple[Any, ...], grid: tuple[int, int],
                repeats: int = 5) -> float:
    """Average milliseconds per launch, measured on the GPU with two events."""
    func(*args, block=(TILE, TILE, 1), grid=grid)          # warm up
    start, stop = cuda.Event(), cuda.Event()
    start.record()
    for _ in range(repeats):
        func(*args, block=(TILE, TILE, 1), grid=grid)
    stop.record()
    stop.synchronize()                                     # wait for the GPU to get there
    return start.time_till(stop) / repeats


def main(argv: list[str]) -> int:
    n = int(argv[1]) if len(argv) > 1 else 1000    # not a multiple of TILE on purpose
    rng = np.random.default_rng(1)
    a = rng.standard_normal((n, n)).astype(np.float32)
    b = rng.standard_normal((n, n)).astype(np.float32)
    expect = a.astype(np.float64) @ b.astype(np.float64)

    mod = SourceModule(KERNEL)
    a_gpu, b_gpu = cuda.mem_alloc(a.nbytes), cuda.mem_alloc(b.nbytes)
    c_gpu = cuda.mem_alloc(a.nbytes)
    cuda.memcpy_htod(a_gpu, a)
    cuda.memcpy_htod(b_gpu, b)
    grid = ((n + TILE - 1) // TILE, (n + TILE - 1) // TILE)
    args = (c_gpu, a_gpu, b_gpu, np.int32(n))

    status = 0
    for name in ("matmul_naive", "matmul_tiled"):
        ms = time_kernel(mod.get_function(name), args, grid)
        c = np.empty_like(a)
        cuda.memcpy_dtoh(c, c_gpu)
        err = float(np.abs(c - expect).max() / np.abs(expect).max())
        gflops = 2.0 * n ** 3 / (ms * 1e-3) / 1e9
        print(f"{name:13s} {ms:8.3f} ms  {gflops:8.1f} GFLOP/s  max rel. error {err:.1e}")
        if not err < 1e-4:
            print(f"MISMATCH: {name} differs from NumPy", file=sys.stderr)
            status = 1
    for mem in (a_gpu, b_gpu, c_gpu):
        mem.free()
    if status == 0:
        print(f"OK: {n}x{n} matrix product matches NumPy")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
