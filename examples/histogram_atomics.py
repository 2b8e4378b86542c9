# SPDX-License-Identifier: MIT
"""A histogram with atomic operations: many threads adding to the same counters.

Teaches: a race condition (two threads doing ``count[b] += 1`` at once can lose
an increment) and its fix, ``atomicAdd``.  Atomics on global memory from every
thread are correct but contend for the same few addresses, so the faster
version first builds a private histogram per block in ``__shared__`` memory
(shared-memory atomics are cheap), then adds it to the global one once per
block.  Both are checked against ``numpy.bincount`` and timed with events.

Run: python examples/histogram_atomics.py [n]
Exit status 0 when both histograms equal numpy.bincount exactly.
"""

import sys

import numpy as np

import barecuda.autoinit  # noqa: F401
import barecuda.driver as cuda
from barecuda.compiler import SourceModule

BINS = 256
KERNEL = r"""
#define BINS 256

/* Version 1: every thread increments the global counter of its byte. */
__global__ void hist_global(unsigned int *hist, const unsigned char *data, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&hist[data[i]], 1u);
}

/* Version 2: a per-block histogram in shared memory, merged at the end. */
__global__ void hist_shared(unsigned int *hist, const unsigned char *data, int n)
{
    __shared__ unsigned int local[BINS];
    for (int b = threadIdx.x; b < BINS; b += blockDim.x)
        local[b] = 0;
    __syncthreads();                                   /* zeroed before anyone adds */
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&local[data[i]], 1u);
    __syncthreads();                                   /* all adds done before merging */
    for (int b = threadIdx.x; b < BINS; b += blockDim.x)
        if (local[b])
            atomicAdd(&hist[b], local[b]);
}
"""


def main(argv: list[str]) -> int:
    n = int(argv[1]) if len(argv) > 1 else 16_000_000
    rng = np.random.default_rng(8)
    # A skewed distribution (many equal bytes) makes the contention visible.
    data = np.clip(rng.normal(128, 20, n), 0, 255).astype(np.uint8)
    want = np.bincount(data, minlength=BINS).astype(np.uint32)

    mod = SourceModule(KERNEL)
    data_gpu = cuda.mem_alloc(data.nbytes)
    cuda.memcpy_htod(data_gpu, data)
    hist_gpu = cuda.mem_alloc(BINS * 4)
    blocks = 8 * cuda.Context.get_device().multiprocessor_count
    ok = True
    for name in ("hist_global", "hist_shared"):
        func = mod.get_function(name)
        cuda.memset_d32(hist_gpu, 0, BINS)              # counters start at zero
        start, stop = cuda.Event().record(), cuda.Event()
        func(hist_gpu, data_gpu, np.int32(n), block=(256, 1, 1), grid=(blocks, 1))
        stop.record().synchronize()
        hist = np.empty(BINS, np.uint32)
        cuda.memcpy_dtoh(hist, hist_gpu)
        same = np.array_equal(hist, want)
        print(f"{name:12s} {start.time_till(stop):7.3f} ms   "
              f"{'equals' if same else 'DIFFERS FROM'} numpy.bincount (total {int(hist.sum())})")
        ok &= same
    data_gpu.free()
    hist_gpu.free()
    if not ok:
        print("MISMATCH: a GPU histogram differs from numpy.bincount", file=sys.stderr)
        return 1
    print(f"OK: histograms of {n} bytes match numpy.bincount")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
