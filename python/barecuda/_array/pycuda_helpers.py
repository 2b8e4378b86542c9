# SPDX-License-Identifier: MIT
"""Module-level helpers that PyCUDA's gpuarray and tools modules have and programs
reach (tools/api_diff.py lists them): a copy between arrays of one shape and dtype
with any strides, host or device on either side; stride arithmetic; integer rounding.
Written for barecuda from what each helper does, over barecuda's own copy kernels."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from barecuda import driver as _drv
from barecuda._array.core import _strided_copy

if TYPE_CHECKING:
    from barecuda.driver import Stream

__all__ = ["_memcpy_discontig", "_compact_strides", "_c_contiguous_strides",
           "_f_contiguous_strides", "has_double_support", "_exact_div", "_int_ceiling",
           "_int_floor"]


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
    out = []
    step = itemsize
    for extent in reversed(tuple(shape)):
        out.append(step)
        step *= max(extent, 1)
    return tuple(reversed(out))


def _f_contiguous_strides(itemsize: int, shape: Sequence[int]) -> tuple[int, ...]:
    """Column-major strides."""
    out = []
    step = itemsize
    for extent in tuple(shape):
        out.append(step)
        step *= max(extent, 1)
    return tuple(out)


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
