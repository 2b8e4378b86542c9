# SPDX-License-Identifier: MIT
"""Elementwise math on GPUArrays, as ``pycuda.cumath``: fabs ceil floor exp log log10
sqrt sin cos tan asin acos atan sinh cosh tanh fmod frexp ldexp modf.

Each takes keyword `stream=` and `out=`; the unary functions also take either
one positionally after the array (a Stream or stream handle is the stream, a
GPUArray the output), as PyCUDA's do.  Output dtypes follow NumPy's ufuncs (float16 and
float32 in, same out; integers in, float out as NumPy chooses; complex where NumPy
supports it, TypeError where it does not).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from barecuda import gpuarray as _ga
from barecuda._kernels.cdecl import dtype_to_ctype
from barecuda.driver import Stream  # noqa: F401 (PyCUDA's cumath has it: cumath.Stream)

if TYPE_CHECKING:
    from typing import Protocol

    from barecuda.gpuarray import GPUArray

    class _UnaryFunc(Protocol):
        def __call__(self, array: GPUArray, stream_or_out: Stream | GPUArray | int | None = None, *,
                     stream: Stream | None = None, out: GPUArray | None = None) -> GPUArray: ...

    # made by _make_unary below (a loop over _UNARY), declared here for type checkers
    fabs: _UnaryFunc
    ceil: _UnaryFunc
    floor: _UnaryFunc
    exp: _UnaryFunc
    log: _UnaryFunc
    log10: _UnaryFunc
    sqrt: _UnaryFunc
    sin: _UnaryFunc
    cos: _UnaryFunc
    tan: _UnaryFunc
    asin: _UnaryFunc
    acos: _UnaryFunc
    atan: _UnaryFunc
    sinh: _UnaryFunc
    cosh: _UnaryFunc
    tanh: _UnaryFunc

__all__ = ["fabs", "ceil", "floor", "exp", "log", "log10", "sqrt", "sin", "cos", "tan", "asin",
           "acos", "atan", "sinh", "cosh", "tanh", "fmod", "frexp", "ldexp", "modf"]

# name -> NumPy ufunc name
_UNARY = {"fabs": "fabs", "ceil": "ceil", "floor": "floor", "exp": "exp", "log": "log",
          "log10": "log10", "sqrt": "sqrt", "sin": "sin", "cos": "cos", "tan": "tan",
          "asin": "arcsin", "acos": "arccos", "atan": "arctan", "sinh": "sinh", "cosh": "cosh",
          "tanh": "tanh"}
_COMPLEX_OK = {"exp", "log", "log10", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh"}
_kernels: dict[Any, Any] = {}


def _out_dtype(ufunc: Any, dt: Any, *more: Any) -> np.dtype[Any]:
    try:
        return getattr(np, ufunc)(np.empty(0, dt), *[np.empty(0, m) for m in more]).dtype  # type: ignore[no-any-return]
    except TypeError as exc:
        raise TypeError(f"{ufunc} is not supported for {dt}: {exc}") from None


def _func_kernel(name: Any, dt: Any) -> Any:
    key = (name, dt)
    k = _kernels.get(key)
    if k is None:
        res = _out_dtype(_UNARY.get(name, "sqrt"), dt)
        if res.kind == "c":
            if name not in _COMPLEX_OK:
                raise TypeError(f"cumath.{name} does not support complex arrays")
            ct = dtype_to_ctype(res)
            expr = f"barecuda::{name}(a)"
        else:
            ct = "float" if res.itemsize <= 4 else "double"
            expr = f"{name}{'f' if ct == 'float' else ''}(a)"
        k = _kernels[key] = _ga.ElementwiseKernel(  # type: ignore[attr-defined]
            f"{dtype_to_ctype(res)} *z, {dtype_to_ctype(dt)} *x",
            f"const {ct} a = bc_cast<{ct}>(x[i]); z[i] = bc_cast<{dtype_to_ctype(res)}>({expr})",
            f"bc_cumath_{name}")
    return k


def _prepare(name: str, arrays: list[GPUArray], out: GPUArray | None, out_dtype: np.dtype[Any],
             stream: Stream | None) -> tuple[list[GPUArray], GPUArray, GPUArray | None]:
    for a in arrays:
        if not isinstance(a, _ga.GPUArray):
            raise TypeError(f"cumath.{name} takes GPUArrays, not {type(a).__name__}")
    first = arrays[0]
    for a in arrays[1:]:
        if a.shape != first.shape:
            raise ValueError(f"cumath.{name}: shapes differ ({first.shape} and {a.shape})")
    srcs = [a._contiguous(stream) if not a._c else a for a in arrays]
    if out is None:
        return srcs, _ga.GPUArray(first.shape, out_dtype, allocator=first.allocator, stream=stream), None
    if not isinstance(out, _ga.GPUArray):
        raise TypeError(f"cumath.{name}: out must be a GPUArray, not {type(out).__name__}")
    if out.shape != first.shape:
        raise ValueError(f"cumath.{name}: out has shape {out.shape}, the result {first.shape}")
    if out.dtype != out_dtype:
        raise TypeError(f"cumath.{name}: out has dtype {out.dtype}, the result is {out_dtype}")
    if out._c:
        return srcs, out, None
    return srcs, _ga.GPUArray(first.shape, out_dtype, stream=stream), out


def _finish(tmp: GPUArray, final: GPUArray | None, stream: Stream | None) -> GPUArray:
    if final is not None:
        _ga._strided_copy(final, tmp, stream)
        return final
    return tmp


def _stream_or_out(name: Any, stream_or_out: Any, stream: Any, out: Any) -> tuple[Any, Any]:
    """Split PyCUDA's positional `stream_or_out` into (stream, out)."""
    if stream_or_out is None:
        return stream, out
    if isinstance(stream_or_out, _ga.GPUArray):
        if out is not None:
            raise TypeError(f"cumath.{name}: out given twice (positionally and as out=)")
        return stream, stream_or_out
    if stream is not None:
        raise TypeError(f"cumath.{name}: stream given twice (positionally and as stream=)")
    return stream_or_out, out


