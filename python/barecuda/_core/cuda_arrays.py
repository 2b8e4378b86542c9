# SPDX-License-Identifier: MIT
"""NumPy and GPUArray data to CUDA arrays: PyCUDA's ``np_to_array`` family.

Re-exported by :mod:`barecuda.driver`.  The Array type and the copies are in C
(``barecuda._driver``); this module only chooses the descriptor and the layout.

Layout.  With ``order="C"`` the *last* axis of the data is x (the array's width):
``(width,)``, ``(height, width)``, ``(depth, height, width)``; layered data is
``(layers, width)`` or ``(layers, height, width)``; multichannel data adds a last
axis of 1, 2 or 4 channels.  ``order="F"`` reads the data transposed (the *first*
axis is x, channels first), as PyCUDA's ``matrix_to_array`` and
``make_multichannel_2d_array`` do.  ``Array.get()`` returns the "C" layout.

Element types.  uint8/16/32, int8/16/32, float16 and float32 map to the
matching ``array_format``; complex64 becomes FLOAT with 2 channels (read as
``float2``).  CUDA arrays hold no doubles: float64 (and complex128) raise
TypeError unless ``allow_double_hack=True``, which stores each double as
SIGNED_INT32 with 2 channels (4 for complex128): read it in a kernel as ``int2 v
= tex2D<int2>(t, x, y)`` and rebuild it with ``__hiloint2double(v.y, v.x)``
(point sampling only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from barecuda import _driver
from barecuda._core import enums as _enums
from barecuda._core.names import public

if TYPE_CHECKING:
    from typing import Any, Literal

    import numpy.typing as npt

    _Order = Literal["C", "F"]

__all__ = [
    "dtype_to_array_format",
    "np_to_array",
    "matrix_to_array",
    "gpuarray_to_array",
    "make_multichannel_2d_array",
]

# dtype -> CUarray_format value (the ABI values of cuda.h's CUarray_format).
_FORMATS = {
    np.dtype(np.uint8): 0x01,
    np.dtype(np.uint16): 0x02,
    np.dtype(np.uint32): 0x03,
    np.dtype(np.int8): 0x08,
    np.dtype(np.int16): 0x09,
    np.dtype(np.int32): 0x0A,
    np.dtype(np.float16): 0x10,
    np.dtype(np.float32): 0x20,
}
_FLOAT, _SIGNED_INT32 = 0x20, 0x0A
_LAYERED, _SURFACE_LDST = 0x01, 0x02


def _array_format(value):
    return _enums.get("array_format")(value)


@public("barecuda.driver")
def dtype_to_array_format(dtype: npt.DTypeLike) -> Any:
    """The ``array_format`` holding one channel of `dtype` (TypeError if none does)."""
    dt = np.dtype(dtype)
    fmt = _FORMATS.get(dt.newbyteorder("=") if dt.byteorder not in "=|" else dt)
    if fmt is None:
        hint = ""
        if dt.kind in "fc" and dt.itemsize >= 8:
            hint = (" (CUDA arrays hold no doubles: convert to float32, or pass "
                    "allow_double_hack=True to store each double as int2)")
        raise TypeError(f"no CUDA array format holds dtype {dt}{hint}")
    return _array_format(fmt)


def _element(dtype, allow_double_hack):
    """(format, channels per element of `dtype`) for the array."""
    dt = np.dtype(dtype)
    if dt == np.complex64:
        return _FLOAT, 2
    if dt in (np.dtype(np.float64), np.dtype(np.complex128)) and allow_double_hack:
        return _SIGNED_INT32, 2 if dt == np.float64 else 4
    return int(dtype_to_array_format(dt)), 1


def _check_order(order, what):
    if order not in ("C", "F", "c", "f"):
        raise ValueError(f"{what}: order must be 'C' or 'F', not {order!r}")
    return order.upper()


def _descriptor(shape, dtype, allow_surface_bind, layered, num_channels, allow_double_hack,
                what):
    """ArrayDescriptor(3D) for data of logical "C" shape `shape`."""
    fmt, nc = _element(dtype, allow_double_hack)
    shape = tuple(int(n) for n in shape)
    if num_channels is not None:
        if nc != 1:
            raise ValueError(f"{what}: num_channels cannot be combined with dtype "
                             f"{np.dtype(dtype)} (already {nc} channels per element)")
        if num_channels not in (1, 2, 4):
            raise ValueError(f"{what}: num_channels must be 1, 2 or 4, got {num_channels!r}")
        if not shape or shape[-1] != num_channels:
            raise ValueError(f"{what}: the channel axis of shape {shape} must have "
                             f"{num_channels} entries")
        shape, nc = shape[:-1], num_channels
    if any(n < 1 for n in shape):
        raise ValueError(f"{what}: cannot make a CUDA array of an empty shape {shape}")
    flags = _SURFACE_LDST if allow_surface_bind else 0
    if layered:
        if len(shape) not in (2, 3):
            raise ValueError(f"{what}: layered data must be (layers, width) or "
                             f"(layers, height, width), got shape {shape}")
        layers, rest = shape[0], shape[1:]
        height, width = (rest[0], rest[1]) if len(rest) == 2 else (0, rest[0])
        return _driver.ArrayDescriptor3D(width=width, height=height, depth=layers, format=fmt,
                                         num_channels=nc, flags=flags | _LAYERED)
    if len(shape) == 1:
        dims = (0, 0, shape[0])
    elif len(shape) == 2:
        dims = (0, shape[0], shape[1])
    elif len(shape) == 3:
        dims = shape
    else:
        raise ValueError(f"{what}: CUDA arrays have 1, 2 or 3 dimensions, got shape {shape}"
                         + (" (pass num_channels= for a channel axis)"
                            if len(shape) == 4 else ""))
    depth, height, width = dims
    if depth == 0 and not allow_surface_bind:
        return _driver.ArrayDescriptor(width=width, height=height, format=fmt, num_channels=nc)
    return _driver.ArrayDescriptor3D(width=width, height=height, depth=depth, format=fmt,
                                     num_channels=nc, flags=flags)


def _surface_flag(allowSurfaceBind, allow_surface_bind):  # noqa: N803 (PyCUDA's spelling)
    return bool(allowSurfaceBind if allow_surface_bind is None else allow_surface_bind)


@public("barecuda.driver")
def np_to_array(nparray: npt.ArrayLike, order: _Order = "C",
                allowSurfaceBind: bool = False,  # noqa: N803 (PyCUDA's name and place)
                layered: bool = False, *, allow_surface_bind: bool | None = None,
                num_channels: int | None = None,
                allow_double_hack: bool = False) -> _driver.Array:
    """A new Array holding a copy of the host data `nparray` (1D, 2D, 3D or layered).

    `order` "C": the last axis is x; "F": the first axis is x (see the module doc).
    `allowSurfaceBind` (PyCUDA's name; `allow_surface_bind` as a keyword, which wins
    when given) makes the array SURFACE_LDST (for SurfaceObject);
    `layered` makes (layers, [height,] width) data a LAYERED array;
    `num_channels` (1, 2 or 4) says the last axis ("C") holds the channels of each
    element; `allow_double_hack` stores float64 as int2 (module doc).
    """
    what = "np_to_array()"
    order = _check_order(order, what)
    data = np.asarray(nparray)
    if order == "F":
        data = data.T
    surface = _surface_flag(allowSurfaceBind, allow_surface_bind)
    desc = _descriptor(data.shape, data.dtype, surface, layered, num_channels,
                       allow_double_hack, what)
    data = np.ascontiguousarray(data)
    if data.dtype.byteorder == ">":
        data = data.astype(data.dtype.newbyteorder("="))
    result = _driver.Array(desc)
    result.set(data)
    return result


@public("barecuda.driver")
def matrix_to_array(matrix: npt.ArrayLike, order: _Order = "C",
                    allow_double_hack: bool = False) -> _driver.Array:
    """A new 2D Array from the 2D host `matrix` (PyCUDA's matrix_to_array):
    "C": shape (height, width); "F": shape (width, height)."""
    what = "matrix_to_array()"
    order = _check_order(order, what)
    data = np.asarray(matrix)
    if data.ndim != 2:
        raise ValueError(f"{what}: expected a 2D matrix, got shape {data.shape}")
    return np_to_array(data, order, allow_double_hack=allow_double_hack)


@public("barecuda.driver")
def make_multichannel_2d_array(ndarray: npt.ArrayLike, order: _Order = "C") -> _driver.Array:
    """A new 2D Array with 1, 2 or 4 channels per element (PyCUDA's helper):
    "C": shape (height, width, channels); "F": shape (channels, width, height)."""
    what = "make_multichannel_2d_array()"
    order = _check_order(order, what)
    data = np.asarray(ndarray)
    if data.ndim != 3:
        raise ValueError(f"{what}: expected a 3D array (height, width, channels) for order "
                         f"'C' or (channels, width, height) for 'F', got shape {data.shape}")
    nc = data.shape[-1] if order == "C" else data.shape[0]
    return np_to_array(data, order, num_channels=nc)


def _logical_layout(shape, strides, itemsize, order, what):
    """Shape of the data read in "C" order, checking the memory is contiguous that way."""
    shape = tuple(int(n) for n in shape)
    if order == "F":
        shape = shape[::-1]
        strides = None if strides is None else tuple(strides)[::-1]
    if strides is not None:
        expect, step = [], itemsize
        for n in reversed(shape):
            expect.append(step)
            step *= n
        expect = tuple(reversed(expect))
        if any(n > 1 and s != e for n, s, e in zip(shape, tuple(strides), expect)):
            kind = "C" if order == "C" else "Fortran"
            raise ValueError(f"{what}: the GPUArray must be {kind}-contiguous for order "
                             f"{order!r} (strides {tuple(strides)})")
    return shape


@public("barecuda.driver")
def gpuarray_to_array(gpuarray: Any, order: _Order = "C",
                      allowSurfaceBind: bool = False, *,  # noqa: N803 (PyCUDA's name and place)
                      allow_surface_bind: bool | None = None,
                      layered: bool = False, num_channels: int | None = None,
                      allow_double_hack: bool = False) -> _driver.Array:
    """A new Array holding a device-to-array copy of `gpuarray` (anything with
    `.gpudata`, `.shape` and `.dtype`, and `.strides` when not C-contiguous).
    Options as np_to_array."""
    what = "gpuarray_to_array()"
    order = _check_order(order, what)
    dtype = np.dtype(gpuarray.dtype)
    shape = _logical_layout(gpuarray.shape, getattr(gpuarray, "strides", None), dtype.itemsize,
                            order, what)
    surface = _surface_flag(allowSurfaceBind, allow_surface_bind)
    desc = _descriptor(shape, dtype, surface, layered, num_channels, allow_double_hack, what)
    result = _driver.Array(desc)
    result.set(gpuarray.gpudata)
    return result
