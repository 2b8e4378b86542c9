# SPDX-License-Identifier: MIT
"""What a GPUArray is made of before any kernel runs: the dtypes it takes, shapes
and strides (C and Fortran order, NumPy's contiguity flags), its memory (the
stream-ordered pool unless an allocator is given) and the add_timer events of
PyCUDA's mul_add.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import numpy as np

from barecuda import _driver as _cdrv
from barecuda._core.names import public

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    import numpy.typing as npt

    from barecuda._driver import Stream

_array_alloc = _cdrv._array_alloc
_SUPPORTED = {np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                    np.uint16, np.uint32, np.uint64, np.float16, np.float32,
                                    np.float64, np.complex64, np.complex128)}


def _alloc(nbytes: int, allocator: Any, stream: Stream | None = None) -> Any:
    """nbytes from `allocator`, else from the stream-ordered pool on `stream`
    (small blocks on the default stream are recycled by the context)."""
    if allocator is not None:
        return allocator(nbytes)
    return _array_alloc(nbytes) if stream is None else _array_alloc(nbytes, stream)


def _check_dtype(dtype: npt.DTypeLike) -> np.dtype[Any]:
    """The np.dtype a GPUArray holds: any NumPy dtype of fixed-size items, structured
    ones included (aligned, nested, with sub-array fields or padding), as PyCUDA's
    GPUArray.  Copies, views and fills move their bytes as they are; operations that
    compute need a dtype with a C type (TypeError from the operation otherwise).  TypeError for Python objects, zero-size
    items, and a top-level sub-array dtype (give its dimensions in the shape)."""
    dt = np.dtype(dtype)
    if dt in _SUPPORTED:
        return dt
    if dt.hasobject:
        raise TypeError(f"GPUArray does not support dtype {dt}: Python objects cannot live on "
                        "the GPU")
    if dt.subdtype is not None:
        raise TypeError(f"GPUArray does not support the sub-array dtype {dt}: make the array "
                        f"of {dt.base} with {dt.shape} appended to its shape")
    if dt.itemsize == 0:
        raise TypeError(f"GPUArray does not support dtype {dt}: its items have no bytes")
    return dt


def _norm_shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, np.ndarray):   # a NumPy integer array (0-d or 1-d) as a shape
        if shape.dtype.kind not in "iu" or shape.ndim > 1:
            raise TypeError(f"a shape array must be 0-d or 1-d of integers, not {shape.ndim}-d "
                            f"{shape.dtype}")
        shape = shape.tolist()
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    else:
        try:
            shape = tuple(operator.index(s) for s in shape)
        except TypeError:
            raise TypeError(f"shape must be an int or a tuple of ints, not {shape!r}") from None
    for s in shape:
        if s < 0:
            raise ValueError(f"negative dimensions are not allowed: {shape}")
    return shape  # type: ignore[no-any-return]


def _c_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    strides = []
    s = itemsize
    for d in reversed(shape):
        strides.append(s)
        s *= d if d else 1
    return tuple(reversed(strides))


def _f_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    strides = []
    s = itemsize
    for d in shape:
        strides.append(s)
        s *= d if d else 1
    return tuple(strides)


def _prod(shape: Any) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _layout(shape: Sequence[int], strides: Sequence[int], itemsize: int) -> tuple[bool, bool]:
    """(c_contiguous, f_contiguous) as NumPy decides (axes of length 1 are free)."""
    if _prod(shape) == 0:
        return True, True
    c = True
    s = itemsize
    for d, st in zip(reversed(shape), reversed(strides)):
        if d != 1 and st != s:
            c = False
            break
        s *= d
    f = True
    s = itemsize
    for d, st in zip(shape, strides):
        if d != 1 and st != s:
            f = False
            break
        s *= d
    return c, f


@public("barecuda.gpuarray")
class ArrayFlags:
    """c_contiguous, f_contiguous and forc (either) of a GPUArray."""
    __slots__ = ("c_contiguous", "f_contiguous", "forc")

    def __init__(self, c: bool, f: bool) -> None:
        self.c_contiguous = c
        self.f_contiguous = f
        self.forc = c or f

    def __repr__(self) -> str:
        return (f"  C_CONTIGUOUS : {self.c_contiguous}\n  F_CONTIGUOUS : {self.f_contiguous}")


def _timer_start(stream: Stream | None) -> Any:
    """An Event recorded on `stream`: the start of the work PyCUDA's add_timer times."""
    return _cdrv.Event().record(stream)


def _timer_stop(start: Any, stream: Stream | None) -> Callable[[], float]:
    """Record the end Event on `stream`; the get_time() PyCUDA passes to add_timer
    (the seconds between the events, once the end is reached)."""
    end = _cdrv.Event().record(stream)

    def get_call_time() -> float:
        end.synchronize()
        return float(end.time_since(start)) * 1e-3

    return get_call_time