def _make_unary(name: str) -> _UnaryFunc:
    def f(array: GPUArray, stream_or_out: Stream | GPUArray | int | None = None, *,
          stream: Stream | None = None, out: GPUArray | None = None) -> GPUArray:
        stream, out = _stream_or_out(name, stream_or_out, stream, out)
        if not isinstance(array, _ga.GPUArray):
            raise TypeError(f"cumath.{name} takes a GPUArray, not {type(array).__name__}")
        k = _func_kernel(name, array.dtype)
        res = _out_dtype(_UNARY.get(name, "sqrt"), array.dtype)
        (x,), z, final = _prepare(name, [array], out, res, stream)
        k.launch_flat(x.size, [z.ptr, x.ptr], stream)
        return _finish(z, final, stream)
    f.__name__ = name
    f.__qualname__ = name
    like = _UNARY.get(name, "sqrt")
    f.__doc__ = (f"{name}(array, stream_or_out=None, *, stream=None, out=None)\n\nElementwise "
                 f"{name} (as numpy.{like}) of a GPUArray, as a new GPUArray or into "
                 "out (a GPUArray of the result's shape and dtype); `stream_or_out` is either, "
                 "as PyCUDA takes it.")
    return f


for _n in _UNARY:
    globals()[_n] = _make_unary(_n)
del _n


def _make_unary_array_func(name: str) -> _UnaryFunc:
    """PyCUDA's factory of cumath's functions: ``f(array, stream_or_out=None, *,
    stream=None, out=None)`` applying the CUDA math function `name` (``namef`` for
    float32 and smaller) elementwise.  Names cumath has keep their NumPy dtypes; any
    other real function of one argument (``erf``, ``expm1``, ``cbrt`` ...) gets the
    result dtype numpy.sqrt would give (complex arrays: TypeError)."""
    return _make_unary(name)


def _real_only(name: Any, dt: Any) -> None:
    if dt.kind == "c":
        raise TypeError(f"cumath.{name} does not support complex arrays")


