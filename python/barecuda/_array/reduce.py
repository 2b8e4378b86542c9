# SPDX-License-Identifier: MIT
"""Reductions of a whole GPUArray to a 0-d GPUArray: ``sum``, ``max``, ``min``,
``mean``, ``dot`` and ``vdot``, their kernels, and the kernel cache ``_reductions``
that the reductions of other modules (any/all, subset_*) share; re-exported by
:mod:`barecuda.gpuarray`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from barecuda import _driver as _cdrv
from barecuda._array.array import GPUArray
from barecuda._kernels import arrays as _karrays
from barecuda._kernels.cdecl import dtype_to_ctype
from barecuda._kernels.reduction import ReductionKernel

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy.typing as npt

    from barecuda._driver import Stream

__all__ = ["sum", "max", "min", "mean", "dot", "vdot"]

_reductions: dict[Any, Any] = {}


def _reduction(key: Any, make: Callable[[], Any]) -> Any:
    k = _reductions.get(key)
    if k is None:
        k = _reductions[key] = make()
    return k


_sum_dtypes: dict[np.dtype[Any], np.dtype[Any]] = {}


def _sum_dtype(dt: np.dtype[Any]) -> np.dtype[Any]:
    r = _sum_dtypes.get(dt)
    if r is None:
        r = _sum_dtypes[dt] = np.add.reduce(np.zeros(1, dt)).dtype
    return r


def _sum_kernel(dt: np.dtype[Any], acc: np.dtype[Any]) -> Any:
    return _reduction(("sum", dt, acc), lambda: ReductionKernel(
        acc, "0", "a + b" if acc != np.bool_ else "a || b", f"bc_cast<{dtype_to_ctype(acc)}>(x[i])",
        f"{dtype_to_ctype(dt)} *x", name="bc_sum"))


def _minmax_kernel(which: str, dt: np.dtype[Any]) -> Any:
    acc = np.dtype(np.float32) if dt == np.float16 else dt
    ct = dtype_to_ctype(acc)
    cmp = ">=" if which == "max" else "<="
    return _reduction((which, dt), lambda: ReductionKernel(
        acc, _extreme(acc, which), f"((a {cmp} b) || a != a) ? a : b",
        f"bc_cast<{ct}>(x[i])", f"{dtype_to_ctype(dt)} *x", name=f"bc_{which}"))


def _dot_kernel(adt: np.dtype[Any], bdt: np.dtype[Any], acc: np.dtype[Any], conj_a: bool) -> Any:
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


def sum(a: GPUArray, dtype: npt.DTypeLike | None = None, stream: Stream | None = None,
        allocator: Callable[[int], Any] | None = None) -> GPUArray:
    """The sum of all elements as a 0-d GPUArray (NumPy's accumulator dtype)."""
    if not isinstance(a, GPUArray):
        raise TypeError(f"sum() takes a GPUArray, not {type(a).__name__}")
    if dtype is None and allocator is None:
        z: GPUArray | None = _SUMS(a, stream)   # the C fast path, or None
        if z is not None:
            return z
    if dtype is None:
        k = _plain_sums.get(a.dtype)
        if k is not None and (a._c or a._f):   # the common case, no conversions
            z1: GPUArray = k._run([a.ptr], a.size, None, None, stream, allocator)
            if a.size:
                _SUMS.put(a.dtype, None, k.dtype_out, k._hot)
            return z1
    res = _sum_dtype(a.dtype) if dtype is None else np.dtype(dtype)
    acc = np.dtype(np.float32) if res == np.float16 else res
    src = a._contiguous(stream)
    k = _sum_kernel(a.dtype, acc)
    if dtype is None and acc == res:
        _plain_sums[a.dtype] = k
    r: GPUArray = k._run([src.ptr], src.size, None, None, stream, allocator)
    return r if acc == res else r.astype(res, stream)


_plain_sums: dict[np.dtype[Any], Any] = {}   # input dtype -> its sum kernel when the result needs no cast

# the C fast path of sum() (those of the operators are in arith)
_SUMS = _cdrv._OpTable(GPUArray, "reduce", "sum")


def _forget_reductions() -> None:
    """The reductions' launch variants changed (reduction._tuning): make the
    kernels of sum, min, max and dot again on next use."""
    global _SUMS
    _reductions.clear()
    _plain_sums.clear()
    _SUMS = _cdrv._OpTable(GPUArray, "reduce", "sum")


_karrays.on_tuning(_forget_reductions)


def _minmax(which: str, a: GPUArray, stream: Stream | None) -> GPUArray:
    if not isinstance(a, GPUArray):
        raise TypeError(f"{which}() takes a GPUArray, not {type(a).__name__}")
    if a.size == 0:
        raise ValueError(f"zero-size array to reduction operation {'maximum' if which == 'max' else 'minimum'} "
                         "which has no identity")
    dt = a.dtype
    acc = np.dtype(np.float32) if dt == np.float16 else dt
    src = a._contiguous(stream)
    k = _minmax_kernel(which, dt)
    r: GPUArray = k._run([src.ptr], src.size, None, None, stream, None)
    return r if acc == dt else r.astype(dt, stream)


def _extreme(dt: np.dtype[Any], which: str) -> str:
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


def max(a: GPUArray, stream: Stream | None = None) -> GPUArray:
    """The largest element as a 0-d GPUArray (NaN if any, as NumPy)."""
    return _minmax("max", a, stream)


def min(a: GPUArray, stream: Stream | None = None) -> GPUArray:
    """The smallest element as a 0-d GPUArray (NaN if any, as NumPy)."""
    return _minmax("min", a, stream)


def mean(a: GPUArray, dtype: npt.DTypeLike | None = None, stream: Stream | None = None) -> GPUArray:
    """The mean as a 0-d GPUArray (NumPy's dtype: float64 for integers)."""
    if dtype is None:
        dtype = np.mean(np.zeros(1, a.dtype)).dtype
    dtype = np.dtype(dtype)
    s = sum(a, dtype if dtype != np.float16 else np.float32, stream)
    r = s / (a.size if a.size else float("nan"))
    return r if r.dtype == dtype else r.astype(dtype, stream)


def _dot(a: GPUArray, b: GPUArray, dtype: npt.DTypeLike | None, stream: Stream | None,
         conj_a: bool, allocator: Any = None) -> GPUArray:
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
    r: GPUArray = k._run([x.ptr, y.ptr], x.size, None, None, stream, allocator)
    return r if acc == res else r.astype(res, stream)


def dot(a: GPUArray, b: GPUArray, dtype: npt.DTypeLike | None = None,
        stream: Stream | None = None, allocator: Any = None) -> GPUArray:
    """sum(a * b) as a 0-d GPUArray (no conjugation); its memory comes from
    `allocator` (a callable taking a byte count) when one is given."""
    return _dot(a, b, dtype, stream, False, allocator)


def vdot(a: GPUArray, b: GPUArray, dtype: npt.DTypeLike | None = None,
         stream: Stream | None = None) -> GPUArray:

    """sum(conj(a) * b) as a 0-d GPUArray."""
    return _dot(a, b, dtype, stream, True)
