# SPDX-License-Identifier: MIT
"""Helpers in PyCUDA's ``pycuda.tools`` style."""

from __future__ import annotations

import os
import warnings as _warnings
from typing import TYPE_CHECKING as _TYPE_CHECKING, cast as _cast

from barecuda import driver as _drv
from barecuda._devicedata import DeviceData, OccupancyRecord  # noqa: F401
from barecuda._pools import (  # noqa: F401  (PyCUDA's tools names)
    DebugMemoryPool,
    DeviceMemoryPool,
    PageLockedAllocator,
    PageLockedMemoryPool,
    PooledHostAllocation,
    bitlog2,
)
from barecuda.trace import (  # the timeline tool, re-exported
    Trace as Trace,
    TraceEvent as TraceEvent,
    TraceSummary as TraceSummary,
    nvtx_available as nvtx_available,
    nvtx_mark as nvtx_mark,
    nvtx_name_thread as nvtx_name_thread,
    nvtx_pop as nvtx_pop,
    nvtx_push as nvtx_push,
    nvtx_range as nvtx_range,
    nvtx_range_end as nvtx_range_end,
    nvtx_range_start as nvtx_range_start,
    trace as trace,
    trace_dir as trace_dir,
)

if _TYPE_CHECKING:   # typing-only names: nothing here is imported at run time
    from collections.abc import Callable, Iterable, Iterator, Sequence
    from typing import Any, ParamSpec, Protocol, TypeVar

    import numpy.typing as npt

    _P = ParamSpec("_P")
    _R = TypeVar("_R")
    _R_co = TypeVar("_R_co", covariant=True)

    class _MemoizedFunction(Protocol[_P, _R_co]):
        """What context_dependent_memoize returns: the function, plus clear_cache()."""

        clear_cache: Callable[[], None]

        def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R_co: ...


def _requested_device() -> int | None:
    """The device ordinal asked for by $CUDA_DEVICE, else by ~/.cuda_device, else None."""
    wanted, where = os.environ.get("CUDA_DEVICE"), "CUDA_DEVICE"
    if wanted is None:
        where = "~/.cuda_device"
        try:
            with open(os.path.join(os.path.expanduser("~"), ".cuda_device")) as f:
                wanted = f.read().strip()
        except OSError:
            return None
    try:
        return int(wanted)
    except ValueError:
        raise _drv.LogicError(f"{where}={wanted!r} is not a device ordinal") from None


def get_default_device(default: int = 0) -> _drv.Device:
    """The Device named by $CUDA_DEVICE, else by ~/.cuda_device, else Device(default).

    Deprecated in PyCUDA (a DeprecationWarning says so): use make_default_context().
    Raises driver.LogicError when the setting is not an int.
    """
    _warnings.warn("get_default_device() is deprecated; use make_default_context() instead",
                   DeprecationWarning, stacklevel=2)
    ordinal = _requested_device()
    return _drv.Device(default if ordinal is None else ordinal)


def make_default_context(
        ctx_maker: Callable[[_drv.Device], _drv.Context] | None = None) -> _drv.Context:
    """Make a context current on this thread and return it.

    Tries the device named by ``CUDA_DEVICE`` (else by the file ``~/.cuda_device``),
    else every device in order, and returns the first context ``ctx_maker(device)``
    gives (default: the device's primary context), pushed on this thread's stack.
    Raises ``driver.Error`` with each device's failure when none works.
    """
    if ctx_maker is None:
        def _primary(dev: _drv.Device) -> _drv.Context:
            return dev.retain_primary_context()
        ctx_maker = _primary

    _drv.init()
    wanted = _requested_device()
    ordinals = range(_drv.Device.count()) if wanted is None else [wanted]
    failures: list[str] = []
    for ordinal in ordinals:
        try:
            ctx = ctx_maker(_drv.Device(ordinal))
        except _drv.Error as exc:
            failures.append(f"device {ordinal}: {exc}")
            continue
        if _drv.Context.get_current() != ctx:
            ctx.push()
        return ctx
    raise _drv.RuntimeError("no device could be given a context: " + ("; ".join(failures) or "no devices"))


def host_pool(budget_mib: int | None = None) -> dict[str, int]:
    """The host pool that keeps the memory of large arrays ``GPUArray.get()`` made
    (8 MiB or more) for the next ones, page-locked from its second use: its counts
    (``buffers``, ``in_use``, ``free_bytes``, ``registered_bytes``, ``budget``,
    ``hits``, ``misses``, ``registrations``, ``evictions``).  With `budget_mib`,
    first sets how much free memory it may keep (and page-lock), letting go of the
    rest now; 0 turns it off.  The first budget comes from BARECUDA_HOST_POOL_MIB
    (default: a sixteenth of the memory, at most 2 GiB)."""
    from barecuda import _driver

    return _driver._host_pool(budget_mib)


# --- dtypes and C declarations (PyCUDA's dtype_to_ctype, parse_c_arg, ...) -------------
# Added by the array layer; the kernels it generates use these names.

import re as _re

import numpy as _np

_DTYPE_TO_CTYPE: dict[_np.dtype[Any], str] = {}
_CTYPE_TO_DTYPE: dict[str, _np.dtype[Any]] = {}


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


