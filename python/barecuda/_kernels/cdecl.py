# SPDX-License-Identifier: MIT
"""dtypes and C declarations: the registry of C type names (PyCUDA's
``dtype_to_ctype``, ``register_dtype``, ``get_or_register_dtype``) and the parsed
kernel arguments (``VectorArg``, ``ScalarArg``, ``parse_c_args``), shown by
barecuda.tools.  The kernel templates write their C source with these names.
"""

from __future__ import annotations

import re as _re
from typing import TYPE_CHECKING as _TYPE_CHECKING

import numpy as _np

from barecuda._core.names import public

if _TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from typing import Any

    import numpy.typing as npt

_HOME = "barecuda.tools"


_DTYPE_TO_CTYPE: dict[_np.dtype[Any], str] = {}
_CTYPE_TO_DTYPE: dict[str, _np.dtype[Any]] = {}


@public(_HOME)
def register_dtype(dtype: npt.DTypeLike, c_names: str | Sequence[str],
                   alias_ok: bool = False) -> None:
    """Make `dtype` known by the C type name(s) `c_names` (first one is the canonical one).

    A dtype already registered under another canonical name raises RuntimeError unless
    alias_ok is true, in which case the names become aliases.
    """
    if isinstance(c_names, str):
        c_names = [c_names]
    dtype = _np.dtype(dtype)
    existing = _DTYPE_TO_CTYPE.get(dtype)
    if existing is not None and existing != c_names[0] and not alias_ok:
        raise RuntimeError(f"dtype {dtype} is already registered as '{existing}'")
    if existing is None:
        _DTYPE_TO_CTYPE[dtype] = c_names[0]
    for name in c_names:
        old = _CTYPE_TO_DTYPE.get(name)
        if old is not None and old != dtype:
            raise RuntimeError(f"C type '{name}' is already registered as dtype {old}")
        _CTYPE_TO_DTYPE[name] = dtype


@public(_HOME)
def get_or_register_dtype(names: str | Sequence[str],
                          dtype: npt.DTypeLike | None = None) -> _np.dtype[Any]:
    """The dtype registered for C type name(s) `names`; registers `dtype` when given."""
    if dtype is None:
        if isinstance(names, str):
            names = [names]
        for name in names:
            found = _CTYPE_TO_DTYPE.get(_normalize_ctype(name))
            if found is not None:
                return found
        raise TypeError(f"unknown C type '{names[0]}'")
    register_dtype(dtype, names, alias_ok=True)
    return _np.dtype(dtype)


def _fill_registry() -> None:
    reg = register_dtype
    reg(_np.bool_, ["bool"])
    reg(_np.int8, ["signed char", "char", "int8_t"])
    reg(_np.uint8, ["unsigned char", "uint8_t"])
    reg(_np.int16, ["short", "short int", "signed short", "int16_t"])
    reg(_np.uint16, ["unsigned short", "unsigned short int", "uint16_t"])
    reg(_np.int32, ["int", "signed int", "signed", "int32_t"])
    reg(_np.uint32, ["unsigned int", "unsigned", "uint32_t"])
    reg(_np.int64, ["long long", "long long int", "signed long long", "long", "long int",
                    "int64_t", "ptrdiff_t", "ssize_t"])
    reg(_np.uint64, ["unsigned long long", "unsigned long long int", "unsigned long",
                     "unsigned long int", "uint64_t", "size_t"])
    reg(_np.float16, ["__half", "half"])
    reg(_np.float32, ["float"])
    reg(_np.float64, ["double"])
    reg(_np.complex64, ["barecuda::complex<float>", "pycuda::complex<float>", "complex<float>"])
    reg(_np.complex128, ["barecuda::complex<double>", "pycuda::complex<double>", "complex<double>"])
    # NumPy's platform-named integer dtypes (np.intc, np.longlong ...) compare equal to
    # the ones above, so they share the entries.


def _normalize_ctype(name: str) -> str:
    name = " ".join(name.replace("*", " ").split())
    name = _re.sub(r"\s*([<>,])\s*", r"\1", name)
    return name


@public(_HOME)
def base_dtype_to_ctype(dtype: npt.DTypeLike) -> str:
    """The registered C type name of `dtype` (e.g. 'float', '__half',
    'barecuda::complex<float>'); TypeError for a dtype with no C counterpart."""
    if dtype is None:
        raise ValueError("dtype may not be None")
    dt = _np.dtype(dtype)
    try:
        return _DTYPE_TO_CTYPE[dt]
    except KeyError:
        raise TypeError(f"dtype {dt} has no C type known to barecuda "
                        "(register one with tools.register_dtype)") from None


_FP_TEX_CTYPES: dict[_np.dtype[Any], str] = {
    _np.dtype(_np.float32): "fp_tex_float",
    _np.dtype(_np.float64): "fp_tex_double",
    _np.dtype(_np.complex64): "fp_tex_cfloat",
    _np.dtype(_np.complex128): "fp_tex_cdouble",
}