def fmod(arg: GPUArray, mod: Any, stream: Stream | None = None,
         out: GPUArray | None = None) -> GPUArray:
    """fmod(arg, mod, stream=None, out=None): elementwise C fmod (sign of arg), as numpy.fmod;
    mod is a GPUArray of arg's shape or a number."""
    if not isinstance(arg, _ga.GPUArray):
        raise TypeError(f"cumath.fmod takes GPUArrays, not {type(arg).__name__}")
    _real_only("fmod", arg.dtype)
    scalar = not isinstance(mod, _ga.GPUArray)
    if scalar:
        res = np.fmod(np.empty(0, arg.dtype), mod).dtype
        mdt = res
    else:
        _real_only("fmod", mod.dtype)
        res = _out_dtype("fmod", arg.dtype, mod.dtype)
        mdt = mod.dtype
    ct = "float" if res == np.float16 else dtype_to_ctype(res)
    expr = "barecuda::mod_int(a, b)" if res.kind in "iu" else "fmod(a, b)"
    if res.kind in "iu":
        # C's remainder (sign of the dividend), 0 for a zero divisor, as NumPy.
        expr = "(b == 0 ? (" + ct + ")0 : (" + ct + ")(a % b))"
    if res.kind == "b":
        expr = "(b ? (bool)0 : (bool)0)"
    key = ("fmod", arg.dtype, mdt, scalar)
    k = _kernels.get(key)
    if k is None:
        mdecl = f"{dtype_to_ctype(mdt)} {'m' if scalar else '*m'}"
        mv = "m" if scalar else "m[i]"
        k = _kernels[key] = _ga.ElementwiseKernel(  # type: ignore[attr-defined]
            f"{dtype_to_ctype(res)} *z, {dtype_to_ctype(arg.dtype)} *x, {mdecl}",
            f"const {ct} a = bc_cast<{ct}>(x[i]); const {ct} b = bc_cast<{ct}>({mv}); "
            f"z[i] = bc_cast<{dtype_to_ctype(res)}>({expr})", "bc_cumath_fmod")
    arrays = [arg] if scalar else [arg, mod]
    srcs, z, final = _prepare("fmod", arrays, out, res, stream)
    flat = [z.ptr] + [s.ptr for s in srcs]
    if scalar:
        flat += _ga._scalar_flat(k, 2, mod)
    k.launch_flat(arg.size, flat, stream)
    return _finish(z, final, stream)


def _float_dtype(name: Any, dt: Any) -> np.dtype[Any]:
    _real_only(name, dt)
    if dt.kind != "f":
        return _out_dtype("modf", dt)
    return dt  # type: ignore[no-any-return]


def frexp(arg: GPUArray, stream: Stream | None = None) -> tuple[GPUArray, GPUArray]:
    """frexp(arg, stream=None) -> (significands, exponents): arg = s * 2**e, 0.5 <= |s| < 1,
    exponents as int32 (numpy.frexp)."""
    if not isinstance(arg, _ga.GPUArray):
        raise TypeError(f"cumath.frexp takes a GPUArray, not {type(arg).__name__}")
    res = _float_dtype("frexp", arg.dtype)
    ct = "float" if res.itemsize <= 4 else "double"
    key = ("frexp", arg.dtype)
    k = _kernels.get(key)
    if k is None:
        k = _kernels[key] = _ga.ElementwiseKernel(  # type: ignore[attr-defined]
            f"{dtype_to_ctype(res)} *z, int *e, {dtype_to_ctype(arg.dtype)} *x",
            f"int ex = 0; const {ct} a = bc_cast<{ct}>(x[i]); const {ct} s = frexp(a, &ex); "
            f"z[i] = bc_cast<{dtype_to_ctype(res)}>(s); e[i] = (isinf(a) || isnan(a)) ? 0 : ex",
            "bc_cumath_frexp")
    (x,), z, _ = _prepare("frexp", [arg], None, res, stream)
    e = _ga.GPUArray(arg.shape, np.int32, allocator=arg.allocator, stream=stream)
    k.launch_flat(x.size, [z.ptr, e.ptr, x.ptr], stream)
    return z, e


