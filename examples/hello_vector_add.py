# SPDX-License-Identifier: MIT
"""Hello, GPU: add two vectors with one thread per element.

Teaches: writing a ``__global__`` kernel, compiling it at run time with
``SourceModule``, computing a global thread index from ``blockIdx``,
``blockDim`` and ``threadIdx``, choosing a grid that covers all elements (and
guarding the last, partial block), and letting ``cuda.In`` / ``cuda.Out`` do the
host <-> device copies around the launch.

Run: python examples/hello_vector_add.py [n]
Exit status 0 when the GPU result equals NumPy's ``a + b``.
"""

import sys

import numpy as np

import barecuda.autoinit  # noqa: F401  (creates a context on the first GPU)
import barecuda.driver as cuda
from barecuda.compiler import SourceModule

# The kernel is plain CUDA C.  SourceModule wraps it in extern "C" so the
# function keeps its name "vector_add" for get_function().
KERNEL = r"""
__global__ void vector_add(float *c, const float *a, const float *b, int n)
{
    /* Every thread handles one element: its position in the whole grid. */
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)              /* the last block may stick out past the end */
        c[i] = a[i] + b[i];
}
"""


def main(argv: list[str]) -> int:
    n = int(argv[1]) if len(argv) > 1 else 1_000_003  # deliberately not a multiple of 256
    rng = np.random.default_rng(0)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    c = np.empty_like(a)

    vector_add = SourceModule(KERNEL).get_function("vector_add")

    threads = 256                            # threads per block
    blocks = (n + threads - 1) // threads    # enough blocks to cover n (rounded up)

    # cuda.In copies an array to the GPU before the launch; cuda.Out copies it
    # back afterwards.  Scalars must have an exact C type: np.int32 for "int".
    vector_add(cuda.Out(c), cuda.In(a), cuda.In(b), np.int32(n),
               block=(threads, 1, 1), grid=(blocks, 1))

    expect = a + b
    if not np.array_equal(c, expect):
        bad = int(np.flatnonzero(c != expect)[0])
        print(f"MISMATCH at element {bad}: GPU {c[bad]} != NumPy {expect[bad]}", file=sys.stderr)
        return 1
    print(f"OK: added two vectors of {n} floats with {blocks} blocks of {threads} threads")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
