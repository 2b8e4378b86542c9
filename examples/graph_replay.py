# SPDX-License-Identifier: MIT
"""Record a sequence of launches once as a CUDA Graph, then replay it many times.

Teaches: every kernel launch has a CPU cost (a few microseconds).  For a fixed
sequence of small kernels, ``Stream.begin_capture()`` ... ``end_capture()``
records the launches into a ``Graph`` instead of running them;
``graph.instantiate()`` turns it into an executable graph whose ``launch(stream)``
submits the whole sequence at once.  The kernel arguments (pointers and
values) are frozen at capture time, so replays work on the same buffers.

Here one "step" of a toy simulation is three small kernels; the step is run
STEPS times with ordinary launches and STEPS times as a graph replay; both
must give NumPy's answer.  Both ways are recorded with ``barecuda.tools.trace()``
(JSON + SVG timeline in trace_dir, else $BARECUDA_TRACE_DIR, else a temp dir):
the captured launches show on the host row only, each replay as one graph bar.

Run: python examples/graph_replay.py [trace_dir]
Exit status 0 when both ways match NumPy.
"""

import sys
import time
from typing import Any

import numpy as np
import numpy.typing as npt

import barecuda.autoinit  # noqa: F401
import barecuda.driver as cuda
from barecuda.compiler import SourceModule
from barecuda.tools import trace, trace_dir

KERNEL = r"""
__global__ void scale(float *x, float a, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }

__global__ void add(float *x, const float *y, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += y[i]; }

__global__ void clamp(float *x, float lo, float hi, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = fminf(fmaxf(x[i], lo), hi); }
"""

N, STEPS = 4096, 200


def numpy_steps(x: npt.NDArray[Any], y: npt.NDArray[Any], steps: int) -> npt.NDArray[Any]:
    x = x.copy()
    for _ in range(steps):
        x = np.clip(x * np.float32(0.9) + y, np.float32(-5), np.float32(5))
    return x


def main(argv: list[str]) -> int:
    mod = SourceModule(KERNEL)
    scale, add, clamp = (mod.get_function(k) for k in ("scale", "add", "clamp"))
    scale.prepare("Pfi")
    add.prepare("PPi")
    clamp.prepare("Pffi")
    rng = np.random.default_rng(7)
    x0 = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    x_gpu, y_gpu = cuda.mem_alloc(x0.nbytes), cuda.mem_alloc(y.nbytes)
    cuda.memcpy_htod(y_gpu, y)
    grid, block = ((N + 255) // 256, 1), (256, 1, 1)
    stream = cuda.Stream()

    def step() -> None:
        """One step: three launches queued on `stream`."""
        scale.prepared_async_call(grid, block, stream, x_gpu, 0.9, N)
        add.prepared_async_call(grid, block, stream, x_gpu, y_gpu, N)
        clamp.prepared_async_call(grid, block, stream, x_gpu, -5.0, 5.0, N)

    want = numpy_steps(x0, y, STEPS)
    results, ok = {}, True

    # 1. Ordinary launches: 3 * STEPS launches from Python.
    cuda.memcpy_htod(x_gpu, x0)
    t = trace().start()
    t0 = time.perf_counter()
    for _ in range(STEPS):
        step()
    stream.synchronize()
    results["launches"] = time.perf_counter() - t0

    # 2. Capture one step into a graph (nothing runs during capture), then replay it.
    stream.begin_capture()
    step()
    graph = stream.end_capture()
    exe = graph.instantiate()
    got_launches = np.empty_like(x0)
    cuda.memcpy_dtoh(got_launches, x_gpu)
    cuda.memcpy_htod(x_gpu, x0)                # start again from the same state
    t0 = time.perf_counter()
    for _ in range(STEPS):
        exe.launch(stream)
    stream.synchronize()
    results["graph replays"] = time.perf_counter() - t0
    t.stop()
    paths = t.save(trace_dir(argv[1] if len(argv) > 1 else None), "graph_replay")
    print(f"timeline: {paths[0]} and {paths[1]}\n{t.summary()}")
    got_graph = np.empty_like(x0)
    cuda.memcpy_dtoh(got_graph, x_gpu)

    for label, got in (("launches", got_launches), ("graph replays", got_graph)):
        err = float(np.abs(got - want).max())
        print(f"{STEPS} steps by {label:13s} {results[label] * 1e3:7.2f} ms   max |GPU - NumPy| {err:.1e}")
        if not err < 1e-4:
            print(f"MISMATCH: {label} differ from NumPy", file=sys.stderr)
            ok = False
    exe.close()
    graph.close()
    x_gpu.free()
    y_gpu.free()
    if not ok:
        return 1
    print(f"OK: a 3-kernel graph replayed {STEPS} times matches NumPy (timings not checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
