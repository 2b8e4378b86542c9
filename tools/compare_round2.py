# SPDX-License-Identifier: MIT
"""Compare the launch variants of reductions and staged copies in one GPU run.

    python tools/compare_round2.py            # reductions and copies
    python tools/compare_round2.py reduce     # only reductions (needs CuPy for the ratios)
    python tools/compare_round2.py copies

Reductions: sum (gpuarray.sum and a ReductionKernel), min, max and dot of 2**28
float32, medians of event-timed runs, as GB/s read and as a ratio to CuPy's (CUB),
for every variant of reduction._tuning (passes 1/2, vector loads on/off, blocks
per SM from occupancy or fixed).  Copies: 256 MiB to_gpu and get (into a new and
into an existing array) through the staged path under several _staging_config
settings, against pinned copies of the same size measured in the same run.
Not installed; not a test.
"""

from __future__ import annotations

import importlib
import statistics
import sys
import time

import numpy as np

from barecuda import _driver, gpuarray as ga, reduction as red
from barecuda import driver as drv
from barecuda.reduction import ReductionKernel

importlib.import_module("barecuda.autoprimaryctx")   # the device's primary context, as CuPy's

N = 2**28
REPS = 30


def gpu_time(fn, reps=REPS):
    fn()
    drv.Context.synchronize()
    ts = []
    for _ in range(reps):
        a, b = drv.Event(), drv.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(b.time_since(a) / 1e3)
    return statistics.median(ts)


def wall_time(fn, reps=10):
    fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def reductions():
    rng = np.random.default_rng(0)
    xh = rng.standard_normal(N).astype(np.float32)
    yh = rng.standard_normal(N).astype(np.float32)
    x, y = ga.to_gpu(xh), ga.to_gpu(yh)
    ref = {}
    try:
        import cupy as cp
        cx, cy = cp.asarray(xh), cp.asarray(yh)
        for name, fn in (("sum", lambda: cp.sum(cx)), ("min", lambda: cp.min(cx)),
                         ("max", lambda: cp.max(cx)), ("dot", lambda: cp.dot(cx, cy))):
            t = gpu_time(fn)
            ref[name] = t
        print("cupy:", {k: f"{(8 if k == 'dot' else 4) * N / v / 1e9:.0f} GB/s" for k, v in ref.items()})
    except ImportError:
        print("no CuPy: absolute figures only")
    variants = [dict(passes=1, vec=True, blocks_per_sm=0), dict(passes=2, vec=True, blocks_per_sm=0),
                dict(passes=1, vec=False, blocks_per_sm=0), dict(passes=1, vec=True, blocks_per_sm=4),
                dict(passes=1, vec=True, blocks_per_sm=8), dict(passes=1, vec=True, blocks_per_sm=16)]
    old = red._tuning()
    try:
        for v in variants:
            red._tuning(**v)
            k = ReductionKernel(np.float32, "0", "a+b", "x[i]", "const float *x", name="rk_sum")
            np.testing.assert_allclose(float(ga.sum(x).get()), float(xh.sum(dtype=np.float64)),
                                       rtol=1e-4, atol=1.0)
            row = {"gpuarray.sum": ("sum", lambda: ga.sum(x)),
                   "ReductionKernel sum": ("sum", lambda: k(x)),
                   "min": ("min", lambda: ga.min(x)), "max": ("max", lambda: ga.max(x)),
                   "dot": ("dot", lambda: ga.dot(x, y))}
            out = []
            for label, (what, fn) in row.items():
                t = gpu_time(fn)
                gbs = (8 if what == "dot" else 4) * N / t / 1e9
                ratio = f" {ref[what] / t:.3f}x cupy" if what in ref else ""
                out.append(f"{label} {gbs:.0f} GB/s{ratio}")
            print(v, "\n    " + "; ".join(out))
    finally:
        red._tuning(**old)


def copies():
    nbytes = 256 << 20
    rng = np.random.default_rng(1)
    host = rng.integers(0, 255, nbytes, dtype=np.uint8)
    dev = ga.to_gpu(host)
    pinned = drv.pagelocked_empty(nbytes, np.uint8)
    pinned[:] = host
    t_h2d = wall_time(lambda: drv.memcpy_htod(dev.ptr, pinned))
    t_d2h = wall_time(lambda: drv.memcpy_dtoh(pinned, dev.ptr))
    print(f"pinned: htod {nbytes / t_h2d / 1e9:.1f} GB/s, dtoh {nbytes / t_d2h / 1e9:.1f} GB/s")
    existing = np.empty_like(host)
    existing[:] = 1
    old = _driver._staging_config()
    from barecuda._array import kept as _kept
    _kept.configure(after=0)        # the staged path every time, never the kept one
    settings = [old, {"chunk_mib": 1}, {"chunk_mib": 4}, {"depth": 3}, {"workers": 12},
                {"workers": 8, "chunk_mib": 4}]
    try:
        for s in settings:
            _driver._staging_config(**old)
            cur = _driver._staging_config(**s)
            t_up = wall_time(lambda: dev.set(host))
            t_new = wall_time(lambda: dev.get())
            t_old = wall_time(lambda: dev.get(existing))
            print(cur, f"\n    to_gpu/set {nbytes / t_up / 1e9:.1f} GB/s ({t_h2d / t_up:.2f}x pinned); "
                  f"get new {nbytes / t_new / 1e9:.1f} GB/s ({t_d2h / t_new:.2f}x); "
                  f"get existing {nbytes / t_old / 1e9:.1f} GB/s ({t_d2h / t_old:.2f}x)")
        np.testing.assert_array_equal(dev.get(), host)
    finally:
        _driver._staging_config(**old)
    # what registering an array the user keeps costs, and what it gains
    kept = np.ones(nbytes, np.uint8)
    t_reg, t_unreg = [], []
    for _ in range(5):
        t = time.perf_counter()
        reg = drv.register_host_memory(kept)
        t_reg.append(time.perf_counter() - t)
        t_rup = wall_time(lambda: drv.memcpy_htod(dev.ptr, reg))
        t_rdn = wall_time(lambda: drv.memcpy_dtoh(reg, dev.ptr))
        t = time.perf_counter()
        reg.base.unregister()
        t_unreg.append(time.perf_counter() - t)
    print(f"register 256 MiB {statistics.median(t_reg) * 1e3:.2f} ms, unregister "
          f"{statistics.median(t_unreg) * 1e3:.2f} ms; registered htod {nbytes / t_rup / 1e9:.1f} GB/s "
          f"({t_h2d / t_rup:.2f}x pinned), dtoh {nbytes / t_rdn / 1e9:.1f} GB/s ({t_d2h / t_rdn:.2f}x)")


if __name__ == "__main__":
    what = sys.argv[1:] or ["reduce", "copies"]
    if "reduce" in what:
        reductions()
    if "copies" in what:
        copies()
