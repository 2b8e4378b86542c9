# SPDX-License-Identifier: MIT
"""Summing a large array: a hand-written reduction against ReductionKernel.

Teaches: the classic two-level reduction.  Each thread first adds up many
elements with a grid-stride loop, then the block combines its threads' partial
sums: inside a warp with ``__shfl_down_sync`` (registers only, no
``__syncthreads``), across warps through a small ``__shared__`` array.  One
partial sum per block goes to global memory, and a second launch of the same
kernel with one block sums those.  The same sum is then written in one line
with ``ReductionKernel``, and both are checked against NumPy.

Run: python examples/reduction_by_hand.py [n]
Exit status 0 when both GPU sums match NumPy's (float64 reference, float32 tolerance).
"""

import sys

import numpy as np

import barecuda.autoinit  # noqa: F401
import barecuda.driver as cuda
from barecuda import gpuarray
from barecuda.compiler import SourceModule
from barecuda.reduction import ReductionKernel

BLOCK = 256
KERNEL = r"""
#define BLOCK 256

__device__ float warp_sum(float v)
{
    /* Each step adds the value held by the lane `offset` places higher:
       after 5 steps lane 0 holds the sum of all 32 lanes. */
    for (int offset = 16; offset > 0; offset /= 2)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

__global__ void block_sum(float *partial, const float *x, int n)
{
    __shared__ float warp_totals[BLOCK / 32];
    float v = 0.0f;
    /* Grid-stride loop: thread t adds x[t], x[t + all threads], ... */
    for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK)
        v += x[i];
    v = warp_sum(v);                              /* 1. reduce within each warp   */
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0)
        warp_totals[warp] = v;                    /* 2. one value per warp ...    */
    __syncthreads();
    if (warp == 0) {                              /* 3. ... summed by warp 0      */
        v = lane < BLOCK / 32 ? warp_totals[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0)
            partial[blockIdx.x] = v;              /* 4. one value per block       */
    }
}
"""


def main(argv: list[str]) -> int:
    n = int(argv[1]) if len(argv) > 1 else 10_000_000
    rng = np.random.default_rng(2)
    x = rng.random(n, dtype=np.float32)
    expect = float(np.sum(x, dtype=np.float64))

    x_gpu = gpuarray.to_gpu(x)
    block_sum = SourceModule(KERNEL).get_function("block_sum")
    block_sum.prepare("PPi")                      # pointer, pointer, int

    # A few blocks per multiprocessor is enough: the grid-stride loop does the rest.
    blocks = 4 * cuda.Context.get_device().multiprocessor_count
    partial = gpuarray.empty(blocks, np.float32)
    total = gpuarray.empty(1, np.float32)
    # The same reduction, generated: neutral "0", combine "a+b", read "x[i]".
    sum_kernel = ReductionKernel(np.float32, neutral="0", reduce_expr="a+b",
                                 map_expr="x[i]", arguments="const float *x")
    sum_kernel(x_gpu)                              # the first call compiles: keep it out of the timing

    # Events on the default stream bracket each version.
    e0, e1, e2 = cuda.Event(), cuda.Event(), cuda.Event()
    e0.record()
    block_sum.prepared_call((blocks, 1), (BLOCK, 1, 1), partial.gpudata, x_gpu.gpudata, n)
    block_sum.prepared_call((1, 1), (BLOCK, 1, 1), total.gpudata, partial.gpudata, blocks)
    e1.record()
    generated_gpu = sum_kernel(x_gpu)              # a 0-d GPUArray
    e2.record()
    e2.synchronize()
    print(f"times: by hand {e0.time_till(e1):.3f} ms, ReductionKernel {e1.time_till(e2):.3f} ms")
    generated = generated_gpu.get()

    by_hand = float(total.get()[0])
    status = 0
    for name, got in (("by hand", by_hand), ("ReductionKernel", float(generated))):
        rel = abs(got - expect) / abs(expect)
        print(f"{name:16s} sum = {got:.6e}   relative error {rel:.1e}")
        if not rel < 1e-5:
            print(f"MISMATCH: the {name} sum differs from NumPy's {expect:.6e}", file=sys.stderr)
            status = 1
    if status == 0:
        print(f"OK: summed {n} floats two ways, both match NumPy")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
