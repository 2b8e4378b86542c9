# SPDX-License-Identifier: MIT
"""Summing arrays across processes with MPI, one process per GPU.

Teaches: each MPI rank picks its GPU (rank modulo the device count), makes that
device's context current and keeps its data in a GPUArray.  ``barecuda.mpi``'s
``allreduce`` hands the device buffers straight to a CUDA-aware MPI, or stages
them through pinned host memory when MPI cannot read GPU memory, and says which
path it took.  When every rank has a GPU of its own, the same ranks then build an
NCCL communicator: rank 0 makes the unique id and MPI broadcasts it.

Run: mpirun -n 2 python examples/mpi_allreduce.py   (or plain python: one rank)
Exit status 0 when every rank's sums match NumPy's; with no usable mpi4py it
says so and exits 0.
"""

import importlib
import sys
from typing import Any

import numpy as np

import barecuda.driver as cuda
from barecuda import gpuarray
from barecuda import mpi as bmpi
from barecuda import nccl

N = 1 << 20


def rank_data(rank: int) -> Any:
    return np.random.default_rng(100 + rank).random(N)


def with_nccl(comm: Any, rank: int, size: int, expect: Any) -> bool:
    """All-reduce again through NCCL, the unique id sent over MPI."""
    uid = nccl.get_unique_id() if rank == 0 else None
    uid = comm.bcast(uid, root=0)
    with nccl.Communicator(size, uid, rank) as nc:
        a = gpuarray.to_gpu(rank_data(rank))
        nc.all_reduce(a, op="sum")                   # in place
        return bool(np.allclose(a.get(), expect))


def main() -> int:
    try:
        MPI = importlib.import_module("mpi4py.MPI")
    except Exception as exc:  # noqa: BLE001 - no mpi4py, or no MPI library under it
        print(f"SKIPPED: this example needs mpi4py with an MPI library ({exc}) (exit 0)")
        return 0
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    cuda.init()
    ndev = cuda.Device.count()
    ctx = cuda.Device(rank % ndev).retain_primary_context()
    ctx.push()

    a = gpuarray.to_gpu(rank_data(rank))
    total = gpuarray.empty_like(a)
    path = bmpi.allreduce(comm, a, total, op=MPI.SUM)
    expect = sum(rank_data(r) for r in range(size))
    ok = bool(np.allclose(total.get(), expect))

    used_nccl = size <= ndev and nccl.available()     # NCCL wants one GPU per rank
    if used_nccl:
        ok = with_nccl(comm, rank, size, expect) and ok

    oks = comm.allgather(ok)
    cuda.Context.pop()
    ctx.detach()
    if rank != 0:
        return 0 if all(oks) else 1
    if not all(oks):
        bad = [r for r, good in enumerate(oks) if not good]
        print(f"MISMATCH: ranks {bad} got sums that differ from NumPy's", file=sys.stderr)
        return 1
    what = " and through NCCL" if used_nccl else ""
    print(f"OK: {size} rank{'s' if size > 1 else ''} all-reduced {N} doubles with MPI "
          f"({path} path){what}; every sum matches NumPy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
