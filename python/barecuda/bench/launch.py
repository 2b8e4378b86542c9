# SPDX-License-Identifier: MIT
"""Benchmark section ``launch``: kernel launch overhead.

Every figure is a median over many repeats after warm-up, paired repeat by
repeat with the same launches made by ``cuLaunchKernel`` in a plain C loop
inside ``barecuda._driver`` in this process (``_driver._bench_launch``;
``_bench_graph_launch`` for graph replays): ratio = Python time / C time, less
is better.  ``__call__`` and ``prepared_call`` are measured at 0, 4, 16 and 64
arguments (half pointers, a quarter ``int``, a quarter ``float``).  Targets
(shared/PERFORMANCE.md): ``__call__`` within 1.05x and prepared calls within
1.03x of the C floor at every argument count.  CuPy's RawKernel and
cuda.core's ``launch`` (4 arguments) run side by side when they import.
``Function.launch(grid, block, args)``, the arguments kept in one tuple, is
measured at every argument count against the same target as ``__call__``.

The kernels are empty and their PTX is generated here (``kernel_ptx``), so this
section needs neither NVRTC nor nvcc.  The timed loops are generated too, so
that each call site names every argument as a user writes it
(``f(a0, a1, ..., block=..., grid=...)``, no ``*args`` and no keyword dict).
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable, Sequence

import numpy as np

from barecuda import _driver
from barecuda import driver as drv

ARG_COUNTS = (0, 4, 16, 64)
CALL_TARGET = 1.05       # __call__ / C floor, at every argument count
PREPARED_TARGET = 1.03   # prepared_call and prepared_async_call / C floor

_PTX_TYPES = {"P": ".u64", "i": ".u32", "f": ".f32"}

# The empty kernel with 4 arguments in CUDA C, for the peers (CuPy, cuda.core).
_CUDA_C = """
extern "C" __global__ void empty4(float *a, float *b, int n, float x) {}
"""

GRID = (1, 1, 1)
BLOCK = (32, 1, 1)
N = 1000          # launches per repeat: stays under the driver's launch queue depth
REPEATS = 41
WARMUP = 3


def prepared_signature(nargs: int) -> str:
    """The parameter kinds of kernel ``empty<nargs>`` as a prepare() string: half
    pointers, then a quarter ``int``, then the rest ``float``."""
    if nargs < 0:
        raise ValueError(f"nargs must be >= 0, not {nargs}")
    pointers, ints = nargs // 2, nargs // 4
    return "P" * pointers + "i" * ints + "f" * (nargs - pointers - ints)


def kernel_ptx(counts: Sequence[int] = ARG_COUNTS) -> str:
    """PTX of empty kernels ``empty<n>`` for each n in `counts`, taking the
    parameters that prepared_signature(n) describes."""
    out = [".version 8.0", ".target sm_75", ".address_size 64", ""]
    for n in counts:
        params = [f".param {_PTX_TYPES[k]} p{i}" for i, k in enumerate(prepared_signature(n))]
        out.append(f".visible .entry empty{n}(" + ",\n    ".join(params) + ")")
        out += ["{", "    ret;", "}", ""]
    return "\n".join(out)


def call_args(nargs: int, a: Any, b: Any) -> tuple[Any, ...]:
    """Arguments for ``empty<nargs>.__call__``: pointers alternate between `a` and
    `b`; NumPy scalars of the kernel's types for the rest."""
    vals = {"i": np.int32(1000), "f": np.float32(2.5)}
    return tuple((a if i % 2 == 0 else b) if k == "P" else vals[k]
                 for i, k in enumerate(prepared_signature(nargs)))


def prepared_args(nargs: int, a: Any, b: Any) -> tuple[Any, ...]:
    """Arguments for a prepared call of ``empty<nargs>``: as call_args, but plain
    Python numbers."""
    vals = {"i": 1000, "f": 2.5}
    return tuple((a if i % 2 == 0 else b) if k == "P" else vals[k]
                 for i, k in enumerate(prepared_signature(nargs)))


def _make_loop(call: str, names: dict[str, Any], args: Sequence[Any]) -> Callable[[int], None]:
    """loop(count) running `call` (source text naming ``a0``, ``a1``, ... and the
    keys of `names`) count times; every name is a local of the loop."""
    ns = dict(names)
    ns.update((f"a{i}", v) for i, v in enumerate(args))
    params = ", ".join(f"{k}={k}" for k in ns)
    src = f"def loop(count, {params}):\n    for _ in range(count):\n        {call}\n"
    exec(compile(src, f"<bench loop: {call[:40]}>", "exec"), ns)  # noqa: S102 - our own text
    loop: Callable[[int], None] = ns["loop"]
    return loop


