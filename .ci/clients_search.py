# SPDX-License-Identifier: MIT
"""kernel_tuner's search over 32 block sizes of a 10,000,000-element vector add, with
answer checking, as issue 32 gives it.  Prints the seconds tune_kernel took, then
kernel_tuner's own account of them (its compile, verification and benchmark times,
summed over the configurations); `--profile FILE` also writes cProfile's top entries.
Run by .ci/clients with `import pycuda` answered by barecuda or by PyCUDA.

kernel_tuner's lang="CUDA" takes cuda-python when it is installed (as on the GPU machine),
then CuPy, and PyCUDA only last: neither binding would be measured.  So the search runs
with lang="pycuda" (kernel_tuner's PyCUDA backend) unless $CLIENTS_LANG says otherwise,
and the line printed names the backend that ran."""

import os

import sys
import time

import numpy as np

import kernel_tuner

LANG = os.environ.get("CLIENTS_LANG", "pycuda")
SOURCE = """__global__ void vector_add(float *c, const float *a, const float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i]; }"""


def search():
    n = np.int32(10_000_000)
    rng = np.random.default_rng(1)
    a = rng.standard_normal(n, dtype=np.float32)
    b = rng.standard_normal(n, dtype=np.float32)
    c = np.zeros_like(a)
    res, env = kernel_tuner.tune_kernel(
        "vector_add", SOURCE, n, [c, a, b, n], {"block_size_x": [32 * i for i in range(1, 33)]},
        lang=LANG, answer=[a + b, None, None, None], quiet=True)
    assert len(res) == 32, len(res)
    failed = [r for r in res if not isinstance(r.get("time"), float)]
    assert not failed, f"{len(failed)} configurations failed: {failed[0]}"
    return res, env


profile = sys.argv[1:2] == ["--profile"] and sys.argv[2]
if profile:
    import cProfile
    import pstats

    prof = cProfile.Profile()
    t0 = time.perf_counter()
    res, env = prof.runcall(search)
    elapsed = time.perf_counter() - t0
    with open(profile, "w") as f:
        stats = pstats.Stats(prof, stream=f)
        stats.sort_stats("cumulative").print_stats(45)
        stats.sort_stats("tottime").print_stats(30)
else:
    t0 = time.perf_counter()
    res, env = search()
    elapsed = time.perf_counter() - t0
parts = {k: sum(r.get(k, 0) for r in res) / 1000
         for k in ("compile_time", "verification_time", "benchmark_time")}
print(f"{elapsed:.3f} " + " ".join(f"{k.split('_')[0]}={v:.3f}" for k, v in parts.items())
      + f" lang={LANG} pycuda.driver={getattr(sys.modules.get('pycuda.driver'), '__name__', None)}")
