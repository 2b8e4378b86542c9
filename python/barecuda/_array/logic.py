# SPDX-License-Identifier: MIT
"""Truth and selection on GPUArrays: ``any``, ``all`` (reductions to a 0-d bool
GPUArray), ``logical_and``, ``logical_or``, ``logical_not`` and ``where``;
re-exported by :mod:`barecuda.gpuarray`.

Truth is C's (and NumPy's): nonzero is true, NaN is true, a complex value is true
when either part is nonzero.  Operands are GPUArrays of one shape or numbers; a
0-d GPUArray combines with any shape, as a number would.
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

import numpy as np

from barecuda._array import core as _core
from barecuda._array import reduce as _reduce
from barecuda._array.array import GPUArray
from barecuda._kernels.cdecl import dtype_to_ctype
from barecuda._kernels.reduction import ReductionKernel

__all__ = ["any", "all", "logical_and", "logical_or", "logical_not", "where"]

def _truth(expr: Any, dt: Any) -> str:
    """C expression: the truth of `expr` of dtype dt."""
    if dt.kind == "b":
        return f"(bool)({expr})"
    if dt.kind == "c":
        return f"(({expr}).real() != 0 || ({expr}).imag() != 0)"
    if dt == np.float16:
        return f"(__half2float({expr}) != 0.0f)"
    return f"(({expr}) != 0)"


def _check(name: Any, a: Any) -> None:
    if not isinstance(a, GPUArray):
        raise TypeError(f"{name}() takes a GPUArray, not {type(a).__name__}")
    if a.dtype.fields is not None:
        raise TypeError(f"{name}(): struct dtype {a.dtype} has no truth value")


def _any_all(which: Any, a: Any, stream: Any, allocator: Any) -> GPUArray:
    _check(which, a)
    k = _any_all_kernel(which, a.dtype)
    src = a._contiguous(stream)
    return k._run([src.ptr], src.size, None, None, stream, allocator)  # type: ignore[no-any-return, unused-ignore]


def _any_all_kernel(which: Any, dt: Any) -> Any:
    key = (which, dt)
    k = _reduce._reductions.get(key)
    if k is None:
        k = _reduce._reductions[key] = ReductionKernel(
            np.bool_, "false" if which == "any" else "true",
            "a || b" if which == "any" else "a && b", _truth("x[i]", dt),
            f"{dtype_to_ctype(dt)} *x", name=f"bc_{which}")
    return k


def any(a: GPUArray, stream: Stream | None = None, allocator: _Allocator | None = None) -> GPUArray:
    """any(a, stream=None, allocator=None): whether any element of GPUArray `a` is true.

    A 0-d GPUArray of dtype bool (False for an empty array), as ``numpy.any``;
    call ``.get()`` for the host value.  TypeError for a non-GPUArray.
    """
    return _any_all("any", a, stream, allocator)


def all(a: GPUArray, stream: Stream | None = None, allocator: _Allocator | None = None) -> GPUArray:
    """all(a, stream=None, allocator=None): whether every element of GPUArray `a` is true.

    A 0-d GPUArray of dtype bool (True for an empty array), as ``numpy.all``.
    TypeError for a non-GPUArray.
    """
    return _any_all("all", a, stream, allocator)


def _operand(name: Any, x: Any) -> Any:
    """(kind, value): ("array", GPUArray), ("dev0", 0-d GPUArray) or ("scalar", number)."""
    if isinstance(x, GPUArray):
        if x.dtype.fields is not None:
            raise TypeError(f"{name}(): struct dtype {x.dtype} has no truth value")
        return ("dev0" if x.shape == () else "array"), x
    if isinstance(x, np.ndarray) and x.ndim == 0:
        x = x[()]
    if isinstance(x, (bool, int, float, complex, np.bool_, np.number)):
        return "scalar", x
    raise TypeError(f"{name}(): operands must be GPUArrays or numbers, not {type(x).__name__}")


def _new_bool(shape: Any, like: Any, allocator: Any, stream: Any) -> GPUArray:
    order = "F" if (like is not None and like._f and not like._c) else "C"
    return GPUArray(shape, np.bool_, allocator=allocator or (like.allocator if like is not None  # type: ignore[no-any-return]
                                                                 else None),
                       order=order, stream=stream)


def _check_out(name: Any, out: Any, shape: Any) -> None:
    if not isinstance(out, GPUArray):
        raise TypeError(f"{name}(): out must be a GPUArray, not {type(out).__name__}")
    if out.shape != shape:
        raise ValueError(f"{name}(): out has shape {out.shape}, the result {shape}")
    if out.dtype != np.bool_:
        raise TypeError(f"{name}(): out must have dtype bool, not {out.dtype}")


def _finish(name: Any, tmp: Any, out: Any, stream: Any) -> GPUArray:
    if out is None:
        return tmp  # type: ignore[no-any-return]
    _core._strided_copy(out, tmp, stream)
    return out  # type: ignore[no-any-return]


def _logical(name: Any, cop: Any, x1: Any, x2: Any, out: Any, allocator: Any, stream: Any) -> GPUArray:
    (k1, v1), (k2, v2) = _operand(name, x1), _operand(name, x2)
    if k1 == "scalar" and k2 == "scalar":
        r = bool(v1) and bool(v2) if cop == "&&" else bool(v1) or bool(v2)
        res = GPUArray((), np.bool_, allocator=allocator, stream=stream).fill(r, stream)
        if out is None:
            return res  # type: ignore[no-any-return]
        _check_out(name, out, ())
        return _finish(name, res, out, stream)
    arrays = [v for k, v in ((k1, v1), (k2, v2)) if k == "array"]
    if len(arrays) == 2 and v1.shape != v2.shape:
        raise ValueError(f"{name}(): shapes {v1.shape} and {v2.shape} differ "
                         "(broadcasting is not supported)")
    like = arrays[0] if arrays else v1
    shape = like.shape
    if out is not None:
        _check_out(name, out, shape)
    if like.size == 0:
        return out if out is not None else _new_bool(shape, like, allocator, stream)
    src = like._contiguous(stream) if not (like._c or like._f) else like
    params, flat, terms = ["bool *z"], [], []
    for pos, (kind, v) in enumerate(((k1, v1), (k2, v2))):
        if kind == "scalar":
            terms.append("true" if bool(v) else "false")
            continue
        if kind == "array":
            if v is like:
                a = src
            elif v.strides == src.strides and (v._c or v._f):
                a = v
            else:   # one flat index walks both: bring v into src's memory order
                a = _layout_like(v, src, stream)
            terms.append(_truth(f"x{pos}[i]", v.dtype))
        else:
            a = v
            terms.append(_truth(f"x{pos}[0]", v.dtype))
        params.append(f"{dtype_to_ctype(v.dtype)} *x{pos}")
        flat.append(a.ptr)
    k = _logical_kernel(cop, params, terms)
    z = _new_bool(shape, src, allocator, stream)
    k.launch_flat(src.size, [z.ptr] + flat, stream)
    return _finish(name, z, out, stream)


def _logical_kernel(cop: Any, params: Any, terms: Any) -> Any:
    key = ("logical", cop, tuple(params), tuple(terms))
    return _core._kernel(key, ", ".join(params), f"z[i] = {terms[0]} {cop} {terms[1]}",
                         "bc_logical_" + ("and" if cop == "&&" else "or"))


def _not_kernel(dt: Any) -> Any:
    return _core._kernel(("logical_not", dt), f"bool *z, {dtype_to_ctype(dt)} *x",
                         f"z[i] = !{_truth('x[i]', dt)}", "bc_logical_not")


def _where_kernel(cdt: Any, res: Any, params: Any, vals: Any, sig: Any) -> Any:
    zt = dtype_to_ctype(res)
    return _core._kernel(("where", cdt, res, sig), ", ".join(params),
                         f"z[i] = {_truth('c[i]', cdt)} ? bc_cast<{zt}>({vals[0]}) "
                         f": bc_cast<{zt}>({vals[1]})", "bc_where")


def _layout_like(v: Any, like: Any, stream: Any) -> GPUArray:
    """v copied into the memory order of `like` (C or F)."""
    order = "F" if (like._f and not like._c) else "C"
    t = GPUArray(v.shape, v.dtype, order=order, stream=stream)
    _core._strided_copy(t, v, stream)
    return t  # type: ignore[no-any-return]


def logical_and(x1: Any, x2: Any, /, out: GPUArray | None = None, *, allocator: _Allocator | None = None,
                stream: Stream | None = None) -> GPUArray:
    """logical_and(x1, x2, /, out=None, *, allocator=None, stream=None): elementwise ``x1 && x2``.

    Operands are GPUArrays of one shape, 0-d GPUArrays or numbers; the result is a
    bool GPUArray (0-d for two numbers), or `out` (a bool GPUArray of the result's
    shape).  ValueError for different shapes, TypeError for other operand types.
    """
    return _logical("logical_and", "&&", x1, x2, out, allocator, stream)


def logical_or(x1: Any, x2: Any, /, out: GPUArray | None = None, *, allocator: _Allocator | None = None,
               stream: Stream | None = None) -> GPUArray:
    """logical_or(x1, x2, /, out=None, *, allocator=None, stream=None): elementwise ``x1 || x2``.

    Arguments, result and errors as ``logical_and``.
    """
    return _logical("logical_or", "||", x1, x2, out, allocator, stream)


def logical_not(x: Any, /, out: GPUArray | None = None, *, allocator: _Allocator | None = None,
                stream: Stream | None = None) -> GPUArray:
    """logical_not(x, /, out=None, *, allocator=None, stream=None): elementwise ``!x``.

    `x` is a GPUArray or a number (giving a 0-d GPUArray); the result is a bool
    GPUArray, or `out` (bool, the shape of `x`).
    """
    kind, v = _operand("logical_not", x)
    if kind == "scalar":
        res = GPUArray((), np.bool_, allocator=allocator, stream=stream).fill(not v, stream)
        if out is not None:
            _check_out("logical_not", out, ())
        return _finish("logical_not", res, out, stream)
    if out is not None:
        _check_out("logical_not", out, v.shape)
    src = v if (v._c or v._f) else v._contiguous(stream)
    z = _new_bool(v.shape, src, allocator, stream)
    if v.size:
        k = _not_kernel(v.dtype)
        k.launch_flat(src.size, [z.ptr, src.ptr], stream)
    return _finish("logical_not", z, out, stream)


def where(criterion: GPUArray, then_: Any, else_: Any, out: GPUArray | None = None,
          stream: Stream | None = None) -> GPUArray:

    """where(criterion, then_, else_, out=None, stream=None): elementwise ``then_ if criterion else else_``.

    As ``numpy.where`` for GPUArrays of one shape (0-d GPUArrays and numbers also
    stand for `then_`/`else_`); the result has NumPy's common dtype of `then_` and
    `else_`.  Returns a new GPUArray or `out` (matching shape and dtype).
    ValueError for different shapes, TypeError for other operand types.
    """
    if not isinstance(criterion, GPUArray):
        raise TypeError(f"where(): criterion must be a GPUArray, not {type(criterion).__name__}")
    if criterion.dtype.fields is not None:
        raise TypeError(f"where(): struct dtype {criterion.dtype} has no truth value")
    shape = criterion.shape
    ops = []
    for name, x in (("then_", then_), ("else_", else_)):
        if isinstance(x, GPUArray):
            if x.shape not in (shape, ()):
                raise ValueError(f"where(): {name} has shape {x.shape}, criterion {shape} "
                                 "(broadcasting is not supported)")
            ops.append(x)
        elif isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
            ops.append(x)   # a Python number is weak in the promotion (NumPy 2's rule)
        elif isinstance(x, np.generic) or (isinstance(x, np.ndarray) and x.ndim == 0):
            ops.append(np.asarray(x)[()])
        else:
            raise TypeError(f"where(): {name} must be a GPUArray or a number, "
                            f"not {type(x).__name__}")
    dts = [o.dtype if isinstance(o, GPUArray) else o for o in ops]
    res = np.result_type(*dts)
    if out is not None:
        if not isinstance(out, GPUArray):
            raise TypeError(f"where(): out must be a GPUArray, not {type(out).__name__}")
        if out.shape != shape or out.dtype != res:
            raise ValueError(f"where(): out must have shape {shape} and dtype {res}, "
                             f"not {out.shape} and {out.dtype}")
    c = criterion if (criterion._c or criterion._f) else criterion._contiguous(stream)
    z = GPUArray(shape, res, allocator=c.allocator, stream=stream,
                    order="F" if (c._f and not c._c) else "C")
    if c.size == 0:
        return out if out is not None else z  # type: ignore[no-any-return]
    zt = dtype_to_ctype(res)
    params, flat, vals = [f"{zt} *z", f"{dtype_to_ctype(c.dtype)} *c"], [z.ptr, c.ptr], []
    scalars = []
    for pos, o in enumerate(ops):
        if isinstance(o, GPUArray):
            params.append(f"{dtype_to_ctype(o.dtype)} *v{pos}")
            if o.shape == ():
                vals.append(f"v{pos}[0]")
                flat.append(o.ptr)
            else:
                a = o if (o.strides == c.strides and (o._c or o._f)) else _layout_like(o, c, stream)
                vals.append(f"v{pos}[i]")
                flat.append(a.ptr)
            sig = ("a", o.dtype, o.shape == ())
        else:
            params.append(f"{zt} v{pos}")
            vals.append(f"v{pos}")
            scalars.append((len(params) - 1, o))
            flat.append(None)
            sig = ("s",)  # type: ignore[assignment]
        ops[pos] = sig
    k = _where_kernel(c.dtype, res, params, vals, tuple(ops))
    for index, value in scalars:
        at = flat.index(None)
        flat[at:at + 1] = _core._scalar_flat(k, index, value)
    k.launch_flat(c.size, flat, stream)
    if out is None:
        return z  # type: ignore[no-any-return]
    _core._strided_copy(out, z, stream)
    return out  # type: ignore[no-any-return]