def _arg_list(n: int, first: str = "") -> str:
    return first + ", ".join(f"a{i}" for i in range(n))


def call_loop(f: Any, args: Sequence[Any], grid: Any = GRID, block: Any = BLOCK) -> Callable[[int], None]:
    """loop(count): count calls ``f(a0, ..., block=block, grid=grid)``."""
    sep = ", " if args else ""
    return _make_loop(f"f({_arg_list(len(args))}{sep}block=block, grid=grid)",
                      {"f": f, "block": block, "grid": grid}, args)


def alternating_loop(f: Any, args: Sequence[Any], other: Sequence[Any],
                     prepared: bool = False) -> Callable[[int], None]:
    """loop(count): count launches of `f` (count even) as call_loop or
    prepared_loop make them, every other one with `other` (the same values in other
    objects), so that no launch passes an object the launch before it passed:
    the argument memo never helps."""
    names: dict[str, Any] = {"f": f, "call": f.prepared_call if prepared else None,
                             "grid": GRID, "block": BLOCK}
    names.update((f"b{i}", v) for i, v in enumerate(other))

    def site(p: str) -> str:
        listed = ", ".join(f"{p}{i}" for i in range(len(args)))
        if prepared:
            return f"call(grid, block{', ' if args else ''}{listed})"
        return f"f({listed}{', ' if args else ''}block=block, grid=grid)"
    pair = _make_loop(f"{site('a')}; {site('b')}", names, args)
    return lambda count: pair(count // 2)


def _other_objects(args: Sequence[Any], pointers: dict[int, Any]) -> tuple[Any, ...]:
    """`args` with every number made again as a new object of the same value,
    and each pointer replaced as `pointers` (by id) says."""
    def again(v: Any) -> Any:
        if id(v) in pointers:
            return pointers[id(v)]
        if isinstance(v, np.generic):
            return type(v)(v.item())
        return type(v)(repr(v))          # int or float, parsed anew
    out = tuple(again(v) for v in args)
    assert not any(x is y for x, y in zip(out, args))
    return out


def prepared_loop(f: Any, args: Sequence[Any], grid: Any = GRID, block: Any = BLOCK,
                  stream: Any = None, use_async: bool = False) -> Callable[[int], None]:
    """loop(count): count calls ``f.prepared_call(grid, block, a0, ...)`` (or
    ``prepared_async_call(grid, block, stream, a0, ...)``) through a bound method
    held in a local, as a tight user loop would."""
    if use_async:
        call = f"call(grid, block, stream{_arg_list(len(args), ', ' if args else '')})"
        names = {"call": f.prepared_async_call, "grid": grid, "block": block, "stream": stream}
    else:
        call = f"call(grid, block{_arg_list(len(args), ', ' if args else '')})"
        names = {"call": f.prepared_call, "grid": grid, "block": block}
    return _make_loop(call, names, args)


def _median(fn: Callable[[], float], repeats: int | None = None) -> float:
    repeats = REPEATS if repeats is None else repeats
    for _ in range(WARMUP):
        fn()
    return statistics.median(fn() for _ in range(repeats))


def _paired(py_once: Callable[[], float], c_once: Callable[[], float],
            repeats: int | None = None) -> tuple[float, float, float]:
    """Median Python time, median C time, and the median of the ratios of C and
    Python repeats taken back to back, so clock and driver drift cancel out."""
    (value, floor, ratio), = _interleaved(c_once, py_once, repeats=repeats)
    return value, floor, ratio


def _interleaved(c_once: Callable[[], float], *py_onces: Callable[[], float],
                 repeats: int | None = None) -> list[tuple[float, float, float]]:
    """_paired for several Python loops against one C loop: every repeat runs
    the C loop and each Python loop once, in an order that turns around at every
    repeat, so that a drift within a repeat (clocks, the driver's queue) favours
    none of them over the run.  Per Python loop: (median time, median C time,
    median of the per-repeat ratios)."""
    repeats = REPEATS if repeats is None else repeats
    onces = (c_once,) + py_onces
    for _ in range(WARMUP):
        for once in onces:
            once()
    times: list[list[float]] = [[] for _ in onces]
    for i in range(repeats):
        order = range(len(onces)) if i % 2 == 0 else reversed(range(len(onces)))
        for k in order:
            times[k].append(onces[k]())
    cs = times[0]
    return [(statistics.median(ps), statistics.median(cs),
             statistics.median(p / c for p, c in zip(ps, cs))) for ps in times[1:]]


def _timed(loop: Callable[[int], object], sync: Callable[[], object]) -> Callable[[], float]:
    """Seconds per launch of loop(N), which makes N launches as users write them."""
    def once() -> float:
        sync()
        t0 = time.perf_counter()
        loop(N)
        sync()
        return (time.perf_counter() - t0) / N
    return once


def _loop(call: Callable[[], object], sync: Callable[[], object],
          n: int | None = None) -> Callable[[], float]:
    count = N if n is None else n

    def once() -> float:
        sync()
        t0 = time.perf_counter()
        for _ in range(count):
            call()
        sync()
        return (time.perf_counter() - t0) / count
    return once


def _row(name: str, value: float, floor: float | None, note: str = "", vs: str = "C floor",
         target: float | None = None, ratio: float | None = None) -> dict[str, Any]:
    if ratio is None:
        ratio = value / floor if floor else None
    if target is not None and ratio is not None:
        note = (note + "; " if note else "") + \
            f"target <= {target} {'met' if ratio <= target else 'MISSED'}"
    return dict(name=name, value=value * 1e6, unit="us", ratio=ratio,
                vs=f"{vs} {floor * 1e6:.2f} us" if floor else vs, note=note or None)


class _NoOpKernel:
    """Stands in for a Function in prepared_loop: its calls do nothing."""
    prepared_call = _driver._bench_noop
    prepared_async_call = _driver._bench_noop


class _FireKernel:
    """Stands in for a Function in prepared_loop: its calls make the launch
    _driver._bench_arm() packed, handling no argument."""
    prepared_call = _driver._bench_fire
    prepared_async_call = _driver._bench_fire


def _site_note(loop: Callable[[int], None], value: float, floor: float) -> str:
    """What the same call site costs CPython alone, calling a C function that does
    nothing (_driver._bench_noop), and the ratio without it.  Not subtracted from
    the figure: past 30 arguments (positional plus twice the keywords) CPython
    builds a list, a tuple (and a dict for keywords) for every call, which no
    binding can avoid, so the ratio without it is what the binding adds."""
    site = _median(_timed(loop, lambda: None))
    return f"CPython call site alone {site * 1e6:.3f} us, ratio without it {(value - site) / floor:.3f}"


def run() -> list[dict[str, Any]]:
    rows = []
    module = drv.module_from_buffer(kernel_ptx())
    a = drv.mem_alloc(1 << 20)
    b = drv.mem_alloc(1 << 20)
    stream = drv.Stream()
    ctx_sync = drv.Context.synchronize
    funcs = {n: module.get_function(f"empty{n}") for n in ARG_COUNTS}
    cargs = {n: call_args(n, a, b) for n in ARG_COUNTS}
    pargs = {n: prepared_args(n, a, b) for n in ARG_COUNTS}
    floors = {}

    # Each figure: launches written as users write them (a plain for loop, no
    # wrapper call per launch), paired repeat by repeat with the same launches made
    # by cuLaunchKernel in a C loop (_driver._bench_launch), ratio = Python / C.
    def c_floor(f: Any, args: tuple[Any, ...], stream: Any = None) -> Callable[[], float]:
        return lambda: _driver._bench_launch(f, GRID, BLOCK, args, N, "enqueue", stream)

    # Beside each: the same call site calling _driver._bench_fire, which makes the
    # same launch from arguments packed beforehand and handles none of its own:
    # the least any binding can cost at that call site.
    try:
        for n in ARG_COUNTS:
            _driver._bench_arm(funcs[n], GRID, BLOCK, cargs[n])
            (value, floor, ratio), (bare, bfloor, bratio) = _interleaved(
                c_floor(funcs[n], cargs[n]), _timed(call_loop(funcs[n], cargs[n]), ctx_sync),
                _timed(call_loop(_driver._bench_fire, cargs[n]), ctx_sync))
            floors[n] = floor
            rows.append(_row(f"launch __call__, empty kernel, {n} args", value, floor, ratio=ratio,
                             target=CALL_TARGET,
                             note=_site_note(call_loop(_driver._bench_noop, cargs[n]), value, floor)))
            rows.append(_row(f"  its call site, no argument handled, {n} args", bare, bfloor,
                             ratio=bratio, note=f"__call__ / this {value / bare:.3f}"))

        for n in ARG_COUNTS:
            funcs[n].prepare(prepared_signature(n))
            _driver._bench_arm(funcs[n], GRID, BLOCK, cargs[n])
            (value, floor, ratio), (bare, bfloor, bratio) = _interleaved(
                c_floor(funcs[n], cargs[n]), _timed(prepared_loop(funcs[n], pargs[n]), ctx_sync),
                _timed(prepared_loop(_FireKernel, pargs[n]), ctx_sync))
            rows.append(_row(f"launch prepared_call, {n} args", value, floor, ratio=ratio,
                             target=PREPARED_TARGET,
                             note=_site_note(prepared_loop(_NoOpKernel, pargs[n]), value, floor)))
            rows.append(_row(f"  its prepared call site, no argument handled, {n} args", bare, bfloor,
                             ratio=bratio, note=f"prepared_call / this {value / bare:.3f}"))
    finally:
        _driver._bench_arm(None)     # the armed Function holds its module

    # The same launches when every argument is another object than the launch
    # before passed (the same values): what the argument memo saves is gone.
    a2, b2 = drv.mem_alloc(1 << 20), drv.mem_alloc(1 << 20)
    for n in ARG_COUNTS[1:]:
        for prepared in (False, True):
            mine = pargs[n] if prepared else cargs[n]
            other = _other_objects(mine, {id(a): a2, id(b): b2})
            value, floor, ratio = _paired(
                _timed(alternating_loop(funcs[n], mine, other, prepared), ctx_sync),
                c_floor(funcs[n], cargs[n]))
            what = "prepared_call" if prepared else "__call__"
            rows.append(_row(f"launch {what}, {n} args, other objects every launch", value, floor,
                             ratio=ratio, note="no argument as the launch before: nothing memoized"))

    # 64 arguments as a program holds them: in a tuple, spread into the call
    n = ARG_COUNTS[-1]
    for label, loop, noop in (
            (f"launch __call__(*args), {n} args",
             _make_loop("f(*args, block=block, grid=grid)",
                        {"f": funcs[n], "args": cargs[n], "block": BLOCK, "grid": GRID}, ()),
             _make_loop("f(*args, block=block, grid=grid)",
                        {"f": _driver._bench_noop, "args": cargs[n], "block": BLOCK, "grid": GRID}, ())),
            (f"launch prepared_call(grid, block, *args), {n} args",
             _make_loop("call(grid, block, *args)",
                        {"call": funcs[n].prepared_call, "args": pargs[n], "block": BLOCK, "grid": GRID}, ()),
             _make_loop("call(grid, block, *args)",
                        {"call": _driver._bench_noop, "args": pargs[n], "block": BLOCK, "grid": GRID}, ()))):
        value, floor, ratio = _paired(_timed(loop, ctx_sync), c_floor(funcs[n], cargs[n]))
        rows.append(_row(label, value, floor, ratio=ratio, note=_site_note(noop, value, floor)))

    # the arguments kept in one tuple and passed whole: CPython spreads nothing
    for n in ARG_COUNTS:
        loop = _make_loop("launch(grid, block, args)",
                          {"launch": funcs[n].launch, "args": cargs[n], "block": BLOCK, "grid": GRID}, ())
        noop = _make_loop("launch(grid, block, args)",
                          {"launch": _driver._bench_noop, "args": cargs[n], "block": BLOCK, "grid": GRID}, ())
        value, floor, ratio = _paired(_timed(loop, ctx_sync), c_floor(funcs[n], cargs[n]))
        rows.append(_row(f"launch Function.launch(grid, block, args), {n} args", value, floor,
                         ratio=ratio, target=CALL_TARGET, note=_site_note(noop, value, floor)))

    f4, args4, pargs4 = funcs[4], cargs[4], pargs[4]
    value, sfloor, ratio = _paired(
        _timed(prepared_loop(f4, pargs4, stream=stream, use_async=True), stream.synchronize),
        c_floor(f4, args4, stream))
    rows.append(_row("launch prepared_async_call on a Stream, 4 args", value, sfloor,
                     ratio=ratio, target=PREPARED_TARGET))

    # GIL around cuLaunchKernel: measure both, report, restore the default.
    call4 = call_loop(f4, args4)
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

    def roundtrip() -> None:
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

    def replay(n: int, launch: Any = gexec.launch, stream: Any = stream) -> None:
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


def _peers(a: Any, b: Any, floor: float) -> list[dict[str, Any]]:
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
    from barecuda.bench import format_table
    print(format_table([dict(r, section="launch") for r in run()]), end="")
