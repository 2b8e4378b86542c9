# SPDX-License-Identifier: MIT
"""Shapes of GPUArrays and of launches: ``concatenate``, ``stack``, ``transpose``,
``reshape`` (module functions) and ``splay``, re-exported by :mod:`barecuda.gpuarray`.

Views (transpose, reshape of a contiguous array) share memory; joins (concatenate,
stack) make one new C-contiguous array and copy each input into its slot with the
strided copy kernel, converting dtypes to the common NumPy result type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import operator

import numpy as np

from barecuda import _driver
from barecuda._array import core as _core
from barecuda._array.array import GPUArray

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import SupportsIndex

    from barecuda._driver import Device, Stream

__all__ = ["concatenate", "stack", "transpose", "reshape", "splay"]

def _check_arrays(name: str, arrays: Iterable[GPUArray]) -> list[GPUArray]:
    if isinstance(arrays, GPUArray):
        raise TypeError(f"{name}(): arrays must be a sequence of GPUArrays, not one GPUArray")
    try:
        arrays = list(arrays)
    except TypeError:
        raise TypeError(f"{name}(): arrays must be a sequence of GPUArrays, "
                        f"not {type(arrays).__name__}") from None
    if not arrays:
        raise ValueError(f"need at least one array to {name}")
    for a in arrays:
        if not isinstance(a, GPUArray):
            raise TypeError(f"{name}(): every item must be a GPUArray, not {type(a).__name__}")
    return arrays


def _copy_into(dst: GPUArray, src: GPUArray, stream: Stream | None) -> None:
    if src.dtype != dst.dtype:
        src = src.astype(dst.dtype, stream=stream)
    _core._strided_copy(dst, src, stream)


def concatenate(arrays: Sequence[GPUArray], axis: SupportsIndex = 0,
                allocator: Callable[[int], Any] | None = None,
                stream: Stream | None = None) -> GPUArray:
    """concatenate(arrays, axis=0, allocator=None, stream=None): join GPUArrays along an existing axis.

    The arrays must agree in every dimension but `axis` (negative counts from the
    end); the result, a new C-contiguous GPUArray, has NumPy's common dtype of the
    inputs.  ValueError for an empty sequence, 0-d arrays, mismatched shapes or an
    axis out of range; TypeError for items that are not GPUArrays.
    """
    arrays = _check_arrays("concatenate", arrays)
    first = arrays[0]
    for a in arrays:
        if a.ndim != first.ndim:
            raise ValueError("concatenate(): arrays must have the same number of dimensions "
                             f"({first.ndim} and {a.ndim})")
    if first.ndim == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    axis = operator.index(axis)
    if not -first.ndim <= axis < first.ndim:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {first.ndim}")
    axis %= first.ndim
    rest = first.shape[:axis] + first.shape[axis + 1:]
    for a in arrays:
        if a.shape[:axis] + a.shape[axis + 1:] != rest:
            raise ValueError("concatenate(): all dimensions but the axis must match "
                             f"({first.shape} and {a.shape} along axis {axis})")
    dtype = np.result_type(*(a.dtype for a in arrays))
    total = sum(a.shape[axis] for a in arrays)
    shape = first.shape[:axis] + (total,) + first.shape[axis + 1:]
    out: GPUArray = GPUArray(shape, dtype, allocator=allocator or first.allocator, stream=stream)
    pos = 0
    for a in arrays:
        n = a.shape[axis]
        if n and a.size:
            _copy_into(out[(slice(None),) * axis + (slice(pos, pos + n),)], a, stream)
        pos += n
    return out


def stack(arrays: Sequence[GPUArray], axis: SupportsIndex = 0,
          allocator: Callable[[int], Any] | None = None, stream: Stream | None = None) -> GPUArray:
    """stack(arrays, axis=0, allocator=None, stream=None): join GPUArrays of one shape along a new axis.

    As ``numpy.stack``: `axis` (in ``-(ndim+1) .. ndim``) is where the new axis of
    length ``len(arrays)`` goes; the result is a new C-contiguous GPUArray of the
    inputs' common dtype.  ValueError for an empty sequence, different shapes or
    an axis out of range; TypeError for items that are not GPUArrays.
    """
    arrays = _check_arrays("stack", arrays)
    shape = arrays[0].shape
    for a in arrays[1:]:
        if a.shape != shape:
            raise ValueError(f"all input arrays must have the same shape ({shape} and {a.shape})")
    nd = len(shape)
    axis = operator.index(axis)
    if not -(nd + 1) <= axis <= nd:
        raise ValueError(f"axis {axis} is out of bounds for array of dimension {nd + 1}")
    axis %= nd + 1
    dtype = np.result_type(*(a.dtype for a in arrays))
    out_shape = shape[:axis] + (len(arrays),) + shape[axis:]
    out: GPUArray = GPUArray(out_shape, dtype, allocator=allocator or arrays[0].allocator,
                         stream=stream)
    if out.size:
        for k, a in enumerate(arrays):
            _copy_into(out[(slice(None),) * axis + (k,)], a, stream)
    return out


def transpose(a: GPUArray, axes: Sequence[SupportsIndex] | None = None) -> GPUArray:
    """transpose(a, axes=None): GPUArray `a` with its axes permuted (a view), as ``a.transpose(axes)``."""
    if not isinstance(a, GPUArray):
        raise TypeError(f"transpose() takes a GPUArray, not {type(a).__name__}")
    return a.transpose(axes)  # type: ignore[no-any-return]


def reshape(a: GPUArray, *shape: Any, order: str = "C") -> GPUArray:
    """reshape(a, *shape, order="C"): GPUArray `a` with a new shape, as ``a.reshape(*shape, order=order)``.

    A view when `a` is contiguous in `order`, else a copy in that order.
    """
    if not isinstance(a, GPUArray):
        raise TypeError(f"reshape() takes a GPUArray, not {type(a).__name__}")
    return a.reshape(*shape, order=order)  # type: ignore[no-any-return]


_splays: dict[Any, tuple[int, int]] = {}


def splay(n: SupportsIndex, dev: Device | None = None) -> tuple[tuple[int, int], tuple[int, int, int]]:

    """splay(n, dev=None) -> ((blocks, 1), (threads, 1, 1)): a launch covering n items.

    PyCUDA's helper for hand-written grid-stride kernels: one warp per block for
    small n, more blocks up to a few per multiprocessor, then up to 128 threads per
    block; the kernel must loop (``for (i = tid; i < n; i += total_threads)``).
    `dev` defaults to the current context's device.  ValueError for negative n.
    """
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"splay(): n must be >= 0, not {n}")
    if dev is None:
        dev = _driver.Context.get_device()
    info = _splays.get(dev)
    if info is None:
        warp = dev.warp_size
        sm = dev.multiprocessor_count
        per_sm = getattr(dev, "max_blocks_per_multiprocessor", 16) or 16
        info = _splays[dev] = (warp, 4 * per_sm * sm)
    warp, max_blocks = info
    max_threads = 128
    if n < warp:
        blocks, threads = 1, warp
    elif n < max_blocks * warp:
        blocks, threads = (n + warp - 1) // warp, warp
    elif n < max_blocks * max_threads:
        groups = (n + warp - 1) // warp
        blocks, threads = max_blocks, ((groups + max_blocks - 1) // max_blocks) * warp
    else:
        blocks, threads = max_blocks, max_threads
    return (blocks, 1), (threads, 1, 1)
