# SPDX-License-Identifier: MIT
"""How a 2D grid of 2D blocks maps threads onto the pixels of an image.

Teaches: the built-in variables ``blockIdx``, ``threadIdx``, ``blockDim`` and
``gridDim`` in two dimensions, turning them into a (column, row) pair and a
row-major offset, and rounding the grid up so that partial blocks at the right
and bottom edges are covered (and guarded).  Every thread writes down who it
is; NumPy predicts the same table from the launch shape.

Run: python examples/grid_block_indexing.py
Exit status 0 when every thread wrote what NumPy expects.
"""

import sys
from typing import Any

import numpy as np
import numpy.typing as npt

import barecuda.autoinit  # noqa: F401
import barecuda.driver as cuda
from barecuda.compiler import SourceModule

KERNEL = r"""
__global__ void whoami(int *out, int width, int height)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;   /* x grows to the right */
    int row = blockIdx.y * blockDim.y + threadIdx.y;   /* y grows downwards    */
    if (col >= width || row >= height)                 /* edge blocks stick out */
        return;
    int *me = out + 5 * (row * width + col);           /* row-major, 5 ints per pixel */
    me[0] = blockIdx.x;
    me[1] = blockIdx.y;
    me[2] = threadIdx.x;
    me[3] = threadIdx.y;
    me[4] = (blockIdx.y * gridDim.x + blockIdx.x)      /* linear block number */
            * (blockDim.x * blockDim.y)
            + threadIdx.y * blockDim.x + threadIdx.x;  /* + linear thread in block */
}
"""


def expected(width: int, height: int, bx: int, by: int, gx: int) -> npt.NDArray[Any]:
    """What each pixel's thread should report, computed with NumPy."""
    row, col = np.mgrid[0:height, 0:width]
    blk_x, blk_y = col // bx, row // by
    thr_x, thr_y = col % bx, row % by
    linear = (blk_y * gx + blk_x) * (bx * by) + thr_y * bx + thr_x
    return np.stack([blk_x, blk_y, thr_x, thr_y, linear], axis=-1).astype(np.int32)


def main() -> int:
    width, height = 100, 37          # deliberately not multiples of the block shape
    bx, by = 16, 8                   # 128 threads per block, as a 16 x 8 tile
    gx = (width + bx - 1) // bx      # round up: 7 blocks across
    gy = (height + by - 1) // by     # and 5 blocks down

    whoami = SourceModule(KERNEL).get_function("whoami")
    out_gpu = cuda.mem_alloc(width * height * 5 * 4)
    cuda.memset_d8(out_gpu, 0xFF, width * height * 5 * 4)   # all bytes 0xFF: -1 = "never written"
    whoami(out_gpu, np.int32(width), np.int32(height), block=(bx, by, 1), grid=(gx, gy))

    out = np.empty((height, width, 5), np.int32)
    cuda.memcpy_dtoh(out, out_gpu)
    out_gpu.free()

    want = expected(width, height, bx, by, gx)
    if not np.array_equal(out, want):
        r, c, k = np.argwhere(out != want)[0]
        print(f"MISMATCH at pixel (row {r}, col {c}) field {k}: GPU {out[r, c, k]}, "
              f"expected {want[r, c, k]}", file=sys.stderr)
        return 1
    print(f"pixel (row 20, col 50) was written by block {tuple(out[20, 50, :2])}, "
          f"thread {tuple(out[20, 50, 2:4])}")
    print(f"OK: {gx}x{gy} blocks of {bx}x{by} threads covered a {width}x{height} image")
    return 0


if __name__ == "__main__":
    sys.exit(main())
