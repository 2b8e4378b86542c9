# SPDX-License-Identifier: MIT
"""Compile-time figures (PERFORMANCE.md): a cold SourceModule against bare NVRTC on
the same source, a disk-cache hit in a fresh process, a repeat in the same
process, and CuPy's RawModule where CuPy imports.

A repeated SourceModule of one small source, with and without a ``__constant__``:
without one the loaded module is shared (against the 20 us target), with one each
SourceModule loads its own, as PyCUDA does (against PyCUDA's compile-cache hit, 208 us
on an H200, PERFORMANCE.md; and against CuPy's RawModule of the same source where CuPy
imports).  These rows need a GPU; without one they are rows without a value.

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

# one small kernel, without and with module-scope state (a __constant__ table)
_PLAIN = r"""
__global__ void scale(float *y, const float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i];
}
"""
_WITH_CONSTANT = r"""
__constant__ float coef[16];
__global__ void scale(float *y, const float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * coef[i & 15] * x[i];
}
"""
#: PyCUDA 2026.1's SourceModule of a source in its compile cache, on an H200 (PERFORMANCE.md)
PYCUDA_CACHE_HIT = 208e-6

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
    results += _repeat_rows(gpu, cupy)
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


def _repeat_rows(gpu, cupy):
    """A SourceModule of one source made again and again (its kernel taken each
    time), without and with a __constant__; CuPy's RawModule of the second source
    the same way, in the same rounds.  Rows without a value where there is no GPU."""
    names = ("SourceModule again, same source, no globals (module shared)",
             "SourceModule again, same source with a __constant__ (module per instance)",
             "RawModule again, same source with a __constant__ (CuPy)")
    if not gpu:
        return [dict(name=n, value=None, unit="s", ratio=None, vs=None,
                     note="needs a GPU: the figure is a module load") for n in names[:2]]
    from barecuda import compiler
    from barecuda.bench import interleaved_times

    cupy_src = f'extern "C" {{\n{_WITH_CONSTANT}\n}}\n'

    def cupy_again():   # CuPy loads the module at get_function, one per RawModule
        cupy.RawModule(code=cupy_src, backend="nvrtc").get_function("scale")

    cupy_note = None
    if cupy is not None:
        try:
            cupy_again()
        except Exception as exc:  # noqa: BLE001 - any failure means no CuPy figure
            cupy_note = f"CuPy failed: {exc}"
    with tempfile.TemporaryDirectory() as cache:
        def plain():
            compiler.SourceModule(_PLAIN, cache_dir=cache).get_function("scale")

        def with_constant():
            compiler.SourceModule(_WITH_CONSTANT, cache_dir=cache).get_function("scale")

        fns = [plain, with_constant]
        if cupy is not None and cupy_note is None:
            fns.append(cupy_again)
        times = interleaved_times(fns, iterations=200, rounds=15, warmup=3)
    shared, own = times[:2]
    pycuda_time, pycuda_note = _pycuda_repeat()
    if pycuda_time is not None:
        vs = "PyCUDA's SourceModule of the same source, this GPU (target <= 1)"
        peer = pycuda_time
    else:
        vs, peer = "PyCUDA's compile-cache hit, 208 us on an H200 (target <= 1)", PYCUDA_CACHE_HIT
    rows = [dict(name=names[0], value=shared, unit="s", ratio=shared / 20e-6,
                 vs="target 20 us", note="get_function included"),
            dict(name=names[1], value=own, unit="s", ratio=own / peer, vs=vs,
                 note=f"get_function and the unload included; {own / shared:.1f}x the "
                      f"shared module's; {pycuda_note}")]
    if len(times) == 3:
        rows.append(dict(name=names[2], value=times[2], unit="s", ratio=own / times[2],
                         vs="barecuda SourceModule with a __constant__ / CuPy",
                         note=f"CuPy {cupy.__version__}; get_function loads the module"))
    elif cupy_note is not None:
        rows.append(dict(name=names[2], value=None, unit="s", ratio=None, vs=None,
                         note=cupy_note))
    return rows

# A real PyCUDA's SourceModule of _WITH_CONSTANT made again and again, in a process
# of its own (its context is not ours): the median of 15 rounds of 50, in seconds.
_PYCUDA_CHILD = r"""
import sys, time
import pycuda
if hasattr(pycuda, "__barecuda__"):
    sys.exit(3)
import pycuda.autoprimaryctx
from pycuda.compiler import SourceModule
src = sys.argv[1]
for _ in range(3):
    SourceModule(src).get_function("scale")
rounds = []
for _ in range(15):
    t = time.perf_counter()
    for _ in range(50):
        SourceModule(src).get_function("scale")
    rounds.append((time.perf_counter() - t) / 50)
rounds.sort()
print(rounds[len(rounds) // 2], pycuda.VERSION_TEXT)
"""


def _pycuda_repeat():
    """(seconds, note): a real PyCUDA's repeated SourceModule of the same source on this
    GPU, or (None, why not) where no real PyCUDA is installed (.ci/clients builds one)."""
    env = {k: v for k, v in os.environ.items() if k != "BARECUDA_AS_PYCUDA"}
    try:
        out = subprocess.run([sys.executable, "-c", _PYCUDA_CHILD, _WITH_CONSTANT], env=env,
                             capture_output=True, text=True, timeout=300, cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        return None, "PyCUDA's run timed out"
    if out.returncode != 0:
        return None, "no real PyCUDA here: compared with its H200 figure"
    value, version = out.stdout.split()[-2:]
    return float(value), f"PyCUDA {version} measured in its own process"


if __name__ == "__main__":
    for r in run():
        print(r)
