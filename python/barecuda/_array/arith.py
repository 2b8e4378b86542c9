# SPDX-License-Identifier: MIT
"""Elementwise arithmetic on GPUArrays: NumPy's type resolution for an operation, the
kernels of binary and unary operators (the Python path behind GPUArray's ``+``,
``-``, ``*``, ``==``, ``abs`` ... and its in-place and ``out=`` forms, after the C
fast paths of ``_ELEMENTWISE``/``_UNARY``), and ``if_positive``, ``maximum``,
``minimum``; re-exported by :mod:`barecuda.gpuarray`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from barecuda import _driver as _cdrv
from barecuda._array import core as _core
from barecuda._array import strided as _strided
from barecuda._array.array import GPUArray, _empty_as, _new_array, _result_as
from barecuda._array.ops import (_BINOPS, _COMPARE, _binop_expr, _compute_dtype,  # noqa: F401
                                 _result_dtype, _types)
from barecuda._kernels.cdecl import dtype_to_ctype

if TYPE_CHECKING:
    from barecuda._driver import Stream

__all__ = ["if_positive", "maximum", "minimum"]

def _binary_kernel(op: str, xd: np.dtype[Any], yd: Any, scalar: Any, reverse: bool,
                   res: np.dtype[Any], cd: np.dtype[Any]) -> Any:
    """Kernel z = op(x, y) (y an array of yd, or a scalar of the compute type cd);
    `scalar` "x0"/"y0": x or y is a 0-d array, its one element used for every i."""
    key = ("bin", op, xd, yd, scalar, reverse, res, cd)
    k = _core._kernels.get(key)
    if k is None:
        ct = _core._ct(cd)
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
        k = _core._kernel(key, f"{zt} *z, {dtype_to_ctype(xd)} *x, {sdecl}", op_src, f"bc_{op}")
    return k


_PY_SCALARS = (int, float, complex, bool, np.generic)


_WEAK_SCALARS = (float, int, complex)


def _binary(op: str, x: GPUArray, y: Any, reverse: bool = False, out: GPUArray | None = None,
            stream: Stream | None = None) -> GPUArray:
    z: GPUArray
    if out is None:
        z = _ELEMENTWISE[reverse][op](x, y, stream)   # the C fast path, or None
        if z is not None:
            return z
    ty = type(y)
    if ty is GPUArray or isinstance(y, GPUArray):    # a subclass's instance too
        if x.shape != y.shape and (x.shape == () or y.shape == ()):
            return _binary_0d(op, y, x, out, stream) if reverse else _binary_0d(op, x, y, out, stream)
        if x.shape != y.shape:
            raise ValueError(f"operands could not be used together: shapes {x.shape} and {y.shape} "
                             "differ (broadcasting is not supported)")
        res = _result_dtype(op, x.dtype, y.dtype)
        cd = _compute_dtype(op, x.dtype, y.dtype, res)
        k = _binary_kernel(op, x.dtype, y.dtype, False, False, res, cd)
        x, y = _unclash(x, out, stream), _unclash(y, out, stream)
        # both dense in one order (itemsizes may differ): one flat index walks x, y and z
        if ((x._c and y._c) or (x._f and y._f)) and _dense_out(out, x, res):
            if out is None:
                z = _result_as(x, res, stream)
                if x.size:
                    k.launch_flat(x.size, [z.ptr, x.ptr, y.ptr], stream)
                    _remember(_ELEMENTWISE[False][op], x.dtype, y.dtype, res, k)
                return z
            return _to_out(k, [x.ptr, y.ptr], x, res, out, op, stream)
        if out is not None:
            _check_out(out, x, res, op)
        r = _strided.binary(op, x, y, "a", False, res, cd, out, stream)
        if r is not None:
            if r[1] is not None:
                _remember(_ELEMENTWISE[False][op], x.dtype, y.dtype, res, r[1], True)
            return r[0]  # type: ignore[no-any-return]
        x = x._contiguous(stream)
        y = y._contiguous(stream)
        if out is None:
            z = _result_as(x, res, stream)
            if x.size:
                k.launch_flat(x.size, [z.ptr, x.ptr, y.ptr], stream)
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
            return NotImplemented  # type: ignore[no-any-return]
    res = _result_dtype(op, x.dtype, y)
    if op == "power" and not reverse and y == 2 and ty is int and x.dtype == np.bool_:
        res = np.dtype(np.int8)   # NumPy's x ** 2 is np.square(x), whose bool loop gives int8
    cd = _compute_dtype(op, x.dtype, y, res)
    k = _binary_kernel(op, x.dtype, None, True, reverse, res, cd)
    s = _core._scalar_flat(k, 2, y)
    if op == "power" and not reverse and cd.kind in "iu" and y < 0:
        raise ValueError("Integers to negative integer powers are not allowed.")
    x = _unclash(x, out, stream)
    weak = ty in _WEAK_SCALARS and op != "power" and not (ty is int and op in _COMPARE)
    if not (x._c or x._f) or not _dense_out(out, x, res):
        if out is not None:
            _check_out(out, x, res, op)
        r = _strided.binary(op, x, y, "s", reverse, res, cd, out, stream)
        if r is not None:
            if weak and r[1] is not None:
                _remember(_ELEMENTWISE[reverse][op], x.dtype, ty, res, r[1], True)
            return r[0]  # type: ignore[no-any-return]
        x = x._contiguous(stream)
    if out is None:
        z = _result_as(x, res, stream)
        if x.size:
            k.launch_flat(x.size, [z.ptr, x.ptr] + s, stream)
            if weak:
                # the kernel depends on the scalar's type only (NumPy 2's weak scalars)
                _remember(_ELEMENTWISE[reverse][op], x.dtype, ty, res, k)
        return z
    return _to_out(k, [x.ptr] + s, x, res, out, op, stream)


def _binary_0d(op: str, x: GPUArray, y: GPUArray, out: GPUArray | None,
               stream: Stream | None) -> GPUArray:
    """op(x, y) where one of x, y is 0-d and the other not: the 0-d array acts as a
    scalar kept on the device (its dtype counts in the promotion, as a NumPy 0-d
    array's does)."""
    mode, big = ("y0", x) if y.shape == () else ("x0", y)
    res = _result_dtype(op, x.dtype, y.dtype)
    cd = _compute_dtype(op, x.dtype, y.dtype, res)
    k = _binary_kernel(op, x.dtype, y.dtype, mode, False, res, cd)
    x, y = _unclash(x, out, stream), _unclash(y, out, stream)
    big = x if mode == "y0" else y
    if not (big._c or big._f) or not _dense_out(out, big, res):
        if out is not None:
            _check_out(out, big, res, op)
        small = y if mode == "y0" else x
        r = _strided.binary(op, big, small, "0", mode == "x0", res, cd, out, stream)
        if r is not None:
            return r[0]  # type: ignore[no-any-return]
        big = big._contiguous(stream)
        if mode == "y0":
            x = big
        else:
            y = big
    if out is None:
        z: GPUArray = _result_as(big, res, stream)
        if big.size:
            k.launch_flat(big.size, [z.ptr, x.ptr, y.ptr], stream)
        return z
    return _to_out(k, [x.ptr, y.ptr], big, res, out, op, stream)


def _remember(table: Any, xdt: np.dtype[Any], key: Any, res: np.dtype[Any], k: Any,
              strided: bool = False) -> None:
    """Let the C `table` launch kernel k for these operands from now on (it checks
    that k's context is still current).  strided: k is the 1-d strided kernel of
    _strided (z dense, 32-bit element strides), which the table runs on 1-d views."""
    if k._hot is not None:
        table.put(xdt, key, res, k._hot, strided)


def _dense_out(out: GPUArray | None, x: GPUArray, res: np.dtype[Any]) -> bool:
    """Whether a flat-index kernel over contiguous x can write `out` (None: a new
    array) directly: out has res's dtype and x's strides."""
    return out is None or (isinstance(out, GPUArray) and out.dtype == res
                           and out.strides == x.strides and (out._c or out._f))


def _unclash(a: Any, out: GPUArray | None, stream: Stream | None) -> Any:
    """a, or a copy of it when it shares memory with `out` other than element for
    element (NumPy computes such operations as if from copies of the operands)."""
    if out is not None and isinstance(out, GPUArray) and _strided.clash(a, out):
        return a.copy(stream)
    return a


class _Tables(dict[str, Any]):
    """op name -> its _OpTable, made on first use."""

    def __init__(self, kind: Literal["elementwise", "unary", "reduce"], suffix: str = "") -> None:
        super().__init__()
        self.kind, self.suffix = kind, suffix

    def __missing__(self, op: str) -> Any:
        t = self[op] = _cdrv._OpTable(GPUArray, self.kind, op + self.suffix)
        return t


# the C small-op fast paths: `x op y` ([0]) and `y op x` for a scalar y ([1]), unary ops
# (the one for sums, _array.reduce._SUMS, is made with GPUArray)
_ELEMENTWISE = (_Tables("elementwise"), _Tables("elementwise", " (reflected)"))
_UNARY = _Tables("unary")


def _to_out(k: Any, flat: list[Any], x: GPUArray, res: np.dtype[Any], out: GPUArray, op: str,
            stream: Stream | None) -> GPUArray:
    """Run kernel k writing into `out` (in-place forms and out= arguments)."""
    _check_out(out, x, res, op)
    if x.size == 0:
        return out  # type: ignore[no-any-return]
    if res == out.dtype and out.strides == x.strides and (out._c or out._f):
        k.launch_flat(x.size, [out.ptr] + flat, stream)
        return out  # type: ignore[no-any-return]
    tmp = _empty_as(x, res, stream)
    k.launch_flat(x.size, [tmp.ptr] + flat, stream)
    _core._assign(out, tmp, stream)
    return out  # type: ignore[no-any-return]


def _check_out(out: Any, x: GPUArray, res: np.dtype[Any], op: str) -> None:
    """TypeError/ValueError unless `out` can take op's result (x's shape, dtype res)."""
    if not isinstance(out, GPUArray):
        raise TypeError(f"out must be a GPUArray, not {type(out).__name__}")
    if out.shape != x.shape:
        raise ValueError(f"out has shape {out.shape}, the result {x.shape}")
    if res != out.dtype and not np.can_cast(res, out.dtype, "same_kind"):
        raise TypeError(f"Cannot cast {op} output from dtype('{res}') to dtype('{out.dtype}') "
                        "with casting rule 'same_kind'")


def _unary_expr(op: str, dt: np.dtype[Any]) -> str:
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


def _unary_kernel(op: str, dt: np.dtype[Any]) -> Any:
    key = ("un", op, dt)
    k = _core._kernels.get(key)
    if k is None:
        res = _result_dtype(op, dt)
        ct = _core._ct(dt)
        expr = _unary_expr(op, dt)
        zt = dtype_to_ctype(res)
        k = _core._kernel(key, f"{zt} *z, {dtype_to_ctype(dt)} *x",
                       f"const {ct} a = bc_cast<{ct}>(x[i]); z[i] = bc_cast<{zt}>({expr})", f"bc_{op}")
    return k


def _unary(op: str, x: GPUArray, out: GPUArray | None = None,
           stream: Stream | None = None) -> GPUArray:
    z: GPUArray
    if out is None:
        z = _UNARY[op](x, stream)
        if z is not None:
            return z
    res = _result_dtype(op, x.dtype)
    k = _unary_kernel(op, x.dtype)
    if not (x._c or x._f):
        x = x._contiguous(stream)
    if out is None:
        z = _result_as(x, res, stream)
        if x.size:
            k.launch_flat(x.size, [z.ptr, x.ptr], stream)
            _remember(_UNARY[op], x.dtype, None, res, k)
        return z
    return _to_out(k, [x.ptr], x, res, out, op, stream)


# ------------------------------------------------------------------ more elementwise (public)

def _if_positive_kernel(cdt: np.dtype[Any], vdt: np.dtype[Any]) -> Any:
    ct, vt = dtype_to_ctype(cdt), dtype_to_ctype(vdt)
    return _core._kernel(("if_positive", cdt, vdt), f"{vt} *z, {ct} *c, {vt} *t, {vt} *e",
                      f"z[i] = bc_cast<{_core._ct(cdt)}>(c[i]) > bc_cast<{_core._ct(cdt)}>(0) ? t[i] : e[i]",
                      "bc_if_positive")


def if_positive(criterion: GPUArray, then_: GPUArray, else_: GPUArray,
                out: GPUArray | None = None, stream: Stream | None = None) -> GPUArray:
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
    return _core._assign(out, tmp, stream)  # type: ignore[no-any-return]


def maximum(a: Any, b: Any, out: GPUArray | None = None, stream: Stream | None = None) -> GPUArray:
    """Elementwise maximum (NaN propagates, as NumPy)."""
    if not isinstance(a, GPUArray):
        a, b = b, a
    return _binary("maximum", a, b, out=out, stream=stream)


def minimum(a: Any, b: Any, out: GPUArray | None = None, stream: Stream | None = None) -> GPUArray:

    """Elementwise minimum (NaN propagates, as NumPy)."""
    if not isinstance(a, GPUArray):
        a, b = b, a
    return _binary("minimum", a, b, out=out, stream=stream)
