# SPDX-License-Identifier: MIT
"""Benchmark section: the array layer (ElementwiseKernel, ReductionKernel, GPUArray).

- ElementwiseKernel axpy ``z = a*x + y`` on 2^28 float32 against a hand-written
  grid-stride kernel compiled and launched through barecuda (ratio = hand time /
  ours; target >= 0.98), GB/s counting three arrays.
- ReductionKernel sum and ``gpuarray.sum`` on 2^28 float32: GB/s read, against CuPy's
  ``sum`` (ratio = CuPy time / ours; target >= 0.95) and against the device-to-device
  copy bandwidth (read + write GB/s of memcpy_dtod; target >= 0.85).
- ``a + b`` and ``sum`` on 1000 float32: microseconds per op (host loop of enqueues
  plus the final synchronize), ratio = CuPy time / ours (target >= 1/0.6 = 1.67);
  rounds of ours and CuPy's alternate, medians of 21 rounds each.
- ``to_gpu`` of 256 MiB pageable against ``cupy.asarray`` and against one
  ``memcpy_htod``; ``get()`` into a new array against PyCUDA's way of doing it
  (``numpy.empty`` + ``memcpy_dtoh``, target >= 3).
- Pageable copies (staged) against pinned copies of the same 256 MiB: ``to_gpu``
  and ``get()`` into an existing array alternate round by round with the pinned
  copy they are compared with (medians of 14 rounds; targets >= 0.85); ``get()``
  into a new array, in a loop and the first of its size (target >= 0.5).
- ``take`` of 2^24 float32 through 2^24 random int32 indices, checked, against the
  plain gather ``z[i] = a[idx[i]]`` (an ElementwiseKernel, nothing checked): in
  mode "raise" each call waits for its kernel to read the bad-index word, so the
  plain gather is synchronized after each call too; "clip" is timed as a loop of
  asynchronous calls, as is its plain gather (ratio = ours / plain: target <= 1.05).
Device work is timed with events, host-side loops with perf_counter; medians of
rounds after a warm-up.
"""

import statistics
import time

import numpy as np

from barecuda.bench import interleaved_times

N_BIG = 1 << 28
N_SMALL = 1000
ROUNDS = 7


def _row(name, value, unit, ratio=None, vs=None, note=None):
    return {"name": name, "value": value, "unit": unit, "ratio": ratio, "vs": vs, "note": note}


def _events_time(fn, drv, reps=5):
    """Median seconds of fn() measured with events (after one warm-up call)."""
    fn()
    start, stop = drv.Event(), drv.Event()
    times = []
    for _ in range(ROUNDS):
        start.record()
        for _ in range(reps):
            fn()
        stop.record()
        stop.synchronize()
        times.append(stop.time_since(start) / 1e3 / reps)
    return statistics.median(times)


def _host_loop_time(fn, sync, iterations=2000):
    fn()
    sync()
    times = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(iterations):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / iterations)
    return statistics.median(times)


def _first_get_time(dev, sync):
    """Median seconds of dev.get() with no free memory of its size in the host
    pool: the first result of that size a process makes (new pages, faulted in
    and zeroed while the copy runs)."""
    from barecuda import _driver
    budget = _driver._host_pool()["budget"] >> 20
    times = []
    try:
        for _ in range(ROUNDS):
            _driver._host_pool(0)
            _driver._host_pool(budget)
            sync()
            t0 = time.perf_counter()
            out = dev.get()
            sync()
            times.append(time.perf_counter() - t0)
            del out
    finally:
        _driver._host_pool(budget)
    return statistics.median(times)


_HAND = r"""
extern "C" __global__ void hand_axpy(float a, const float *x, const float *y, float *z, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        z[i] = a * x[i] + y[i];
}
"""


def _cupy():
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
        return cupy
    except Exception:  # noqa: BLE001 - CuPy is optional
        return None


