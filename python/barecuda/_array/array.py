# SPDX-License-Identifier: MIT
"""GPUArray, the class (shown by barecuda.gpuarray): its attributes, transfers, views
and copies, built on barecuda._array.core.

Its operators and reductions (``+``, ``==``, ``abs``, ``sum``, ``any`` ...) are
NumPy's semantics implemented in the modules above this one (arith, reduce, logic,
create); GPUArray's methods reach them through ``_ops``, which barecuda._array fills
in when it loads those modules, so this module never imports them.
"""

from __future__ import annotations

import builtins as _builtins
import operator
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from barecuda import _driver as _cdrv
from barecuda._array import dlpack as _interop
from barecuda._array import kept as _kept
from barecuda._array.core import (_assign, _cast_kernel, _dtoh_staged, _dtod, _fill, _htod,
                                  _reverse_kernel, _strided_copy)
from barecuda._array.layout import (ArrayFlags, _alloc, _c_strides, _check_dtype, _f_strides,
                                    _layout, _norm_shape, _prod, _timer_start, _timer_stop)
from barecuda._core import aio as _aio
from barecuda._core.names import public
from barecuda._kernels import cache as _kcache

_drv = _cdrv

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import SupportsIndex

    import numpy.typing as npt

    from barecuda._driver import Stream

    _Allocator = Callable[[int], Any]
    _ShapeLike = SupportsIndex | Sequence[SupportsIndex]

_HOME = "barecuda.gpuarray"


class _Operations:
    """What GPUArray's operators and reductions hand over to.  Filled in by
    barecuda._array (register_operations) from the modules that implement them:
    ``binary(op, x, y, reverse=False, out=None, stream=None)`` and
    ``unary(op, x, out=None, stream=None)`` (arith), ``sum``, ``max``, ``min``,
    ``mean``, ``dot`` (reduce), ``any``, ``all`` (logic), ``zeros_like`` (create)."""

    __slots__ = ("binary", "unary", "sum", "max", "min", "mean", "dot", "any", "all",
                 "zeros_like")

    if TYPE_CHECKING:
        binary: Callable[..., GPUArray]
        unary: Callable[..., GPUArray]
        sum: Callable[..., GPUArray]
        max: Callable[..., GPUArray]
        min: Callable[..., GPUArray]
        mean: Callable[..., GPUArray]
        dot: Callable[..., GPUArray]
        any: Callable[..., GPUArray]
        all: Callable[..., GPUArray]
        zeros_like: Callable[..., GPUArray]


_ops = _Operations()


def register_operations(**operations: Callable[..., Any]) -> None:
    """Give GPUArray's methods the functions that implement them (see _Operations)."""
    for name, func in operations.items():
        setattr(_ops, name, func)


class _derived:
    """A GPUArray attribute computed from its fields that an instance may also set.

    PyCUDA's GPUArray.__init__ stores nbytes, itemsize, mem_size, _grid and _block
    on the instance, and libraries assign them (``self.nbytes = n`` in a subclass's
    __init__).  This is a non-data descriptor: until assigned, the value follows the
    fields; once assigned, the instance's own value (in its __dict__) wins.
    """

    def __init__(self, fget: Callable[[Any], Any]) -> None:
        self.fget = fget
        self.__doc__ = fget.__doc__
        self.__name__ = fget.__name__

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        return self if obj is None else self.fget(obj)


