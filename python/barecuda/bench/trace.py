# SPDX-License-Identifier: MIT
"""Benchmark section: what barecuda.tools.trace() costs a kernel launch.

- ``trace off``: ``Function.__call__`` (4 args) and ``prepared_call`` with no trace
  active, interleaved (``bench.interleaved_times``) with the same launches made by
  cuLaunchKernel in a C loop (``_bench_launch``, which has no trace hook): ratio =
  Python / C, less is better.  The launch path's only cost when tracing is off is
  one pointer test, so these ratios should equal the ``launch`` section's from a
  build without the trace hook (target <= 1.15 for __call__, <= 1.08 prepared).
- ``trace on``: the same __call__ loop while a trace records (two timing events and
  one record per launch), alternated round by round with the untraced loop: ratio
  = traced / untraced.
- ``trace end``: microseconds per record to end a trace (wait, read the events,
  build the Python objects).

The kernel is empty and written in PTX, so no compiler is needed.
"""

import statistics
import time

import numpy as np

from barecuda import _driver
from barecuda import driver as drv
from barecuda.bench import interleaved_times

_PTX = """
.version 8.0
.target sm_75
.address_size 64

.visible .entry empty4(.param .u64 a, .param .u64 b, .param .u32 n, .param .f32 x)
{
    ret;
}
"""

GRID = (1, 1, 1)
BLOCK = (32, 1, 1)
N = 1000        # launches per loop: under the driver's launch queue depth
ROUNDS = 15


def _row(name, value, unit, ratio=None, vs=None, note=None):
    return {"name": name, "value": value, "unit": unit, "ratio": ratio, "vs": vs, "note": note}


def run():
    from barecuda import trace as _trace

    module = drv.module_from_buffer(_PTX)
    f = module.get_function("empty4")
    a, b = drv.mem_alloc(1 << 16), drv.mem_alloc(1 << 16)
    args = (a, b, np.int32(1000), np.float32(2.5))
    a0, a1, a2, a3 = args
    sync = drv.Context.synchronize
    if _driver._trace_active():
        raise RuntimeError("a trace is already active: the figures would be wrong")

    def call_loop():
        for _ in range(N):
            f(a0, a1, a2, a3, block=BLOCK, grid=GRID)

    def c_loop():
        _driver._bench_launch(f, GRID, BLOCK, args, N, "enqueue")

    t_py, t_c = interleaved_times([call_loop, c_loop], [sync, sync], iterations=1,
                                  rounds=ROUNDS, warmup=3)
    rows = [_row("launch __call__ 4 args, trace off", t_py / N * 1e6, "us", t_py / t_c,
                 f"C floor {t_c / N * 1e6:.2f} us", "compare with the launch section's ratio")]

    f.prepare("PPif")
    call = f.prepared_call
    pa = (a, b, 1000, 2.5)

    def prep_loop():
        for _ in range(N):
            call(GRID, BLOCK, *pa)

    t_pp, t_c2 = interleaved_times([prep_loop, c_loop], [sync, sync], iterations=1,
                                   rounds=ROUNDS, warmup=3)
    rows.append(_row("launch prepared_call 4 args, trace off", t_pp / N * 1e6, "us",
                     t_pp / t_c2, f"C floor {t_c2 / N * 1e6:.2f} us"))

    # Traced against untraced, round by round; the trace starts and ends outside
    # the timed part, and its end is timed on its own.
    off, on, ends = [], [], []
    for r in range(ROUNDS + 2):
        sync()
        t0 = time.perf_counter()
        call_loop()
        sync()
        t_off = time.perf_counter() - t0
        t = _trace.trace().start()
        t0 = time.perf_counter()
        call_loop()
        sync()
        t_on = time.perf_counter() - t0
        t0 = time.perf_counter()
        t.stop()
        t_end = time.perf_counter() - t0
        kernels = sum(1 for e in t.events if e.kind == "kernel")
        if kernels != N:
            raise RuntimeError(f"the trace recorded {kernels} launches, expected {N}")
        if r >= 2:   # warm-up rounds dropped
            off.append(t_off)
            on.append(t_on)
            ends.append(t_end)
    m_off, m_on = statistics.median(off), statistics.median(on)
    rows.append(_row("launch __call__ 4 args, trace on", m_on / N * 1e6, "us", m_on / m_off,
                     f"trace off {m_off / N * 1e6:.2f} us", "2 timing events + 1 record per launch"))
    rows.append(_row("trace end, per recorded launch", statistics.median(ends) / N * 1e6, "us",
                     note="wait for events, elapsed times, Python objects"))
    a.free()
    b.free()
    return rows
