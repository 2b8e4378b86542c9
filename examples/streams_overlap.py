# SPDX-License-Identifier: MIT
"""Overlapping copies with computation using several CUDA streams.

Teaches: work queued on one stream runs in order, work on different streams may
run at the same time.  A GPU has separate copy engines, so while chunk k is
being computed, chunk k+1 can be uploaded and chunk k-1 downloaded.  That needs
page-locked ("pinned") host memory (``cuda.pagelocked_empty``) and the
``*_async`` copies.  The same work is run twice, all on one stream (serial) and
split over several streams (overlapped), each timed with events; the results
are checked against NumPy.  The timings are printed but never fail the run
(they depend on the machine).  Each run is recorded with
``barecuda.tools.trace()``; the overlapped one's timeline (Chrome/Perfetto JSON and SVG, one row per
stream) goes to trace_dir (else $BARECUDA_TRACE_DIR, else a temporary directory).

Run: python examples/streams_overlap.py [n_streams] [trace_dir]
Exit status 0 when the results match NumPy.
"""

import sys
from typing import Any

import numpy as np
import numpy.typing as npt

import barecuda.autoinit  # noqa: F401
import barecuda.driver as cuda
from barecuda.compiler import SourceModule
from barecuda.tools import trace, trace_dir

ITERS = 4000          # arithmetic per element: makes a chunk's kernel take about as long as its copy
KERNEL = r"""
/* y = `iters` steps of v <- 0.999 v + 0.001 (2x), starting from v = x: pure arithmetic. */
__global__ void relax(float *y, const float *x, int n, int iters)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i], target = x[i] * 2.0f;
    for (int k = 0; k < iters; ++k)
        v = 0.999f * v + 0.001f * target;
    y[i] = v;
}
"""


def reference(x: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """Closed form of the loop: v_K = t + (x - t) * 0.999**K with t = 2x."""
    x = x.astype(np.float64)
    out: npt.NDArray[Any] = 2 * x + (x - 2 * x) * 0.999 ** ITERS
    return out


def run(relax: cuda.Function, streams: list[cuda.Stream], host_in: npt.NDArray[Any], host_out: npt.NDArray[Any],
        dev_in: cuda.DeviceAllocation, dev_out: cuda.DeviceAllocation, chunks: int) -> float:
    """Queue upload, kernel and download of every chunk, chunk k on streams[k % len]."""
    step = host_in.size // chunks
    start, stop = cuda.Event(), cuda.Event()
    start.record(streams[0])
    for s in streams[1:]:
        s.wait_for_event(start)           # every stream starts after `start`
    for k in range(chunks):
        s = streams[k % len(streams)]
        lo, hi = k * step, (k + 1) * step
        off = lo * 4                      # byte offset of the chunk on the device
        cuda.memcpy_htod_async(int(dev_in) + off, host_in[lo:hi], s)
        relax.prepared_async_call(((step + 255) // 256, 1), (256, 1, 1), s,
                                  int(dev_out) + off, int(dev_in) + off, step, ITERS)
        cuda.memcpy_dtoh_async(host_out[lo:hi], int(dev_out) + off, s)
    for s in streams[1:]:                 # `stop` waits for every stream
        done = cuda.Event().record(s)
        streams[0].wait_for_event(done)
    stop.record(streams[0])
    stop.synchronize()
    return start.time_till(stop)


def main(argv: list[str]) -> int:
    n_streams = int(argv[1]) if len(argv) > 1 else 4
    chunks = 16
    n = chunks * (1 << 20)                      # 16 Mi floats = 64 MiB each way

    relax = SourceModule(KERNEL).get_function("relax")
    relax.prepare("PPii")                      # y, x, n, iters
    # Pinned host buffers: the copy engines can read and write them directly.
    host_in = cuda.pagelocked_empty(n, np.float32)
    host_out = cuda.pagelocked_empty(n, np.float32)
    host_in[:] = np.random.default_rng(5).random(n, dtype=np.float32)
    dev_in, dev_out = cuda.mem_alloc(host_in.nbytes), cuda.mem_alloc(host_in.nbytes)
    streams = [cuda.Stream() for _ in range(n_streams)]
    want = reference(host_in)

    status = 0
    times = {}
    run(relax, streams[:1], host_in, host_out, dev_in, dev_out, chunks)   # warm up
    for label, use in (("serial (1 stream)", streams[:1]),
                       (f"overlapped ({n_streams} streams)", streams)):
        host_out[:] = 0
        with trace() as t:
            times[label] = run(relax, use, host_in, host_out, dev_in, dev_out, chunks)
        err = float(np.max(np.abs(host_out - want) / (np.abs(want) + 1e-6)))
        print(f"{label:26s} {times[label]:7.2f} ms   max rel. error {err:.1e}")
        if not err < 1e-3:
            print(f"MISMATCH: {label} result differs from NumPy", file=sys.stderr)
            status = 1
    paths = t.save(trace_dir(argv[2] if len(argv) > 2 else None), "streams_overlap")
    print(f"timeline of the overlapped run: {paths[0]} and {paths[1]}\n{t.summary()}")
    serial, overlapped = times.values()
    print(f"overlap saved {100 * (1 - overlapped / serial):.0f}% of the serial time "
          "(not checked: it depends on the GPU and the bus)")
    dev_in.free()
    dev_out.free()
    if status == 0:
        print(f"OK: {chunks} chunks on {n_streams} streams give the same result as NumPy")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
