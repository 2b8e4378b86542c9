# SPDX-License-Identifier: MIT
"""All-reduce across every GPU of the machine from one process, with NCCL.

Teaches: ``nccl.Communicator.init_all`` makes one communicator per visible GPU
(rank i on device i, through that device's primary context).  One thread drives
them all, so their operations go inside ``with nccl.group():`` (NCCL launches a
collective on every GPU at once; issued one by one they would wait for each
other forever).  Each GPU holds its own array; after the all-reduce every GPU
holds the elementwise sum, and all_gather puts all arrays side by side.

Run: python examples/nccl_allreduce.py   (any number of GPUs, one included)
Exit status 0 when every GPU's results match NumPy's; without libnccl it says so
and exits 0.
"""

import sys
from typing import Any

import numpy as np

import barecuda.driver as cuda
from barecuda import gpuarray, nccl

N = 1 << 20


def main() -> int:
    if not nccl.available():
        print("SKIPPED: this example needs NCCL (pip install nvidia-nccl-cu13) (exit 0)")
        return 0
    comms = nccl.Communicator.init_all()              # every visible GPU
    n = len(comms)
    hosts = [np.random.default_rng(i).random(N).astype(np.float32) for i in range(n)]
    arrays: list[tuple[Any, Any, Any]] = []
    for comm, host in zip(comms, hosts):
        comm.context.push()                           # allocate on this rank's GPU
        arrays.append((gpuarray.to_gpu(host), gpuarray.empty(N * n, np.float32),
                       cuda.Stream()))
        cuda.Context.pop()

    with nccl.group():                                # gathered first: inputs untouched
        for comm, (a, gathered, stream) in zip(comms, arrays):
            comm.all_gather(a, gathered, stream=stream)
    with nccl.group():
        for comm, (a, _, stream) in zip(comms, arrays):
            comm.all_reduce(a, op="sum", stream=stream)   # in place

    total = np.sum(hosts, axis=0)
    ok = True
    for comm, (a, gathered, stream) in zip(comms, arrays):
        comm.context.push()
        stream.synchronize()
        ok &= bool(np.allclose(a.get(), total, rtol=1e-5))
        ok &= bool(np.array_equal(gathered.get(), np.concatenate(hosts)))
        cuda.Context.pop()
        comm.destroy()
    if not ok:
        print("MISMATCH: a GPU's sum or gathered array differs from NumPy's", file=sys.stderr)
        return 1
    print(f"OK: all-reduced and gathered {N} floats across {n} GPU(s) with NCCL "
          f"{'.'.join(map(str, nccl.version()))}; results match NumPy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
