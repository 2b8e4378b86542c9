# SPDX-License-Identifier: MIT
"""Launch overhead figures for ``python -m barecuda.bench``.

Every figure is a median over many repeats after warm-up, divided by the same
launches made in a plain C loop inside ``barecuda._driver`` in this process
(``_bench_launch`` / ``_bench_graph_launch``): ratio = Python time / C time.
Targets (../shared/PERFORMANCE.md): ``__call__`` with 4 args <= 1.15, prepared
calls <= 1.08.  CuPy's RawKernel and cuda.core's ``launch`` run side by side
when they are importable.

The kernels are empty and written in PTX here, so this benchmark needs neither
NVRTC nor nvcc.
"""

import statistics
import time

import numpy as np

from barecuda import _driver
from barecuda import driver as drv

# Empty kernels taking 0, 4 (two pointers, an int, a float) and 16 arguments.
_PTX = """
.version 8.0
.target sm_75
.address_size 64

.visible .entry empty0()
{
    ret;
}

.visible .entry empty4(.param .u64 a, .param .u64 b, .param .u32 n, .param .f32 x)
{
    ret;
}

.visible .entry empty16(
    .param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u64 p3,
    .param .u64 p4, .param .u64 p5, .param .u64 p6, .param .u64 p7,
    .param .u32 i0, .param .u32 i1, .param .u32 i2, .param .u32 i3,
    .param .f32 f0, .param .f32 f1, .param .f32 f2, .param .f32 f3)
{
    ret;
}
"""

_CUDA_C = """
extern "C" __global__ void empty0() {}
extern "C" __global__ void empty4(float *a, float *b, int n, float x) {}
extern "C" __global__ void empty16(float *p0, float *p1, float *p2, float *p3,
                                   float *p4, float *p5, float *p6, float *p7,
                                   int i0, int i1, int i2, int i3,
                                   float f0, float f1, float f2, float f3) {}
"""

GRID = (1, 1, 1)
BLOCK = (32, 1, 1)
N = 1000          # launches per repeat: stays under the driver's launch queue depth
REPEATS = 21
WARMUP = 3


def _median(fn, repeats=None):
    repeats = REPEATS if repeats is None else repeats
    for _ in range(WARMUP):
        fn()
    return statistics.median(fn() for _ in range(repeats))


def _paired(py_once, c_once, repeats=None):
    """Median Python time, median C time, and the median of the ratios of C and
    Python repeats taken back to back, so clock and driver drift cancel out."""
    repeats = REPEATS if repeats is None else repeats
    for _ in range(WARMUP):
        c_once()
        py_once()
    pys, cs, ratios = [], [], []
    for _ in range(repeats):
        c = c_once()
        p = py_once()
        pys.append(p)
        cs.append(c)
        ratios.append(p / c)
    return statistics.median(pys), statistics.median(cs), statistics.median(ratios)


def _timed(loop, sync):
    """Seconds per launch of loop(n), which makes n launches as users write them."""
    def once():
        sync()
        t0 = time.perf_counter()
        loop(N)
        sync()
        return (time.perf_counter() - t0) / N
    return once


def _loop(call, sync, n=None):
    n = N if n is None else n

    def once():
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        sync()
        return (time.perf_counter() - t0) / n
    return once


def _row(name, value, floor, note="", vs="C floor", target=None, ratio=None):
    if ratio is None:
        ratio = value / floor if floor else None
    if target is not None and ratio is not None:
        note = (note + "; " if note else "") + \
            f"target <= {target} {'met' if ratio <= target else 'MISSED'}"
    return dict(name=name, value=value * 1e6, unit="us", ratio=ratio,
                vs=f"{vs} {floor * 1e6:.2f} us" if floor else vs, note=note)


def _args(n, a, b):
    if n == 0:
        return ()
    if n == 4:
        return (a, b, np.int32(1000), np.float32(2.5))
    return (a, b, a, b, a, b, a, b) + (np.int32(7),) * 4 + (np.float32(1.5),) * 4


def _prepared_sig(n):
    return {0: "", 4: "PPif", 16: "P" * 8 + "i" * 4 + "f" * 4}[n]


