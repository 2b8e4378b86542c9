# SPDX-License-Identifier: MIT
"""CUDA's built-in vector types (``float3``, ``int2``, ``uchar4`` ...) as NumPy
structured dtypes: ``gpuarray.vec``, as ``pycuda.gpuarray.vec``.

    p = gpuarray.vec.make_float3(1, 2, 3)          # a 0-d array of dtype vec.float3
    a = gpuarray.empty(100, gpuarray.vec.float3)   # a GPUArray of float3
    a.fill(p)

Each type is a dtype with fields ``x``, ``y``, ``z``, ``w`` (as many as the type
has) of the component type, laid out as CUDA lays out the struct (no padding; the
size is the component size times the count).  Every dtype is registered with
:mod:`barecuda.tools` under its CUDA name, so ``dtype_to_ctype(vec.float3)`` is
``"float3"`` and ``"float3 *p"`` parses in ElementwiseKernel / ReductionKernel
argument lists.  They pass to kernels by value (a ``make_*`` result or a NumPy
void scalar) and ``Function.prepare`` accepts them in a list of dtypes.

CUDA aligns some vector types more strictly than their components (``float2``
to 8 bytes, ``float4`` and ``double2`` to 16); NumPy cannot express a dtype
alignment above its widest field, so :func:`cuda_alignment` gives CUDA's value.
Kernel parameters are placed at the offsets the driver reports, and GPUArray
memory is at least 256-byte aligned, so the difference matters only for host
structures that embed these dtypes.

``long``/``ulong`` are 64-bit (LP64, as CUDA on Linux and macOS); their dtypes
equal those of ``longlong``/``ulonglong``, so the registry names those ``long1``,
``long2`` ... (both C names parse).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from barecuda._kernels.cdecl import get_or_register_dtype

__all__ = ["vec", "cuda_alignment", "VECTOR_TYPES"]

_FIELDS = ("x", "y", "z", "w")

# (CUDA base name, component dtype, counts CUDA defines)
_BASES = (
    ("char", np.int8, (1, 2, 3, 4)),
    ("uchar", np.uint8, (1, 2, 3, 4)),
    ("short", np.int16, (1, 2, 3, 4)),
    ("ushort", np.uint16, (1, 2, 3, 4)),
    ("int", np.int32, (1, 2, 3, 4)),
    ("uint", np.uint32, (1, 2, 3, 4)),
    ("long", np.int64, (1, 2, 3, 4)),
    ("ulong", np.uint64, (1, 2, 3, 4)),
    ("longlong", np.int64, (1, 2, 3, 4)),
    ("ulonglong", np.uint64, (1, 2, 3, 4)),
    ("float", np.float32, (1, 2, 3, 4)),
    ("double", np.float64, (1, 2, 3, 4)),
)

VECTOR_TYPES: dict[str, np.dtype[Any]] = {}   # CUDA name -> dtype, in definition order
_ALIGN: dict[str, int] = {}         # CUDA name -> CUDA's alignment in bytes


def _cuda_align(itemsize: Any, count: Any) -> int:
    """CUDA's __align__ of a vector of `count` components of `itemsize` bytes:
    2- and 4-vectors are aligned to their size (capped at 16), 1- and 3-vectors to
    a component."""
    if count in (2, 4):
        return min(itemsize * count, 16)  # type: ignore[no-any-return]
    return itemsize  # type: ignore[no-any-return]


class vec:  # noqa: N801 - PyCUDA's name
    """Namespace of CUDA vector dtypes (``vec.float3``) and their constructors
    (``vec.make_float3(x, y, z)``, returning a 0-d NumPy array)."""

    __slots__ = ()

    def __init__(self) -> None:
        raise TypeError("gpuarray.vec is a namespace; use vec.float3, vec.make_float3(...)")


def _make_constructor(name: Any, dtype: Any, count: Any) -> Any:
    fields = _FIELDS[:count]

    def make(*args: Any, **kwargs: Any) -> np.ndarray[Any, Any]:
        if kwargs:
            unknown = set(kwargs) - set(fields)
            if unknown:
                raise TypeError(f"make_{name}() got unexpected keyword arguments "
                                f"{', '.join(sorted(unknown))}")
            args = args + tuple(kwargs[f] for f in fields[len(args):] if f in kwargs)
        if len(args) != count:
            raise TypeError(f"make_{name}() takes {count} component{'s' if count > 1 else ''} "
                            f"({', '.join(fields)}), got {len(args)}")
        for v in args:
            if not np.isscalar(v) and not (isinstance(v, np.ndarray) and v.ndim == 0):
                raise TypeError(f"make_{name}(): components must be numbers, not "
                                f"{type(v).__name__}")
        return np.array(tuple(args), dtype=dtype)

    make.__name__ = make.__qualname__ = f"make_{name}"
    make.__doc__ = (f"make_{name}({', '.join(fields)})\n\nA 0-d NumPy array of dtype "
                    f"vec.{name} (CUDA's {name}) holding the given components.")
    return staticmethod(make)


def _build() -> None:
    for base, comp, counts in _BASES:
        comp = np.dtype(comp)  # type: ignore[assignment]
        for count in counts:
            name = f"{base}{count}"
            dtype = np.dtype([(f, comp) for f in _FIELDS[:count]], align=True)
            dtype = get_or_register_dtype(name, dtype)
            VECTOR_TYPES[name] = dtype
            _ALIGN[name] = _cuda_align(comp.itemsize, count)
            setattr(vec, name, dtype)
            setattr(vec, "make_" + name, _make_constructor(name, dtype, count))
    vec.types = dict(VECTOR_TYPES)  # type: ignore[attr-defined]


def cuda_alignment(dtype_or_name: Any) -> int:

    """cuda_alignment(dtype_or_name) -> int: the alignment CUDA gives a vector type.

    Takes a CUDA name ("float4") or a vec dtype; KeyError for anything else.
    """
    if isinstance(dtype_or_name, str):
        return _ALIGN[dtype_or_name]
    dt = np.dtype(dtype_or_name)
    for name, d in VECTOR_TYPES.items():
        if d == dt:
            return _ALIGN[name]
    raise KeyError(f"{dt} is not a CUDA vector type")


_build()
