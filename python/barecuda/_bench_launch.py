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


def _row(name, value, floor, note="", vs="C floor", target=None):
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

    # __call__ on the default stream vs cuLaunchKernel in a C loop
    for n, f in funcs.items():
        args = _args(n, a, b)
        floor = _median(lambda f=f, args=args: _driver._bench_launch(f, GRID, BLOCK, args, N,
                                                                    "enqueue"))
        floors[n] = floor

        if n == 4:      # written out as users write it: no *args tuple in the loop
            a0, a1, a2, a3 = args

            def call(f=f, a0=a0, a1=a1, a2=a2, a3=a3, block=BLOCK, grid=GRID):
                f(a0, a1, a2, a3, block=block, grid=grid)
        else:
            def call(f=f, args=args, block=BLOCK, grid=GRID):
                f(*args, block=block, grid=grid)
        value = _median(_loop(call, ctx_sync))
        rows.append(_row(f"launch __call__, empty kernel, {n} args", value, floor,
                         target=1.15 if n == 4 else None))

    # prepared_call and prepared_async_call
    for n, f in funcs.items():
        f.prepare(_prepared_sig(n))
        pargs = _prepared_args(n, a, b)

        if n == 4:
            p0, p1, p2, p3 = pargs

            def pcall(call=f.prepared_call, p0=p0, p1=p1, p2=p2, p3=p3, grid=GRID, block=BLOCK):
                call(grid, block, p0, p1, p2, p3)
        else:
            def pcall(call=f.prepared_call, pargs=pargs, grid=GRID, block=BLOCK):
                call(grid, block, *pargs)
        value = _median(_loop(pcall, ctx_sync))
        rows.append(_row(f"launch prepared_call, {n} args", value, floors[n],
                         target=1.08 if n == 4 else None))
    f4 = funcs[4]
    args4 = _args(4, a, b)
    pargs4 = _prepared_args(4, a, b)
    sfloor = _median(lambda: _driver._bench_launch(f4, GRID, BLOCK, args4, N, "enqueue", stream))

    p0, p1, p2, p3 = pargs4

    def acall(call=f4.prepared_async_call, grid=GRID, block=BLOCK, stream=stream):
        call(grid, block, stream, p0, p1, p2, p3)
    value = _median(_loop(acall, stream.synchronize))
    rows.append(_row("launch prepared_async_call on a Stream, 4 args", value, sfloor,
                     target=1.08))

    # GIL around cuLaunchKernel: measure both, report, restore the default.
    default = _driver._launch_release_gil()
    per_mode = {}
    try:
        for release in (False, True):
            _driver._launch_release_gil(release)

            def call4(f=f4, a0=args4[0], a1=args4[1], a2=args4[2], a3=args4[3], block=BLOCK,
                      grid=GRID):
                f(a0, a1, a2, a3, block=block, grid=grid)
            per_mode[release] = _median(_loop(call4, ctx_sync))
    finally:
        _driver._launch_release_gil(default)
    faster = min(per_mode, key=per_mode.get)
    for release, value in per_mode.items():
        rows.append(_row(f"launch __call__ 4 args, GIL {'released' if release else 'held'}",
                         value, floors[4],
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
    gfloor = _median(lambda: _driver._bench_graph_launch(gexec, stream, N))

    def replay(launch=gexec.launch, stream=stream):
        launch(stream)
    value = _median(_loop(replay, stream.synchronize))
    rows.append(_row("graph replay (1 kernel node), GraphExec.launch", value, gfloor,
                     vs="C floor (cuGraphLaunch loop)", target=1.08))

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

            def cp_call():
                k(GRID, BLOCK, cargs)
            value = _median(_loop(cp_call, dev.synchronize))
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

            def cc_call():
                launch(s, cfg, kern, *kargs)
            value = _median(_loop(cc_call, s.sync))
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
