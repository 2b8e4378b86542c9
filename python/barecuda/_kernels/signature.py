# SPDX-License-Identifier: MIT
"""Kernel arguments on their way to a launch: scalars converted to what the kernel's
parameters take (complex as two reals, float16 as a float, bool as an int, structs
as their bytes), arrays checked (dtype, contiguity) and turned into pointers.

An array is anything exposing ``gpudata``, ``ptr``, ``dtype``, ``size``,
``strides`` and ``flags``; another library's device array (CUDA array interface,
DLPack) is viewed through the array type the arrays floor registered
(barecuda._kernels.arrays), never by importing that floor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from barecuda import _driver as _drv
from barecuda._core.names import public
from barecuda._kernels import arrays as _arrays
from barecuda._kernels.cdecl import VectorArg, dtype_to_ctype

if TYPE_CHECKING:
    from typing import Any

# struct format characters of scalars passed as they are
_STRUCT_CHAR = {np.dtype(k): v for k, v in (
    (np.int8, "b"), (np.uint8, "B"), (np.int16, "h"), (np.uint16, "H"), (np.int32, "i"),
    (np.uint32, "I"), (np.int64, "q"), (np.uint64, "Q"), (np.float32, "f"), (np.float64, "d"))}


@public("barecuda.elementwise")
def scalar_transport(arg: Any) -> Any:
    """(params, unpack code, struct chars, converter) for a scalar argument.

    Complex scalars travel as two reals, float16 as a float and bool as an int; a
    local of the declared type is rebuilt at the top of the kernel.
    """
    dt, name = arg.dtype, arg.name
    ctype = dtype_to_ctype(dt)
    if dt.kind == "c":
        rt = "float" if dt == np.complex64 else "double"
        ch = "f" if dt == np.complex64 else "d"
        conv_t = dt.type

        def conv(v, _t=conv_t):
            c = _t(v)
            return (c.real, c.imag)
        return (f"{rt} {name}_bc_re, {rt} {name}_bc_im",
                f"const {ctype} {name}({name}_bc_re, {name}_bc_im);", ch + ch, conv, 2)
    if dt == np.float16:
        return (f"float {name}_bc_f", f"const __half {name} = __float2half_rn({name}_bc_f);",
                "f", lambda v: float(np.float16(v)), 1)
    if dt == np.bool_:
        return (f"int {name}_bc_b", f"const bool {name} = {name}_bc_b != 0;", "i",
                lambda v: 1 if v else 0, 1)
    if dt.fields is not None:   # a struct (gpuarray.vec.float3 ...): its bytes, as given
        def conv(v, _dt=dt):
            a = np.asarray(v)
            if a.dtype != _dt or a.size != 1:
                a = np.array(v if a.dtype.fields is None else a.tolist(), dtype=_dt)
            if a.size != 1:
                raise ValueError(f"expected one {_dt} value, got {a.size}")
            return a.tobytes()
        return (f"{ctype} {name}", "", f"{dt.itemsize}s", conv, 1)
    ch = _STRUCT_CHAR.get(dt)
    if ch is None:
        raise TypeError(f"scalar argument '{name}' has dtype {dt}, which cannot be passed by value")
    return (f"{ctype} {name}", "", ch, dt.type, 1)


class _Signature:
    """Kernel parameters, unpack code and argument converters for a parsed argument list."""

    def __init__(self, args, kernel_name):
        self.args = args
        params, unpack, fmt, self.converters = [], [], [], []
        for a in args:
            if isinstance(a, VectorArg):
                params.append(f"{dtype_to_ctype(a.dtype)} *{a.name}")
                fmt.append("P")
                self.converters.append(None)
            else:
                p, u, ch, conv, count = scalar_transport(a)
                params.append(p)
                if u:
                    unpack.append(u)
                fmt.append(ch)
                self.converters.append((conv, count))
        self.params = params
        self.unpack = "\n    ".join(unpack)
        self.fmt = "".join(fmt)
        self.name = kernel_name
        self.dtypes = [a.dtype for a in args]

    def bind(self, args, rng, slc, who):
        """The call of a generated kernel: (flat arguments, element count, the range
        of indices or None).  The count is the first array's size; `slc` (a slice)
        becomes a range over it.  TypeError for a wrong argument count, no array
        among the arguments, both range= and slice=, or either of a wrong type."""
        if len(args) != len(self.args):
            raise TypeError(f"{who} takes {len(self.args)} arguments "
                            f"({', '.join(a.name for a in self.args)}), got {len(args)}")
        flat, first = self.convert(args, who)
        if first is None:
            raise TypeError(f"{who}: no GPUArray among the array arguments, so the size is unknown")
        n = first.size
        if slc is not None:
            if rng is not None:
                raise TypeError(f"{who}: give range= or slice=, not both")
            if not isinstance(slc, slice):
                raise TypeError(f"slice= must be a slice, not {type(slc).__name__}")
            rng = range(*slc.indices(n))
        if rng is not None and not isinstance(rng, range):
            raise TypeError(f"range= must be a range, not {type(rng).__name__}")
        return flat, n, rng

    def convert(self, values, who):
        """Flatten user arguments into launch arguments; returns (flat list, first array)."""
        out = []
        first = None
        for a, conv, v in zip(self.args, self.converters, values):
            if conv is None:
                try:
                    ptr = _array_pointer(v, a, who)
                except _Foreign:  # a CuPy/torch/Numba array: a zero-copy GPUArray view
                    w = _arrays.device_view(v)
                    if w is None:
                        raise TypeError(f"argument '{a.name}' of {who} must be a GPUArray "
                                        f"of {a.dtype}, not {type(v).__name__}") from None
                    v = w
                    ptr = _array_pointer(v, a, who)
                if first is None and hasattr(v, "gpudata"):
                    first = v
                out.append(ptr)
            else:
                fn, count = conv
                if _is_array_like(v):
                    raise TypeError(f"argument '{a.name}' of {who} is a scalar ({a.dtype}), "
                                    f"not {type(v).__name__}")
                try:
                    c = fn(v)
                except (TypeError, ValueError, OverflowError) as exc:
                    raise type(exc)(f"argument '{a.name}' of {who}: cannot convert "
                                    f"{v!r} to {a.dtype}: {exc}") from None
                if count == 2:
                    out.extend(c)
                else:
                    out.append(c)
        return out, first


def _is_array_like(v):
    return hasattr(v, "gpudata") or isinstance(v, np.ndarray) and v.ndim > 0


class _Foreign(Exception):
    """Raised by _array_pointer for a device array of another library."""


def _array_pointer(v, arg, who):
    dt = getattr(v, "dtype", None)
    if dt is None or not hasattr(v, "gpudata"):
        if isinstance(v, int) and not isinstance(v, bool):
            return v  # a raw device pointer
        alloc = getattr(_drv, "DeviceAllocation", None)
        if alloc is not None and isinstance(v, alloc):
            return int(v)   # before the CAI test: allocations export one too (raw bytes)
        if (hasattr(v, "__cuda_array_interface__") or hasattr(v, "__dlpack__")) \
                and not isinstance(v, np.ndarray):
            raise _Foreign
        raise TypeError(f"argument '{arg.name}' of {who} must be a GPUArray of {arg.dtype}, "
                        f"not {type(v).__name__}")
    if dt != arg.dtype:
        raise TypeError(f"argument '{arg.name}' of {who} must be a GPUArray of {arg.dtype}, "
                        f"got one of {dt}")
    flags = v.flags
    if not flags.forc:
        raise ValueError(f"argument '{arg.name}' of {who} is not contiguous (strides "
                         f"{v.strides}); pass a contiguous copy (.copy())")
    return v.ptr
