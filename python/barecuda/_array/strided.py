# SPDX-License-Identifier: MIT
"""Elementwise arithmetic that reads (and writes) strided operands directly: the
layouts and kernels behind ``x[::2] + y[::2]``, ``a[::2, 1::3] * 2``, ``a.T - b``
and ``x[::-1] += 1``, so such an operation is one launch over exactly the elements
it needs, with the operands' dtypes cast inline (one pass, no ``astype`` copies).

A layout is found by :func:`collapse`: axes of length 1 are dropped and
neighbouring axes merged wherever every operand steps through them as through one
axis, so most views end up 1-d (a base pointer and one element stride) and the
rest have a few axes.  The kernel of :func:`binary_kernel` then maps the flat
index i of the result (C order) to each operand's element offset: one multiply
for 1-d layouts, a short chain of divisions by the axis lengths otherwise.  Its
parameters are, in this order: z, x, y (or the scalar s), the element strides of
x and y (and of z when z is strided) per axis, then the axis lengths but the
first.  The 1-d kernel with a dense z and 32-bit strides is what the C fast path
of ``_arith._ELEMENTWISE`` launches on its own (``_OpTable.put(..., strided=True)``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from barecuda._array import core as _core
from barecuda._array.array import _new_array
from barecuda._array.ops import _binop_expr
from barecuda._kernels.cdecl import dtype_to_ctype

MAX_DIMS = 8          # axes a kernel walks after collapsing; more: the old copy path
_INT_MAX = 2**31 - 1


def collapse(shape: Sequence[int], strides: Sequence[Sequence[int]],
             itemsizes: Sequence[int]) -> tuple[tuple[int, ...], list[tuple[int, ...]]] | None:
    """The smallest walk over `shape` (C order) that visits every operand's
    elements in the same order: (axis lengths, each operand's element strides per
    axis).  `strides` are the operands' byte strides, `itemsizes` their items'.
    Axes of length 1 go, neighbours merge where every operand's outer stride is
    its inner stride times the inner length.  A 0-d or one-element shape gives
    ((), [(), ...]).  None when a stride is not a multiple of its item size."""
    elems: list[list[int]] = []
    for st, item in zip(strides, itemsizes):
        row = []
        for s in st:
            if s % item:
                return None
            row.append(s // item)
        elems.append(row)
    dims: list[int] = []
    out: list[list[int]] = [[] for _ in strides]
    for ax, n in enumerate(shape):
        if n == 1:
            continue
        if dims and all(o[-1] == e[ax] * n for o, e in zip(out, elems)):
            dims[-1] *= n
            for o, e in zip(out, elems):
                o[-1] = e[ax]
            continue
        dims.append(n)
        for o, e in zip(out, elems):
            o.append(e[ax])
    return tuple(dims), [tuple(o) for o in out]


def extent(shape: Sequence[int], strides: Sequence[int]) -> int:
    """The largest |element offset| a walk reaches from the base pointer."""
    return sum((n - 1) * abs(s) for n, s in zip(shape, strides))


def fits32(shape: Sequence[int], strides: Sequence[Sequence[int]]) -> bool:
    """Whether every offset of the walk fits a 32-bit int."""
    return all(extent(shape, st) <= _INT_MAX for st in strides)


def _offsets(nd: int, names: Sequence[str], wide: bool) -> list[str]:
    """C statements computing `<name>o`, each operand's element offset of flat index i."""
    it = "long long" if wide else "int"
    ut = "unsigned long long" if wide else "unsigned int"
    if nd == 1:
        return [f"const {it} {p}o = ({it})i * {p}s0;" for p in names]
    lines = [f"{ut} r = ({ut})i, q;"] + [f"{it} {p}o = 0;" for p in names]
    for d in reversed(range(1, nd)):
        lines.append(f"q = r % sh{d}; r /= sh{d};")
        lines += [f"{p}o += ({it})q * {p}s{d};" for p in names]
    lines += [f"{p}o += ({it})r * {p}s0;" for p in names]
    return lines


