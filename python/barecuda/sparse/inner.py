# SPDX-License-Identifier: MIT
"""Inner products read back without stalling the GPU, as ``pycuda.sparse.inner``.

``AsyncInnerProduct(a, b, allocator)`` queues dot(a, b) and an event behind it;
``get_host_result()`` is polled: once the event has passed it starts a copy of the
result into page-locked host memory on a side stream, and once that copy is done it
returns the value (None until then).  The host can thus keep queuing iterations of
a solver while earlier inner products come back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import atexit

from barecuda import driver as drv
from barecuda import gpuarray

if TYPE_CHECKING:
    from typing import Any

    import numpy.typing as npt

    from barecuda._driver import Stream
    from barecuda.gpuarray import GPUArray

__all__ = ["AsyncInnerProduct", "get_stream", "STREAM_POOL"]

STREAM_POOL = []     # side streams of finished copies, reused by later ones


def get_stream() -> Any:
    """A stream of the current context from STREAM_POOL, or a new one.

    Pooled streams of other contexts stay for their context; those of a context
    that is gone (detached, or a primary context that was reset) are dropped.
    """
    ctx = drv.Context.get_current()
    for i in range(len(STREAM_POOL) - 1, -1, -1):
        stream = STREAM_POOL[i]
        try:
            owner = stream.context
            usable = owner is not None and not owner.released
        except drv.LogicError:
            usable = False
        if not usable:
            del STREAM_POOL[i]
        elif owner == ctx:
            del STREAM_POOL[i]
            return stream
    return drv.Stream()


class AsyncInnerProduct:
    """AsyncInnerProduct(a, b, pagelocked_allocator=None): dot(a, b) queued now.

    ``gpu_result`` is the 0-d GPUArray of the product.  `pagelocked_allocator`
    is called as ``allocator((1,), dtype)`` for the host copy (default
    ``driver.pagelocked_empty``; a ``tools.PageLockedMemoryPool().allocate`` fits).
    """

    def __init__(self, a: Any, b: Any, pagelocked_allocator: Any = None) -> None:
        self.gpu_result = gpuarray.dot(a, b)
        self.gpu_finished_evt = drv.Event()
        self.gpu_finished_evt.record()
        self.gpu_finished = False
        self.pagelocked_allocator = pagelocked_allocator or drv.pagelocked_empty
        self.copy_stream = None
        self.host_dest = None
        self._value = None

    def get_host_result(self) -> Any:
        """The product as a NumPy scalar once it has reached the host, else None
        (call again later; each call only polls events, never waits)."""
        if self._value is not None:
            return self._value
        if not self.gpu_finished:
            if self.gpu_finished_evt.query():
                self.gpu_finished = True
                self.copy_stream = get_stream()
                res = self.gpu_result
                self.host_dest = self.pagelocked_allocator((1,), res.dtype)
                drv.memcpy_dtoh_async(self.host_dest, res.gpudata, self.copy_stream)
                self.copy_finished_evt = drv.Event()
                self.copy_finished_evt.record(self.copy_stream)
            return None
        if self.copy_finished_evt.query():
            STREAM_POOL.append(self.copy_stream)
            self.copy_stream = None
            self._value = self.host_dest[0]
            return self._value
        return None

    def wait(self) -> None:
        """The product, waiting for it (used when a solver must decide now)."""
        while True:
            value = self.get_host_result()
            if value is not None:
                return value
            if not self.gpu_finished:
                self.gpu_finished_evt.synchronize()
            else:
                self.copy_finished_evt.synchronize()


def _at_exit():
    STREAM_POOL[:] = []


atexit.register(_at_exit)
