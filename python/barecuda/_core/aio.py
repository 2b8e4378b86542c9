# SPDX-License-Identifier: MIT
"""asyncio futures for the driver's completion points: ``await stream``, ``await event``.

How the loop learns that the GPU is done, with no thread of ours waiting: each
event loop has one :class:`_LoopWaker`, which owns a C ``_Waker`` (src/waker.c: an
eventfd that a stream callback writes on the driver's callback thread, where no
Python runs) and watches its fd with ``loop.add_reader``.  Every pending await of
that loop is one entry of its table, answered when the fd turns readable: the
future gets None (or the event, or a copy's host array), or the driver error the
callback was given, or LogicError when the stream was closed or its context
detached first.

Waking that way costs what the driver's callback thread and the loop's epoll take
to wake (150 to 190 us a median on the lent H200, against 5 to 9 us for a
spinning ``synchronize()``).  So for its first ``spin`` seconds (:func:`set_spin`;
2 ms by default) an await is also asked about from the loop itself, one event
query (``cuEventQuery``, no system call) per pass of the loop, which does not sleep
meanwhile.  A task awaiting a future directly asks its own mark each time it runs
and resumes in the pass that finds the work done (:class:`GPUFuture`, below: its
steps run in C); a future awaited in other ways (``gather``, ``wait``) is asked by
the loop's ``_poll``, queued once per pass while any such future is in its window.
A wait longer than the window costs the loop that window's CPU once (0.3% of a
core over a 1 s kernel) and then nothing until the fd wakes it.  (Asking on in C
while the loop had nothing else to run, looking at its selector every few
microseconds, was tried and measured: it woke later than one query per pass on the
lent H200s and kept the GIL from other threads.)

What users rely on, and where it is kept:
- Cancelling an await (``asyncio.wait_for``'s timeout, a cancelled task) only
  cancels the future: the GPU work goes on, what it reads and writes stays alive in
  the C watch until the callback comes, and the callback then finds a done future.
- A loop closed while awaits are pending: the table holds the futures weakly and
  the registry holds loops weakly, so the loop, its table and the Waker go; the
  Waker's fd is closed, and the watches still pending let go of what they kept when
  the GPU is past them (src/waker.c).
- Awaits wake in the order their work completes (to within one pass of the loop):
  each has a mark of its own, and an event's await its callback on a side stream
  (src/waker.c).  A stream's await puts its callback on the stream: work queued
  there next starts once the driver has run it.

This module imports asyncio on first use only (``import barecuda`` stays cheap).
"""

from __future__ import annotations

import itertools
import numbers
import weakref
from typing import Any

from barecuda import _driver

_tokens = itertools.count(1)
_spin = 2e-3                                       # s: set_spin()
_by_loop: weakref.WeakKeyDictionary[Any, _LoopWaker] = weakref.WeakKeyDictionary()
_last: tuple[Any, Any] | None = None              # weak references: (loop, its waker)


def done(obj: Any, result: Any = None, keep: Any = None) -> Any:
    """A future of the running loop, done once `obj`'s work is: an Event (the work
    before its last record; the result is the event unless `result` is given) or a
    stream (a Stream, None for the legacy default stream, a handle, or an object with
    ``__cuda_stream__``; the work queued on it so far; the result is `result`).
    `keep` stays alive until the GPU is past that work (a copy's buffers)."""
    waker = _waker_for_running_loop()
    if isinstance(obj, _driver.Event) and result is None:
        result = obj
    return waker.watch(obj, result, keep)


def set_spin(seconds: float) -> float:
    """Set how long each await is also asked about from its loop (see above); returns
    the previous value.  0 leaves every wake-up to the driver's callback."""
    global _spin
    if not isinstance(seconds, numbers.Real) or isinstance(seconds, bool):
        raise TypeError(f"the spin window is a number of seconds, not "
                        f"{type(seconds).__name__}")
    value = float(seconds)
    if not 0.0 <= value <= 1.0:         # also refuses NaN
        raise ValueError(f"the spin window must be from 0 to 1 s, not {seconds!r}")
    previous, _spin = _spin, value
    return previous