@public(_HOME)
def dtype_to_ctype(dtype: npt.DTypeLike, with_fp_tex_hack: bool = False) -> str:
    """The C type name barecuda's kernels use for `dtype` (e.g. 'float', '__half',
    'barecuda::complex<float>'); TypeError for a dtype with no C counterpart.

    with_fp_tex_hack=True names the floating-point types by PyCUDA's texture
    stand-ins (fp_tex_float, fp_tex_double, fp_tex_cfloat, fp_tex_cdouble).
    """
    if with_fp_tex_hack and dtype is not None:
        name = _FP_TEX_CTYPES.get(_np.dtype(dtype))
        if name is not None:
            return name
    return base_dtype_to_ctype(dtype)


@public(_HOME)
class Argument:
    """One kernel argument parsed from a C declaration: name and dtype."""

    def __init__(self, dtype: npt.DTypeLike, name: str) -> None:
        self.dtype: _np.dtype[Any] = _np.dtype(dtype)
        self.name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.dtype!r}, {self.name!r})"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.dtype == other.dtype and self.name == other.name

    def __hash__(self) -> int:
        return hash((type(self), self.dtype, self.name))


@public(_HOME)
class VectorArg(Argument):
    """A pointer argument (an array): `dtype *name`."""

    def declarator(self) -> str:
        """The C declaration of the parameter, e.g. ``float *x``."""
        return f"{dtype_to_ctype(self.dtype)} *{self.name}"

    struct_char: str = "P"   # the ``Function.prepare`` format character of a pointer


@public(_HOME)
class ScalarArg(Argument):
    """A by-value argument: `dtype name`."""

    def declarator(self) -> str:
        """The C declaration of the parameter, e.g. ``int n``."""
        return f"{dtype_to_ctype(self.dtype)} {self.name}"

    @property
    def struct_char(self) -> str:
        """The ``Function.prepare`` format character of the dtype (an attribute, as
        PyCUDA's): its NumPy char ("f", "l", "F" complex64, "e" float16, "?" bool),
        "<n>s" for a structured dtype of n bytes."""
        ch = self.dtype.char
        return f"{self.dtype.itemsize}s" if ch == "V" else ch


_QUALIFIERS = {"const", "volatile", "__restrict__", "restrict", "__restrict", "register"}


@public(_HOME)
def parse_c_arg(c_arg: str) -> VectorArg | ScalarArg:
    """Parse one C declaration ('float *x', 'const double a', 'pycuda::complex<float> *z')
    into a VectorArg or ScalarArg."""
    if not isinstance(c_arg, str):
        raise TypeError(f"a C argument declaration must be a str, not {type(c_arg).__name__}")
    decl = c_arg.strip()
    if not decl:
        raise ValueError("empty C argument declaration")
    if "[" in decl:
        m = _re.fullmatch(r"(.*?)(\w+)\s*\[\s*\]", decl)
        if m is None:
            raise ValueError(f"cannot parse C argument '{c_arg}': only 'type name[]' arrays are supported")
        decl = f"{m.group(1)} *{m.group(2)}"
    pointer = decl.count("*")
    if pointer > 1:
        raise ValueError(f"cannot parse C argument '{c_arg}': pointers to pointers are not supported")
    words = decl.replace("*", " * ").replace("<", " < ").replace(">", " > ").split()
    if not words:
        raise ValueError(f"cannot parse C argument '{c_arg}'")
    name = words[-1]
    if not (name.isidentifier()) or name in _QUALIFIERS or name == "*":
        raise ValueError(f"cannot parse C argument '{c_arg}': no argument name")
    tp = [w for w in words[:-1] if w not in _QUALIFIERS and w != "*"]
    if not tp:
        raise ValueError(f"cannot parse C argument '{c_arg}': a type and a name are needed")
    type_name = _normalize_ctype(" ".join(tp))
    dtype = _CTYPE_TO_DTYPE.get(type_name)
    if dtype is None:
        raise TypeError(f"cannot parse C argument '{c_arg}': unknown C type '{type_name}'")
    kind: type[VectorArg] | type[ScalarArg] = VectorArg if pointer else ScalarArg
    return kind(dtype, name)


@public(_HOME)
def get_arg_type(c_arg: str) -> str:
    """The ``Function.prepare`` format of one C declaration: "P" for a pointer, else
    the dtype's character (``get_arg_type("float x") == "f"``)."""
    return parse_c_arg(c_arg).struct_char


@public(_HOME)
def parse_c_args(arguments: str | Iterable[str | Argument]) -> list[Argument]:
    """Parse a comma-separated C declaration list (or a list of declarations, strings or
    already parsed arguments) into a list of VectorArg/ScalarArg."""
    parts: Sequence[str | Argument]
    if isinstance(arguments, str):
        parts = _split_top_level(arguments)
    else:
        parts = list(arguments)
    out: list[Argument] = []
    for part in parts:
        out.append(part if isinstance(part, Argument) else parse_c_arg(part))
    names = [a.name for a in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"argument name(s) used twice: {', '.join(sorted(dup))}")
    return out


def _split_top_level(s: str) -> list[str]:
    parts: list[str]
    cur: list[str]
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    parts = [p.strip() for p in parts]
    if len(parts) == 1 and not parts[0]:
        return []
    if any(not p for p in parts):
        raise ValueError(f"cannot parse C argument list '{s}': empty declaration")
    return parts


_fill_registry()
