# SPDX-License-Identifier: MIT
"""Default contexts and per-context memoization: PyCUDA's ``tools.make_default_context``,
``context_dependent_memoize``, ``mark_cuda_test`` and their helpers (shown by
barecuda.tools, used by barecuda.autoinit and the kernel getters).
"""

from __future__ import annotations

import functools as _functools
import os
import warnings as _warnings
import weakref as _weakref
from typing import TYPE_CHECKING as _TYPE_CHECKING, cast as _cast

from barecuda import _driver as _drv
from barecuda._core.names import public

if _TYPE_CHECKING:   # typing-only names: nothing here is imported at run time
    from collections.abc import Callable, Iterator
    from typing import Any, ParamSpec, Protocol, TypeVar

    _P = ParamSpec("_P")
    _R = TypeVar("_R")
    _R_co = TypeVar("_R_co", covariant=True)

    class _MemoizedFunction(Protocol[_P, _R_co]):
        """What context_dependent_memoize returns: the function, plus clear_cache()."""

        clear_cache: Callable[[], None]

        def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R_co: ...

_HOME = "barecuda.tools"


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


@public(_HOME)
def get_default_device(default: int = 0) -> _drv.Device:
    """The Device named by $CUDA_DEVICE, else by ~/.cuda_device, else Device(default).

    Deprecated in PyCUDA (a DeprecationWarning says so): use make_default_context().
    Raises driver.LogicError when the setting is not an int.
    """
    _warnings.warn("get_default_device() is deprecated; use make_default_context() instead",
                   DeprecationWarning, stacklevel=2)
    ordinal = _requested_device()
    return _drv.Device(default if ordinal is None else ordinal)


@public(_HOME)
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


@public(_HOME)
def host_pool(budget_mib: int | None = None) -> dict[str, int]:
    """The host pool that keeps the memory of large arrays ``GPUArray.get()`` made
    (8 MiB or more) for the next ones, page-locked from its second use: its counts
    (``buffers``, ``in_use``, ``free_bytes``, ``registered_bytes``, ``budget``,
    ``hits``, ``misses``, ``registrations``, ``evictions``).  With `budget_mib`,
    first sets how much free memory it may keep (and page-lock), letting go of the
    rest now; 0 turns it off.  The first budget comes from BARECUDA_HOST_POOL_MIB
    (default: a sixteenth of the memory, at most 2 GiB)."""
    return _drv._host_pool(budget_mib)


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


@public(_HOME)
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


@public(_HOME)
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


@public(_HOME)
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


@public(_HOME)
def clear_context_caches() -> None:
    """Empty every cache of context_dependent_memoize, in every context, and the
    current context's cache of generated kernels (they are rebuilt from the disk
    cache on next use)."""
    for wrapper in list(_memoized):
        wrapper.clear_cache()
    ctx = _drv.Context.get_current()
    if ctx is not None:
        ctx.kernel_cache.clear()

