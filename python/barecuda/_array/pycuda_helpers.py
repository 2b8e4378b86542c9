# SPDX-License-Identifier: MIT
"""Module-level helpers that PyCUDA's gpuarray and tools modules have and programs
reach (tools/api_diff.py lists them): a copy between arrays of one shape and dtype
with any strides, host or device on either side; stride arithmetic; integer rounding;
the dtype, result and layout helpers libraries extending GPUArray call.
Written for barecuda from what each helper does, over barecuda's own copy kernels."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from barecuda import driver as _drv
from barecuda._array.core import _strided_copy
from barecuda._array.layout import ArrayFlags, _c_strides, _f_strides, _layout

if TYPE_CHECKING:
    from barecuda.driver import Stream

__all__ = ["_memcpy_discontig", "_compact_strides", "_c_contiguous_strides",
           "_f_contiguous_strides", "has_double_support", "_exact_div", "_int_ceiling",
           "_int_floor", "_get_common_dtype", "_get_common_dtype_base",
           "_get_broadcasted_binary_op_result", "_array_like_helper", "_splay_backend",
           "_ArrayFlags"]


def _is_gpu(a: Any) -> bool:
    from barecuda._array.array import GPUArray
    return isinstance(a, GPUArray)


def _memcpy_discontig(dst: Any, src: Any, async_: bool = False,
                      stream: Stream | None = None) -> None:
    """Copy `src` into `dst`: GPUArrays or NumPy arrays of one shape and dtype, with any
    strides (PyCUDA's takes at most three discontiguous axes; a strided copy kernel has
    no such limit).  With ``async_`` the device side is queued on `stream`; a host
    destination is written before this returns (it is filled from a contiguous
    staging copy)."""
    for what, a in (("src", src), ("dst", dst)):
        if not (_is_gpu(a) or isinstance(a, np.ndarray)):
            raise TypeError(f"{what} must be GPUArray or ndarray")
    if tuple(src.shape) != tuple(dst.shape):
        raise ValueError("src and dst must be same shape")
    if src.dtype != dst.dtype:
        raise TypeError("src and dst must have same dtype")
    queue = stream if async_ else None
    if isinstance(src, np.ndarray) and isinstance(dst, np.ndarray):
        dst[...] = src
        return
    if src.size == 0:
        return
    if _is_gpu(src) and _is_gpu(dst):
        _strided_copy(dst, src, queue)
        if not async_:
            _drv.Context.synchronize()
        return
    from barecuda._array.create import to_gpu, to_gpu_async
    if _is_gpu(dst):                        # host -> device
        host = np.ascontiguousarray(src)
        staged = to_gpu_async(host, stream=queue) if async_ else to_gpu(host)
        _strided_copy(dst, staged, queue)
        if not async_:
            _drv.Context.synchronize()
        return
    # device -> host
    if src.flags.c_contiguous and dst.flags.c_contiguous \
            or src.flags.f_contiguous and dst.flags.f_contiguous and src.ndim > 1:
        src.get(ary=dst, async_=async_, stream=stream)
        if async_:
            (stream.synchronize() if stream is not None else _drv.Context.synchronize())
        return
    host = src.get(async_=async_, stream=stream)
    if async_:
        (stream.synchronize() if stream is not None else _drv.Context.synchronize())
    dst[...] = host


def _compact_strides(a: Any) -> list[int]:
    """Strides with the axes in the order of `a`'s strides, without gaps."""
    order = sorted((a.strides[i], a.shape[i], i) for i in range(len(a.shape)))
    strides = [0] * len(a.shape)
    step = a.dtype.itemsize
    for _, extent, axis in order:
        strides[axis] = step
        step *= extent
    return strides


