# SPDX-License-Identifier: MIT
"""MPI with device buffers: mpi4py helpers that pick CUDA-aware MPI or host staging.

GPUArrays and DeviceAllocations export ``__cuda_array_interface__``, so with a
CUDA-aware MPI they go straight into mpi4py's buffer calls::

    comm.Allreduce(MPI.IN_PLACE, gpu_array, op=MPI.SUM)

(synchronize the work that produced the data first: MPI does not know CUDA
streams).  The helpers here do that for you and also work with an MPI that is
not CUDA-aware, by staging through pinned host buffers.  Each returns the path
it took: ``"device"`` (buffers handed to MPI directly) or ``"host"`` (copied
through pinned memory).

Whether MPI is CUDA-aware (:func:`cuda_aware`) is decided, in order, by:

1. ``BARECUDA_MPI_CUDA_AWARE=1`` or ``=0`` in the environment (an override: say
   what your MPI does when detection cannot);
2. mpi4py's ``MPI.Query_cuda_support()`` (mpi4py 4 with an MPI that has it);
3. Open MPI's ``MPIX_Query_cuda_support()`` or MPICH's ``MPIX_GPU_query_support``
   found in the loaded MPI library;
4. otherwise False: the host path, which works with every MPI.

mpi4py is optional: ``import barecuda.mpi`` works without it; the helpers need a
communicator, which only mpi4py (or a look-alike) provides.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy as np

__all__ = ["cuda_aware", "allreduce", "bcast", "send", "recv", "DEVICE", "HOST"]

DEVICE = "device"
HOST = "host"

_ENV = "BARECUDA_MPI_CUDA_AWARE"


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise ImportError("barecuda.mpi needs mpi4py (pip install mpi4py)") from exc
    return MPI


def _library_query() -> bool | None:
    """Ask the MPI library in the process directly; None when it cannot say."""
    try:
        lib = ctypes.CDLL(None)
    except OSError:
        return None
    fn = getattr(lib, "MPIX_Query_cuda_support", None)        # Open MPI
    if fn is not None:
        fn.restype = ctypes.c_int
        fn.argtypes = []
        return bool(fn())
    fn = getattr(lib, "MPIX_GPU_query_support", None)         # MPICH: (gpu_type, &flag)
    if fn is not None:
        flag = ctypes.c_int(0)
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
        if fn(0, ctypes.byref(flag)) == 0:                    # MPIX_GPU_SUPPORT_CUDA = 0
            return bool(flag.value)
    return None


def cuda_aware(mpi: Any = None) -> bool:
    """Whether MPI can read and write device memory (see the module's doc for the
    order of the checks).  `mpi`: the MPI module to ask (default: mpi4py.MPI, when it
    imports)."""
    env = os.environ.get(_ENV, "").strip()
    if env in ("0", "1"):
        return env == "1"
    if env:
        raise ValueError(f"{_ENV} must be 0 or 1, not {env!r}")
    if mpi is None:
        try:
            mpi = _mpi()
        except ImportError:
            return False
    query = getattr(mpi, "Query_cuda_support", None)
    if query is not None:
        try:
            return bool(query())
        except Exception:  # noqa: BLE001 - an MPI without it raises NotImplementedError
            pass
    found = _library_query()
    return bool(found)


# ------------------------------------------------------------------ buffers

def _device_buffer(obj: Any, what: str) -> tuple[int, int, np.dtype[Any]]:
    """(pointer, nbytes, dtype) of a contiguous GPUArray or a DeviceAllocation (uint8)."""
    from barecuda import _driver
    if isinstance(obj, (_driver.DeviceAllocation, _driver.IPCMemoryHandle)):
        return int(obj), int(obj.size), np.dtype(np.uint8)
    if hasattr(obj, "gpudata") and hasattr(obj, "dtype"):
        if not obj.flags.forc:
            raise ValueError(f"{what} is not contiguous (strides {obj.strides})")
        return int(obj.ptr), int(obj.nbytes), np.dtype(obj.dtype)
    raise TypeError(f"{what} must be a GPUArray or a DeviceAllocation, not "
                    f"{type(obj).__name__}")


def _settle() -> None:
    """Wait for the current context's work: MPI reads memory without stream order."""
    from barecuda import driver as drv
    drv.Context.synchronize()