@public(_HOME)
class GPUArray(_cdrv._ArrayBase):
    """GPUArray(shape, dtype, allocator=None, base=None, gpudata=None, strides=None,
    order="C", stream=None)

    An array of `shape` and `dtype` in device memory: new memory from `allocator`
    (default: the stream-ordered pool, on `stream`), or the existing memory `gpudata`
    (a DeviceAllocation or a pointer as int) kept alive by `base`.
    """

    __array_priority__ = 100
    __array_ufunc__ = None   # NumPy scalars and ufuncs defer to our operators
    # The fields (shape, dtype, size, strides, gpudata, ptr, base, allocator, _c, _f,
    # _mem) live in the C base, so C fast paths can make results; instances also have
    # a __dict__, as PyCUDA's do: libraries set attributes of their own on arrays, and
    # subclasses assign nbytes, itemsize, mem_size, _grid and _block (see _derived).

    def __init__(self, shape: _ShapeLike, dtype: npt.DTypeLike, allocator: _Allocator | None = None,
                 base: Any = None, gpudata: Any = None, strides: Sequence[int] | None = None,
                 order: str = "C", stream: Stream | None = None) -> None:
        shape = _norm_shape(shape)
        dtype = _check_dtype(dtype)
        size = _prod(shape)
        if strides is None:
            if order in ("C", "c"):
                strides = _c_strides(shape, dtype.itemsize)
            elif order in ("F", "f"):
                strides = _f_strides(shape, dtype.itemsize)
            else:
                raise ValueError(f"order must be 'C' or 'F', not {order!r}")
        else:
            strides = tuple(int(s) for s in strides)
            if len(strides) != len(shape):
                raise ValueError(f"strides {strides} do not match shape {shape}")
        self.shape = shape
        self.dtype = dtype
        self.size = size
        self.strides = strides
        self.base = base
        self.allocator = allocator
        self._mem = None
        if gpudata is None and size:
            gpudata = _alloc(size * dtype.itemsize, allocator, stream)
        # sets ptr too; memory held by an object (not a bare int) is kept alive as _mem
        self.gpudata = gpudata
        self._c, self._f = _layout(shape, strides, dtype.itemsize)

    # ----------------------------------------------------------- attributes

    @_derived
    def nbytes(self) -> int:
        """Bytes of the elements (size times itemsize)."""
        return self.size * self.dtype.itemsize  # type: ignore[no-any-return]

    @_derived
    def itemsize(self) -> int:
        """Bytes of one element."""
        return self.dtype.itemsize  # type: ignore[no-any-return]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @_derived
    def mem_size(self) -> int:
        """Number of elements (PyCUDA's name)."""
        return self.size  # type: ignore[no-any-return]

    @property
    def flags(self) -> ArrayFlags:
        return ArrayFlags(self._c, self._f)

    # --- PyCUDA's launch geometry and texref binding, for programs that launch the
    # --- kernels of elementwise.get_*_kernel themselves (kern helper)

    @_derived
    def _grid(self) -> tuple[int, int]:
        """A grid for a grid-stride kernel over this array (PyCUDA's attribute)."""
        return (_kcache.grid_for(self.size), 1)

    @_derived
    def _block(self) -> tuple[int, int, int]:
        """The block matching ``_grid`` (PyCUDA's attribute)."""
        return (_kcache.BLOCK, 1, 1)

    def bind_to_texref(self, texref: Any, allow_offset: bool = False) -> Any:
        """bind_to_texref(texref, allow_offset=False): bind this contiguous array to
        `texref` (a PointerTextureRef of a kernel getter); returns the offset in
        elements (0)."""
        if not self.flags.forc:
            raise ValueError("only contiguous arrays can be bound to a texture reference")
        return texref.set_address(self.ptr, self.nbytes, allow_offset=allow_offset) \
            // self.dtype.itemsize

    def bind_to_texref_ext(self, texref: Any, channels: int = 1, allow_double_hack: bool = False,
                           allow_complex_hack: bool = False, allow_offset: bool = False) -> Any:
        """bind_to_texref_ext(texref, channels=1, allow_double_hack=False, allow_complex_hack=False, allow_offset=False)

        As bind_to_texref (PyCUDA's signature; the hacks are not needed: the
        reference reads elements of the array's dtype).  ValueError for
        ``channels`` other than 1.
        """
        if channels != 1:
            raise ValueError("only single-channel binding is supported")
        return self.bind_to_texref(texref, allow_offset=allow_offset)

    @property
    def is_contiguous(self) -> bool:
        return self._c or self._f

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self) -> str:
        return repr(self.get())

    def __str__(self) -> str:
        return str(self.get())

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError("The truth value of an array with more than one element is ambiguous")
        return bool(self.get().reshape(()))

    def __float__(self) -> float:
        return float(self._scalar())

    def __int__(self) -> int:
        return int(self._scalar())

    def __complex__(self) -> complex:
        return complex(self._scalar())

    def __index__(self) -> int:
        if self.dtype.kind not in "iub":
            raise TypeError("only integer GPUArrays can be used as an index")
        return int(self._scalar())

    def item(self) -> Any:
        """The single element as a Python scalar (int, float, complex or bool).

        Copies the array to the host.  Raises TypeError unless the array has exactly
        one element (as NumPy's ``ndarray.item()`` with no arguments).
        """
        return self._scalar().item()

    def _scalar(self) -> Any:
        if self.size != 1:
            raise TypeError(f"only 1-element arrays can be converted to scalars (size {self.size})")
        return self.get().reshape(())[()]

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        # CAI v3 as PyCUDA and Numba export it: strides always, "stream": None.  None
        # tells the consumer that no synchronization is needed, so the legacy default
        # stream (where our work runs, or which our blocking streams order with) is
        # first waited for when it is busy: a consumer on a non-blocking stream then
        # reads finished data too.
        _interop.settle_default_stream()
        cai = {"shape": self.shape, "typestr": self.dtype.str,
               "data": (self.ptr, False), "version": 3,
               "strides": self.strides, "stream": None}
        if self.dtype.fields is not None:
            cai["descr"] = self.dtype.descr     # a structured dtype's fields (CAI v3)
        return cai

    def __dlpack__(self, *, stream: int | None = None, max_version: tuple[int, int] | None = None,
                   dl_device: tuple[int, int] | None = None, copy: bool | None = None) -> Any:
        """A DLPack capsule of this array (array API standard).  `stream`: the consumer's
        CUDA stream (an int; None or 1: the legacy default stream, -1: no ordering); it is
        made to wait for our work on the default stream.  `max_version` >= (1, 0) gives a
        versioned capsule.  copy=True exports a copy; dl_device must be this device."""
        return _interop._to_dlpack(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        """(kDLCUDA = 2, device ordinal)."""
        return (_interop._DL_CUDA, _interop._device_ordinal())

    # ----------------------------------------------------------- transfers

    def set(self, ary: npt.ArrayLike, async_: bool = False, stream: Stream | None = None,
            **kwargs: Any) -> None:
        """Copy the host array `ary` (same size and dtype) into this array."""
        if "async" in kwargs:
            async_ = kwargs.pop("async")
        if kwargs:
            raise TypeError(f"set(): unexpected keyword arguments {', '.join(kwargs)}")
        ary = np.asarray(ary)
        if ary.size != self.size:
            raise ValueError(f"set(): array of size {ary.size} does not fit a GPUArray of size {self.size}")
        if ary.dtype != self.dtype:
            raise ValueError(f"set(): array has dtype {ary.dtype}, this GPUArray {self.dtype}")
        if self.size == 0:
            return
        if self._c:
            _htod(self.ptr, np.ascontiguousarray(ary), async_, stream)
        elif self._f and ary.shape == self.shape:
            _htod(self.ptr, np.asfortranarray(ary), async_, stream)
        else:
            tmp = GPUArray(self.shape, self.dtype, stream=stream)
            tmp.set(np.ascontiguousarray(ary).reshape(self.shape), async_, stream)
            _strided_copy(self, tmp, stream)

    def set_async(self, ary: npt.ArrayLike, stream: Stream | None = None) -> None:
        """set_async(ary, stream=None): queue the host-to-device copy of `ary` on `stream`.

        As ``set(ary, async_=True, stream=stream)``: `ary` must have this array's size
        and dtype (ValueError otherwise).  The copy is truly asynchronous only for
        page-locked `ary`; keep `ary` alive and unchanged until the stream has run it.
        """
        return self.set(ary, async_=True, stream=stream)

    def get(self, ary: npt.NDArray[Any] | None = None, pagelocked: bool = False, async_: bool = False,
            stream: Stream | None = None, **kwargs: Any) -> npt.NDArray[Any]:
        """Copy this array to the host: into `ary` when given, else a new (page-locked
        when asked) NumPy array, which is returned."""
        if "async" in kwargs:
            async_ = kwargs.pop("async")
        if kwargs:
            raise TypeError(f"get(): unexpected keyword arguments {', '.join(kwargs)}")
        src = self if (self._c or self._f) else self._contiguous(stream)
        order: Literal["C", "F"] = "C" if src._c else "F"
        new = ary is None
        if new:
            if pagelocked and self.size:
                ary = _drv.pagelocked_empty(self.shape, self.dtype, order=order)
            elif not async_:
                # numpy.empty, whose memory comes from the host pool when large (kept
                # for the next one, page-locked from its second use); not for async
                # copies, which page-locked memory would make truly asynchronous
                # where pageable memory was copied at once
                ary = _cdrv._host_empty(self.shape, self.dtype, order)
            else:
                ary = np.empty(self.shape, self.dtype, order=order)
        else:
            if not isinstance(ary, np.ndarray):
                raise TypeError(f"get(): ary must be a numpy.ndarray, not {type(ary).__name__}")
            if ary.size != self.size:
                raise ValueError(f"get(): ary has size {ary.size}, this GPUArray {self.size}")
            if ary.dtype != self.dtype:
                raise TypeError(f"get(): ary has dtype {ary.dtype}, this GPUArray {self.dtype}")
            if not (ary.flags.c_contiguous if order == "C" else ary.flags.f_contiguous):
                if self.ndim > 1 or not (ary.flags.c_contiguous or ary.flags.f_contiguous):
                    raise ValueError("get(): ary must be contiguous in the same order as this GPUArray")
        if self.size:
            if async_:
                _drv.memcpy_dtoh_async(ary, src.ptr, stream)
                return ary
            if not new and ary.nbytes >= _kept.MIN_BYTES:
                _kept.note_copy(ary)        # an array the program keeps: maybe registered
            if stream is None:
                _dtoh_staged(ary, src.ptr)
            else:
                _dtoh_staged(ary, src.ptr, stream)
        return ary

    def get_async(self, stream: Stream | None = None,
                  ary: npt.NDArray[Any] | None = None) -> npt.NDArray[Any]:
        """get_async(stream=None, ary=None): queue the device-to-host copy on `stream`.

        As ``get(ary=ary, async_=True, stream=stream)``; returns the host array, whose
        contents are valid only once `stream` is synchronized.  Give a page-locked `ary`
        (e.g. from ``driver.pagelocked_empty``) for a truly asynchronous copy.  Raises
        TypeError or ValueError when `ary` has the wrong type, dtype, size or order.
        """
        return self.get(ary=ary, async_=True, stream=stream)

    def aget(self, stream: Stream | None = None,
             ary: npt.NDArray[Any] | None = None) -> Any:
        """aget(stream=None, ary=None): the device-to-host copy for asyncio.

        Queues the copy on `stream` now (into `ary`, or a new page-locked array, so
        that it is truly asynchronous) and returns an asyncio future of the running
        loop whose result is the host array once the copy is done:
        ``host = await a.aget(stream=s)``.  The loop is woken as for ``await stream``
        (no thread of ours waits: see driver.set_await_spin); cancelling the future leaves the copy running, and this
        array and the host array alive until it is done.  RuntimeError outside a
        running event loop; `ary` is checked as get_async checks it.
        """
        import asyncio

        asyncio.get_running_loop()          # before anything is queued
        host = self.get(ary=ary, pagelocked=ary is None, async_=True, stream=stream)
        return _aio.done(stream, result=host, keep=(self, host))

    # ----------------------------------------------------------- views and copies

    def _view(self, shape: tuple[int, ...], strides: tuple[int, ...], ptr_offset: int = 0,
              dtype: np.dtype[Any] | None = None) -> GPUArray:
        dtype = self.dtype if dtype is None else dtype
        v = GPUArray.__new__(GPUArray)
        v.shape = shape
        v.dtype = dtype
        v.size = _prod(shape)
        v.strides = strides
        ptr = self.ptr
        v.gpudata = ptr + ptr_offset if (ptr_offset or not ptr) else self.gpudata
        v.base = self
        v.allocator = self.allocator
        v._mem = self._mem
        v._c, v._f = _layout(shape, strides, dtype.itemsize)
        return v

    def _contiguous(self, stream: Stream | None = None) -> GPUArray:
        """self if C-contiguous, else a C-contiguous copy."""
        if self._c:
            return self
        out = GPUArray(self.shape, self.dtype, allocator=self.allocator, stream=stream)
        _strided_copy(out, self, stream)
        return out

    def copy(self, stream: Stream | None = None) -> GPUArray:
        """A new C-contiguous... (F-contiguous stays F) copy of this array."""
        if self._f and not self._c:
            out = GPUArray(self.shape, self.dtype, allocator=self.allocator, order="F", stream=stream)
        else:
            out = GPUArray(self.shape, self.dtype, allocator=self.allocator, stream=stream)
        if self.size:
            if self._c or self._f:
                _dtod(out.ptr, self.ptr, self.nbytes, stream)
            else:
                _strided_copy(out, self, stream)
        return out

    def _new_like_me(self, dtype: npt.DTypeLike | None = None, order: str = "C") -> GPUArray:
        """_new_like_me(dtype=None, order="C"): a new, uninitialised array of this
        shape and class, of `dtype` (default: this array's), made by calling the class
        as ``type(self)(shape, dtype, allocator=..., strides=..., order=...)``.

        The results of operations on a subclass's instances are made here, as in
        PyCUDA: a subclass whose __init__ takes other arguments overrides it (as
        ``_new_like_me(self, dtype=None)``) to keep its type through arithmetic.
        With this array's dtype and a dense layout, the result has the same strides.
        """
        dtype = self.dtype if dtype is None else _check_dtype(dtype)
        strides = self.strides if dtype == self.dtype and (self._c or self._f) else None
        return type(self)(self.shape, dtype, allocator=self.allocator, strides=strides,
                          order=order)

    def __copy__(self) -> GPUArray:
        return self.copy()

    def __deepcopy__(self, memo: Any) -> GPUArray:
        return self.copy()

    def view(self, dtype: npt.DTypeLike | None = None) -> GPUArray:
        """The same memory seen as `dtype` (the last axis rescaled when sizes differ)."""
        if dtype is None:
            return self._view(self.shape, self.strides)
        dtype = _check_dtype(dtype)
        old, new = self.dtype.itemsize, dtype.itemsize
        if old == new:
            return self._view(self.shape, self.strides, dtype=dtype)
        if not self._c:
            raise ValueError("view(): changing the item size needs a C-contiguous array")
        if not self.shape:
            raise ValueError("view(): changing the item size of a 0-d array is not supported")
        last = self.shape[-1] * old
        if last % new:
            raise ValueError(f"view(): the last axis ({last} bytes) is not a multiple of {new} bytes")
        shape = self.shape[:-1] + (last // new,)
        return self._view(shape, _c_strides(shape, new), dtype=dtype)

    def reshape(self, *shape: Any, order: str = "C") -> GPUArray:
        """A view with a new shape (one dimension may be -1); needs contiguity in `order`."""
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = shape[0]
        try:
            shape = tuple(operator.index(s) for s in shape)
        except TypeError:
            raise TypeError(f"reshape(): shape must be ints, not {shape!r}") from None
        if shape.count(-1) > 1:
            raise ValueError("reshape(): can only specify one unknown dimension")
        if -1 in shape:
            known = _prod(s for s in shape if s != -1)
            if known == 0 or self.size % known:
                raise ValueError(f"cannot reshape array of size {self.size} into shape {shape}")
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        if _builtins.any(s < 0 for s in shape):
            raise ValueError(f"reshape(): negative dimension in {shape}")
        if _prod(shape) != self.size:
            raise ValueError(f"cannot reshape array of size {self.size} into shape {shape}")
        if order not in ("C", "F", "c", "f"):
            raise ValueError(f"order must be 'C' or 'F', not {order!r}")
        if shape == self.shape and (self._c if order in ("C", "c") else self._f):
            return self._view(self.shape, self.strides)
        if order in ("C", "c"):
            src = self if self._c else self._contiguous()
            return src._view(shape, _c_strides(shape, self.dtype.itemsize))
        src = self
        if not self._f:
            src = GPUArray(self.shape, self.dtype, allocator=self.allocator, order="F")
            _strided_copy(src, self, None)
        return src._view(shape, _f_strides(shape, self.dtype.itemsize))

    def ravel(self, order: str = "C") -> GPUArray:
        """ravel(order="C"): the elements as a 1-d GPUArray of length ``size``.

        A view when the array is contiguous in `order` ('C' or 'F'), else a contiguous
        copy (as NumPy).  Raises ValueError for another `order`.
        """
        return self.reshape(self.size, order=order)

    def flatten(self) -> GPUArray:
        """flatten(): a new 1-d GPUArray holding a C-order copy of the elements.

        Unlike ravel(), the result never shares memory with this array.
        """
        c = self._contiguous()
        return (c.copy() if c is self else c).reshape(self.size)

    def squeeze(self, axis: int | Sequence[int] | None = None) -> GPUArray:
        """squeeze(axis=None): a view without axes of length one.

        `axis` (an int or a tuple of ints, negative counts from the end) names the axes
        to drop; each must have length one, else ValueError (NumPy's message).
        """
        if axis is None:
            keep = [k for k, d in enumerate(self.shape) if d != 1]
        else:
            axes: Any = (axis,) if isinstance(axis, int) else tuple(axis)
            axes = {a % self.ndim if self.ndim else a for a in axes}
            for a in axes:
                if self.shape[a] != 1:
                    raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
            keep = [k for k in range(self.ndim) if k not in axes]
        return self._view(tuple(self.shape[k] for k in keep), tuple(self.strides[k] for k in keep))

    def transpose(self, axes: Sequence[SupportsIndex] | None = None) -> GPUArray:
        """transpose(axes=None): a view with the axes permuted (no copy).

        `axes` is a permutation of ``range(ndim)`` (negative values allowed); None
        reverses the axes, as ``self.T``.  Raises ValueError for a wrong permutation.
        """
        if axes is None:
            axes = tuple(reversed(range(self.ndim)))
        else:
            axes = tuple(operator.index(a) for a in axes)
            if sorted(a % self.ndim for a in axes) != list(range(self.ndim)):
                raise ValueError(f"transpose(): axes {axes} do not match an array of {self.ndim} dimensions")
            axes = tuple(a % self.ndim for a in axes)
        return self._view(tuple(self.shape[a] for a in axes), tuple(self.strides[a] for a in axes))

    @property
    def T(self) -> GPUArray:
        return self.transpose()

    def __getitem__(self, index: Any) -> GPUArray:
        if not isinstance(index, tuple):
            index = (index,)
        if _builtins.any(i is Ellipsis for i in index):
            k: Any = [n for n, i in enumerate(index) if i is Ellipsis]
            if len(k) > 1:
                raise IndexError("an index can only have a single ellipsis ('...')")
            k = k[0]
            fill = self.ndim - (len(index) - 1 - _builtins.sum(1 for i in index if i is None))
            index = index[:k] + (slice(None),) * fill + index[k + 1:]
        shape, strides = [], []
        offset = 0
        axis = 0
        for idx in index:
            if idx is None:
                shape.append(1)
                strides.append(0)
                continue
            if axis >= self.ndim:
                raise IndexError(f"too many indices for array: array is {self.ndim}-dimensional")
            d, st = self.shape[axis], self.strides[axis]
            if isinstance(idx, slice):
                start, stop, step = idx.indices(d)
                n = len(range(start, stop, step))
                if n:
                    offset += start * st
                shape.append(n)
                strides.append(st * step)
            else:
                try:
                    i = operator.index(idx)
                except TypeError:
                    raise IndexError("only integers, slices (`:`), ellipsis (`...`) and None are "
                                     f"valid indices of a GPUArray, not {type(idx).__name__}") from None
                if i < -d or i >= d:
                    raise IndexError(f"index {i} is out of bounds for axis {axis} with size {d}")
                offset += (i % d) * st
            axis += 1
        shape += self.shape[axis:]
        strides += self.strides[axis:]
        if _prod(shape) == 0:
            offset = 0
        return self._view(tuple(shape), tuple(strides), offset)

    def __setitem__(self, index: Any, value: Any) -> None:
        target = self[index]
        if isinstance(value, GPUArray):
            if value.shape != target.shape:
                if value.size == target.size and value.ndim <= 1 and target.ndim <= 1:
                    value = value.reshape(target.shape)
                else:
                    raise ValueError(f"cannot assign an array of shape {value.shape} to a "
                                     f"selection of shape {target.shape}")
            if value.dtype != target.dtype:
                value = value.astype(target.dtype)
            _strided_copy(target, value, None)
        elif isinstance(value, np.ndarray) and value.ndim > 0:
            target.set(np.broadcast_to(value.astype(target.dtype, copy=False), target.shape))
        else:
            target.fill(value)

    # ----------------------------------------------------------- fill, astype

    def fill(self, value: Any, stream: Stream | None = None) -> GPUArray:
        """Set every element to `value` (converted to the dtype); returns self."""
        if self.size == 0:
            return self
        if self._c or self._f:
            _fill(self, value, stream)
        else:
            tmp = GPUArray(self.shape, self.dtype, stream=stream)
            _fill(tmp, value, stream)
            _strided_copy(self, tmp, stream)
        return self

    def astype(self, dtype: npt.DTypeLike, stream: Stream | None = None) -> GPUArray:
        """A copy converted to `dtype` (NumPy's unsafe cast)."""
        dtype = _check_dtype(dtype)
        if dtype == self.dtype:   # a subclass's copy() may take no stream (PyCUDA's takes none)
            return self.copy() if stream is None else self.copy(stream)
        src = self._contiguous(stream) if not (self._c or self._f) else self
        out = _result_as(src, dtype, stream)
        _cast_kernel(self.dtype, dtype).launch_flat(self.size, [out.ptr, src.ptr], stream)
        return out

    # ----------------------------------------------------------- arithmetic

    def __add__(self, other: Any) -> GPUArray:
        return _ops.binary("add", self, other)

    def __radd__(self, other: Any) -> GPUArray:
        return _ops.binary("add", self, other, True)

    def __sub__(self, other: Any) -> GPUArray:
        return _ops.binary("subtract", self, other)

    def __rsub__(self, other: Any) -> GPUArray:
        return _ops.binary("subtract", self, other, True)

    def __mul__(self, other: Any) -> GPUArray:
        return _ops.binary("multiply", self, other)

    def __rmul__(self, other: Any) -> GPUArray:
        return _ops.binary("multiply", self, other, True)

    def __truediv__(self, other: Any) -> GPUArray:
        return _ops.binary("true_divide", self, other)

    def __rtruediv__(self, other: Any) -> GPUArray:
        return _ops.binary("true_divide", self, other, True)

    __div__ = __truediv__
    __rdiv__ = __rtruediv__

    def __floordiv__(self, other: Any) -> GPUArray:
        return _ops.binary("floor_divide", self, other)

    def __rfloordiv__(self, other: Any) -> GPUArray:
        return _ops.binary("floor_divide", self, other, True)

    def __mod__(self, other: Any) -> GPUArray:
        return _ops.binary("remainder", self, other)

    def __rmod__(self, other: Any) -> GPUArray:
        return _ops.binary("remainder", self, other, True)

    def __pow__(self, other: Any) -> GPUArray:
        return _ops.binary("power", self, other)

    def __rpow__(self, other: Any) -> GPUArray:
        return _ops.binary("power", self, other, True)

    def __iadd__(self, other: Any) -> GPUArray:
        return _ops.binary("add", self, other, out=self)

    def __isub__(self, other: Any) -> GPUArray:
        return _ops.binary("subtract", self, other, out=self)

    def __imul__(self, other: Any) -> GPUArray:
        return _ops.binary("multiply", self, other, out=self)

    def __itruediv__(self, other: Any) -> GPUArray:
        return _ops.binary("true_divide", self, other, out=self)

    def __ifloordiv__(self, other: Any) -> GPUArray:
        return _ops.binary("floor_divide", self, other, out=self)

    def __imod__(self, other: Any) -> GPUArray:
        return _ops.binary("remainder", self, other, out=self)

    def __ipow__(self, other: Any) -> GPUArray:
        return _ops.binary("power", self, other, out=self)

    def __eq__(self, other: Any) -> GPUArray:  # type: ignore[override]
        return _ops.binary("equal", self, other)

    def __ne__(self, other: Any) -> GPUArray:  # type: ignore[override]
        return _ops.binary("not_equal", self, other)

    def __lt__(self, other: Any) -> GPUArray:
        return _ops.binary("less", self, other)

    def __le__(self, other: Any) -> GPUArray:
        return _ops.binary("less_equal", self, other)

    def __gt__(self, other: Any) -> GPUArray:
        return _ops.binary("greater", self, other)

    def __ge__(self, other: Any) -> GPUArray:
        return _ops.binary("greater_equal", self, other)

    __hash__ = None  # type: ignore[assignment]

    def __neg__(self) -> GPUArray:
        return _ops.unary("negative", self)

    def __pos__(self) -> GPUArray:
        return self.copy()

    def __abs__(self) -> GPUArray:
        return _ops.unary("absolute", self)

    def mul_add(self, selffac: Any, other: GPUArray, otherfac: Any, add_timer: Any = None,
                stream: Stream | None = None, out: GPUArray | None = None) -> GPUArray:
        """mul_add(selffac, other, otherfac, add_timer=None, stream=None, out=None): ``selffac * self + otherfac * other``.

        The factors are numbers or 0-d GPUArrays, `other` a GPUArray of this shape;
        the result (NumPy's dtype) is a new array or `out`.

        `add_timer`, as in PyCUDA, is a callable ``add_timer(n, get_time)`` called
        once after the work is queued, with ``n = 3 * self.size`` (the elements read
        and written) and ``get_time()`` returning the seconds the work took on the
        GPU (it waits for the work to finish, timed with a pair of Events recorded
        on `stream`).
        """
        if not isinstance(other, GPUArray):
            raise TypeError(f"mul_add(): other must be a GPUArray, not {type(other).__name__}")
        if add_timer is not None and not callable(add_timer):
            raise TypeError(f"mul_add(): add_timer must be callable, not "
                            f"{type(add_timer).__name__}")
        start = _timer_start(stream) if add_timer is not None else None
        result = _ops.binary("add", _ops.binary("multiply", self, selffac, stream=stream),
                             _ops.binary("multiply", other, otherfac, stream=stream), out=out,
                             stream=stream)
        if start is not None:
            add_timer(3 * self.size, _timer_stop(start, stream))
        return result

    def reverse(self, stream: Stream | None = None) -> GPUArray:
        """reverse(stream=None): a new array with the elements in reversed order.

        The array is taken flat in its memory order (C, or F for an F-contiguous
        array; other layouts are copied to C first) and the result has the same
        shape and order, as PyCUDA's ``reverse``.
        """
        src = self if (self._c or self._f) else self._contiguous(stream)
        out = _result_as(src, self.dtype, stream)
        if self.size:
            k = _reverse_kernel(self.dtype)
            k.launch_flat(self.size, [out.ptr, src.ptr], stream)
        return out

    def any(self, stream: Stream | None = None, allocator: _Allocator | None = None) -> GPUArray:
        """any(stream=None, allocator=None): whether any element is true, as a 0-d bool GPUArray."""
        return _ops.any(self, stream, allocator)

    def all(self, stream: Stream | None = None, allocator: _Allocator | None = None) -> GPUArray:
        """all(stream=None, allocator=None): whether every element is true, as a 0-d bool GPUArray."""
        return _ops.all(self, stream, allocator)

    def conj(self, out: GPUArray | None = None, stream: Stream | None = None) -> GPUArray:
        """conj(out=None, stream=None): the complex conjugate, elementwise.

        A new array (or `out`, which must match shape and dtype); real arrays give a
        copy and bool arrays int8, as ``numpy.conjugate``.  ``conjugate`` is the same
        method.
        """
        if self.dtype.kind == "b":  # NumPy has no bool loop for conjugate: it gives int8
            return self.astype(np.int8, stream=stream) if out is None else _assign(out, self, stream)
        if self.dtype.kind != "c":
            return self.copy(stream) if out is None else _assign(out, self, stream)
        return _ops.unary("conjugate", self, out=out, stream=stream)

    conjugate = conj

    @property
    def real(self) -> GPUArray:
        """The real part: this array for real dtypes, else a new array (C-contiguous,
        or F-contiguous when this one is), as PyCUDA."""
        if self.dtype.kind != "c":
            return self
        return self._part(0)

    @property
    def imag(self) -> GPUArray:
        """The imaginary part: zeros for real dtypes, else a new array (C-contiguous,
        or F-contiguous when this one is), as PyCUDA."""
        if self.dtype.kind != "c":
            return _ops.zeros_like(self)
        return self._part(1)

    def _part(self, which: int) -> GPUArray:
        rdt = np.dtype(self.dtype.char.lower())
        part = self._view(self.shape, self.strides, which * rdt.itemsize, rdt)
        out = GPUArray(self.shape, rdt, allocator=self.allocator,
                       order="F" if (self._f and not self._c) else "C")
        _strided_copy(out, part, None)
        return out

    # ----------------------------------------------------------- reductions

    def sum(self, dtype: npt.DTypeLike | None = None, stream: Stream | None = None,
            allocator: _Allocator | None = None) -> GPUArray:
        """sum(dtype=None, stream=None, allocator=None): the sum of all elements.

        Returns a 0-d GPUArray (PyCUDA semantics: call ``.get()`` or ``.item()`` for a
        host value).  `dtype` defaults to NumPy's accumulator type (int64 for small
        integers, the input's type for floats); see ``gpuarray.sum``.
        """
        return _ops.sum(self, dtype, stream, allocator)

    def max(self, stream: Stream | None = None) -> GPUArray:
        """max(stream=None): the largest element as a 0-d GPUArray.

        NaN wins if present, as NumPy.  Raises ValueError for an empty array.
        """
        return _ops.max(self, stream)

    def min(self, stream: Stream | None = None) -> GPUArray:
        """min(stream=None): the smallest element as a 0-d GPUArray.

        NaN wins if present, as NumPy.  Raises ValueError for an empty array.
        """
        return _ops.min(self, stream)

    def mean(self, dtype: npt.DTypeLike | None = None, stream: Stream | None = None) -> GPUArray:
        """mean(dtype=None, stream=None): the arithmetic mean as a 0-d GPUArray.

        The dtype is NumPy's (float64 for integer input) unless given; an empty array
        gives NaN.
        """
        return _ops.mean(self, dtype, stream)

    def dot(self, other: GPUArray, dtype: npt.DTypeLike | None = None,
            stream: Stream | None = None) -> GPUArray:
        """dot(other, dtype=None, stream=None): ``sum(self * other)`` as a 0-d GPUArray.

        Both arrays are taken flat and must have the same size (ValueError otherwise);
        `other` must be a GPUArray (TypeError).  No conjugation (see ``gpuarray.vdot``).
        """
        return _ops.dot(self, other, dtype, stream)

    def get_numpy_scalar(self) -> Any:
        """The single element as a NumPy scalar (e.g. numpy.float32), copied to the host.

        Raises TypeError unless the array has exactly one element.
        """
        return self._scalar()

    def __array__(self, dtype: npt.DTypeLike | None = None,
                  copy: bool | None = None) -> npt.NDArray[Any]:
        a = self.get()
        return a if dtype is None else a.astype(dtype)



# ------------------------------------------------------------------ new arrays

def _new_array(shape: tuple[int, ...], dtype: np.dtype[Any], allocator: Any,
               stream: Stream | None) -> GPUArray:
    """A new C-contiguous GPUArray of a normalised shape tuple and a supported
    np.dtype; skips __init__'s checks (the internal fast path)."""
    z = GPUArray.__new__(GPUArray)
    z.shape = shape
    z.dtype = dtype
    z.size = n = _prod(shape)
    z.base = None
    z.allocator = allocator
    z.strides = _c_strides(shape, dtype.itemsize) if shape else ()
    z._c = z._f = True if len(shape) < 2 or n == 0 else None  # type: ignore[assignment]
    if z._c is None:
        z._c, z._f = _layout(shape, z.strides, dtype.itemsize)
    z.gpudata = z._mem = _alloc(n * dtype.itemsize, allocator, stream) if n else None
    return z


def _new_scalar(dtype: np.dtype[Any], allocator: Any, stream: Stream | None) -> GPUArray:
    """A new 0-d GPUArray of a supported np.dtype (reduction results)."""
    z = GPUArray.__new__(GPUArray)
    z.shape = z.strides = ()
    z.dtype = dtype
    z.size = 1
    z.base = None
    z.allocator = allocator
    z._c = z._f = True
    z.gpudata = z._mem = _alloc(dtype.itemsize, allocator, stream)
    return z


def _result_as(x: GPUArray, dtype: np.dtype[Any], stream: Stream | None) -> GPUArray:
    """The result of an operation on x: as _empty_as, except that for a subclass's
    instance it is made by ``x._new_like_me(dtype)``, as PyCUDA makes it, when that
    gives the layout asked (else a plain GPUArray)."""
    if type(x) is not GPUArray:
        z = x._new_like_me(dtype)
        if z.shape == x.shape and z.dtype == dtype and ((z._c and x._c) or (z._f and x._f)):
            return z
    return _empty_as(x, dtype, stream)


def _empty_as(x: GPUArray, dtype: np.dtype[Any], stream: Stream | None) -> GPUArray:
    """A new dense GPUArray with x's shape and memory order (x must be C- or
    F-contiguous) and `dtype`, so elementwise kernels can walk both with one flat
    index; skips __init__'s checks."""
    z = GPUArray.__new__(GPUArray)
    z.shape = x.shape
    z.dtype = dtype
    z.size = n = x.size
    z.base = None
    z.allocator = a = x.allocator
    if dtype.itemsize == x.dtype.itemsize:
        z.strides = x.strides
        z._c, z._f = x._c, x._f
    else:
        make = _c_strides if x._c else _f_strides
        z.strides = make(x.shape, dtype.itemsize)
        z._c, z._f = _layout(x.shape, z.strides, dtype.itemsize)
    z.gpudata = z._mem = _alloc(n * dtype.itemsize, a, stream) if n else None
    return z


@public(_HOME)
def real(a: GPUArray) -> GPUArray:
    """The real part of GPUArray `a` (a view; `a` itself for real dtypes), as ``a.real``."""
    return a.real


@public(_HOME)
def imag(a: GPUArray) -> GPUArray:
    """The imaginary part of GPUArray `a` (a view; zeros for real dtypes), as ``a.imag``."""
    return a.imag


@public(_HOME)
def conj(a: GPUArray, out: GPUArray | None = None, stream: Stream | None = None) -> GPUArray:

    """conj(a, out=None, stream=None): the complex conjugate of GPUArray `a`, as ``a.conj()``."""
    return a.conj(out, stream)
