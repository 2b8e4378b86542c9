# SPDX-License-Identifier: MIT
"""Benchmark section: host<->device copies through the Python API.

For pinned and pageable host memory, both directions, a 4 KiB copy (latency)
and a 256 MiB copy (bandwidth) are timed through ``memcpy_htod`` /
``memcpy_dtoh`` and divided by ``_driver._bench_copy`` of the same kind, the
bare driver call in a C loop of the same process: ratio = C time / Python time,
so 1.0 is the floor (target: at least 0.98 for pinned copies).  Plus
device-to-device GB/s (read + write counted) the same way, and CuPy's pageable
copies (``cupy.asarray`` of a NumPy array, ``.get()``) side by side when CuPy
imports: there ratio = CuPy's time / barecuda's time, more is better for us.
Figures are medians of rounds after a warm-up; rounds of the Python loop and
of the C loop alternate so drift hits both alike.
"""

import statistics
import time

KIB4 = 4096
MIB256 = 256 << 20
ROUNDS = 7


def _median_per_call(fn, iterations, rounds=ROUNDS, sync=None):
    fn()
    if sync:
        sync()
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(iterations):
            fn()
        if sync:
            sync()
        times.append((time.perf_counter() - t0) / iterations)
    return statistics.median(times)


def _pair(py_loop, kind, nbytes, iterations, sync=None):
    """Median seconds per copy through Python (py_loop(n) makes n copies in a plain
    for loop, as users write it) and in the C loop, rounds interleaved."""
    from barecuda import _driver

    py_loop(1)
    _driver._bench_copy(kind, nbytes, 1)
    py, c = [], []
    for _ in range(ROUNDS):
        c.append(_driver._bench_copy(kind, nbytes, iterations))
        t0 = time.perf_counter()
        py_loop(iterations)
        if sync:
            sync()
        py.append((time.perf_counter() - t0) / iterations)
    return statistics.median(py), statistics.median(c)


def _row(name, value, unit, ratio, vs, note=None):
    return {"name": name, "value": value, "unit": unit, "ratio": ratio, "vs": vs, "note": note}


def _cupy_rows(ours, rows):
    try:
        import cupy
    except Exception:  # noqa: BLE001 - CuPy is optional
        return
    import numpy as np

    for nbytes, label, iters in ((KIB4, "4 KiB", 500), (MIB256, "256 MiB", 3)):
        host = np.ones(nbytes, np.uint8)
        t_up = _median_per_call(lambda: cupy.asarray(host), iters,
                                sync=cupy.cuda.runtime.deviceSynchronize)
        dev = cupy.asarray(host)
        t_down = _median_per_call(lambda: dev.get(), iters)
        for direction, t in (("htod", t_up), ("dtoh", t_down)):
            mine = ours.get((direction, "pageable", nbytes))
            ratio = t / mine if mine else None
            if nbytes == KIB4:
                rows.append(_row(f"cupy {direction} pageable {label} latency", t * 1e6, "us", ratio,
                                 "cupy", "ratio = CuPy time / barecuda time"))
            else:
                rows.append(_row(f"cupy {direction} pageable {label} bandwidth", nbytes / t / 1e9,
                                 "GB/s", ratio, "cupy", "cupy.asarray / .get(); new arrays"))


def run():
    import numpy as np

    from barecuda import driver as drv

    drv.init()
    ctx = drv.Device(0).retain_primary_context()
    ctx.push()
    rows, ours = [], {}
    try:
        for nbytes, label, iters in ((KIB4, "4 KiB", 2000), (MIB256, "256 MiB", 4)):
            dev = drv.mem_alloc(nbytes)
            for mem in ("pinned", "pageable"):
                if mem == "pinned":
                    host = drv.pagelocked_empty(nbytes, np.uint8)
                else:
                    host = np.empty(nbytes, np.uint8)
                host[:] = 1
                for direction in ("htod", "dtoh"):
                    if direction == "htod":
                        def copy(n, dev=dev, host=host, htod=drv.memcpy_htod):
                            for _ in range(n):
                                htod(dev, host)
                    else:
                        def copy(n, dev=dev, host=host, dtoh=drv.memcpy_dtoh):
                            for _ in range(n):
                                dtoh(host, dev)
                    py, c = _pair(copy, f"{direction}_{mem}", nbytes, iters)
                    ours[(direction, mem, nbytes)] = py
                    if nbytes == KIB4:
                        rows.append(_row(f"{direction} {mem} {label} latency", py * 1e6, "us",
                                         c / py, "C loop", f"C loop {c * 1e6:.2f} us"))
                    else:
                        rows.append(_row(f"{direction} {mem} {label} bandwidth", nbytes / py / 1e9,
                                         "GB/s", c / py, "C loop",
                                         f"C loop {nbytes / c / 1e9:.1f} GB/s"))
                del host
            dev.free()
        a, b = drv.mem_alloc(MIB256), drv.mem_alloc(MIB256)
        def dtod(n, dtod=drv.memcpy_dtod):
            for _ in range(n):
                dtod(b, a, MIB256)
        py, c = _pair(dtod, "dtod", MIB256, 20, sync=drv.Context.synchronize)
        rows.append(_row("dtod 256 MiB bandwidth (read+write)", 2 * MIB256 / py / 1e9, "GB/s",
                         c / py, "C loop", f"C loop {2 * MIB256 / c / 1e9:.0f} GB/s"))
        a.free()
        b.free()
        _cupy_rows(ours, rows)
    finally:
        drv.Context.pop()
        ctx.detach()
    return rows
