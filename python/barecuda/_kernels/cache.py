# SPDX-License-Identifier: MIT
"""Per-context kernel caches and launch geometry, shared by every kernel template:
the compiled kernels live in the current context's ``kernel_cache`` (so they never
keep a context alive), the grids come from the device's multiprocessor count, and
sources are compiled by barecuda.compiler's SourceModule.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from barecuda import _driver as _drv
from barecuda._core.names import public
from barecuda._driver import _HotEntry as HotEntry  # noqa: F401  (the C fast path's entry)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from barecuda.compiler import SourceModule

BLOCK = 256          # threads per block of the generated loops
BLOCKS_PER_SM = 8    # 2048 resident threads per SM on every architecture we target


_current_context = _drv.Context.get_current


@public("barecuda.elementwise")
def context_cache() -> dict[Any, Any]:
    """The dict of compiled kernels of the current context (``Context.kernel_cache``).

    The context owns it, so kernels never keep a context alive: detach() empties
    it, and a context nobody references is collected with its kernels.  An empty
    throwaway dict when no context is current yet.
    """
    ctx = _current_context()
    return {} if ctx is None else ctx.kernel_cache


@public("barecuda.elementwise")
def cache_store(cache: dict[Any, Any] | None, key: Any, entry: Any) -> Any:
    """``cache[key] = entry``; entries whose kernel object is gone (first item a
    dead weak reference) are swept out whenever the dict has doubled."""
    if len(cache) >= cache.get("__sweep_at__", 64):
        dead = [k for k, v in cache.items()
                if type(v) is tuple and v and type(v[0]) is weakref.ref and v[0]() is None]
        for k in dead:
            del cache[k]
        cache["__sweep_at__"] = 2 * len(cache) + 64
    cache[key] = entry
    return entry


@public("barecuda.elementwise")
def device_blocks(cache: dict[Any, Any] | None = None) -> tuple[int, int]:
    """(multiprocessor count, max threads per block) of the current context's device."""
    if cache is None:
        cache = context_cache()
    info = cache.get("__device__")
    if info is None:
        dev = _drv.Context.get_device()
        info = cache["__device__"] = (dev.multiprocessor_count, dev.max_threads_per_block)
    return info


@public("barecuda.elementwise")
def grid_for(n: int, cache: dict[Any, Any] | None = None, block: int = BLOCK,
             per_sm: int = BLOCKS_PER_SM) -> int:
    """Blocks for a grid-stride loop over n elements."""
    sm = device_blocks(cache)[0]
    g = (n + block - 1) // block
    cap = sm * per_sm
    return max(1, g if g < cap else cap)


@public("barecuda.elementwise")
def source_module(source: str, options: Sequence[str] | None = None,
                  keep: bool = False) -> SourceModule:
    from barecuda.compiler import SourceModule
    return SourceModule(source, options=options, keep=keep, no_extern_c=True)

