# SPDX-License-Identifier: MIT
"""kernel_tuner's search over 32 block sizes of a 10,000,000-element vector add, with
answer checking, as issue 32 gives it; prints the seconds tune_kernel took.  Run by
.ci/clients with `import pycuda` answered by barecuda or by PyCUDA."""

import time

import numpy as np

import kernel_tuner

SOURCE = """__global__ void vector_add(float *c, const float *a, const float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i]; }"""

n = np.int32(10_000_000)
rng = np.random.default_rng(1)
a = rng.standard_normal(n, dtype=np.float32)
b = rng.standard_normal(n, dtype=np.float32)
c = np.zeros_like(a)
t0 = time.perf_counter()
res, env = kernel_tuner.tune_kernel("vector_add", SOURCE, n, [c, a, b, n],
                                    {"block_size_x": [32 * i for i in range(1, 33)]},
                                    lang="CUDA", answer=[a + b, None, None, None], quiet=True)
elapsed = time.perf_counter() - t0
assert len(res) == 32, len(res)
print(f"{elapsed:.3f}")
