# SPDX-License-Identifier: MIT
"""Zero-copy exchange of GPUArrays with CuPy, PyTorch, Numba, JAX...: DLPack
(``GPUArray.__dlpack__``/``__dlpack_device__`` in barecuda._array.dlpack, :func:`from_dlpack`) and the CUDA
array interface v3 (:func:`asarray` reads it); re-exported by :mod:`barecuda.gpuarray`.

Imported views keep their producer alive.  Stream rules: our work runs on the
legacy default stream (handle 1) unless a stream is given; as a producer we make
the consumer's stream wait for it (an event), as a consumer we ask producers to
order their work before stream 1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import SupportsIndex

    import numpy.typing as npt

    from barecuda._driver import Stream

    _Allocator = Callable[[int], Any]
    _ShapeLike = SupportsIndex | Sequence[SupportsIndex]

import numpy as np

from barecuda import _driver as _cdrv
from barecuda._array.array import GPUArray
from barecuda._array.dlpack import (  # noqa: F401  (the export side, re-exported by gpuarray)
    _DL_CODES,
    _DL_CUDA,
    _DL_CUDA_MANAGED,
    _LEGACY,
    _device_ordinal,
    _to_dlpack,
    _wait_on,
    settle_default_stream,
)
from barecuda._array import create as _create
from barecuda._array.layout import _check_dtype

__all__ = ["from_dlpack", "asarray"]

class _DLPackKeep:
    """Keeps a consumed DLPack tensor (its deleter runs when this dies) and its producer."""
    __slots__ = ("capsule", "producer", "read_only")

    def __init__(self, capsule: Any, producer: Any, read_only: bool) -> None:

        self.capsule = capsule
        self.producer = producer
        self.read_only = read_only


def _view(ptr: Any, shape: Any, strides: Any, dtype: Any, keep: Any) -> GPUArray:
    dtype = _check_dtype(dtype)
    return GPUArray(shape, dtype, base=keep, gpudata=int(ptr), strides=strides)  # type: ignore[no-any-return]


def from_dlpack(obj: Any) -> GPUArray:
    """A GPUArray viewing the device memory of `obj` (no copy): anything with
    __dlpack__/__dlpack_device__ on a CUDA device (a CuPy array, a torch tensor, a JAX
    array...) or a DLPack capsule.  The producer orders its pending work before our
    default stream (we pass stream=1) and stays alive as long as the view."""
    if isinstance(obj, GPUArray):
        return obj  # type: ignore[no-any-return]
    if type(obj).__name__ == "PyCapsule":
        cap, producer = obj, None
    else:
        get_dev = getattr(obj, "__dlpack_device__", None)
        export = getattr(obj, "__dlpack__", None)
        if get_dev is None or export is None:
            raise TypeError(f"from_dlpack(): {type(obj).__name__} does not support the DLPack "
                            f"protocol (__dlpack__ and __dlpack_device__)")
        dev = tuple(get_dev())
        if dev[0] not in (_DL_CUDA, _DL_CUDA_MANAGED):
            raise BufferError(f"from_dlpack(): the array lives on DLPack device {dev} "
                              f"(kDLCUDA=2 needed): copy host arrays with to_gpu()/asarray()")
        try:
            cap = export(stream=_LEGACY, max_version=(1, 0))
        except TypeError:  # producers of DLPack < 1.0 do not take max_version
            cap = export(stream=_LEGACY)
        producer = obj
    ptr, shape, strides, typestr, dev_type, _dev_id, keep, ro = _cdrv._from_dlpack(cap)
    if dev_type not in (_DL_CUDA, _DL_CUDA_MANAGED):
        raise BufferError(f"from_dlpack(): the capsule holds memory of DLPack device type "
                          f"{dev_type}, not CUDA (2)")
    return _view(ptr, shape, strides, typestr, _DLPackKeep(keep, producer, ro))


def _from_cai(obj: Any, cai: Any) -> Any:
    if not isinstance(cai, dict):
        raise TypeError(f"__cuda_array_interface__ of {type(obj).__name__} is not a dict")
    if cai.get("mask") is not None:
        raise TypeError("asarray(): masked CUDA arrays (a __cuda_array_interface__ with a "
                        "mask) are not supported")
    try:
        shape = tuple(cai["shape"])
        typestr = cai["typestr"]
        ptr = cai["data"][0]
    except (KeyError, TypeError, IndexError):
        raise TypeError("__cuda_array_interface__ must have shape, typestr and data: "
                        "(ptr, readonly)") from None
    strides = cai.get("strides")
    if cai.get("version", 0) >= 3:
        stream = cai.get("stream")
        # 0 is forbidden by the spec (ambiguous); read it, like 1, as the legacy stream.
        if stream is not None and stream not in (0, _LEGACY):
            _wait_on(_LEGACY, stream)
    dtype = np.dtype(typestr)
    if cai.get("descr") is not None and len(cai["descr"]) > 1:
        dtype = np.dtype([tuple(d) for d in cai["descr"]])  # type: ignore[assignment]
    return _view(ptr or 0, shape, None if strides is None else tuple(strides), dtype, obj)


def _device_view(obj: Any) -> Any:
    """A zero-copy GPUArray view of another library's device array, or None when `obj`
    exports neither __cuda_array_interface__ nor DLPack on a CUDA device."""
    if isinstance(obj, np.ndarray):
        return None
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        if isinstance(cai, dict) and cai.get("version", 0) < 3 and hasattr(obj, "__dlpack__"):
            return from_dlpack(obj)   # a CAI v2 says nothing of streams (torch): DLPack does
        return _from_cai(obj, cai)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__") and \
            obj.__dlpack_device__()[0] in (_DL_CUDA, _DL_CUDA_MANAGED):
        return from_dlpack(obj)
    return None


def asarray(obj: Any, dtype: npt.DTypeLike | None = None, stream: Stream | None = None) -> GPUArray:
    """A GPUArray for `obj`: a GPUArray itself (cast with astype if `dtype` differs),
    a zero-copy view of an object exporting __cuda_array_interface__ (v2/v3, whose
    `stream` our default stream waits for) or DLPack on a CUDA device, else a copy of
    ``numpy.asarray(obj, dtype)`` on the device."""
    if not isinstance(obj, GPUArray):
        view = _device_view(obj)
        if view is None:
            return _create.to_gpu(np.asarray(obj, dtype=dtype), stream=stream)  # type: ignore[no-any-return]
        obj = view
    if dtype is not None and np.dtype(dtype) != obj.dtype:
        return obj.astype(dtype, stream=stream)  # type: ignore[no-any-return]
    return obj  # type: ignore[no-any-return]