def binary_source(op: str, xd: np.dtype[Any], yd: np.dtype[Any] | None, ymode: str,
                  reverse: bool, cd: np.dtype[Any], zd: np.dtype[Any], nd: int, wide: bool,
                  zdense: bool) -> tuple[str, str]:
    """(argument list, operation) of z = op(x, y) over an nd-axis walk (nd >= 1).

    ymode: "a" y is an array walked like x, "0" a 0-d array (its one element),
    "s" a scalar `s` of the compute dtype cd.  zd is z's dtype (the result's, or
    an out= array's: the value is cast to it); zdense: z is written at i."""
    if not 1 <= nd <= MAX_DIMS:
        raise ValueError(f"a strided kernel walks 1 to {MAX_DIMS} axes, not {nd}")
    ct = _core._ct(cd)
    it = "long long" if wide else "int"
    ut = "unsigned long long" if wide else "unsigned int"
    walked = ["x"] + (["y"] if ymode == "a" else []) + ([] if zdense else ["z"])
    args = [f"{dtype_to_ctype(zd)} *z", f"{dtype_to_ctype(xd)} *x"]
    if ymode == "s":
        args.append(f"{dtype_to_ctype(cd)} s")
    else:
        assert yd is not None
        args.append(f"{dtype_to_ctype(yd)} *y")
    for p in walked:
        args += [f"{it} {p}s{d}" for d in range(nd)]
    args += [f"{ut} sh{d}" for d in range(1, nd)]
    body = _offsets(nd, walked, wide)
    xa = f"bc_cast<{ct}>(x[xo])"
    ya = {"a": f"bc_cast<{ct}>(y[yo])", "0": f"bc_cast<{ct}>(y[0])", "s": f"bc_cast<{ct}>(s)"}[ymode]
    a, b = (ya, xa) if reverse else (xa, ya)
    expr = _binop_expr(op, cd if cd != np.float16 else np.dtype(np.float32))
    zt = dtype_to_ctype(zd)
    body.append(f"const {ct} a = {a}; const {ct} b = {b};")
    body.append(f"z[{'i' if zdense else 'zo'}] = bc_cast<{zt}>({expr})")
    return ", ".join(args), "\n".join(body)


def binary_kernel(op: str, xd: np.dtype[Any], yd: np.dtype[Any] | None, ymode: str,
                  reverse: bool, cd: np.dtype[Any], zd: np.dtype[Any], nd: int, wide: bool,
                  zdense: bool) -> Any:
    """The ElementwiseKernel of :func:`binary_source` (made once per variant)."""
    key = ("sbin", op, xd, yd, ymode, reverse, cd, zd, nd, wide, zdense)
    k = _core._kernels.get(key)
    if k is None:
        arguments, operation = binary_source(op, xd, yd, ymode, reverse, cd, zd, nd, wide, zdense)
        k = _core._kernel(key, arguments, operation, f"bc_s{op}")
    return k


def overlaps(a: Any, b: Any) -> bool:
    """Whether the memory spans of GPUArrays a and b (first to last byte) meet."""
    if a.size == 0 or b.size == 0:
        return False
    lo_a, hi_a = _span(a)
    lo_b, hi_b = _span(b)
    return lo_a < hi_b and lo_b < hi_a


def clash(a: Any, out: Any) -> bool:
    """Whether writing `out` elementwise could change an element of `a` before it
    is read: their memory meets, and not element for element (same pointer,
    strides and item size)."""
    return overlaps(a, out) and not (a.ptr == out.ptr and a.strides == out.strides
                                     and a.dtype.itemsize == out.dtype.itemsize)


def _span(a: Any) -> tuple[int, int]:
    lo = hi = a.ptr
    for n, s in zip(a.shape, a.strides):
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi + a.dtype.itemsize


def binary(op: str, x: Any, y: Any, ymode: str, reverse: bool, res: np.dtype[Any],
           cd: np.dtype[Any], out: Any, stream: Any) -> tuple[Any, Any] | None:
    """z = op(x, y) in one launch reading strided x (and y when ymode is "a";
    ymode "0": y a 0-d array; "s": y a scalar) of x's shape, z a new C-contiguous
    array of dtype res or `out` (a GPUArray of x's shape, checked by the caller,
    written through its strides and cast to its dtype).  Returns (z, kernel),
    kernel being the ElementwiseKernel when it is the 1-d one the C fast path can
    run on its own (else None); or None when the layout does not suit (too many
    axes, odd strides, out= overlapping an operand otherwise than exactly): the
    caller then takes the copying path."""
    if out is not None and any(clash(o, out) for o in ((x, y) if ymode != "s" else (x,))):
        return None
    zd = res if out is None else out.dtype
    arrays = [x] + ([y] if ymode == "a" else []) + ([] if out is None else [out])
    lay = collapse(x.shape, [a.strides for a in arrays], [a.dtype.itemsize for a in arrays])
    if lay is None:
        return None
    dims, est = lay
    zdense = out is None or est[-1] == dense_strides(dims)
    if out is not None and zdense:
        est = est[:-1]
    if len(dims) > MAX_DIMS:
        return None
    if not dims:
        dims, est = (1,), [(0,) for _ in est]
    wide = not fits32(dims, est) or x.size > _INT_MAX
    nd = len(dims)
    k = binary_kernel(op, x.dtype, None if ymode == "s" else y.dtype, ymode, reverse, cd, zd,
                      nd, wide, zdense)
    z = _new_array(x.shape, res, x.allocator, stream) if out is None else out
    if x.size == 0:
        return z, None
    flat: list[Any] = [z.ptr, x.ptr]
    flat += _core._scalar_flat(k, 2, y) if ymode == "s" else [y.ptr]
    for st in est:
        flat += list(st)
    flat += list(dims[1:])
    k.launch_flat(x.size, flat, stream)
    hot = nd == 1 and not wide and out is None and ymode != "0"
    return z, (k if hot else None)


def dense_strides(dims: Sequence[int]) -> tuple[int, ...]:
    """C-order element strides of `dims`."""
    out, s = [], 1
    for n in reversed(dims):
        out.append(s)
        s *= n
    return tuple(reversed(out))