def run():
    from barecuda._array import kept as _kept
    from barecuda import driver as drv
    from barecuda import gpuarray
    from barecuda.compiler import SourceModule
    from barecuda.elementwise import BLOCK, ElementwiseKernel, grid_for
    from barecuda.reduction import ReductionKernel
    from barecuda.tools import make_default_context

    ctx = drv.Context.get_current() or make_default_context()
    rows = []
    rng = np.random.default_rng(0)
    cp = _cupy()

    # ---- elementwise axpy vs hand-written grid-stride kernel
    x = gpuarray.to_gpu(rng.random(N_BIG, dtype=np.float32))
    y = gpuarray.to_gpu(rng.random(N_BIG, dtype=np.float32))
    z = gpuarray.empty(N_BIG, np.float32)
    axpy = ElementwiseKernel("float a, float *x, float *y, float *z", "z[i] = a * x[i] + y[i]", "axpy")
    hand = SourceModule(_HAND, no_extern_c=True).get_function("hand_axpy")
    hand.prepare("fPPPi")
    grid = grid_for(N_BIG)
    t_ours = _events_time(lambda: axpy(2.0, x, y, z), drv)
    t_hand = _events_time(lambda: hand.prepared_async_call((grid, 1, 1), (BLOCK, 1, 1), None, 2.0,
                                                           x.ptr, y.ptr, z.ptr, N_BIG), drv)
    np_check = (z[:4].get(), 2 * x[:4].get() + y[:4].get())
    ok = np.allclose(*np_check)
    gbs = 3 * 4 * N_BIG / t_ours / 1e9
    rows.append(_row("ElementwiseKernel axpy 2^28 f32", gbs, "GB/s", t_hand / t_ours,
                     "hand-written grid-stride kernel", None if ok else "WRONG RESULT"))

    # ---- device-to-device copy bandwidth
    t_copy = _events_time(lambda: drv.memcpy_dtod(z.ptr, x.ptr, 4 * N_BIG), drv)
    copy_gbs = 2 * 4 * N_BIG / t_copy / 1e9
    rows.append(_row("memcpy_dtod 2^28 f32", copy_gbs, "GB/s", None, None, "read + write"))

    # ---- reductions
    rk = ReductionKernel(np.float32, "0", "a+b", "x[i]", "float *x", name="bench_sum")
    t_rk = _events_time(lambda: rk(x), drv)
    t_gs = _events_time(lambda: gpuarray.sum(x), drv)
    ref = float(np.sum(x.get(), dtype=np.float64))
    got = float(gpuarray.sum(x).get())
    ok = abs(got - ref) <= 1e-3 * abs(ref)
    rk_gbs = 4 * N_BIG / t_rk / 1e9
    gs_gbs = 4 * N_BIG / t_gs / 1e9
    t_cp = None
    if cp is not None:
        xc = cp.asarray(x.get())
        t_cp = _events_time(lambda: xc.sum(), drv)
        del xc
    for name, t, g in (("ReductionKernel sum 2^28 f32", t_rk, rk_gbs), ("gpuarray.sum 2^28 f32", t_gs, gs_gbs)):
        rows.append(_row(name, g, "GB/s", g / copy_gbs, "device-to-device copy GB/s",
                         None if ok else "WRONG RESULT"))
        if t_cp is not None:
            rows.append(_row(name + " vs CuPy", g, "GB/s", t_cp / t, "cupy sum (CUB)"))
    # min, max and dot against CuPy's (CUB), the results checked against NumPy's
    if cp is not None:
        xh, yh = x.get(), y.get()
        xc, yc = cp.asarray(xh), cp.asarray(yh)
        for what, ours, theirs, want, nbytes in (
                ("min", lambda: gpuarray.min(x), lambda: cp.min(xc), xh.min(), 4 * N_BIG),
                ("max", lambda: gpuarray.max(x), lambda: cp.max(xc), xh.max(), 4 * N_BIG),
                ("dot", lambda: gpuarray.dot(x, y), lambda: cp.dot(xc, yc),
                 float(np.dot(xh.astype(np.float64), yh)), 8 * N_BIG)):
            t_ours, t_theirs = _events_time(ours, drv), _events_time(theirs, drv)
            got = float(ours().get())
            ok = abs(got - want) <= 1e-3 * max(1.0, abs(want))
            rows.append(_row(f"gpuarray.{what} 2^28 f32 vs CuPy", nbytes / t_ours / 1e9, "GB/s",
                             t_theirs / t_ours, f"cupy {what} (CUB; target >= 1.00)",
                             None if ok else "WRONG RESULT"))
        del xh, yh, xc, yc
    x = y = z = None  # free 3 GiB before the next figures

    # ---- small ops
    a = gpuarray.to_gpu(rng.random(N_SMALL, dtype=np.float32))
    b = gpuarray.to_gpu(rng.random(N_SMALL, dtype=np.float32))
    fns, syncs = [lambda: a + b, lambda: a.sum()], [drv.Context.synchronize] * 2
    if cp is not None:
        ac, bc = cp.asarray(a.get()), cp.asarray(b.get())
        fns += [lambda: ac + bc, lambda: ac.sum()]
        syncs += [cp.cuda.Device().synchronize] * 2
    # rounds of ours and CuPy's alternate, so both see the same host and GPU state
    # (clocks, other load) and a drift does not favour whoever ran first
    t_add, t_sum, *c_times = interleaved_times(fns, syncs, rounds=3 * ROUNDS)
    if cp is not None:
        c_add, c_sum = c_times
        rows.append(_row("a + b 1000 f32", t_add * 1e6, "us/op", c_add / t_add, "cupy (target >= 1.67)"))
        rows.append(_row("sum 1000 f32", t_sum * 1e6, "us/op", c_sum / t_sum, "cupy (target >= 1.67)"))
    else:
        rows.append(_row("a + b 1000 f32", t_add * 1e6, "us/op"))
        rows.append(_row("sum 1000 f32", t_sum * 1e6, "us/op"))

    # ---- transfers: pageable copies against pinned ones of the same size, this run
    host = rng.random(N_BIG // 4, dtype=np.float32)   # 256 MiB
    nbytes = host.nbytes
    dev = gpuarray.to_gpu(host)
    pinned = drv.pagelocked_empty(host.shape, host.dtype)
    pinned[:] = host
    sync = drv.Context.synchronize
    kept_after = _kept.info()["after"]
    existing = np.ones_like(host)
    try:
        _kept.configure(after=0)          # every copy staged, none registered
        # each staged copy beside the pinned copy it is compared with, round by
        # round, so that the host's drift (other load, clocks) favours neither
        t_pin_up, t_to, t_pin_down, t_old = interleaved_times(
            [lambda: drv.memcpy_htod(dev.ptr, pinned), lambda: gpuarray.to_gpu(host),
             lambda: drv.memcpy_dtoh(pinned, dev.ptr), lambda: dev.get(existing)],
            [sync] * 4, iterations=3, rounds=2 * ROUNDS)
    finally:
        _kept.configure(after=kept_after)
    # a program calling get() in a loop: the host pool hands out the memory of
    # the results it dropped (src/hostpool.c), page-locked from its second use
    t_get = _host_loop_time(lambda: dev.get(), sync, iterations=3)
    t_first = _first_get_time(dev, sync)
    # arrays the program keeps: registered at their third copy (barecuda._array.kept)
    kept_up, kept_down = host.copy(), np.ones_like(host)
    t_kup = _host_loop_time(lambda: dev.set(kept_up), sync, iterations=3)
    t_kdown = _host_loop_time(lambda: dev.get(kept_down), sync, iterations=3)
    for name, t, pin, target in (
            ("to_gpu 256 MiB pageable (staged)", t_to, t_pin_up, 0.85),
            ("set() 256 MiB from a kept array (registered)", t_kup, t_pin_up, 0.85),
            ("get() 256 MiB into a new array (in a loop: host pool)", t_get, t_pin_down, 0.5),
            ("get() 256 MiB into a new array, first of its size", t_first, t_pin_down, 0.5),
            ("get() 256 MiB into an existing array (staged)", t_old, t_pin_down, 0.85),
            ("get() 256 MiB into a kept array (registered)", t_kdown, t_pin_down, 0.85)):
        ratio = pin / t
        rows.append(_row(name, nbytes / t / 1e9, "GB/s", ratio,
                         f"pinned {nbytes / pin / 1e9:.1f} GB/s",
                         f"target >= {target} {'met' if ratio >= target else 'MISSED'}"))
    del kept_up, kept_down, pinned
    if cp is not None:
        t_cto = _host_loop_time(lambda: cp.asarray(host), cp.cuda.Device().synchronize, iterations=3)
        rows.append(_row("to_gpu 256 MiB pageable vs CuPy", nbytes / t_to / 1e9, "GB/s", t_cto / t_to,
                         "cupy.asarray"))
    # PyCUDA's get() is numpy.empty + cuMemcpyDtoH: measured here the same way
    def pycuda_get():
        out = np.empty(host.shape, host.dtype)
        drv.memcpy_dtoh(out, dev.ptr)
        return out
    t_pyc = _host_loop_time(pycuda_get, sync, iterations=3)
    rows.append(_row("get() 256 MiB into a new array vs PyCUDA", nbytes / t_get / 1e9, "GB/s",
                     t_pyc / t_get, "PyCUDA's way, numpy.empty + memcpy_dtoh (target >= 3)"))
    t_plain = _host_loop_time(lambda: drv.memcpy_htod(dev.ptr, host), sync, iterations=3)
    rows.append(_row("to_gpu 256 MiB pageable vs memcpy_htod", nbytes / t_to / 1e9, "GB/s", t_plain / t_to,
                     "cuMemcpyHtoD of the same pageable array"))
    rows += _take_rows(drv, gpuarray, ElementwiseKernel, rng)
    del ctx
    return rows


N_TAKE = 1 << 24


def _take_rows(drv, gpuarray, ElementwiseKernel, rng):
    a = gpuarray.to_gpu(rng.random(N_TAKE, dtype=np.float32))
    idx = gpuarray.to_gpu(rng.integers(0, N_TAKE, N_TAKE, dtype=np.int32))
    z = gpuarray.empty(N_TAKE, np.float32)
    plain = ElementwiseKernel("float *z, const float *a, const int *idx", "z[i] = a[idx[i]]",
                              "plain_gather")
    sync = drv.Context.synchronize
    assert np.array_equal(gpuarray.take(a, idx, out=z).get(),
                          a.get()[idx.get()]), "take() disagrees with NumPy"

    def plain_synced():
        plain(z, a, idx)
        sync()

    t_raise, t_plain_synced, t_clip, t_plain = interleaved_times(
        [lambda: gpuarray.take(a, idx, out=z), plain_synced,
         lambda: gpuarray.take(a, idx, out=z, mode="clip"), lambda: plain(z, a, idx)],
        [None, None, sync, sync], iterations=20, rounds=15)
    gbs = 3 * 4 * N_TAKE / 1e9
    return [
        _row("take 2^24 float32, mode=raise", gbs / t_raise, "GB/s", t_raise / t_plain_synced,
             "plain gather, synchronized per call (target <= 1.05)",
             f"{t_raise * 1e6:.1f} us against {t_plain_synced * 1e6:.1f} us"),
        _row("take 2^24 float32, mode=clip", gbs / t_clip, "GB/s", t_clip / t_plain,
             "plain gather, asynchronous loop (target <= 1.05)",
             f"{t_clip * 1e6:.1f} us against {t_plain * 1e6:.1f} us"),
    ]
