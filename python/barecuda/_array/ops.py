# SPDX-License-Identifier: MIT
"""What an arithmetic operation means on GPUArrays: NumPy's result dtype of a ufunc
for given operand dtypes (asked of NumPy once, then remembered), the dtype it is
computed in, and the C expression of ``a op b`` for that dtype.  Shared by the
contiguous (arith) and strided (strided) kernels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# ------------------------------------------------------------------ type resolution

_types: dict[Any, np.dtype[Any]] = {}


def _result_dtype(op: str, a: np.dtype[Any], b: Any = None) -> np.dtype[Any]:
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


def _binop_expr(op: str, ct_dt: Any) -> str:
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


def _compute_dtype(op: str, x_dt: np.dtype[Any], y_dt_or_scalar: Any,
                   res: np.dtype[Any]) -> np.dtype[Any]:
    """The dtype the operation is computed in."""
    if op in _COMPARE:
        if isinstance(y_dt_or_scalar, np.dtype):
            return np.result_type(x_dt, y_dt_or_scalar)
        return np.result_type(np.empty(0, x_dt), y_dt_or_scalar)
    return res
