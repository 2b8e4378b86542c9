# SPDX-License-Identifier: MIT
"""Copying between two GPUs: peer-to-peer with memcpy_peer.

Teaches: each GPU has its own context and memory.  ``Device.can_access_peer``
says whether one GPU can reach the other's memory directly (over NVLink or
PCIe); ``memcpy_peer`` copies between the memories of two contexts (through
the host when direct access is impossible).  (After
``Context.enable_peer_access`` a kernel on one GPU could even read the other
GPU's memory by pointer; not shown here.)  Data goes GPU 0 -> GPU 1, a kernel on GPU 1
doubles it, and it comes back to GPU 0; the bandwidth of the peer copy is
timed with events.

Run: python examples/multi_gpu_peer.py
With fewer than two GPUs it says so and exits 0; otherwise exit status 0 when
the data that comes back is twice what was sent.
"""

import sys

import numpy as np

import barecuda.driver as cuda
from barecuda.compiler import SourceModule

KERNEL = r"""
__global__ void twice(float *x, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }
"""


def main() -> int:
    cuda.init()
    if cuda.Device.count() < 2:
        print(f"SKIPPED: this example needs two GPUs, found {cuda.Device.count()} (exit 0)")
        return 0
    dev0, dev1 = cuda.Device(0), cuda.Device(1)
    print(f"GPU 0: {dev0.name()}, GPU 1: {dev1.name()}, peer access 0->1: "
          f"{dev0.can_access_peer(dev1)}, 1->0: {dev1.can_access_peer(dev0)}")
    ctx0, ctx1 = dev0.retain_primary_context(), dev1.retain_primary_context()

    n = 16 << 20                                    # 64 MiB of float32
    data = np.random.default_rng(12).random(n, dtype=np.float32)
    ctx0.push()                                     # allocations belong to the current context
    a0 = cuda.mem_alloc(data.nbytes)
    cuda.memcpy_htod(a0, data)
    cuda.Context.pop()
    ctx1.push()
    a1 = cuda.mem_alloc(data.nbytes)
    twice = SourceModule(KERNEL).get_function("twice")   # loaded into GPU 1's context

    # GPU 0 -> GPU 1, timed on GPU 1's default stream.
    start, stop = cuda.Event(), cuda.Event()
    start.record()
    cuda.memcpy_peer(a1, a0, data.nbytes, dest_context=ctx1, src_context=ctx0)
    stop.record()
    stop.synchronize()
    ms = start.time_till(stop)
    twice(a1, np.int32(n), block=(256, 1, 1), grid=((n + 255) // 256, 1))
    ctx1.synchronize()
    cuda.Context.pop()

    # And back to GPU 0 (each allocation knows its own context).
    cuda.memcpy_peer(a0, a1, data.nbytes)
    back = np.empty_like(data)
    ctx0.push()
    cuda.memcpy_dtoh(back, a0)
    cuda.Context.pop()
    print(f"peer copy GPU 0 -> GPU 1: {data.nbytes / (ms * 1e-3) / 1e9:.1f} GB/s")

    a0.free()
    a1.free()
    ctx0.detach()
    ctx1.detach()
    if not np.array_equal(back, 2 * data):
        print("MISMATCH: the data that came back is not twice what was sent", file=sys.stderr)
        return 1
    print("OK: data crossed between two GPUs and back, doubled on the way")
    return 0


if __name__ == "__main__":
    sys.exit(main())