def _prepared_args(n, a, b):
    if n == 0:
        return ()
    if n == 4:
        return (a, b, 1000, 2.5)
    return (a, b, a, b, a, b, a, b) + (7,) * 4 + (1.5,) * 4


def run():
    rows = []
    module = drv.module_from_buffer(_PTX)
    a = drv.mem_alloc(1 << 20)
    b = drv.mem_alloc(1 << 20)
    stream = drv.Stream()
    ctx_sync = drv.Context.synchronize
    funcs = {n: module.get_function(f"empty{n}") for n in (0, 4, 16)}
    floors = {}

    # Each figure: launches written as users write them (a plain for loop, no
    # wrapper call per launch), paired repeat by repeat with the same launches made
    # by cuLaunchKernel in a C loop (_bench_launch), ratio = Python / C.
    blk, grd = BLOCK, GRID

    def c_floor(f, args, stream=None):
        return lambda: _driver._bench_launch(f, grd, blk, args, N, "enqueue", stream)

    f0, f4, f16 = funcs[0], funcs[4], funcs[16]
    a0, a1, a2, a3 = args4 = _args(4, a, b)
    args16 = _args(16, a, b)

    def call0(n, f=f0):
        for _ in range(n):
            f(block=blk, grid=grd)

    def call4(n, f=f4):
        for _ in range(n):
            f(a0, a1, a2, a3, block=blk, grid=grd)

    def call16(n, f=f16, args=args16):
        for _ in range(n):
            f(*args, block=blk, grid=grd)

    for n, loop, args in ((0, call0, ()), (4, call4, args4), (16, call16, args16)):
        value, floor, ratio = _paired(_timed(loop, ctx_sync), c_floor(funcs[n], args))
        floors[n] = floor
        rows.append(_row(f"launch __call__, empty kernel, {n} args", value, floor, ratio=ratio,
                         target=1.15 if n == 4 else None))

    for n in (0, 4, 16):
        funcs[n].prepare(_prepared_sig(n))
    p0, p1, p2, p3 = pargs4 = _prepared_args(4, a, b)
    pargs16 = _prepared_args(16, a, b)

    def prep0(n, call=f0.prepared_call):
        for _ in range(n):
            call(grd, blk)

    def prep4(n, call=f4.prepared_call):
        for _ in range(n):
            call(grd, blk, p0, p1, p2, p3)

    def prep16(n, call=f16.prepared_call, args=pargs16):
        for _ in range(n):
            call(grd, blk, *args)

    for n, loop, args in ((0, prep0, ()), (4, prep4, args4), (16, prep16, args16)):
        value, floor, ratio = _paired(_timed(loop, ctx_sync), c_floor(funcs[n], args))
        rows.append(_row(f"launch prepared_call, {n} args", value, floor, ratio=ratio,
                         target=1.08 if n == 4 else None))

    def prep_async4(n, call=f4.prepared_async_call, stream=stream):
        for _ in range(n):
            call(grd, blk, stream, p0, p1, p2, p3)

    value, sfloor, ratio = _paired(_timed(prep_async4, stream.synchronize),
                                   c_floor(f4, args4, stream))
    rows.append(_row("launch prepared_async_call on a Stream, 4 args", value, sfloor,
                     ratio=ratio, target=1.08))

    # GIL around cuLaunchKernel: measure both, report, restore the default.
    default = _driver._launch_release_gil()
    per_mode = {}
    try:
        for release in (False, True):
            _driver._launch_release_gil(release)
            per_mode[release] = _paired(_timed(call4, ctx_sync), c_floor(f4, args4))
    finally:
        _driver._launch_release_gil(default)
    faster = min(per_mode, key=lambda k: per_mode[k][2])
    for release, (value, floor, ratio) in per_mode.items():
        rows.append(_row(f"launch __call__ 4 args, GIL {'released' if release else 'held'}",
                         value, floor, ratio=ratio,
                         note=("faster" if release == faster else "slower") +
                         ("; current default" if release == default else "")))

    # launch + synchronize round trip
    sync_floor = _median(lambda: _driver._bench_launch(f4, GRID, BLOCK, args4, 200, "sync",
                                                       stream), repeats=9)

    def roundtrip():
        f4.prepared_async_call(GRID, BLOCK, stream, *pargs4)
        stream.synchronize()
    value = _median(_loop(roundtrip, stream.synchronize, n=200), repeats=9)
    rows.append(_row("launch + stream synchronize round trip, 4 args", value, sync_floor))

    # graph replay: one captured launch
    stream.begin_capture()
    f4.prepared_async_call(GRID, BLOCK, stream, *pargs4)
    graph = stream.end_capture()
    gexec = graph.instantiate()
    gexec.upload(stream)
    def replay(n, launch=gexec.launch, stream=stream):
        for _ in range(n):
            launch(stream)
    value, gfloor, ratio = _paired(_timed(replay, stream.synchronize),
                                   lambda: _driver._bench_graph_launch(gexec, stream, N))
    rows.append(_row("graph replay (1 kernel node), GraphExec.launch", value, gfloor,
                     vs="C floor (cuGraphLaunch loop)", target=1.08, ratio=ratio))

    rows.extend(_peers(a, b, floors[4]))
    gexec.close()
    graph.close()
    stream.synchronize()
    return rows