def ldexp(significand: GPUArray, exponent: Any, stream: Stream | None = None,
          out: GPUArray | None = None) -> GPUArray:
    """ldexp(significand, exponent, stream=None, out=None): significand * 2**exponent.

    `exponent` is a GPUArray of the same shape or a number; floating exponents are
    truncated toward zero (C's conversion to int, as PyCUDA's kernel does; NaN
    counts as 0), huge ones saturate.  TypeError for complex exponents."""
    if not isinstance(significand, _ga.GPUArray):
        raise TypeError(f"cumath.ldexp takes GPUArrays, not {type(significand).__name__}")
    res = _float_dtype("ldexp", significand.dtype)
    scalar = not isinstance(exponent, _ga.GPUArray)
    if not scalar and exponent.dtype.kind not in "iubf":
        raise TypeError(f"cumath.ldexp: exponent must be real numbers, not {exponent.dtype}")
    if scalar:
        if isinstance(exponent, (complex, np.complexfloating)) or \
                not isinstance(exponent, (int, float, np.integer, np.floating, np.bool_)):
            raise TypeError(f"cumath.ldexp: exponent must be a GPUArray or a real number, "
                            f"not {type(exponent).__name__}")
        if exponent != exponent:
            exponent = 0
        exponent = int(max(-100000, min(100000, exponent)))
    edt = np.dtype(np.int32) if scalar else exponent.dtype
    ct = "float" if res.itemsize <= 4 else "double"
    key = ("ldexp", significand.dtype, edt, scalar)
    k = _kernels.get(key)
    if k is None:
        edecl = "int e" if scalar else f"{dtype_to_ctype(edt)} *e"
        ev = "e" if scalar else "e[i]"
        k = _kernels[key] = _ga.ElementwiseKernel(  # type: ignore[attr-defined]
            f"{dtype_to_ctype(res)} *z, {dtype_to_ctype(significand.dtype)} *x, {edecl}",
            (f"const double ed = bc_cast<double>({ev}); "
             "const int ei = ed != ed ? 0 : (ed > 100000.0 ? 100000 : (ed < -100000.0 ? -100000 : (int)ed)); "
             if edt.kind == "f" else
             f"long long ee = (long long){ev}; int ei = ee > 100000 ? 100000 : (ee < -100000 ? -100000 : (int)ee); ") +
            f"z[i] = bc_cast<{dtype_to_ctype(res)}>(ldexp(bc_cast<{ct}>(x[i]), ei))",
            "bc_cumath_ldexp")
    arrays = [significand] if scalar else [significand, exponent]
    srcs, z, final = _prepare("ldexp", arrays, out, res, stream)
    flat = [z.ptr] + [s.ptr for s in srcs]
    if scalar:
        flat.append(int(exponent))
    k.launch_flat(significand.size, flat, stream)
    return _finish(z, final, stream)


def modf(arg: GPUArray, stream: Stream | None = None) -> tuple[GPUArray, GPUArray]:

    """modf(arg, stream=None) -> (fractional parts, integral parts), both signed as arg."""
    if not isinstance(arg, _ga.GPUArray):
        raise TypeError(f"cumath.modf takes a GPUArray, not {type(arg).__name__}")
    res = _float_dtype("modf", arg.dtype)
    ct = "float" if res.itemsize <= 4 else "double"
    key = ("modf", arg.dtype)
    k = _kernels.get(key)
    if k is None:
        rt = dtype_to_ctype(res)
        k = _kernels[key] = _ga.ElementwiseKernel(  # type: ignore[attr-defined]
            f"{rt} *f, {rt} *ipart, {dtype_to_ctype(arg.dtype)} *x",
            f"{ct} ip; const {ct} fp = modf(bc_cast<{ct}>(x[i]), &ip); "
            f"f[i] = bc_cast<{rt}>(fp); ipart[i] = bc_cast<{rt}>(ip)", "bc_cumath_modf")
    (x,), f, _ = _prepare("modf", [arg], None, res, stream)
    n = _ga.GPUArray(arg.shape, res, allocator=arg.allocator, stream=stream)
    k.launch_flat(x.size, [f.ptr, n.ptr, x.ptr], stream)
    return f, n
