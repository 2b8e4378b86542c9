# SPDX-License-Identifier: MIT
"""Compile-time figures (PERFORMANCE.md): a cold SourceModule against bare NVRTC on
the same source, a disk-cache hit in a fresh process, a repeat in the same
process, and CuPy's RawModule where CuPy imports.

``run()`` returns a list of dicts (name, value, unit, ratio, vs, note).  Without
a GPU the figures are taken with ``compiler.compile(arch=...)`` (no module load)."""

import os
import statistics
import subprocess
import sys
import tempfile
import time

SOURCE = r"""
#include <barecuda_helpers.cuh>
__global__ void saxpy(float *y, const float *x, float a, long long n)
{
    BC_GRID_STRIDE_LOOP(i, n)
        y[i] = a * x[i] + y[i];
}

__global__ void block_sum(float *out, const float *x, long long n)
{
    __shared__ float partial[32];
    float v = 0.0f;
    BC_GRID_STRIDE_LOOP(i, n)
        v += x[i];
    v = bc_warp_sum_float(v);
    if (threadIdx.x % 32 == 0)
        partial[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        v = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0f;
        v = bc_warp_sum_float(v);
        if (threadIdx.x == 0)
            atomicAdd(out, v);
    }
}
"""

_CHILD = r"""
import sys, time
from barecuda import compiler, driver
src, cache, arch = sys.argv[1], sys.argv[2], sys.argv[3]
gpu = arch == "-"
if gpu:
    driver.Context.get_device()
t = time.perf_counter()
if gpu:
    compiler.SourceModule(src, cache_dir=cache)
else:
    compiler.compile(src, arch=arch, cache_dir=cache)
dt = time.perf_counter() - t
assert compiler.stats["disk_hits"] == 1 and compiler.stats["nvrtc"] == 0, compiler.stats
print(dt)
"""


def _has_gpu():
    from barecuda import driver
    try:
        driver.Context.get_device()
        return True
    except driver.Error:
        return False


def _median_time(fn, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def run(repeat=7):
    from barecuda import _driver, compiler, driver

    results = []
    gpu = _has_gpu()
    arch = None if gpu else f"sm_{compiler._supported_archs()[-1]}"
    where = "SourceModule (module loaded)" if gpu else f"compiler.compile(arch={arch!r})"
    nvrtc_ver = "%d.%d" % driver.nvrtc_version()

    # the exact program SourceModule builds: wrapped source and final options
    compiler.clear_memory_cache()
    with tempfile.TemporaryDirectory() as scratch:
        if gpu:
            mod = compiler.SourceModule(SOURCE, cache_dir=scratch, keep=False)
            target_arch = mod.arch
        else:
            compiler.compile(SOURCE, arch=arch, cache_dir=scratch)
            target_arch = arch
    kind = "ptx" if target_arch.startswith("compute") else "cubin"
    toolkit = compiler._toolkit_include()
    options = [f"--gpu-architecture={target_arch}", f"--include-path={compiler.INCLUDE_DIR}"]
    if toolkit:
        options.append(f"--include-path={toolkit}")
    full = 'extern "C" {\n' + SOURCE + "\n}\n"

    def bare():
        image = _driver._nvrtc_compile(full, "kernel.cu", options, None, (), kind)[0]
        if gpu:
            driver.module_from_buffer(image)

    def ours():
        if gpu:
            compiler.SourceModule(SOURCE, cache_dir=False)
        else:
            compiler.compile(SOURCE, arch=arch, cache_dir=False)

    bare()
    ours()
    # in pairs, each first in every other pair, so that neither drift nor the
    # order favours one; the ratio is the median of the pairs' ratios
    tb, to, ratios = [], [], []
    for i in range(3 * repeat):
        first, second = (bare, ours) if i % 2 == 0 else (ours, bare)
        t1, t2 = _median_time(first, 1), _median_time(second, 1)
        t_bare, t_ours = (t1, t2) if first is bare else (t2, t1)
        tb.append(t_bare)
        to.append(t_ours)
        ratios.append(t_ours / t_bare)
    b, o = statistics.median(tb), statistics.median(to)
    results.append(dict(name="compile cold (bare NVRTC)", value=b, unit="s", ratio=None,
                        vs=None, note=f"_nvrtc_compile, {target_arch}, NVRTC {nvrtc_ver}"))
    results.append(dict(name="compile cold (SourceModule, cache off)", value=o, unit="s",
                        ratio=statistics.median(ratios), vs="bare NVRTC (target <= 1.1)",
                        note=f"{where}, cache_dir=False"))

    # a disk hit in a fresh process
    with tempfile.TemporaryDirectory() as cache:
        compiler.clear_memory_cache()
        if gpu:
            compiler.SourceModule(SOURCE, cache_dir=cache)
        else:
            compiler.compile(SOURCE, arch=arch, cache_dir=cache)
        env = dict(os.environ)
        env.pop("BARECUDA_CACHE_DIR", None)
        hits = []
        for _ in range(max(9, repeat)):     # a fresh process each: its run varies
            out = subprocess.run([sys.executable, "-c", _CHILD, SOURCE, cache, arch or "-"],
                                 capture_output=True, text=True, env=env)
            if out.returncode != 0:
                raise RuntimeError(f"disk-hit child failed:\n{out.stderr}")
            hits.append(float(out.stdout.strip().splitlines()[-1]))
        d = statistics.median(hits)
        results.append(dict(name="compile, disk-cache hit in a fresh process", value=d,
                            unit="s", ratio=d / 0.0005, vs="target 0.5 ms",
                            note=f"{where}; excludes interpreter start and imports"))

        # a repeat in the same process
        def again():
            if gpu:
                compiler.SourceModule(SOURCE, cache_dir=cache)
            else:
                compiler.compile(SOURCE, arch=arch, cache_dir=cache)
        again()
        n = 2000
        per = []
        for _ in range(5):
            t = time.perf_counter()
            for _ in range(n):
                again()
            per.append((time.perf_counter() - t) / n)
        r = statistics.median(per)
        results.append(dict(name="compile again in the same process", value=r, unit="s",
                            ratio=r / 20e-6, vs="target 20 us", note=where))

    # CuPy, where it imports and a GPU is present
    try:
        import cupy
    except Exception:  # noqa: BLE001 - any failure means no CuPy figure
        cupy = None
    if cupy is not None and gpu:
        try:
            counter = [0]

            def cupy_cold():
                counter[0] += 1
                # wrapped in extern "C" as SourceModule does, so the names are unmangled
                src = (f"// barecuda bench {os.getpid()} {counter[0]} {time.time_ns()}\n"
                       f'extern "C" {{\n{SOURCE}\n}}\n')
                m = cupy.RawModule(code=src, backend="nvrtc",
                                   options=(f"-I{compiler.INCLUDE_DIR}",))
                m.get_function("saxpy")
            cupy_cold()
            c = _median_time(cupy_cold, repeat)
            results.append(dict(name="compile cold (CuPy RawModule)", value=c, unit="s",
                                ratio=o / c, vs="barecuda SourceModule cold / CuPy",
                                note=f"CuPy {cupy.__version__}, unique source each time"))
        except Exception as exc:  # noqa: BLE001
            results.append(dict(name="compile cold (CuPy RawModule)", value=None, unit="s",
                                ratio=None, vs=None, note=f"CuPy failed: {exc}"))
    return results


if __name__ == "__main__":
    for r in run():
        print(r)