def _peers(a, b, floor):
    rows = []
    try:
        import cupy
    except Exception:  # noqa: BLE001  (not installed, or broken)
        cupy = None
    if cupy is not None:
        try:
            k = cupy.RawKernel(_CUDA_C, "empty4")
            ca = cupy.empty(1024, dtype=cupy.float32)
            cb = cupy.empty(1024, dtype=cupy.float32)
            cargs = (ca, cb, np.int32(1000), np.float32(2.5))
            dev = cupy.cuda.Device()

            def cp_loop(n, k=k, cargs=cargs, grid=GRID, block=BLOCK):
                for _ in range(n):
                    k(grid, block, cargs)
            value = _median(_timed(cp_loop, dev.synchronize))
            rows.append(_row("CuPy RawKernel launch, 4 args", value, floor,
                             note=f"cupy {cupy.__version__}"))
        except Exception as exc:  # noqa: BLE001
            rows.append(dict(name="CuPy RawKernel launch, 4 args", value=None, unit="us",
                             ratio=None, vs="C floor", note=f"failed: {exc!r}"))
    core = None
    try:
        import cuda.core as core
        core.launch  # noqa: B018
    except Exception:  # noqa: BLE001
        try:
            import cuda.core.experimental as core
        except Exception:  # noqa: BLE001
            core = None
    if core is not None:
        try:
            dev = core.Device()
            dev.set_current()
            cc = dev.compute_capability
            prog = core.Program(_CUDA_C, code_type="c++",
                                options=core.ProgramOptions(arch=f"sm_{cc[0]}{cc[1]}"))
            kern = prog.compile("cubin").get_kernel("empty4")
            s = dev.create_stream()
            cfg = core.LaunchConfig(grid=GRID, block=BLOCK)
            kargs = (np.uint64(int(a)), np.uint64(int(b)), np.int32(1000), np.float32(2.5))
            launch = core.launch

            k0, k1, k2, k3 = kargs

            def cc_loop(n, launch=launch, s=s, cfg=cfg, kern=kern):
                for _ in range(n):
                    launch(s, cfg, kern, k0, k1, k2, k3)
            value = _median(_timed(cc_loop, s.sync))
            rows.append(_row("cuda.core launch, 4 args", value, floor,
                             note=f"cuda.core {getattr(core, '__version__', '')}".strip()))
            s.close()
        except Exception as exc:  # noqa: BLE001
            rows.append(dict(name="cuda.core launch, 4 args", value=None, unit="us",
                             ratio=None, vs="C floor", note=f"failed: {exc!r}"))
    return rows


if __name__ == "__main__":
    for r in run():
        ratio = f"{r['ratio']:.3f}" if r["ratio"] is not None else "-"
        value = f"{r['value']:.2f}" if r["value"] is not None else "-"
        print(f"{r['name']:<55} {value:>8} {r['unit']}  x{ratio:<6} vs {r['vs']}  {r['note']}")