def _c_contiguous_strides(itemsize: int, shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides (PyCUDA's compyte helper takes the itemsize first)."""
    return _c_strides(tuple(shape), itemsize)


def _f_contiguous_strides(itemsize: int, shape: Sequence[int]) -> tuple[int, ...]:
    """Column-major strides (itemsize first, as PyCUDA's)."""
    return _f_strides(tuple(shape), itemsize)


def has_double_support() -> bool:
    """Whether the current context's device computes in double precision (compute
    capability 1.3 and up: every device the CUDA 13 driver runs)."""
    return _drv.Context.get_device().compute_capability() >= (1, 3)


def _exact_div(dividend: int, divisor: int) -> int:
    """dividend / divisor where it divides evenly (AssertionError otherwise)."""
    quot, rem = divmod(dividend, divisor)
    assert rem == 0, f"{dividend} is not a multiple of {divisor}"
    return quot


def _int_ceiling(value: float, multiple_of: float = 1) -> Any:
    """`value` rounded up to a multiple of `multiple_of`."""
    return math.ceil(value / multiple_of) * multiple_of


def _int_floor(value: float, multiple_of: float = 1) -> Any:
    """`value` rounded down to a multiple of `multiple_of`."""
    return math.floor(value / multiple_of) * multiple_of


# ------------------------------------------------ PyCUDA's gpuarray internals

def _get_common_dtype(obj1: Any, obj2: Any) -> np.dtype[Any]:
    """The dtype of ``obj1 + obj2`` (obj1 an array; obj2 an array, a NumPy scalar or a
    Python scalar) under barecuda's promotion, NumPy's: anything with a ``dtype``
    counts by its dtype, a Python scalar is weak.  Every device the CUDA 13 driver
    runs computes in double, so float64 is never narrowed (PyCUDA narrows it where
    has_double_support() is false)."""
    from barecuda._array.ops import _result_dtype
    other = getattr(obj2, "dtype", obj2)
    if not isinstance(other, np.dtype) and not isinstance(other, (bool, int, float, complex)):
        other = np.dtype(other)
    return _result_dtype("add", np.dtype(obj1.dtype), other)


def _get_common_dtype_base(obj1: Any, obj2: Any, allow_double: bool) -> np.dtype[Any]:
    """_get_common_dtype, with float64/complex128 narrowed to float32/complex64 when
    `allow_double` is false (the compyte helper PyCUDA imports under this name)."""
    res = _get_common_dtype(obj1, obj2)
    if not allow_double:
        res = {np.dtype(np.float64): np.dtype(np.float32),
               np.dtype(np.complex128): np.dtype(np.complex64)}.get(res, res)
    return res


def _get_broadcasted_binary_op_result(obj1: Any, obj2: Any,
                                      dtype_getter: Any = _get_common_dtype) -> Any:
    """An uninitialised result for a binary operation of `obj1` and `obj2`: made by
    the ``_new_like_me`` of the operand that has the result's shape (a 0-d operand
    takes the other's shape), of dtype ``dtype_getter(obj1, obj2)``.  Other shapes
    raise NotImplementedError, as in PyCUDA."""
    if obj1.shape == obj2.shape or obj2.shape == ():
        model = obj1
    elif obj1.shape == ():
        model = obj2
    else:
        raise NotImplementedError(f"broadcasting a binary operator over shapes "
                                  f"{obj1.shape} and {obj2.shape}")
    return model._new_like_me(dtype_getter(obj1, obj2))


def _array_like_helper(other_ary: Any, dtype: Any, order: str) -> tuple[Any, str, Any]:
    """(dtype, order, strides) of an array made like `other_ary`, as NumPy's *_like:
    order "A" is F for an F-contiguous (and not C-contiguous) model, else C; "K" is C
    for a C-contiguous or at most 1-d model, F for an F-contiguous one, else the
    model's strides (made positive, scaled to `dtype`'s itemsize) with order C; "C"
    and "F" stay; anything else is ValueError.  strides is None unless given so."""
    strides = None
    c, f = other_ary.flags.c_contiguous, other_ary.flags.f_contiguous
    if order == "A":
        order = "F" if f and not c else "C"
    elif order == "K":
        if c or len(other_ary.shape) <= 1:
            order = "C"
        elif f:
            order = "F"
        else:
            strides = [abs(s) for s in other_ary.strides]
            if dtype is not None and np.dtype(dtype) != other_ary.dtype:
                ratio = np.dtype(dtype).itemsize / other_ary.dtype.itemsize
                strides = [int(s * ratio) for s in strides]
    elif order not in ("C", "F"):
        raise ValueError(f"unsupported order: {order!r}")
    return (other_ary.dtype if dtype is None else dtype), order, strides


def _splay_backend(n: int, dev: Any) -> tuple[tuple[int, int], tuple[int, int, int]]:
    """splay(n, dev) with the device given: ((blocks, 1), (threads, 1, 1))."""
    from barecuda._array.shape import splay
    return splay(n, dev)


class _ArrayFlags(ArrayFlags):
    """PyCUDA's flags class (compyte's ArrayFlags), made from an array: barecuda's
    ArrayFlags (c_contiguous, f_contiguous, forc) computed from `ary`'s shape,
    strides and itemsize."""
    __slots__ = ()

    def __init__(self, ary: Any) -> None:
        super().__init__(*_layout(tuple(ary.shape), tuple(ary.strides),
                                  np.dtype(ary.dtype).itemsize))