def get_or_register_dtype(c_names: str | Sequence[str],
                          dtype: npt.DTypeLike | None = None) -> _np.dtype[Any]:
    """The dtype registered for C type name(s) `c_names`; registers `dtype` when given."""
    if dtype is None:
        if isinstance(c_names, str):
            c_names = [c_names]
        for name in c_names:
            found = _CTYPE_TO_DTYPE.get(_normalize_ctype(name))
            if found is not None:
                return found
        raise TypeError(f"unknown C type '{c_names[0]}'")
    register_dtype(dtype, c_names, alias_ok=True)
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


class VectorArg(Argument):
    """A pointer argument (an array): `dtype *name`."""

    def declarator(self) -> str:
        """The C declaration of the parameter, e.g. ``float *x``."""
        return f"{dtype_to_ctype(self.dtype)} *{self.name}"

    struct_char: str = "P"   # the ``Function.prepare`` format character of a pointer


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


def get_arg_type(c_arg: str) -> str:
    """The ``Function.prepare`` format of one C declaration: "P" for a pointer, else
    the dtype's character (``get_arg_type("float x") == "f"``)."""
    return parse_c_arg(c_arg).struct_char


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


# --- contexts for tests and per-context memoization (PyCUDA's tools names) --------------

import functools as _functools
import weakref as _weakref

_memoized: _weakref.WeakSet[_MemoizedFunction[..., Any]] = _weakref.WeakSet()   # the per-context caches clear_context_caches() empties



def _check_context(ctx: _drv.Context) -> None:
    dev = ctx.get_device()
    assert isinstance(dev.name(), str)
    assert isinstance(dev.compute_capability(), tuple)
    assert isinstance(dev.get_attributes(), dict)


def _test_context_done(ctx: _drv.Context) -> None:
    import gc

    if _drv.Context.get_current() == ctx:
        _drv.Context.pop()
    clear_context_caches()
    gc.collect()


def _enter_test_context() -> _drv.Context:
    """The default context, pushed exactly once by us (so the test's pop is ours)."""
    _drv.init()
    before = _drv.Context.get_current()
    ctx = make_default_context()      # pushes it unless it was current already
    if before == ctx:
        ctx.push()
    _check_context(ctx)
    return ctx


def mark_cuda_test(inner_f: Callable[_P, object]) -> Callable[_P, None]:
    """Decorate a test so that it runs with a default context pushed (PyCUDA's name).

    The context is popped afterwards, the context-dependent caches are cleared and
    garbage is collected, as in PyCUDA; the test carries pytest's ``cuda`` mark
    when pytest is importable.
    """
    @_functools.wraps(inner_f)
    def f(*args: _P.args, **kwargs: _P.kwargs) -> None:
        ctx = _enter_test_context()
        try:
            inner_f(*args, **kwargs)     # a test's result is dropped, as in PyCUDA
        finally:
            _test_context_done(ctx)

    try:
        import pytest
    except ImportError:
        return f
    with _warnings.catch_warnings():      # 'cuda' need not be a registered mark
        _warnings.simplefilter("ignore")
        mark = pytest.mark.cuda
    return mark(f)


def init_cuda_context_fixture() -> Iterator[None]:
    """Generator for a pytest fixture: a default context pushed around each test.

    Use as ``yield from init_cuda_context_fixture()`` inside a fixture (PyCUDA's name).
    """
    ctx = _enter_test_context()
    try:
        yield
    finally:
        _test_context_done(ctx)


_memo_contexts: _weakref.WeakSet[_drv.Context] = _weakref.WeakSet()   # contexts holding memoized results


def context_dependent_memoize(func: Callable[_P, _R]) -> _MemoizedFunction[_P, _R]:
    """Cache `func`'s results per current context and arguments (PyCUDA's decorator).

    The results live in the context's own ``kernel_cache``, so they never keep a
    context alive and go with it: a detached context (or a reset primary context)
    never hands its modules to the next one.  A call with no context current is not
    cached.  ``clear_context_caches()`` empties every such cache.
    """
    token = ("context_dependent_memoize", func.__module__, func.__qualname__, object())

    @_functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        ctx = _drv.Context.get_current()
        if ctx is None:
            return func(*args, **kwargs)
        cache = ctx.kernel_cache
        key = (token, args, frozenset(kwargs.items())) if kwargs else (token, args)
        try:
            return _cast("_R", cache[key])
        except KeyError:
            value = cache[key] = func(*args, **kwargs)
            _memo_contexts.add(ctx)
            return value

    def clear_cache() -> None:
        for ctx in list(_memo_contexts):
            try:
                cache = ctx.kernel_cache
            except _drv.LogicError:         # detached: its cache went with it
                _memo_contexts.discard(ctx)
                continue
            for key in [k for k in cache if type(k) is tuple and k and k[0] is token]:
                del cache[key]

    memoized = _cast("_MemoizedFunction[_P, _R]", wrapper)   # the same object, typed
    memoized.clear_cache = clear_cache
    _memoized.add(memoized)
    return memoized


def clear_context_caches() -> None:
    """Empty every cache of context_dependent_memoize, in every context, and the
    current context's cache of generated kernels (they are rebuilt from the disk
    cache on next use)."""
    for wrapper in list(_memoized):
        wrapper.clear_cache()
    ctx = _drv.Context.get_current()
    if ctx is not None:
        ctx.kernel_cache.clear()


def __getattr__(name: str) -> list[_MemoizedFunction[..., Any]]:
    if name == "context_dependent_memoized_functions":
        # PyCUDA's list of the memoized functions; here a snapshot of the live ones
        return list(_memoized)
    raise AttributeError(f"module 'barecuda.tools' has no attribute {name!r}")