def _staging(nbytes: int, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    from barecuda import driver as drv
    count = nbytes // dtype.itemsize
    return drv.pagelocked_empty((count,), dtype)


def _to_host(ptr: int, host: np.ndarray[Any, Any]) -> None:
    from barecuda import driver as drv
    drv.memcpy_dtoh(host, ptr)


def _to_device(ptr: int, host: np.ndarray[Any, Any]) -> None:
    from barecuda import driver as drv
    drv.memcpy_htod(ptr, host)


def _choose(cuda_aware_: bool | None) -> bool:
    if cuda_aware_ is not None:
        return bool(cuda_aware_)
    return cuda_aware()


def allreduce(comm: Any, send: Any, recv: Any = None, op: Any = None, *,
              cuda_aware: bool | None = None) -> str:
    """``comm.Allreduce`` of device buffers: recv = op over all ranks of send
    (recv=None: in place).  `op` defaults to MPI.SUM.  `cuda_aware` forces the path
    (None: :func:`cuda_aware`).  Returns the path taken, "device" or "host"."""
    sptr, snb, sdt = _device_buffer(send, "send")
    rptr, rnb, rdt = (sptr, snb, sdt) if recv is None else _device_buffer(recv, "recv")
    if (snb, sdt) != (rnb, rdt):
        raise ValueError(f"allreduce(): send is {snb} bytes of {sdt} but recv is {rnb} bytes "
                         f"of {rdt}")
    MPI: Any = _mpi() if op is None or recv is None else None
    if op is None:
        op = MPI.SUM
    _settle()
    if _choose(cuda_aware):
        if recv is None:
            comm.Allreduce(MPI.IN_PLACE, send, op=op)
        else:
            comm.Allreduce(send, recv, op=op)
        return DEVICE
    host = _staging(snb, sdt)
    _to_host(sptr, host)
    out = np.empty_like(host) if recv is not None else None
    if out is None:
        comm.Allreduce(MPI.IN_PLACE, host, op=op)
        _to_device(sptr, host)
    else:
        comm.Allreduce(host, out, op=op)
        _to_device(rptr, out)
    return HOST


def bcast(comm: Any, buf: Any, root: int = 0, *, cuda_aware: bool | None = None) -> str:
    """``comm.Bcast`` of a device buffer from `root` to every rank; returns the path."""
    ptr, nbytes, dtype = _device_buffer(buf, "buf")
    _settle()
    if _choose(cuda_aware):
        comm.Bcast(buf, root=root)
        return DEVICE
    host = _staging(nbytes, dtype)
    if comm.Get_rank() == root:
        _to_host(ptr, host)
    comm.Bcast(host, root=root)
    if comm.Get_rank() != root:
        _to_device(ptr, host)
    return HOST


def send(comm: Any, buf: Any, dest: int, tag: int = 0, *, cuda_aware: bool | None = None) -> str:
    """``comm.Send`` of a device buffer to rank `dest`; returns the path."""
    ptr, nbytes, dtype = _device_buffer(buf, "buf")
    _settle()
    if _choose(cuda_aware):
        comm.Send(buf, dest=dest, tag=tag)
        return DEVICE
    host = _staging(nbytes, dtype)
    _to_host(ptr, host)
    comm.Send(host, dest=dest, tag=tag)
    return HOST


def recv(comm: Any, buf: Any, source: int, tag: int = 0, *,
         cuda_aware: bool | None = None) -> str:
    """``comm.Recv`` into a device buffer from rank `source`; returns the path."""
    ptr, nbytes, dtype = _device_buffer(buf, "buf")
    _settle()
    if _choose(cuda_aware):
        comm.Recv(buf, source=source, tag=tag)
        return DEVICE
    host = _staging(nbytes, dtype)
    comm.Recv(host, source=source, tag=tag)
    _to_device(ptr, host)
    return HOST