def _waker_for_running_loop() -> _LoopWaker:
    global _last
    import asyncio

    loop = asyncio.get_running_loop()
    last = _last
    if last is not None and last[0]() is loop:
        known: _LoopWaker | None = last[1]()
        if known is not None:
            return known
    waker = _by_loop.get(loop)
    if waker is None:
        waker = _by_loop[loop] = _LoopWaker(loop)
    _last = (weakref.ref(loop), weakref.ref(waker))
    return waker


class _LoopWaker:
    """The awaits pending on one event loop, and the fd that tells it of them."""

    def __init__(self, loop: Any) -> None:
        self._waker = _driver._Waker()
        # token -> (weak reference to the future, its result)
        self._pending: dict[int, tuple[Any, Any]] = {}
        self._loop = weakref.ref(loop)
        self._spinning = False                # a _poll is queued on the loop
        loop.add_reader(self._waker.fileno(), self._drain)

    def watch(self, target: Any, result: Any, keep: Any) -> Any:
        loop = self._loop()
        if loop is None:           # only a running loop's _LoopWaker is ever asked
            raise RuntimeError("the event loop of this waker is gone")
        fut = _future_type()(loop=loop)
        token = next(_tokens)
        mark = self._waker.watch(target, token, (target, keep), _spin)
        self._pending[token] = (weakref.ref(fut), result)
        if mark is not None:
            fut._mark, fut._gpu_result, fut._waker, fut._token = mark, result, self, token
            fut._spin_until = loop.time() + _spin
        return fut

    def ask_for(self, fut: Any) -> None:
        """`fut` is awaited other than directly (a done-callback was added) while
        in its window: have the loop's _poll ask about it (and about every await
        in its window) on each pass."""
        loop = self._loop()
        if self._spinning or loop is None or loop.time() >= fut._spin_until:
            return
        self._spinning = True
        loop.call_soon(self._poll)

    def _drain(self) -> None:
        for token, exc in self._waker.drain():
            self._answer(token, exc)

    def _poll(self) -> None:
        """Queued with call_soon while futures awaited other than directly are in
        their spin window: the loop then does not sleep, and each pass asks about
        every await in its window."""
        idle, spinning = self._waker.poll()
        for token in idle:
            self._answer(token, None)
        loop = self._loop()
        self._spinning = bool(spinning) and loop is not None and not loop.is_closed()
        if self._spinning:
            loop.call_soon(self._poll)

    def _answer(self, token: int, exc: BaseException | None) -> None:
        entry = self._pending.pop(token, None)
        if entry is None:
            return
        ref, result = entry
        fut = ref()
        if fut is None or fut.done():          # dropped or cancelled: nothing to tell
            return
        if exc is None:
            fut.set_result(result)
        else:
            fut.set_exception(exc)


_Future: Any = None


def _future_type() -> Any:
    """The future type of the awaits, made on first use (asyncio is imported then)."""
    global _Future
    if _Future is not None:
        return _Future
    import asyncio

    class GPUFuture(asyncio.Future):  # type: ignore[type-arg]
        """A future of GPU work.  Awaited directly (``await stream``), it asks its
        mark itself each time its task runs while its spin window lasts and, the
        work done, returns at once: no done-callback, no pass of the loop in
        between (the steps run in C: ``_Waker.awaiting``).  Awaited in other ways
        (``gather``) it is an ordinary future, answered by the loop's _poll or the
        driver's callback."""

        _spin_until = 0.0
        _mark: Any = None
        _gpu_result: Any = None
        _waker: Any = None
        _token = 0

        def __await__(self) -> Any:
            waker = self._waker
            if waker is None:           # no spin window: an ordinary future
                return super().__await__()
            return waker._waker.awaiting(                           # src/waker.c
                self, self._mark, self._gpu_result, self._spin_until, self._token,
                self._loop)

        __iter__ = __await__

        def add_done_callback(self, fn: Any, *, context: Any = None) -> None:
            super().add_done_callback(fn, context=context)
            if self._waker is not None and not self.done():
                self._waker.ask_for(self)

    _Future = GPUFuture
    return _Future


_driver._set_awaiter(done)
