# SPDX-License-Identifier: MIT
"""GPUArray: a NumPy-like array in device memory, as ``pycuda.gpuarray``.

    a = gpuarray.to_gpu(np.arange(10, dtype=np.float32))
    b = (2 * a + 1).get()

Memory comes from the stream-ordered pool (``driver.mem_alloc_async``) unless an
``allocator`` (a callable taking a byte count, e.g. ``tools.DeviceMemoryPool().allocate``)
is given.  Arithmetic follows NumPy's type promotion (NumPy 2 rules: Python scalars are
weak).  Operations on non-contiguous views (slices with steps, transposes, ``real``/
``imag`` of complex arrays) work on contiguous copies made by a strided copy kernel;
results are contiguous.  Kernels are generated per (operation, dtypes) and cached per
context.
"""

import builtins as _builtins
import operator

import numpy as np

from barecuda import _driver as _cdrv
from barecuda import driver as _drv
from barecuda.elementwise import ElementwiseKernel
from barecuda.reduction import ReductionKernel
from barecuda.tools import dtype_to_ctype

# Themes kept in their own modules (each fetches this one lazily, never at import):
from barecuda import _interop
from barecuda._gather import (multi_put, multi_take, multi_take_put, subset_dot, subset_max,
                              subset_min, subset_sum, take)
from barecuda._interop import _device_view, asarray, from_dlpack   # noqa: F401
from barecuda._logic import all, any, logical_and, logical_not, logical_or, where
from barecuda._shape import concatenate, reshape, splay, stack, transpose
from barecuda._vec import vec

__all__ = ["GPUArray", "to_gpu", "to_gpu_async", "empty", "zeros", "ones", "full",
           "empty_like", "zeros_like", "ones_like", "arange", "if_positive", "maximum",
           "minimum", "take", "concatenate", "dot", "vdot", "sum", "max", "min", "subset_dot",
           "subset_max", "subset_min", "mean", "is_gpuarray", "ArrayFlags",
           "asarray", "from_dlpack", "vec", "stack", "transpose", "reshape", "any", "all",
           "logical_and", "logical_or", "logical_not", "where", "subset_sum", "multi_take",
           "multi_put", "multi_take_put", "splay", "real", "imag", "conj"]

_array_alloc = _cdrv._array_alloc
_SUPPORTED = {np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                    np.uint16, np.uint32, np.uint64, np.float16, np.float32,
                                    np.float64, np.complex64, np.complex128)}


def _alloc(nbytes, allocator, stream=None):
    """nbytes from `allocator`, else from the stream-ordered pool on `stream`
    (small blocks on the default stream are recycled by the context)."""
    if allocator is not None:
        return allocator(nbytes)
    return _array_alloc(nbytes) if stream is None else _array_alloc(nbytes, stream)


def _check_dtype(dtype):
    dt = np.dtype(dtype)
    if dt not in _SUPPORTED:
        try:
            dtype_to_ctype(dt)
        except TypeError:
            raise TypeError(f"GPUArray does not support dtype {dt}") from None
    return dt


def _norm_shape(shape):
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
    return shape


def _c_strides(shape, itemsize):
    strides = []
    s = itemsize
    for d in reversed(shape):
        strides.append(s)
        s *= d if d else 1
    return tuple(reversed(strides))


def _f_strides(shape, itemsize):
    strides = []
    s = itemsize
    for d in shape:
        strides.append(s)
        s *= d if d else 1
    return tuple(strides)


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _layout(shape, strides, itemsize):
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


class ArrayFlags:
    """c_contiguous, f_contiguous and forc (either) of a GPUArray."""
    __slots__ = ("c_contiguous", "f_contiguous", "forc")

    def __init__(self, c, f):
        self.c_contiguous = c
        self.f_contiguous = f
        self.forc = c or f

    def __repr__(self):
        return (f"  C_CONTIGUOUS : {self.c_contiguous}\n  F_CONTIGUOUS : {self.f_contiguous}")


