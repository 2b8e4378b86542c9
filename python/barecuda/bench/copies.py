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

PyCUDA's copy calls on 256 MiB of pageable memory (issue 32): ``memcpy_htod``,
``memcpy_dtoh`` into an array already in memory and into a new one,
``to_device``, ``from_device``, and ``In`` / ``Out`` / ``InOut`` around an empty
kernel (their figures include the temporary device allocation, the launch and
the synchronize that the handlers make; InOut counts both directions).  Those
rows give GB/s with ratio = their rate / the rate of the pinned
``memcpy_htod``/``memcpy_dtoh`` rows of the same run (target: at least 0.8); their note gives the ratio to the C loop of the driver's own
pageable copy (cuMemcpyHtoD / cuMemcpyDtoH), taken in alternate rounds.  The 4
KiB pageable latency rows above are the same calls' small-copy path (target:
as before, within 5%).
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
                    ours[(direction, mem, nbytes, "C loop")] = c
                    if nbytes == KIB4:
                        rows.append(_row(f"{direction} {mem} {label} latency", py * 1e6, "us",
                                         c / py, "C loop", f"C loop {c * 1e6:.2f} us"))
                    else:
                        rows.append(_row(f"{direction} {mem} {label} bandwidth", nbytes / py / 1e9,
                                         "GB/s", c / py, "C loop",
                                         f"C loop {nbytes / c / 1e9:.1f} GB/s"))
                del host
            dev.free()
        _pycuda_rows(drv, ours, rows)
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


def _pycuda_rows(drv, ours, rows, nbytes=MIB256, iters=4):
    """The rows of PyCUDA's copy calls on `nbytes` of pageable memory (see the
    module's docstring); `ours` holds the pinned figures of the same run."""
    import numpy as np

    from barecuda.bench import launch as L

    pinned = {d: ours[(d, "pinned", nbytes)] for d in ("htod", "dtoh")}
    gb = nbytes / 1e9
    dev = drv.mem_alloc(nbytes)
    other = drv.mem_alloc(256)
    host = np.empty(nbytes, np.uint8)
    host[:] = 3
    module = drv.module_from_buffer(L.kernel_ptx((4,)))
    empty4 = module.get_function("empty4")
    n32, x32 = np.int32(0), np.float32(0)

    def loop(body):
        def run(n):
            for _ in range(n):
                body()
        return run

    cases = [
        ("memcpy_htod pageable 256 MiB", "htod",
         loop(lambda: drv.memcpy_htod(dev, host)), "from an array in memory"),
        ("memcpy_dtoh pageable 256 MiB into an existing array", "dtoh",
         loop(lambda: drv.memcpy_dtoh(host, dev)), "into an array in memory"),
        ("memcpy_dtoh pageable 256 MiB into a new array", "dtoh",
         loop(lambda: drv.memcpy_dtoh(np.empty(nbytes, np.uint8), dev)),
         "np.empty per copy: page faults counted"),
        ("to_device 256 MiB", "htod",
         loop(lambda: drv.to_device(host).free()), "allocation and free counted"),
        ("from_device 256 MiB", "dtoh",
         loop(lambda: drv.from_device(dev, (nbytes,), np.uint8)), "a new array per copy"),
        ("In 256 MiB", "htod",
         loop(lambda: empty4(drv.In(host), other, n32, x32, block=L.BLOCK, grid=L.GRID)),
         "empty kernel; allocation, launch counted"),
        ("Out 256 MiB", "dtoh",
         loop(lambda: empty4(drv.Out(host), other, n32, x32, block=L.BLOCK, grid=L.GRID)),
         "empty kernel; allocation, launch counted"),
        ("InOut 256 MiB", "both",
         loop(lambda: empty4(drv.InOut(host), other, n32, x32, block=L.BLOCK, grid=L.GRID)),
         "empty kernel; both directions counted"),
    ]
    try:
        for name, direction, run, what in cases:
            if direction == "both":
                py, c = _pair(run, "htod_pageable", nbytes, iters, sync=drv.Context.synchronize)
                c += ours[("dtoh", "pageable", nbytes, "C loop")]
                pin, moved = pinned["htod"] + pinned["dtoh"], 2 * gb
            else:
                py, c = _pair(run, f"{direction}_pageable", nbytes, iters,
                              sync=drv.Context.synchronize)
                pin, moved = pinned[direction], gb
            rows.append(_row(name, moved / py, "GB/s", pin / py, "pinned",
                             f"{what}; pinned {moved / pin:.1f} GB/s; {c / py:.2f}x the C loop "
                             f"of pageable cuMemcpy ({moved / c:.1f} GB/s)"))
    finally:
        dev.free()
        other.free()
        module.unload()
