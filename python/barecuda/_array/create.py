# SPDX-License-Identifier: MIT
"""Making GPUArrays: ``empty``, ``zeros``, ``ones``, ``full``, their ``*_like`` forms,
``to_gpu``, ``to_gpu_async``, ``arange`` and ``is_gpuarray``; re-exported by
:mod:`barecuda.gpuarray`.
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

import builtins as _builtins

import numpy as np

from barecuda import _driver as _drv
from barecuda._array import core as _core
from barecuda._array.array import GPUArray
from barecuda._array.layout import _check_dtype
from barecuda._kernels.cdecl import dtype_to_ctype

__all__ = ["empty", "zeros", "ones", "full", "empty_like", "zeros_like", "ones_like", "to_gpu",
           "to_gpu_async", "arange", "is_gpuarray"]

def _shape_dtype_alloc(shape: Any, dtype: Any, allocator: Any, order: Any = "C", stream: Any = None) -> Any:
    return GPUArray(shape, dtype, allocator=allocator, order=order, stream=stream)


def empty(shape: _ShapeLike, dtype: npt.DTypeLike = np.float64, allocator: _Allocator | None = None,
          order: str = "C", stream: Stream | None = None) -> GPUArray:
    """A new uninitialised GPUArray."""
    return GPUArray(shape, dtype, allocator=allocator, order=order, stream=stream)  # type: ignore[no-any-return]


def zeros(shape: _ShapeLike, dtype: npt.DTypeLike = np.float64, allocator: _Allocator | None = None,
          order: str = "C", stream: Stream | None = None) -> GPUArray:
    """zeros(shape, dtype=float64, allocator=None, order="C", stream=None): a new GPUArray of zeros.

    `shape` is an int or a tuple of ints, `order` 'C' or 'F'; `allocator` (a callable
    taking a byte count, such as a ``tools.DeviceMemoryPool``) supplies the memory.
    With `stream` the clearing is queued on it.  Raises ValueError or TypeError for
    a bad shape, dtype or order, as the GPUArray constructor.
    """
    a: GPUArray = GPUArray(shape, dtype, allocator=allocator, order=order, stream=stream)
    if a.size:
        if stream is not None and hasattr(_drv, "memset_d8_async"):
            _drv.memset_d8_async(a.ptr, 0, a.nbytes, stream)
        else:
            _drv.memset_d8(a.ptr, 0, a.nbytes)
    return a


def ones(shape: _ShapeLike, dtype: npt.DTypeLike = np.float64, allocator: _Allocator | None = None,
         order: str = "C", stream: Stream | None = None) -> GPUArray:
    """ones(shape, dtype=float64, allocator=None, order="C", stream=None): a new GPUArray of ones.

    Arguments and errors as ``zeros``.
    """
    return full(shape, 1, dtype, allocator, order, stream)


def full(shape: _ShapeLike, fill_value: Any, dtype: npt.DTypeLike | None = None,
         allocator: _Allocator | None = None, order: str = "C", stream: Stream | None = None) -> GPUArray:
    """full(shape, fill_value, dtype=None, ...): a new GPUArray with every element `fill_value`.

    `dtype` defaults to NumPy's type of `fill_value` (``numpy.array(fill_value).dtype``);
    other arguments and errors as ``zeros``.
    """
    if dtype is None:
        dtype = np.array(fill_value).dtype
    a: GPUArray = GPUArray(shape, dtype, allocator=allocator, order=order, stream=stream)
    return a.fill(fill_value, stream)


def _like(other: Any, dtype: Any, order: Any) -> Any:
    if not isinstance(other, GPUArray):
        raise TypeError(f"other must be a GPUArray, not {type(other).__name__}")
    dtype = other.dtype if dtype is None else dtype
    if order in ("K", "A", "k", "a") or order is None:
        # "A": F when other is F-contiguous (and not C), else C; "K" the same here,
        # since the result is always contiguous
        order = "F" if (other._f and not other._c) else "C"
    return order, dtype


def _like_arg(other_ary: GPUArray | None, other: GPUArray | None) -> GPUArray:
    # the array is named other_ary (PyCUDA's keyword) or other (barecuda's earlier one)
    if (other_ary is None) == (other is None):
        raise TypeError("give the model array once, as other_ary (or other)")
    return other_ary if other is None else other  # type: ignore[return-value]


def empty_like(other_ary: GPUArray | None = None, dtype: npt.DTypeLike | None = None,
               order: str | None = "K", stream: Stream | None = None, *,
               other: GPUArray | None = None) -> GPUArray:
    """empty_like(other_ary, dtype=None, order="K", stream=None): a new uninitialised GPUArray shaped as `other_ary`.

    `other_ary` (also accepted as ``other=``) is a GPUArray; its dtype and allocator
    are reused unless `dtype` is given.  order "K" keeps Fortran order for an
    F-contiguous `other_ary`, else C.
    """
    other = _like_arg(other_ary, other)
    order, dtype = _like(other, dtype, order)
    return GPUArray(other.shape, dtype, allocator=other.allocator, order=order, stream=stream)  # type: ignore[no-any-return]


def zeros_like(other_ary: GPUArray | None = None, dtype: npt.DTypeLike | None = None,
               order: str | None = "K", stream: Stream | None = None, *,
               other: GPUArray | None = None) -> GPUArray:
    """zeros_like(other_ary, dtype=None, order="K", stream=None): a new GPUArray of zeros shaped as `other_ary`.

    Arguments as ``empty_like``.
    """
    other = _like_arg(other_ary, other)
    order, dtype = _like(other, dtype, order)
    return zeros(other.shape, dtype, other.allocator, order, stream)


def ones_like(other_ary: GPUArray | None = None, dtype: npt.DTypeLike | None = None,
              order: str | None = "K", stream: Stream | None = None, *,
              other: GPUArray | None = None) -> GPUArray:
    """ones_like(other_ary, dtype=None, order="K", stream=None): a new GPUArray of ones shaped as `other_ary`.

    Arguments as ``empty_like``.
    """
    other = _like_arg(other_ary, other)
    order, dtype = _like(other, dtype, order)
    return full(other.shape, 1, dtype, other.allocator, order, stream)


def to_gpu(ary: npt.ArrayLike, allocator: _Allocator | None = None, stream: Stream | None = None) -> GPUArray:
    """A GPUArray holding a copy of the host array `ary`."""
    ary = np.asarray(ary)
    if not (ary.flags.c_contiguous or ary.flags.f_contiguous):
        ary = np.ascontiguousarray(ary)
    order = "C" if ary.flags.c_contiguous else "F"
    a: GPUArray = GPUArray(ary.shape, ary.dtype, allocator=allocator, order=order, stream=stream)
    if a.size:
        _core._htod(a.ptr, ary, False, stream)
    return a


def to_gpu_async(ary: npt.ArrayLike, allocator: _Allocator | None = None, stream: Stream | None = None) -> GPUArray:
    """As to_gpu, the copy queued on `stream` (page-locked `ary` makes it truly async)."""
    ary = np.asarray(ary)
    if not (ary.flags.c_contiguous or ary.flags.f_contiguous):
        ary = np.ascontiguousarray(ary)
    order = "C" if ary.flags.c_contiguous else "F"
    a: GPUArray = GPUArray(ary.shape, ary.dtype, allocator=allocator, order=order, stream=stream)
    if a.size:
        _drv.memcpy_htod_async(a.ptr, ary, stream)
    return a


def _arange_kernel(dtype: Any, cd: Any) -> Any:
    ct, cc = dtype_to_ctype(dtype), dtype_to_ctype(cd)
    return _core._kernel(("arange", dtype, cd), f"{ct} *z, {cc} start, {cc} step",
                         f"z[i] = bc_cast<{ct}>(start + ({cc})i * step)", "bc_arange")


def arange(*args: Any, dtype: npt.DTypeLike | None = None, allocator: _Allocator | None = None,
           stream: Stream | None = None) -> GPUArray:
    """As numpy.arange: arange([start,] stop[, step], dtype=None)."""
    if not 1 <= len(args) <= 3:
        raise TypeError(f"arange() takes 1 to 3 positional arguments, {len(args)} given")
    if len(args) == 1:
        start, stop, step = 0, args[0], 1
    elif len(args) == 2:
        start, stop, step = args[0], args[1], 1
    else:
        start, stop, step = args
    if step == 0:
        raise ValueError("arange(): step may not be zero")
    if dtype is None:
        dtype = np.result_type(np.asarray(start), np.asarray(stop), np.asarray(step))
    dtype = _check_dtype(dtype)
    import math
    n = _builtins.max(0, int(math.ceil((stop - start) / step)))
    a: GPUArray = GPUArray((n,), dtype, allocator=allocator, stream=stream)
    if n:
        cd = (np.dtype(np.float64)
              if dtype.kind in "fcb" or isinstance(start, float) or isinstance(step, float)  # type: ignore[union-attr]
              else np.dtype(np.int64))
        k = _arange_kernel(dtype, cd)
        k.launch_flat(n, [a.ptr, cd.type(start), cd.type(step)], stream)
    return a


def is_gpuarray(obj: object) -> bool:
    """True when `obj` is a GPUArray (views included), else False."""
    return isinstance(obj, GPUArray)
