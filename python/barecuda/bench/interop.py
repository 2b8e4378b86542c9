# SPDX-License-Identifier: MIT
"""Benchmark section: zero-copy exchange with CuPy (DLPack and the CUDA array interface).

- ``gpuarray.from_dlpack(cupy_array)`` against ``cupy.from_dlpack(gpuarray)``: the
  cost of one import, each side consuming the other's capsule (ratio = CuPy's time /
  ours, more is better).
- ``gpuarray.asarray(cupy_array)`` (through CuPy's CAI) against ``cupy.asarray(gpuarray)``.
- One ``GPUArray.__cuda_array_interface__`` export against CuPy's own.
Host-side medians of rounds of many calls, in microseconds; ours and CuPy's calls
alternate round by round.  Peers that do not import
are skipped (then only our figures are given, without a ratio).
"""

import importlib
import statistics
import time

import numpy as np

from barecuda.bench import interleaved_times

ROUNDS = 7
ITER = 2000


def _row(name, value, unit, ratio=None, vs=None, note=None):
    return {"name": name, "value": value, "unit": unit, "ratio": ratio, "vs": vs, "note": note}


def _us(fn, iterations=ITER):
    """Median microseconds of one fn() call."""
    for _ in range(50):
        fn()
    times = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(iterations):
            fn()
        times.append((time.perf_counter() - t0) / iterations * 1e6)
    return statistics.median(times)


def run():
    from barecuda import gpuarray

    importlib.import_module("barecuda.autoprimaryctx")   # the primary context, shared with CuPy

    ours = gpuarray.to_gpu(np.arange(1000, dtype=np.float32))
    try:
        import cupy
    except Exception:  # noqa: BLE001 - CuPy missing or broken: our figures alone
        cupy = None
    rows = []
    if cupy is None:
        rows.append(_row("GPUArray.__cuda_array_interface__",
                         _us(lambda: ours.__cuda_array_interface__), "us", note="CuPy not found"))
        rows.append(_row("GPUArray.__dlpack__", _us(lambda: ours.__dlpack__(max_version=(1, 0))),
                         "us", note="CuPy not found"))
        return rows
    theirs = cupy.arange(1000, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()

    # ours and CuPy's alternate round by round (host-side figures drift otherwise)
    t_from, c_from, t_as, c_as, t_cai, c_cai, t_dlp, c_dlp = (
        t * 1e6 for t in interleaved_times([
            lambda: gpuarray.from_dlpack(theirs), lambda: cupy.from_dlpack(ours),
            lambda: gpuarray.asarray(theirs), lambda: cupy.asarray(ours),
            lambda: ours.__cuda_array_interface__, lambda: theirs.__cuda_array_interface__,
            lambda: ours.__dlpack__(max_version=(1, 0)),
            lambda: theirs.__dlpack__(max_version=(1, 0))],
            iterations=ITER, rounds=3 * ROUNDS, warmup=50))
    rows.append(_row("from_dlpack (import 1000 float32)", t_from, "us", c_from / t_from,
                     "cupy.from_dlpack(GPUArray)"))
    rows.append(_row("asarray via CAI (import)", t_as, "us", c_as / t_as, "cupy.asarray(GPUArray)"))
    rows.append(_row("__cuda_array_interface__ export", t_cai, "us", c_cai / t_cai,
                     "cupy.ndarray.__cuda_array_interface__"))
    rows.append(_row("__dlpack__ export", t_dlp, "us", c_dlp / t_dlp, "cupy.ndarray.__dlpack__",
                     "capsules collected unconsumed"))
    # Correctness of what was timed: both views see the same memory.
    view = gpuarray.from_dlpack(theirs)
    if view.ptr != theirs.data.ptr or int(cupy.from_dlpack(ours).data.ptr) != ours.ptr:
        rows.append(_row("interop check", 0.0, "", note="pointers differ: zero-copy broken"))
    return rows