class GPUArray(_cdrv._ArrayBase):
    """GPUArray(shape, dtype, allocator=None, base=None, gpudata=None, strides=None,
    order="C", stream=None)

    An array of `shape` and `dtype` in device memory: new memory from `allocator`
    (default: the stream-ordered pool, on `stream`), or the existing memory `gpudata`
    (a DeviceAllocation or a pointer as int) kept alive by `base`.
    """

    __array_priority__ = 100
    __array_ufunc__ = None   # NumPy scalars and ufuncs defer to our operators
    __slots__ = ()   # the fields (shape, dtype, size, strides, gpudata, ptr, base,
    # allocator, _c, _f, _mem) live in the C base, so C fast paths can make results

    def __init__(self, shape, dtype, allocator=None, base=None, gpudata=None, strides=None,
                 order="C", stream=None):
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
        if gpudata is None:
            if size:
                gpudata = _alloc(size * dtype.itemsize, allocator, stream)
                self.ptr = int(gpudata)
            else:
                self.ptr = 0
            self._mem = gpudata
        else:
            self.ptr = int(gpudata)
            self._mem = gpudata if not isinstance(gpudata, int) else None
        self.gpudata = gpudata
        self._c, self._f = _layout(shape, strides, dtype.itemsize)

    # ----------------------------------------------------------- attributes

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def mem_size(self):
        """Number of elements (PyCUDA's name)."""
        return self.size

    @property
    def flags(self):
        return ArrayFlags(self._c, self._f)

    # --- PyCUDA's launch geometry and texref binding, for programs that launch the
    # --- kernels of elementwise.get_*_kernel themselves (kern helper)

    @property
    def _grid(self):
        """A grid for a grid-stride kernel over this array (PyCUDA's attribute)."""
        from barecuda.elementwise import grid_for
        return (grid_for(self.size), 1)

    @property
    def _block(self):
        """The block matching ``_grid`` (PyCUDA's attribute)."""
        from barecuda.elementwise import BLOCK
        return (BLOCK, 1, 1)

    def bind_to_texref(self, texref, allow_offset=False):
        """bind_to_texref(texref, allow_offset=False): bind this contiguous array to
        `texref` (a PointerTextureRef of a kernel getter); returns the offset in
        elements (0)."""
        if not self.flags.forc:
            raise ValueError("only contiguous arrays can be bound to a texture reference")
        return texref.set_address(self.ptr, self.nbytes, allow_offset=allow_offset) \
            // self.dtype.itemsize

    def bind_to_texref_ext(self, texref, channels=1, allow_double_hack=False,
                           allow_complex_hack=False, allow_offset=False):
        """bind_to_texref_ext(texref, channels=1, allow_double_hack=False, allow_complex_hack=False, allow_offset=False)

        As bind_to_texref (PyCUDA's signature; the hacks are not needed: the
        reference reads elements of the array's dtype).  ValueError for
        ``channels`` other than 1.
        """
        if channels != 1:
            raise ValueError("only single-channel binding is supported")
        return self.bind_to_texref(texref, allow_offset=allow_offset)

    @property
    def is_contiguous(self):
        return self._c or self._f

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self):
        return repr(self.get())

    def __str__(self):
        return str(self.get())

    def __bool__(self):
        if self.size != 1:
            raise ValueError("The truth value of an array with more than one element is ambiguous")
        return bool(self.get().reshape(()))

    def __float__(self):
        return float(self._scalar())

    def __int__(self):
        return int(self._scalar())

    def __complex__(self):
        return complex(self._scalar())

    def __index__(self):
        if self.dtype.kind not in "iub":
            raise TypeError("only integer GPUArrays can be used as an index")
        return int(self._scalar())

    def item(self):
        """The single element as a Python scalar (int, float, complex or bool).

        Copies the array to the host.  Raises TypeError unless the array has exactly
        one element (as NumPy's ``ndarray.item()`` with no arguments).
        """
        return self._scalar().item()

    def _scalar(self):
        if self.size != 1:
            raise TypeError(f"only 1-element arrays can be converted to scalars (size {self.size})")
        return self.get().reshape(())[()]

    @property
    def __cuda_array_interface__(self):
        # CAI v3 as PyCUDA and Numba export it: strides always, "stream": None.  None
        # tells the consumer that no synchronization is needed, so the legacy default
        # stream (where our work runs, or which our blocking streams order with) is
        # first waited for when it is busy: a consumer on a non-blocking stream then
        # reads finished data too.
        _interop.settle_default_stream()
        return {"shape": self.shape, "typestr": self.dtype.str,
                "data": (self.ptr, False), "version": 3,
                "strides": self.strides, "stream": None}

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of this array (array API standard).  `stream`: the consumer's
        CUDA stream (an int; None or 1: the legacy default stream, -1: no ordering); it is
        made to wait for our work on the default stream.  `max_version` >= (1, 0) gives a
        versioned capsule.  copy=True exports a copy; dl_device must be this device."""
        return _interop._to_dlpack(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self):
        """(kDLCUDA = 2, device ordinal)."""
        return (_interop._DL_CUDA, _interop._device_ordinal())

    # ----------------------------------------------------------- transfers

    def set(self, ary, async_=False, stream=None, **kwargs):
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

    def set_async(self, ary, stream=None):
        """set_async(ary, stream=None): queue the host-to-device copy of `ary` on `stream`.

        As ``set(ary, async_=True, stream=stream)``: `ary` must have this array's size
        and dtype (ValueError otherwise).  The copy is truly asynchronous only for
        page-locked `ary`; keep `ary` alive and unchanged until the stream has run it.
        """
        return self.set(ary, async_=True, stream=stream)

    def get(self, ary=None, pagelocked=False, async_=False, stream=None, **kwargs):
        """Copy this array to the host: into `ary` when given, else a new (page-locked
        when asked) NumPy array, which is returned."""
        if "async" in kwargs:
            async_ = kwargs.pop("async")
        if kwargs:
            raise TypeError(f"get(): unexpected keyword arguments {', '.join(kwargs)}")
        src = self if (self._c or self._f) else self._contiguous(stream)
        order = "C" if src._c else "F"
        if ary is None:
            if pagelocked and self.size:
                ary = _drv.pagelocked_empty(self.shape, self.dtype, order=order)
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
            elif stream is None:
                _dtoh_staged(ary, src.ptr)
            else:
                _dtoh_staged(ary, src.ptr, stream)
        return ary

    def get_async(self, stream=None, ary=None):
        """get_async(stream=None, ary=None): queue the device-to-host copy on `stream`.

        As ``get(ary=ary, async_=True, stream=stream)``; returns the host array, whose
        contents are valid only once `stream` is synchronized.  Give a page-locked `ary`
        (e.g. from ``driver.pagelocked_empty``) for a truly asynchronous copy.  Raises
        TypeError or ValueError when `ary` has the wrong type, dtype, size or order.
        """
        return self.get(ary=ary, async_=True, stream=stream)

    # ----------------------------------------------------------- views and copies

    def _view(self, shape, strides, ptr_offset=0, dtype=None):
        dtype = self.dtype if dtype is None else dtype
        v = GPUArray.__new__(GPUArray)
        v.shape = shape
        v.dtype = dtype
        v.size = _prod(shape)
        v.strides = strides
        v.ptr = self.ptr + ptr_offset
        v.gpudata = v.ptr if (ptr_offset or not self.ptr) else self.gpudata
        v.base = self
        v.allocator = self.allocator
        v._mem = self._mem
        v._c, v._f = _layout(shape, strides, dtype.itemsize)
        return v

    def _contiguous(self, stream=None):
        """self if C-contiguous, else a C-contiguous copy."""
        if self._c:
            return self
        out = GPUArray(self.shape, self.dtype, allocator=self.allocator, stream=stream)
        _strided_copy(out, self, stream)
        return out

    def copy(self, stream=None):
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

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def view(self, dtype=None):
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

    def reshape(self, *shape, order="C"):
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

    def ravel(self, order="C"):
        """ravel(order="C"): the elements as a 1-d GPUArray of length ``size``.

        A view when the array is contiguous in `order` ('C' or 'F'), else a contiguous
        copy (as NumPy).  Raises ValueError for another `order`.
        """
        return self.reshape(self.size, order=order)

    def flatten(self):
        """flatten(): a new 1-d GPUArray holding a C-order copy of the elements.

        Unlike ravel(), the result never shares memory with this array.
        """
        c = self._contiguous()
        return (c.copy() if c is self else c).reshape(self.size)

    def squeeze(self, axis=None):
        """squeeze(axis=None): a view without axes of length one.

        `axis` (an int or a tuple of ints, negative counts from the end) names the axes
        to drop; each must have length one, else ValueError (NumPy's message).
        """
        if axis is None:
            keep = [k for k, d in enumerate(self.shape) if d != 1]
        else:
            axes = (axis,) if isinstance(axis, int) else tuple(axis)
            axes = {a % self.ndim if self.ndim else a for a in axes}
            for a in axes:
                if self.shape[a] != 1:
                    raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
            keep = [k for k in range(self.ndim) if k not in axes]
        return self._view(tuple(self.shape[k] for k in keep), tuple(self.strides[k] for k in keep))

    def transpose(self, axes=None):
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
    def T(self):
        return self.transpose()

    def __getitem__(self, index):
        if not isinstance(index, tuple):
            index = (index,)
        if _builtins.any(i is Ellipsis for i in index):
            k = [n for n, i in enumerate(index) if i is Ellipsis]
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

    def __setitem__(self, index, value):
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

    def fill(self, value, stream=None):
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

    def astype(self, dtype, stream=None):
        """A copy converted to `dtype` (NumPy's unsafe cast)."""
        dtype = _check_dtype(dtype)
        if dtype == self.dtype:
            return self.copy(stream)
        src = self._contiguous(stream) if not (self._c or self._f) else self
        out = GPUArray(self.shape, dtype, allocator=self.allocator, stream=stream,
                       order="F" if (src._f and not src._c) else "C")
        _cast_kernel(self.dtype, dtype).launch_flat(self.size, [out.ptr, src.ptr], stream)
        return out

    # ----------------------------------------------------------- arithmetic

    def __add__(self, other):
        return _binary("add", self, other)

    def __radd__(self, other):
        return _binary("add", self, other, True)

    def __sub__(self, other):
        return _binary("subtract", self, other)

    def __rsub__(self, other):
        return _binary("subtract", self, other, True)

    def __mul__(self, other):
        return _binary("multiply", self, other)

    def __rmul__(self, other):
        return _binary("multiply", self, other, True)

    def __truediv__(self, other):
        return _binary("true_divide", self, other)

    def __rtruediv__(self, other):
        return _binary("true_divide", self, other, True)

    __div__ = __truediv__
    __rdiv__ = __rtruediv__

    def __floordiv__(self, other):
        return _binary("floor_divide", self, other)

    def __rfloordiv__(self, other):
        return _binary("floor_divide", self, other, True)

    def __mod__(self, other):
        return _binary("remainder", self, other)

    def __rmod__(self, other):
        return _binary("remainder", self, other, True)

    def __pow__(self, other):
        return _binary("power", self, other)

    def __rpow__(self, other):
        return _binary("power", self, other, True)

    def __iadd__(self, other):
        return _binary("add", self, other, out=self)

    def __isub__(self, other):
        return _binary("subtract", self, other, out=self)

    def __imul__(self, other):
        return _binary("multiply", self, other, out=self)

    def __itruediv__(self, other):
        return _binary("true_divide", self, other, out=self)

    def __ifloordiv__(self, other):
        return _binary("floor_divide", self, other, out=self)

    def __imod__(self, other):
        return _binary("remainder", self, other, out=self)

    def __ipow__(self, other):
        return _binary("power", self, other, out=self)

    def __eq__(self, other):
        return _binary("equal", self, other)

    def __ne__(self, other):
        return _binary("not_equal", self, other)

    def __lt__(self, other):
        return _binary("less", self, other)

    def __le__(self, other):
        return _binary("less_equal", self, other)

    def __gt__(self, other):
        return _binary("greater", self, other)

    def __ge__(self, other):
        return _binary("greater_equal", self, other)

    __hash__ = None

    def __neg__(self):
        return _unary("negative", self)

    def __pos__(self):
        return self.copy()

    def __abs__(self):
        return _unary("absolute", self)

    def mul_add(self, selffac, other, otherfac, add_timer=None, stream=None, out=None):
        """mul_add(selffac, other, otherfac, add_timer=None, stream=None, out=None): ``selffac * self + otherfac * other``.

        The factors are numbers or 0-d GPUArrays, `other` a GPUArray of this shape;
        the result (NumPy's dtype) is a new array or `out`.  `add_timer` is accepted
        for PyCUDA compatibility and ignored.
        """
        if not isinstance(other, GPUArray):
            raise TypeError(f"mul_add(): other must be a GPUArray, not {type(other).__name__}")
        return _binary("add", _binary("multiply", self, selffac, stream=stream),
                       _binary("multiply", other, otherfac, stream=stream), out=out, stream=stream)

    def reverse(self, stream=None):
        """reverse(stream=None): a new array with the elements in reversed order.

        The array is taken flat in its memory order (C, or F for an F-contiguous
        array; other layouts are copied to C first) and the result has the same
        shape and order, as PyCUDA's ``reverse``.
        """
        src = self if (self._c or self._f) else self._contiguous(stream)
        out = _empty_as(src, self.dtype, stream)
        if self.size:
            k = _reverse_kernel(self.dtype)
            k.launch_flat(self.size, [out.ptr, src.ptr], stream)
        return out

    def any(self, stream=None, allocator=None):
        """any(stream=None, allocator=None): whether any element is true, as a 0-d bool GPUArray."""
        return any(self, stream, allocator)

    def all(self, stream=None, allocator=None):
        """all(stream=None, allocator=None): whether every element is true, as a 0-d bool GPUArray."""
        return all(self, stream, allocator)

    def conj(self, out=None, stream=None):
        """conj(out=None, stream=None): the complex conjugate, elementwise.

        A new array (or `out`, which must match shape and dtype); real arrays give a
        copy and bool arrays int8, as ``numpy.conjugate``.  ``conjugate`` is the same
        method.
        """
        if self.dtype.kind == "b":  # NumPy has no bool loop for conjugate: it gives int8
            return self.astype(np.int8, stream=stream) if out is None else _assign(out, self, stream)
        if self.dtype.kind != "c":
            return self.copy(stream) if out is None else _assign(out, self, stream)
        return _unary("conjugate", self, out=out, stream=stream)

    conjugate = conj

    @property
    def real(self):
        """The real part: this array for real dtypes, else a new array (C-contiguous,
        or F-contiguous when this one is), as PyCUDA."""
        if self.dtype.kind != "c":
            return self
        return self._part(0)

    @property
    def imag(self):
        """The imaginary part: zeros for real dtypes, else a new array (C-contiguous,
        or F-contiguous when this one is), as PyCUDA."""
        if self.dtype.kind != "c":
            return zeros_like(self)
        return self._part(1)

    def _part(self, which):
        rdt = np.dtype(self.dtype.char.lower())
        part = self._view(self.shape, self.strides, which * rdt.itemsize, rdt)
        out = GPUArray(self.shape, rdt, allocator=self.allocator,
                       order="F" if (self._f and not self._c) else "C")
        _strided_copy(out, part, None)
        return out

    # ----------------------------------------------------------- reductions

    def sum(self, dtype=None, stream=None, allocator=None):
        """sum(dtype=None, stream=None, allocator=None): the sum of all elements.

        Returns a 0-d GPUArray (PyCUDA semantics: call ``.get()`` or ``.item()`` for a
        host value).  `dtype` defaults to NumPy's accumulator type (int64 for small
        integers, the input's type for floats); see ``gpuarray.sum``.
        """
        return sum(self, dtype, stream, allocator)

    def max(self, stream=None):
        """max(stream=None): the largest element as a 0-d GPUArray.

        NaN wins if present, as NumPy.  Raises ValueError for an empty array.
        """
        return max(self, stream)

    def min(self, stream=None):
        """min(stream=None): the smallest element as a 0-d GPUArray.

        NaN wins if present, as NumPy.  Raises ValueError for an empty array.
        """
        return min(self, stream)

    def mean(self, dtype=None, stream=None):
        """mean(dtype=None, stream=None): the arithmetic mean as a 0-d GPUArray.

        The dtype is NumPy's (float64 for integer input) unless given; an empty array
        gives NaN.
        """
        return mean(self, dtype, stream)

    def dot(self, other, dtype=None, stream=None):
        """dot(other, dtype=None, stream=None): ``sum(self * other)`` as a 0-d GPUArray.

        Both arrays are taken flat and must have the same size (ValueError otherwise);
        `other` must be a GPUArray (TypeError).  No conjugation (see ``gpuarray.vdot``).
        """
        return dot(self, other, dtype, stream)

    def get_numpy_scalar(self):
        """The single element as a NumPy scalar (e.g. numpy.float32), copied to the host.

        Raises TypeError unless the array has exactly one element.
        """
        return self._scalar()

    def __iter__(self):
        for k in range(len(self)):
            yield self[k]

    def __array__(self, dtype=None, copy=None):
        a = self.get()
        return a if dtype is None else a.astype(dtype)


# ------------------------------------------------------------------ copies

# Synchronous copies of pageable memory go through pinned buffers with several
# threads (src/staging.c): faster than the driver's single bounce buffer.
_htod_staged = _cdrv._htod_staged
_dtoh_staged = _cdrv._dtoh_staged


def _htod(ptr, host, async_, stream):
    if async_:
        _drv.memcpy_htod_async(ptr, host, stream)
    elif stream is None:
        _htod_staged(ptr, host)
    else:
        _htod_staged(ptr, host, stream)


def _dtod(dst, src, nbytes, stream):
    if stream is not None:
        _drv.memcpy_dtod_async(dst, src, nbytes, stream)
    else:
        _drv.memcpy_dtod(dst, src, nbytes)


_kernels = {}   # (kind, dtypes...) -> ElementwiseKernel; compiled per context inside


def _kernel(key, arguments, operation, name, preamble=""):
    k = _kernels.get(key)
    if k is None:
        k = _kernels[key] = ElementwiseKernel(arguments, operation, name, preamble=preamble)
    return k


def _reverse_kernel(dt):
    ct = dtype_to_ctype(dt)
    return _kernel(("reverse", dt), f"{ct} *z, {ct} *x", "z[i] = x[n - 1 - i]", "bc_reverse")


def _ct(dt):
    """C type computations in dtype dt run in (float for float16)."""
    return "float" if dt == np.float16 else dtype_to_ctype(dt)


def _strided_copy_kernel(dt, nd):
    """dst[off(i)] = src[off(i)] over an nd-dimensional index space (strides in elements)."""
    key = ("strided_copy", dt, nd)
    k = _kernels.get(key)
    if k is None:
        ct = dtype_to_ctype(dt)
        args = [f"{ct} *dst", f"{ct} *src"] + [f"long long sh{k}, long long ds{k}, long long ss{k}"
                                               for k in range(nd)]
        body = ["long long r = i, doff = 0, soff = 0, q;"]
        for d in reversed(range(nd)):
            body.append(f"q = r % sh{d}; r /= sh{d}; doff += q * ds{d}; soff += q * ss{d};")
        body.append("(void)q; (void)r; dst[doff] = src[soff]")
        k = _kernel(key, ", ".join(args), "\n".join(body), "bc_strided_copy")
    return k


def _strided_copy(dst, src, stream):
    """dst[...] = src[...] for arrays of one shape and dtype with any strides."""
    if dst.shape != src.shape:
        raise ValueError(f"shape mismatch: {dst.shape} vs {src.shape}")
    if dst.dtype != src.dtype:
        raise TypeError(f"dtype mismatch: {dst.dtype} vs {src.dtype}")
    if dst.size == 0:
        return
    shape, dstr, sstr = [], [], []
    item = dst.dtype.itemsize
    for d, a, b in zip(dst.shape, dst.strides, src.strides):
        if d == 1:
            continue
        if a % item or b % item:
            raise ValueError("strides that are not a multiple of the item size are not supported")
        shape.append(d)
        dstr.append(a // item)
        sstr.append(b // item)
    if (dst._c and src._c) or (dst._f and src._f and dst.strides == src.strides):
        _dtod(dst.ptr, src.ptr, dst.nbytes, stream)
        return
    k = _strided_copy_kernel(dst.dtype, len(shape))
    flat = [dst.ptr, src.ptr]
    for d, a, b in zip(shape, dstr, sstr):
        flat += [d, a, b]
    k.launch_flat(dst.size, flat, stream)


def _fill(ary, value, stream):
    dt = ary.dtype
    try:
        if dt.fields is not None:   # a struct (gpuarray.vec): a make_* value, tuple or number
            v = np.asarray(value)
            if v.dtype != dt:
                v = np.array(value if v.dtype.fields is None else v.tolist(), dtype=dt)
            if v.size != 1:
                raise ValueError(f"one value is needed, got {v.size}")
            v = v.reshape(())
        else:
            v = dt.type(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise type(exc)(f"fill(): cannot convert {value!r} to {dt}: {exc}") from None
    if dt.itemsize == 4 and hasattr(_drv, "memset_d32"):
        word = int(np.array(v, dt).view(np.uint32))
        if stream is not None and hasattr(_drv, "memset_d32_async"):
            _drv.memset_d32_async(ary.ptr, word, ary.size, stream)
        else:
            _drv.memset_d32(ary.ptr, word, ary.size)
        return
    if dt.itemsize == 1 and hasattr(_drv, "memset_d8"):
        word = int(np.array(v, dt).view(np.uint8))
        if stream is not None and hasattr(_drv, "memset_d8_async"):
            _drv.memset_d8_async(ary.ptr, word, ary.size, stream)
        else:
            _drv.memset_d8(ary.ptr, word, ary.size)
        return
    k = _fill_kernel(dt)
    k.launch_flat(ary.size, [ary.ptr] + _scalar_flat(k, 1, v), stream)


def _fill_kernel(dt):
    ct = dtype_to_ctype(dt)
    return _kernel(("fill", dt), f"{ct} *z, {ct} v", "z[i] = v", "bc_fill")


def _scalar_flat(kernel, index, value):
    conv, count = kernel._sig.converters[index]
    c = conv(value)
    return list(c) if count == 2 else [c]


def _cast_kernel(src_dt, dst_dt):
    key = ("cast", src_dt, dst_dt)
    k = _kernels.get(key)
    if k is None:
        k = _kernel(key, f"{dtype_to_ctype(dst_dt)} *z, {dtype_to_ctype(src_dt)} *x",
                    f"z[i] = bc_cast<{dtype_to_ctype(dst_dt)}>(x[i])", "bc_cast_kernel")
    return k


def _assign(out, src, stream):
    if out.shape != src.shape:
        raise ValueError(f"out has shape {out.shape}, the result {src.shape}")
    _strided_copy(out, src if src.dtype == out.dtype else src.astype(out.dtype), stream)
    return out


# ------------------------------------------------------------------ type resolution

_types = {}


def _result_dtype(op, a, b=None):
    """NumPy's result dtype of ufunc `op` on an array of a and b (dtype, Python or NumPy
    scalar); raises TypeError (or OverflowError) as NumPy does."""
    key = (op, a, b if isinstance(b, np.dtype) else type(b))
    r = _types.get(key)
    if r is None:
        uf = getattr(np, op)
        x = np.empty(0, a)
        try:
            if b is None:
                r = uf(x).dtype
            elif isinstance(b, np.dtype):
                r = uf(x, np.empty(0, b)).dtype
            else:
                r = uf(x, b).dtype
        except TypeError as exc:
            raise TypeError(f"operation {op} is not supported for {a}"
                            + ("" if b is None else f" and {b if isinstance(b, np.dtype) else type(b).__name__}")
                            + f": {exc}") from None
        if isinstance(b, (np.generic, int, float, complex)) and not isinstance(b, np.dtype):
            if type(b) is int and a.kind in "iu":
                pass  # overflow is checked on conversion, value by value
        _types[key] = r
    return r


_BINOPS = {
    "add": "a + b", "subtract": "a - b", "multiply": "a * b", "true_divide": "a / b",
    "equal": "a == b", "not_equal": "a != b", "less": "a < b", "less_equal": "a <= b",
    "greater": "a > b", "greater_equal": "a >= b",
    "maximum": "((a >= b || a != a) ? a : b)", "minimum": "((a <= b || a != a) ? a : b)",
}
_COMPARE = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}


def _binop_expr(op, ct_dt):
    if ct_dt == np.bool_:
        if op == "add":
            return "(a || b)"
        if op == "multiply":
            return "(a && b)"
        if op in ("maximum",):
            return "(a || b)"
        if op in ("minimum",):
            return "(a && b)"
    if op in _BINOPS:
        return _BINOPS[op]
    kind = ct_dt.kind
    if op == "floor_divide":
        return "barecuda::floordiv_int(a, b)" if kind in "iu" else "barecuda::floordiv_float(a, b)"
    if op == "remainder":
        return "barecuda::mod_int(a, b)" if kind in "iu" else "barecuda::mod_float(a, b)"
    if op == "power":
        if kind in "iu":
            return "barecuda::pow_int(a, b)"
        if kind == "c":
            return "barecuda::pow(a, b)"
        return "pow(a, b)"
    raise TypeError(f"unsupported operation {op}")


def _compute_dtype(op, x_dt, y_dt_or_scalar, res):
    """The dtype the operation is computed in."""
    if op in _COMPARE:
        if isinstance(y_dt_or_scalar, np.dtype):
            return np.result_type(x_dt, y_dt_or_scalar)
        return np.result_type(np.empty(0, x_dt), y_dt_or_scalar)
    return res


def _binary_kernel(op, xd, yd, scalar, reverse, res, cd):
    """Kernel z = op(x, y) (y an array of yd, or a scalar of the compute type cd);
    `scalar` "x0"/"y0": x or y is a 0-d array, its one element used for every i."""
    key = ("bin", op, xd, yd, scalar, reverse, res, cd)
    k = _kernels.get(key)
    if k is None:
        ct = _ct(cd)
        expr = _binop_expr(op, cd if cd != np.float16 else np.dtype(np.float32))
        xa = f"bc_cast<{ct}>(x[{'0' if scalar == 'x0' else 'i'}])"
        if scalar in ("x0", "y0"):
            ya = f"bc_cast<{ct}>(y[{'0' if scalar == 'y0' else 'i'}])"
            sdecl = f"{dtype_to_ctype(yd)} *y"
        elif scalar:
            ya = f"bc_cast<{ct}>(s)"
            sdecl = f"{dtype_to_ctype(cd)} s"
        else:
            ya = f"bc_cast<{ct}>(y[i])"
            sdecl = f"{dtype_to_ctype(yd)} *y"
        a, b = (ya, xa) if reverse else (xa, ya)
        zt = dtype_to_ctype(res)
        op_src = (f"const {ct} a = {a}; const {ct} b = {b}; "
                  f"z[i] = bc_cast<{zt}>({expr})")
        k = _kernel(key, f"{zt} *z, {dtype_to_ctype(xd)} *x, {sdecl}", op_src, f"bc_{op}")
    return k


_PY_SCALARS = (int, float, complex, bool, np.generic)


_WEAK_SCALARS = (float, int, complex)


def _new_array(shape, dtype, allocator, stream):
    """A new C-contiguous GPUArray of a normalised shape tuple and a supported
    np.dtype; skips __init__'s checks (the internal fast path)."""
    z = GPUArray.__new__(GPUArray)
    z.shape = shape
    z.dtype = dtype
    z.size = n = _prod(shape)
    z.base = None
    z.allocator = allocator
    z.strides = _c_strides(shape, dtype.itemsize) if shape else ()
    z._c = z._f = True if len(shape) < 2 or n == 0 else None
    if z._c is None:
        z._c, z._f = _layout(shape, z.strides, dtype.itemsize)
    if n:
        mem = _alloc(n * dtype.itemsize, allocator, stream)
        z.ptr = int(mem)
    else:
        mem = None
        z.ptr = 0
    z.gpudata = z._mem = mem
    return z


def _new_scalar(dtype, allocator, stream):
    """A new 0-d GPUArray of a supported np.dtype (reduction results)."""
    z = GPUArray.__new__(GPUArray)
    z.shape = z.strides = ()
    z.dtype = dtype
    z.size = 1
    z.base = None
    z.allocator = allocator
    z._c = z._f = True
    z.gpudata = z._mem = mem = _alloc(dtype.itemsize, allocator, stream)
    z.ptr = int(mem)
    return z


def _empty_as(x, dtype, stream):
    """A new dense array with x's shape and memory order (x must be C- or F-contiguous)
    and `dtype`, so elementwise kernels can walk both with one flat index; skips
    __init__'s checks."""
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
    if n:
        mem = _alloc(n * dtype.itemsize, a, stream)
        z.ptr = int(mem)
    else:
        mem = None
        z.ptr = 0
    z.gpudata = z._mem = mem
    return z


def _binary(op, x, y, reverse=False, out=None, stream=None):
    if out is None:
        z = _ELEMENTWISE[reverse][op](x, y, stream)   # the C fast path, or None
        if z is not None:
            return z
    ty = type(y)
    if ty is GPUArray and x.shape != y.shape and (x.shape == () or y.shape == ()):
        return _binary_0d(op, y, x, out, stream) if reverse else _binary_0d(op, x, y, out, stream)
    if ty is GPUArray:
        if x.shape != y.shape:
            raise ValueError(f"operands could not be used together: shapes {x.shape} and {y.shape} "
                             "differ (broadcasting is not supported)")
        res = _result_dtype(op, x.dtype, y.dtype)
        cd = _compute_dtype(op, x.dtype, y.dtype, res)
        k = _binary_kernel(op, x.dtype, y.dtype, False, False, res, cd)
        same = x.strides == y.strides and (x._c or x._f)
        if not same:
            x = x._contiguous(stream)
            y = y._contiguous(stream)
        if out is None:
            z = _empty_as(x, res, stream)
            if x.size:
                k.launch_flat(x.size, [z.ptr, x.ptr, y.ptr], stream)
                _remember(_ELEMENTWISE[False][op], x.dtype, y.dtype, res, k)
            return z
        return _to_out(k, [x.ptr, y.ptr], x, res, out, op, stream)
    if not isinstance(y, _PY_SCALARS):
        if isinstance(y, (list, tuple)):
            # refused, not left to Python: `a == [1, 2]` would quietly be False
            raise TypeError(f"cannot combine a GPUArray with a {type(y).__name__} in {op}; "
                            "make it an array with gpuarray.to_gpu first")
        if isinstance(y, np.ndarray):
            if y.ndim == 0:
                y = y[()]
            else:
                raise TypeError(f"cannot combine a GPUArray with a numpy.ndarray in {op}; "
                                "transfer it with gpuarray.to_gpu first")
        else:
            return NotImplemented
    res = _result_dtype(op, x.dtype, y)
    cd = _compute_dtype(op, x.dtype, y, res)
    k = _binary_kernel(op, x.dtype, None, True, reverse, res, cd)
    s = _scalar_flat(k, 2, y)
    if op == "power" and not reverse and cd.kind in "iu" and y < 0:
        raise ValueError("Integers to negative integer powers are not allowed.")
    if not (x._c or x._f):
        x = x._contiguous(stream)
    if out is None:
        z = _empty_as(x, res, stream)
        if x.size:
            k.launch_flat(x.size, [z.ptr, x.ptr] + s, stream)
            if ty in _WEAK_SCALARS and op != "power" and not (ty is int and op in _COMPARE):
                # the kernel depends on the scalar's type only (NumPy 2's weak scalars)
                _remember(_ELEMENTWISE[reverse][op], x.dtype, ty, res, k)
        return z
    return _to_out(k, [x.ptr] + s, x, res, out, op, stream)


def _binary_0d(op, x, y, out, stream):
    """op(x, y) where one of x, y is 0-d and the other not: the 0-d array acts as a
    scalar kept on the device (its dtype counts in the promotion, as a NumPy 0-d
    array's does)."""
    mode, big = ("y0", x) if y.shape == () else ("x0", y)
    res = _result_dtype(op, x.dtype, y.dtype)
    cd = _compute_dtype(op, x.dtype, y.dtype, res)
    k = _binary_kernel(op, x.dtype, y.dtype, mode, False, res, cd)
    if not (big._c or big._f):
        big = big._contiguous(stream)
        if mode == "y0":
            x = big
        else:
            y = big
    if out is None:
        z = _empty_as(big, res, stream)
        if big.size:
            k.launch_flat(big.size, [z.ptr, x.ptr, y.ptr], stream)
        return z
    return _to_out(k, [x.ptr, y.ptr], big, res, out, op, stream)


def _remember(table, xdt, key, res, k):
    """Let the C `table` launch kernel k for these operands from now on (it checks
    that k's context is still current); results of another itemsize than x's
    cannot share x's strides, so those stay on the Python path."""
    if res.itemsize == xdt.itemsize and k._hot is not None:
        table.put(xdt, key, res, k._hot)


class _Tables(dict):
    """op name -> its _OpTable, made on first use."""

    def __init__(self, kind, suffix=""):
        super().__init__()
        self.kind, self.suffix = kind, suffix

    def __missing__(self, op):
        t = self[op] = _cdrv._OpTable(GPUArray, self.kind, op + self.suffix)
        return t


# the C small-op fast paths: `x op y` ([0]) and `y op x` for a scalar y ([1]), unary ops, sums
_ELEMENTWISE = (_Tables("elementwise"), _Tables("elementwise", " (reflected)"))
_UNARY = _Tables("unary")
_SUMS = _cdrv._OpTable(GPUArray, "reduce", "sum")


def _to_out(k, flat, x, res, out, op, stream):
    """Run kernel k writing into `out` (in-place forms and out= arguments)."""
    if not isinstance(out, GPUArray):
        raise TypeError(f"out must be a GPUArray, not {type(out).__name__}")
    if out.shape != x.shape:
        raise ValueError(f"out has shape {out.shape}, the result {x.shape}")
    if res != out.dtype and not np.can_cast(res, out.dtype, "same_kind"):
        raise TypeError(f"Cannot cast {op} output from dtype('{res}') to dtype('{out.dtype}') "
                        "with casting rule 'same_kind'")
    if x.size == 0:
        return out
    if res == out.dtype and out.strides == x.strides and (out._c or out._f):
        k.launch_flat(x.size, [out.ptr] + flat, stream)
        return out
    tmp = _empty_as(x, res, stream)
    k.launch_flat(x.size, [tmp.ptr] + flat, stream)
    _assign(out, tmp, stream)
    return out


def _unary_expr(op, dt):
    if op == "negative":
        return "-a"
    if op == "conjugate":
        return "barecuda::conj(a)"
    if op == "absolute":
        if dt.kind == "c":
            return "barecuda::abs(a)"
        if dt.kind == "b" or dt.kind == "u":
            return "a"
        if dt.kind == "f":
            return "fabs(a)"
        return "(a < 0 ? -a : a)"
    raise TypeError(op)


def _unary_kernel(op, dt):
    key = ("un", op, dt)
    k = _kernels.get(key)
    if k is None:
        res = _result_dtype(op, dt)
        ct = _ct(dt)
        expr = _unary_expr(op, dt)
        zt = dtype_to_ctype(res)
        k = _kernel(key, f"{zt} *z, {dtype_to_ctype(dt)} *x",
                    f"const {ct} a = bc_cast<{ct}>(x[i]); z[i] = bc_cast<{zt}>({expr})", f"bc_{op}")
    return k


def _unary(op, x, out=None, stream=None):
    if out is None:
        z = _UNARY[op](x, stream)
        if z is not None:
            return z
    res = _result_dtype(op, x.dtype)
    k = _unary_kernel(op, x.dtype)
    if not (x._c or x._f):
        x = x._contiguous(stream)
    if out is None:
        z = _empty_as(x, res, stream)
        if x.size:
            k.launch_flat(x.size, [z.ptr, x.ptr], stream)
            _remember(_UNARY[op], x.dtype, None, res, k)
        return z
    return _to_out(k, [x.ptr], x, res, out, op, stream)


# ------------------------------------------------------------------ creation

def _shape_dtype_alloc(shape, dtype, allocator, order="C", stream=None):
    return GPUArray(shape, dtype, allocator=allocator, order=order, stream=stream)


def empty(shape, dtype=np.float64, allocator=None, order="C", stream=None):
    """A new uninitialised GPUArray."""
    return GPUArray(shape, dtype, allocator=allocator, order=order, stream=stream)


def zeros(shape, dtype=np.float64, allocator=None, order="C", stream=None):
    """zeros(shape, dtype=float64, allocator=None, order="C", stream=None): a new GPUArray of zeros.

    `shape` is an int or a tuple of ints, `order` 'C' or 'F'; `allocator` (a callable
    taking a byte count, such as a ``tools.DeviceMemoryPool``) supplies the memory.
    With `stream` the clearing is queued on it.  Raises ValueError or TypeError for
    a bad shape, dtype or order, as the GPUArray constructor.
    """
    a = GPUArray(shape, dtype, allocator=allocator, order=order, stream=stream)
    if a.size:
        if stream is not None and hasattr(_drv, "memset_d8_async"):
            _drv.memset_d8_async(a.ptr, 0, a.nbytes, stream)
        else:
            _drv.memset_d8(a.ptr, 0, a.nbytes)
    return a


def ones(shape, dtype=np.float64, allocator=None, order="C", stream=None):
    """ones(shape, dtype=float64, allocator=None, order="C", stream=None): a new GPUArray of ones.

    Arguments and errors as ``zeros``.
    """
    return full(shape, 1, dtype, allocator, order, stream)


def full(shape, fill_value, dtype=None, allocator=None, order="C", stream=None):
    """full(shape, fill_value, dtype=None, ...): a new GPUArray with every element `fill_value`.

    `dtype` defaults to NumPy's type of `fill_value` (``numpy.array(fill_value).dtype``);
    other arguments and errors as ``zeros``.
    """
    if dtype is None:
        dtype = np.array(fill_value).dtype
    a = GPUArray(shape, dtype, allocator=allocator, order=order, stream=stream)
    return a.fill(fill_value, stream)


def _like(other, dtype, order):
    if not isinstance(other, GPUArray):
        raise TypeError(f"other must be a GPUArray, not {type(other).__name__}")
    dtype = other.dtype if dtype is None else dtype
    if order in ("K", "A", "k", "a") or order is None:
        # "A": F when other is F-contiguous (and not C), else C; "K" the same here,
        # since the result is always contiguous
        order = "F" if (other._f and not other._c) else "C"
    return order, dtype


def empty_like(other, dtype=None, order="K", stream=None):
    """empty_like(other, dtype=None, order="K", stream=None): a new uninitialised GPUArray shaped as `other`.

    `other` is a GPUArray; its dtype and allocator are reused unless `dtype` is
    given.  order "K" keeps Fortran order for an F-contiguous `other`, else C.
    """
    order, dtype = _like(other, dtype, order)
    return GPUArray(other.shape, dtype, allocator=other.allocator, order=order, stream=stream)


def zeros_like(other, dtype=None, order="K", stream=None):
    """zeros_like(other, dtype=None, order="K", stream=None): a new GPUArray of zeros shaped as `other`.

    Arguments as ``empty_like``.
    """
    order, dtype = _like(other, dtype, order)
    return zeros(other.shape, dtype, other.allocator, order, stream)


def ones_like(other, dtype=None, order="K", stream=None):
    """ones_like(other, dtype=None, order="K", stream=None): a new GPUArray of ones shaped as `other`.

    Arguments as ``empty_like``.
    """
    order, dtype = _like(other, dtype, order)
    return full(other.shape, 1, dtype, other.allocator, order, stream)


def to_gpu(ary, allocator=None, stream=None):
    """A GPUArray holding a copy of the host array `ary`."""
    ary = np.asarray(ary)
    if not (ary.flags.c_contiguous or ary.flags.f_contiguous):
        ary = np.ascontiguousarray(ary)
    order = "C" if ary.flags.c_contiguous else "F"
    a = GPUArray(ary.shape, ary.dtype, allocator=allocator, order=order, stream=stream)
    if a.size:
        _htod(a.ptr, ary, False, stream)
    return a


def to_gpu_async(ary, allocator=None, stream=None):
    """As to_gpu, the copy queued on `stream` (page-locked `ary` makes it truly async)."""
    ary = np.asarray(ary)
    if not (ary.flags.c_contiguous or ary.flags.f_contiguous):
        ary = np.ascontiguousarray(ary)
    order = "C" if ary.flags.c_contiguous else "F"
    a = GPUArray(ary.shape, ary.dtype, allocator=allocator, order=order, stream=stream)
    if a.size:
        _drv.memcpy_htod_async(a.ptr, ary, stream)
    return a


def _arange_kernel(dtype, cd):
    ct, cc = dtype_to_ctype(dtype), dtype_to_ctype(cd)
    return _kernel(("arange", dtype, cd), f"{ct} *z, {cc} start, {cc} step",
                   f"z[i] = bc_cast<{ct}>(start + ({cc})i * step)", "bc_arange")


def arange(*args, dtype=None, allocator=None, stream=None):
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
    a = GPUArray((n,), dtype, allocator=allocator, stream=stream)
    if n:
        cd = np.dtype(np.float64) if dtype.kind in "fcb" or isinstance(start, float) or isinstance(step, float) \
            else np.dtype(np.int64)
        k = _arange_kernel(dtype, cd)
        k.launch_flat(n, [a.ptr, cd.type(start), cd.type(step)], stream)
    return a


def is_gpuarray(obj):
    """True when `obj` is a GPUArray (views included), else False."""
    return isinstance(obj, GPUArray)


# ------------------------------------------------------------------ more elementwise

def _if_positive_kernel(cdt, vdt):
    ct, vt = dtype_to_ctype(cdt), dtype_to_ctype(vdt)
    return _kernel(("if_positive", cdt, vdt), f"{vt} *z, {ct} *c, {vt} *t, {vt} *e",
                   f"z[i] = bc_cast<{_ct(cdt)}>(c[i]) > bc_cast<{_ct(cdt)}>(0) ? t[i] : e[i]",
                   "bc_if_positive")


def if_positive(criterion, then_, else_, out=None, stream=None):
    """Elementwise `then_ if criterion > 0 else else_` (arrays of one shape)."""
    for name, a in (("criterion", criterion), ("then_", then_), ("else_", else_)):
        if not isinstance(a, GPUArray):
            raise TypeError(f"if_positive(): {name} must be a GPUArray")
    if not (criterion.shape == then_.shape == else_.shape):
        raise ValueError("if_positive(): criterion, then_ and else_ must have one shape")
    if then_.dtype != else_.dtype:
        raise TypeError(f"if_positive(): then_ ({then_.dtype}) and else_ ({else_.dtype}) "
                        "must have one dtype")
    c, t, e = (a._contiguous(stream) for a in (criterion, then_, else_))
    k = _if_positive_kernel(c.dtype, t.dtype)
    if out is None:
        out = GPUArray(c.shape, t.dtype, allocator=t.allocator, stream=stream)
        k.launch_flat(c.size, [out.ptr, c.ptr, t.ptr, e.ptr], stream)
        return out
    if out.shape != c.shape or out.dtype != t.dtype:
        raise ValueError("if_positive(): out has the wrong shape or dtype")
    tmp = GPUArray(c.shape, t.dtype, stream=stream)
    k.launch_flat(c.size, [tmp.ptr, c.ptr, t.ptr, e.ptr], stream)
    return _assign(out, tmp, stream)


def maximum(a, b, out=None, stream=None):
    """Elementwise maximum (NaN propagates, as NumPy)."""
    if not isinstance(a, GPUArray):
        a, b = b, a
    return _binary("maximum", a, b, out=out, stream=stream)


def minimum(a, b, out=None, stream=None):
    """Elementwise minimum (NaN propagates, as NumPy)."""
    if not isinstance(a, GPUArray):
        a, b = b, a
    return _binary("minimum", a, b, out=out, stream=stream)


# ------------------------------------------------------------------ reductions

_reductions = {}


def _reduction(key, make):
    k = _reductions.get(key)
    if k is None:
        k = _reductions[key] = make()
    return k


_sum_dtypes = {}


def _sum_dtype(dt):
    r = _sum_dtypes.get(dt)
    if r is None:
        r = _sum_dtypes[dt] = np.add.reduce(np.zeros(1, dt)).dtype
    return r


def _sum_kernel(dt, acc):
    return _reduction(("sum", dt, acc), lambda: ReductionKernel(
        acc, "0", "a + b" if acc != np.bool_ else "a || b", f"bc_cast<{dtype_to_ctype(acc)}>(x[i])",
        f"{dtype_to_ctype(dt)} *x", name="bc_sum"))


def _minmax_kernel(which, dt):
    acc = np.dtype(np.float32) if dt == np.float16 else dt
    ct = dtype_to_ctype(acc)
    cmp = ">=" if which == "max" else "<="
    return _reduction((which, dt), lambda: ReductionKernel(
        acc, _extreme(acc, which), f"((a {cmp} b) || a != a) ? a : b",
        f"bc_cast<{ct}>(x[i])", f"{dtype_to_ctype(dt)} *x", name=f"bc_{which}"))


def _dot_kernel(adt, bdt, acc, conj_a):
    ct = dtype_to_ctype(acc)
    xa = f"bc_cast<{ct}>(x[i])"
    if conj_a and adt.kind == "c":
        xa = f"barecuda::conj({xa})"
    if acc == np.bool_:
        red, mp = "a || b", f"({xa} && bc_cast<bool>(y[i]))"
    else:
        red, mp = "a + b", f"{xa} * bc_cast<{ct}>(y[i])"
    return _reduction(("dot", adt, bdt, acc, conj_a), lambda: ReductionKernel(
        acc, "0", red, mp, f"{dtype_to_ctype(adt)} *x, {dtype_to_ctype(bdt)} *y", name="bc_dot"))


def sum(a, dtype=None, stream=None, allocator=None):
    """The sum of all elements as a 0-d GPUArray (NumPy's accumulator dtype)."""
    if not isinstance(a, GPUArray):
        raise TypeError(f"sum() takes a GPUArray, not {type(a).__name__}")
    if dtype is None and allocator is None:
        z = _SUMS(a, stream)   # the C fast path, or None
        if z is not None:
            return z
    if dtype is None:
        k = _plain_sums.get(a.dtype)
        if k is not None and (a._c or a._f):   # the common case, no conversions
            z = k._run([a.ptr], a.size, None, None, stream, allocator)
            if a.size:
                _SUMS.put(a.dtype, None, k.dtype_out, k._hot)
            return z
    res = _sum_dtype(a.dtype) if dtype is None else np.dtype(dtype)
    acc = np.dtype(np.float32) if res == np.float16 else res
    src = a._contiguous(stream)
    k = _sum_kernel(a.dtype, acc)
    if dtype is None and acc == res:
        _plain_sums[a.dtype] = k
    r = k._run([src.ptr], src.size, None, None, stream, allocator)
    return r if acc == res else r.astype(res, stream)


_plain_sums = {}   # input dtype -> its sum kernel when the result needs no cast


def _minmax(which, a, stream):
    if not isinstance(a, GPUArray):
        raise TypeError(f"{which}() takes a GPUArray, not {type(a).__name__}")
    if a.size == 0:
        raise ValueError(f"zero-size array to reduction operation {'maximum' if which == 'max' else 'minimum'} "
                         "which has no identity")
    dt = a.dtype
    acc = np.dtype(np.float32) if dt == np.float16 else dt
    src = a._contiguous(stream)
    k = _minmax_kernel(which, dt)
    r = k._run([src.ptr], src.size, None, None, stream, None)
    return r if acc == dt else r.astype(dt, stream)


def _extreme(dt, which):
    """C expression of the identity of max (the lowest value) or min (the highest)."""
    low = which == "max"
    if dt.kind == "b":
        return "false" if low else "true"
    if dt.kind in "iu":
        info = np.iinfo(dt)
        v = info.min if low else info.max
        if dt == np.int64 and low:
            return "(-9223372036854775807LL - 1)"
        return f"{v}{'ULL' if dt.kind == 'u' else 'LL'}"
    if dt == np.float32 or dt == np.complex64:
        inf = "__int_as_float(0xff800000)" if low else "__int_as_float(0x7f800000)"
    else:
        inf = ("__longlong_as_double(0xfff0000000000000ULL)" if low
               else "__longlong_as_double(0x7ff0000000000000ULL)")
    if dt.kind == "c":
        return f"{dtype_to_ctype(dt)}({inf}, {inf})"
    return inf


def max(a, stream=None):
    """The largest element as a 0-d GPUArray (NaN if any, as NumPy)."""
    return _minmax("max", a, stream)


def min(a, stream=None):
    """The smallest element as a 0-d GPUArray (NaN if any, as NumPy)."""
    return _minmax("min", a, stream)


def mean(a, dtype=None, stream=None):
    """The mean as a 0-d GPUArray (NumPy's dtype: float64 for integers)."""
    if dtype is None:
        dtype = np.mean(np.zeros(1, a.dtype)).dtype
    dtype = np.dtype(dtype)
    s = sum(a, dtype if dtype != np.float16 else np.float32, stream)
    r = s / (a.size if a.size else float("nan"))
    return r if r.dtype == dtype else r.astype(dtype, stream)


def _dot(a, b, dtype, stream, conj_a):
    for name, x in (("a", a), ("b", b)):
        if not isinstance(x, GPUArray):
            raise TypeError(f"dot(): {name} must be a GPUArray, not {type(x).__name__}")
    if a.size != b.size:
        raise ValueError(f"dot(): sizes differ ({a.size} and {b.size})")
    res = np.result_type(a.dtype, b.dtype) if dtype is None else np.dtype(dtype)
    if res == np.bool_ and dtype is None:
        res = np.dtype(np.bool_)
    acc = np.dtype(np.float32) if res == np.float16 else res
    x = a._contiguous(stream)
    y = b._contiguous(stream)
    k = _dot_kernel(a.dtype, b.dtype, acc, conj_a)
    r = k._run([x.ptr, y.ptr], x.size, None, None, stream, None)
    return r if acc == res else r.astype(res, stream)


def dot(a, b, dtype=None, stream=None):
    """sum(a * b) as a 0-d GPUArray (no conjugation)."""
    return _dot(a, b, dtype, stream, False)


def vdot(a, b, dtype=None, stream=None):
    """sum(conj(a) * b) as a 0-d GPUArray."""
    return _dot(a, b, dtype, stream, True)


def real(a):
    """The real part of GPUArray `a` (a view; `a` itself for real dtypes), as ``a.real``."""
    return a.real


def imag(a):
    """The imaginary part of GPUArray `a` (a view; zeros for real dtypes), as ``a.imag``."""
    return a.imag


def conj(a, out=None, stream=None):
    """conj(a, out=None, stream=None): the complex conjugate of GPUArray `a`, as ``a.conj()``."""
    return a.conj(out, stream)
