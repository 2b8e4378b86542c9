# SPDX-License-Identifier: MIT
"""Large host arrays a program keeps copying are page-locked in place.

A synchronous copy of pageable memory goes through pinned staging buffers
(src/staging.c) at about 0.8x the pinned rate, because every byte is also
copied by the CPU.  Registered memory is copied by the DMA directly, at the
pinned rate, but registering costs about what two staged copies cost
(256 MiB on an H100 machine: 9 ms to register, 6 ms to unregister, against
6 ms per staged copy and 4.9 ms pinned).  So an array is registered only
once it has shown that it is kept: at its `AFTER`-th large copy (to_gpu,
set, or get into it), counting copies of the NumPy array that owns the
memory, whichever view was copied.

Registrations end when their array is collected (a weak reference's
callback, which NumPy runs before it frees the memory) or when the bytes
registered would pass the budget, least recently copied first.  While an
array is counted or registered, NumPy refuses ``ndarray.resize()`` on it (it
has a weak reference).  Set BARECUDA_KEEP_AFTER=0 to turn this off, or
BARECUDA_KEEP_MIB to change the budget (default: an eighth of the memory, at
most 16 GiB).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict
from typing import Any

import numpy as np

from barecuda import _driver

MIN_BYTES = 32 << 20     # smaller arrays are staged: registering them gains too little
PAGE = 4096


def _env_int(name: str, default: int) -> int:
    try:
        return max(0, int(os.environ.get(name, "")))
    except ValueError:
        return default


def _default_budget() -> int:
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        ram = 8 << 30
    return min(ram // 8, 16 << 30)


AFTER = _env_int("BARECUDA_KEEP_AFTER", 3)
_budget = _env_int("BARECUDA_KEEP_MIB", _default_budget() >> 20) << 20

_lock = threading.RLock()      # re-entered when a collection runs a callback inside
# data address of the owning array -> [weak reference, copies seen]
_seen: dict[int, list[Any]] = {}
# page-aligned start -> (weak reference, page-aligned length); least recently copied first
_kept: OrderedDict[int, tuple[weakref.ref[np.ndarray], int]] = OrderedDict()
_bytes = 0                     # registered now: the sum of _kept's lengths
_stats = {"registered": 0, "unregistered": 0, "refused": 0, "evicted": 0}


def _owner(a: np.ndarray) -> np.ndarray | None:
    """The array that owns `a`'s memory, or None when NumPy does not own it
    (memory of a buffer, an mmap, another library)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a if a.base is None and a.flags.owndata else None


def _pages(owner: np.ndarray) -> tuple[int, int]:
    addr = owner.__array_interface__["data"][0]
    start = addr & ~(PAGE - 1)
    end = (addr + owner.nbytes + PAGE - 1) & ~(PAGE - 1)
    return start, end - start


def _known(start: int) -> bool:
    try:
        return bool(_driver._host_known(start))
    except _driver.Error:
        return False


def _forget_seen(addr: int) -> None:
    with _lock:
        _seen.pop(addr, None)


def _release(start: int) -> None:
    """The registration at `start` ends (its array is being collected, or evicted)."""
    global _bytes
    with _lock:
        entry = _kept.pop(start, None)
        if entry is not None:
            _bytes -= entry[1]
    if entry is not None:
        try:
            if _driver._host_unregister(start):
                _stats["unregistered"] += 1
        except Exception:  # noqa: BLE001 - a callback must not raise (interpreter exit)
            pass


def note_copy(host: np.ndarray) -> None:
    """Count a synchronous copy of `host` (to or from the device) and register
    the memory of its owner once it is seen to be kept.  Never raises for the
    array's sake: an array it cannot register is staged as before."""
    global _bytes
    if AFTER <= 0 or host.nbytes < MIN_BYTES:
        return
    owner = _owner(host)
    if owner is None or owner.nbytes < MIN_BYTES:
        return
    start, length = _pages(owner)
    with _lock:
        entry = _kept.get(start)
        if entry is not None and entry[0]() is owner and entry[1] == length:
            _kept.move_to_end(start)
            if _known(start):
                return
            # its registration went with a destroyed context: kept, so register again
            _release(start)
        else:
            seen = _seen.get(start)
            if seen is None or seen[0]() is not owner:
                seen = _seen[start] = [weakref.ref(owner, lambda _, a=start: _forget_seen(a)), 0]
            seen[1] += 1
            if seen[1] < AFTER:
                return
            del _seen[start]
        if length > _budget or _known(start):   # too large, or page-locked already
            return
        _evict(_budget - length)
        try:
            done = _driver._host_register(start, length)
        except _driver.Error:       # no driver or context: the copy itself will say so
            done = False
        if not done:
            _stats["refused"] += 1
            return
        _kept[start] = (weakref.ref(owner, lambda _, s=start: _release(s)), length)
        _bytes += length
        _stats["registered"] += 1


def _evict(room: int) -> None:
    """End registrations, least recently copied first, until at most `room`
    bytes stay registered."""
    while _kept and _bytes > room:
        _stats["evicted"] += 1
        _release(next(iter(_kept)))


def info() -> dict[str, Any]:
    """What is registered now: {"arrays", "bytes", "budget", "after"} and counts
    of registrations made, ended, refused by the driver and evicted."""
    with _lock:
        return dict(arrays=len(_kept), bytes=_bytes, budget=_budget, after=AFTER, **_stats)


def configure(after: int | None = None, budget: int | None = None) -> dict[str, Any]:
    """Change AFTER (copies before registering; 0 turns it off) and the budget in
    bytes; registrations past a smaller budget end now.  Returns info()."""
    global AFTER, _budget
    with _lock:
        if after is not None:
            if not isinstance(after, int) or after < 0:
                raise ValueError(f"after must be an int >= 0, not {after!r}")
            AFTER = after
        if budget is not None:
            if not isinstance(budget, int) or budget < 0:
                raise ValueError(f"budget must be an int >= 0, not {budget!r}")
            _budget = budget
        _evict(_budget if AFTER else 0)
    return info()
