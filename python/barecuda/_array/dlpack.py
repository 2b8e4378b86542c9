# SPDX-License-Identifier: MIT
"""GPUArrays handed to other libraries: DLPack export (``GPUArray.__dlpack__``,
``__dlpack_device__``) and the stream rules of the CUDA array interface export
(``__cuda_array_interface__`` first settles the legacy default stream).  The import
side (from_dlpack, asarray) is barecuda._array.interop.
"""

from __future__ import annotations

from typing import Any

from barecuda import _driver as _cdrv
from barecuda._core import enums as _enums

_drv = _cdrv

_DL_CUDA, _DL_CUDA_MANAGED = 2, 13
_DL_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}
_LEGACY = 1


def _device_ordinal() -> int:
    return _drv.Context.get_device().handle


def _wait_on(waiter: Any, producer: Any) -> None:
    """Make stream `waiter` (an int handle) wait for work queued so far on `producer`."""
    ev = _drv.Event(_enums.get("event_flags").DISABLE_TIMING)
    ev.record(_drv.Stream.from_handle(producer))
    _drv.Stream.from_handle(waiter).wait_for_event(ev)


def settle_default_stream() -> None:
    """Wait until the legacy default stream of the current context is idle (a query
    when it already is)."""
    legacy = _drv.Stream.from_handle(_LEGACY)
    if not legacy.is_done():
        legacy.synchronize()


def _to_dlpack(a: Any, stream: Any, max_version: Any, dl_device: Any, copy: Any) -> Any:
    dev = (_DL_CUDA, _device_ordinal())
    if dl_device is not None and tuple(dl_device) != dev:
        raise BufferError(f"__dlpack__: this GPUArray lives on device {dev} (kDLCUDA=2); "
                          f"exporting to {tuple(dl_device)} is not supported")
    if stream is not None:
        if isinstance(stream, bool) or not isinstance(stream, int):
            raise TypeError(f"__dlpack__: stream must be an int or None, not {type(stream).__name__}")
        if stream == 0:
            raise ValueError("__dlpack__: stream 0 is ambiguous for CUDA; pass 1 (legacy default), "
                             "2 (per-thread default), a stream handle, or -1")
    code = _DL_CODES.get(a.dtype.kind)
    if code is None or a.dtype.fields is not None:
        raise BufferError(f"__dlpack__: dtype {a.dtype} has no DLPack type")
    if copy:
        a = a.copy()
    if stream is not None and stream not in (-1, _LEGACY):
        _wait_on(stream, _LEGACY)
    if a._c:
        strides = None
    else:
        isz = a.dtype.itemsize
        if any(s % isz for s in a.strides):
            raise BufferError(f"__dlpack__: strides {a.strides} are not multiples of the "
                              f"item size {isz}")
        strides = [s // isz for s in a.strides]
    versioned = max_version is not None and tuple(max_version)[:1] >= (1,)
    return _cdrv._to_dlpack(a, a.ptr, a.shape, strides, code, a.dtype.itemsize * 8, dev[1],
                           versioned, False, bool(copy))
