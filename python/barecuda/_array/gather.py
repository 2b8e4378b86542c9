# SPDX-License-Identifier: MIT
"""Gathers and scatters through integer index arrays, and reductions over a subset:
``take``, ``multi_take``, ``multi_put``, ``multi_take_put``, ``subset_sum``,
``subset_dot``, ``subset_max``, ``subset_min``; re-exported by :mod:`barecuda.gpuarray`.

Arrays are indexed flat, in C order (non-contiguous inputs are copied first).
Index values are not checked against the arrays' sizes (as PyCUDA: an index out of
range reads or writes outside the array and may fault the context), so check them
on the host when they are not known to be good.  The multi_* forms move several
arrays with one launch per group of up to 16 arrays.
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

import operator

import numpy as np

from barecuda._array import core as _core
from barecuda._array import reduce as _reduce
from barecuda._array.array import GPUArray
from barecuda._kernels.cdecl import dtype_to_ctype
from barecuda._kernels.reduction import ReductionKernel

__all__ = ["take", "multi_take", "multi_put", "multi_take_put", "subset_sum", "subset_dot",
           "subset_max", "subset_min"]

_CHUNK = 16   # arrays per launch of the multi_* kernels

def _indices(name: Any, what: Any, idx: Any, one_d: Any = True) -> Any:
    if not isinstance(idx, GPUArray):
        raise TypeError(f"{name}(): {what} must be a GPUArray of integers, not {type(idx).__name__}")
    if idx.dtype.kind not in "iu":
        raise TypeError(f"{name}(): {what} must have an integer dtype, not {idx.dtype}")
    if one_d and idx.ndim != 1:
        raise ValueError(f"{name}(): {what} must be 1-dimensional, not of shape {idx.shape}")
    return idx._contiguous()


def _same_dtype(name: Any, arrays: Any, what: Any = "arrays") -> Any:
    for a in arrays:
        if not isinstance(a, GPUArray):
            raise TypeError(f"{name}(): {what} must hold GPUArrays, not {type(a).__name__}")
    dts = {a.dtype for a in arrays}
    if len(dts) > 1:
        raise TypeError(f"{name}(): {what} must share one dtype, not {sorted(map(str, dts))}")
    return arrays[0].dtype


def take(a: GPUArray, indices: GPUArray, out: GPUArray | None = None, stream: Stream | None = None) -> GPUArray:
    """take(a, indices, out=None, stream=None): ``a.ravel()[indices]`` for an integer index GPUArray.

    The result has the shape of `indices` and the dtype of `a` (or is `out`, a
    C-contiguous GPUArray of that size and dtype).  Indices are not bounds-checked.
    """
    if not isinstance(a, GPUArray) or not isinstance(indices, GPUArray):
        raise TypeError("take(): a and indices must be GPUArrays")
    idx = _indices("take", "indices", indices, one_d=False)
    src = a._contiguous(stream)
    k = _take_kernel(a.dtype, idx.dtype)
    if out is None:
        out = GPUArray(idx.shape, a.dtype, allocator=a.allocator, stream=stream)
    elif not isinstance(out, GPUArray) or out.dtype != a.dtype or out.size != idx.size \
            or not out._c:
        raise ValueError("take(): out must be a contiguous array of the indices' size and a's dtype")
    k.launch_flat(idx.size, [out.ptr, src.ptr, idx.ptr], stream)
    return out


def _take_kernel(dt: Any, idt: Any) -> Any:
    vt, it = dtype_to_ctype(dt), dtype_to_ctype(idt)
    return _core._kernel(("take", dt, idt), f"{vt} *z, {vt} *a, {it} *idx", "z[i] = a[idx[i]]",
                         "bc_take")


def _outs(name: Any, arrays: Any, out: Any, shape: Any, dtype: Any) -> Any:
    if out is None:
        if shape is None:
            raise ValueError(f"{name}(): give dest_shape (or out)")
        return [GPUArray(shape, dtype, allocator=arrays[0].allocator) for _ in arrays]
    out = list(out)
    if len(out) != len(arrays):
        raise ValueError(f"{name}(): out has {len(out)} arrays, arrays {len(arrays)}")
    if _same_dtype(name, out, "out") != dtype:
        raise TypeError(f"{name}(): out and arrays must have the same dtype")
    for o in out:
        if not o._c:
            raise ValueError(f"{name}(): every out array must be C-contiguous")
    return out


def _chunks(n: Any) -> Any:
    for start in range(0, n, _CHUNK):
        yield start, min(start + _CHUNK, n)


def _multi_kernel(kind: Any, dtype: Any, idt: Any, count: Any, with_offsets: Any = False) -> Any:
    vt, it = dtype_to_ctype(dtype), dtype_to_ctype(idt)
    params = []
    if kind == "take":
        params.append(f"{it} *sidx")
        body = [f"const {it} s = sidx[i];"] + [f"d{j}[i] = s{j}[s];" for j in range(count)]
    elif kind == "put":
        params.append(f"{it} *didx")
        body = [f"const {it} d = didx[i];"] + [f"d{j}[d] = s{j}[i];" for j in range(count)]
    else:
        params += [f"{it} *didx", f"{it} *sidx"]
        body = [f"const {it} d = didx[i]; const {it} s = sidx[i];"]
        body += [f"d{j}[d] = s{j}[s{' + o%d' % j if with_offsets else ''}];" for j in range(count)]
    params += [f"{vt} *d{j}" for j in range(count)] + [f"{vt} *s{j}" for j in range(count)]
    if with_offsets:
        params += [f"long long o{j}" for j in range(count)]
    key = ("multi_" + kind, dtype, idt, count, with_offsets)
    return _core._kernel(key, ", ".join(params), "\n".join(body), f"bc_multi_{kind}")


def _sources(name: Any, arrays: Any, stream: Any) -> Any:
    arrays = list(arrays)
    return [a._contiguous(stream) for a in arrays]


def multi_take(arrays: Sequence[GPUArray], indices: GPUArray, out: list[GPUArray] | None = None,
               stream: Stream | None = None) -> list[GPUArray]:
    """multi_take(arrays, indices, out=None, stream=None): ``[a.ravel()[indices] for a in arrays]``.

    `arrays` share one dtype; `indices` is a 1-d integer GPUArray.  Returns a list of
    new GPUArrays of the indices' shape (or fills `out`, a list of C-contiguous
    arrays of that shape and dtype).  An empty `arrays` gives [].
    """
    arrays = list(arrays)
    if not arrays:
        return []
    dtype = _same_dtype("multi_take", arrays)
    idx = _indices("multi_take", "indices", indices)
    out = _outs("multi_take", arrays, out, idx.shape, dtype)
    for o in out:
        if o.size != idx.size:
            raise ValueError(f"multi_take(): out arrays must have {idx.size} elements, not {o.size}")
    src = _sources("multi_take", arrays, stream)
    for lo, hi in _chunks(len(src)):
        k = _multi_kernel("take", dtype, idx.dtype, hi - lo)
        k.launch_flat(idx.size, [idx.ptr] + [o.ptr for o in out[lo:hi]]
                      + [s.ptr for s in src[lo:hi]], stream)
    return out


def multi_put(arrays: Sequence[GPUArray], dest_indices: GPUArray, dest_shape: _ShapeLike | None = None,
              out: list[GPUArray] | None = None, stream: Stream | None = None) -> list[GPUArray]:
    """multi_put(arrays, dest_indices, dest_shape=None, out=None, stream=None): scatter each array.

    ``out[j].ravel()[dest_indices[i]] = arrays[j].ravel()[i]`` for every i below
    ``dest_indices.size``; elements of `out` not named by an index are left as
    they were (uninitialised for new arrays of `dest_shape`).  Returns `out` (a
    list of C-contiguous GPUArrays, made when not given).
    """
    arrays = list(arrays)
    if not arrays:
        return []
    dtype = _same_dtype("multi_put", arrays)
    idx = _indices("multi_put", "dest_indices", dest_indices)
    for a in arrays:
        if a.size < idx.size:
            raise ValueError(f"multi_put(): arrays need at least {idx.size} elements, "
                             f"one has {a.size}")
    out = _outs("multi_put", arrays, out, dest_shape, dtype)
    src = _sources("multi_put", arrays, stream)
    for lo, hi in _chunks(len(src)):
        k = _multi_kernel("put", dtype, idx.dtype, hi - lo)
        k.launch_flat(idx.size, [idx.ptr] + [o.ptr for o in out[lo:hi]]
                      + [s.ptr for s in src[lo:hi]], stream)
    return out


def multi_take_put(arrays: Sequence[GPUArray], dest_indices: GPUArray, src_indices: GPUArray,
                   dest_shape: _ShapeLike | None = None, out: list[GPUArray] | None = None,
                   stream: Stream | None = None, src_offsets: Sequence[int] | None = None) -> list[GPUArray]:
    """multi_take_put(arrays, dest_indices, src_indices, dest_shape=None, out=None, stream=None, src_offsets=None)

    ``out[j].ravel()[dest_indices[i]] = arrays[j].ravel()[src_indices[i] + src_offsets[j]]``
    for every i: a gather and a scatter in one pass.  The two index arrays are 1-d,
    of one shape and integer dtype; `src_offsets` (ints, one per array) default to
    0.  Returns `out` (made of `dest_shape` when not given).
    """
    arrays = list(arrays)
    if not arrays:
        return []
    dtype = _same_dtype("multi_take_put", arrays)
    didx = _indices("multi_take_put", "dest_indices", dest_indices)
    sidx = _indices("multi_take_put", "src_indices", src_indices)
    if didx.dtype != sidx.dtype:
        raise TypeError("multi_take_put(): src_indices and dest_indices must have the same dtype")
    if didx.shape != sidx.shape:
        raise ValueError("multi_take_put(): src_indices and dest_indices must have the same shape")
    if src_offsets is not None:
        src_offsets = [operator.index(o) for o in src_offsets]
        if len(src_offsets) != len(arrays):
            raise ValueError("multi_take_put(): src_offsets must have one entry per array")
    out = _outs("multi_take_put", arrays, out, dest_shape, dtype)
    src = _sources("multi_take_put", arrays, stream)
    for lo, hi in _chunks(len(src)):
        k = _multi_kernel("take_put", dtype, didx.dtype, hi - lo, src_offsets is not None)
        flat = [didx.ptr, sidx.ptr] + [o.ptr for o in out[lo:hi]] + [s.ptr for s in src[lo:hi]]
        if src_offsets is not None:
            flat += src_offsets[lo:hi]
        k.launch_flat(didx.size, flat, stream)
    return out


def _subset_check(name: Any, subset: Any, arrays: Any) -> Any:
    for x in arrays:
        if not isinstance(x, GPUArray):
            raise TypeError(f"{name}(): arrays must be GPUArrays, not {type(x).__name__}")
    return _indices(name, "subset", subset, one_d=False)


def subset_sum(subset: GPUArray, a: GPUArray, dtype: npt.DTypeLike | None = None, stream: Stream | None = None,
               allocator: _Allocator | None = None) -> GPUArray:
    """subset_sum(subset, a, dtype=None, stream=None, allocator=None): ``sum(a.ravel()[subset])``.

    A 0-d GPUArray, in `dtype` or NumPy's accumulator dtype (as ``gpuarray.sum``),
    computed in one pass without a gathered copy; `allocator` supplies the result's
    memory.  `subset` is an integer GPUArray (not bounds-checked).
    """
    idx = _subset_check("subset_sum", subset, (a,))
    res = _reduce._sum_dtype(a.dtype) if dtype is None else np.dtype(dtype)
    acc = np.dtype(np.float32) if res == np.float16 else res
    k = _subset_sum_kernel(idx.dtype, a.dtype, acc)
    src = a._contiguous(stream)
    r: GPUArray = k._run([idx.ptr, src.ptr], idx.size, None, None, stream, allocator)
    return r if acc == res else r.astype(res, stream)


def _subset_sum_kernel(idt: Any, dt: Any, acc: Any) -> Any:
    key = ("subset_sum", idt, dt, acc)
    k = _reduce._reductions.get(key)
    if k is None:
        ct = dtype_to_ctype(acc)
        k = _reduce._reductions[key] = ReductionKernel(
            acc, "0", "a || b" if acc == np.bool_ else "a + b", f"bc_cast<{ct}>(x[s[i]])",
            f"{dtype_to_ctype(idt)} *s, {dtype_to_ctype(dt)} *x", name="bc_subset_sum")
    return k


def subset_dot(subset: GPUArray, a: GPUArray, b: GPUArray, dtype: npt.DTypeLike | None = None,
               stream: Stream | None = None) -> GPUArray:
    """subset_dot(subset, a, b, dtype=None, stream=None): ``sum(a[subset] * b[subset])`` as a 0-d GPUArray."""
    idx = _subset_check("subset_dot", subset, (a, b))
    return _reduce.dot(take(a, idx, stream=stream), take(b, idx, stream=stream), dtype, stream)  # type: ignore[no-any-return]


def subset_max(subset: GPUArray, a: GPUArray, stream: Stream | None = None) -> GPUArray:
    """subset_max(subset, a, stream=None): ``max(a.ravel()[subset])`` as a 0-d GPUArray."""
    idx = _subset_check("subset_max", subset, (a,))
    return _reduce.max(take(a, idx, stream=stream), stream)  # type: ignore[no-any-return]


def subset_min(subset: GPUArray, a: GPUArray, stream: Stream | None = None) -> GPUArray:

    """subset_min(subset, a, stream=None): ``min(a.ravel()[subset])`` as a 0-d GPUArray."""
    idx = _subset_check("subset_min", subset, (a,))
    return _reduce.min(take(a, idx, stream=stream), stream)  # type: ignore[no-any-return]
