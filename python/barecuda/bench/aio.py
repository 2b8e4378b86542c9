# SPDX-License-Identifier: MIT
"""Benchmark section ``aio``: waiting for the GPU from asyncio (``await stream``).

Three parts, all in one event loop of this process, each against its floor in the
same run:

- ``wake-up``: from a kernel's end to the waiting code running again, median and
  p99 over ``TRIALS`` trials of each way to wait: ``stream.synchronize()`` (the
  floor), ``await stream`` (ours, with the default spin window: for the await's
  first 2 ms the awaiting task asks the awaited work's event on each pass of the
  loop),
  ``await stream`` with no spin window (``set_await_spin(0)``: woken by the
  driver's stream callback alone), ``await loop.run_in_executor(None,
  stream.synchronize)`` and polling ``stream.is_done()`` with ``await
  asyncio.sleep(50e-6)`` between polls; and, for scale, one pass of the event loop
  (``await asyncio.sleep(0)``, no GPU involved), the resolution of any way of
  waiting that runs in the loop.  The ways take turns trial by trial.  A
  trial: a one-thread kernel writes "started" into a word of page-locked host
  memory mapped into the device, then spins on a second such word (volatile reads,
  bounded by ``%globaltimer`` so a lost write cannot hang the GPU); the waiter is
  set up (the future made, the executor's thread given ``SETTLE`` to enter
  synchronize), the host sees "started", writes the go word and takes t0; t1 is
  taken when the wait returns.  ratio = median (p99) / synchronize's median (p99):
  less is better.  Goal for ``await stream``: median within ``LATENCY_GOAL`` x the
  synchronize median, and below the executor's and the poller's.
- ``CPU while waiting``: process CPU time (``time.process_time``, every thread of
  the process, the driver's included) during a wait for a kernel that spins on
  ``%globaltimer`` for ``CPU_SECONDS``, as a percentage of one core: ``await
  stream`` (goal <= ``CPU_GOAL`` %), ``stream.synchronize()`` and
  ``event.synchronize()`` in the primary context with the driver's default flags
  (SCHED_AUTO: they may spin; reported, no target), and ``event.synchronize()``
  on an event made with ``BLOCKING_SYNC``.
- ``server``: requests per second of ``examples/async_server.py`` (loaded from
  the source tree, or the current directory's ``examples/``: run from the
  checkout's root; the rows say so when it is not found) with 1, 4 and 16
  streams: ``CLIENTS`` concurrent clients send ``REQUESTS`` requests of
  ``FLOATS`` float32 each way over loopback TCP; each request copies in, runs a
  kernel calibrated here to take about ``KERNEL_US`` us, copies back.  The same
  server waiting with ``run_in_executor(None, stream.synchronize)`` runs beside it,
  in two halves (ours first, then theirs first).  ratio = ours / executor: more
  is better.  Every answer is checked (the first of each client against NumPy,
  the others equal to it); wrong answers are noted.

Without a GPU every row is given without a value and says why.  Sized to take about
15 s on a GPU (the goal is under 40 s).
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import statistics
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Awaitable, Callable

import numpy as np

from barecuda.bench import row

TRIALS = 300
WARMUP = 20
SETTLE = 1e-3                 # s between "started" and go: an executor's thread is in synchronize
POLL = 50e-6                  # the poller's asyncio.sleep
SPIN_TIMEOUT_NS = 1_000_000_000
LATENCY_GOAL = 1.5            # await stream's median / synchronize's median
CPU_SECONDS = 1.0
CPU_GOAL = 1.0                # % of one core while awaiting
STREAMS = (1, 4, 16)
CLIENTS = 64
REQUESTS = 2000
FLOATS = 1 << 16              # 256 KiB each way per request
KERNEL_US = 300
PART_TIMEOUT = 120.0          # s for each part: a hang becomes an error, not a stuck benchmark

KERNELS = r"""
/* %globaltimer: nanoseconds, one clock for the whole GPU. */
__device__ __forceinline__ unsigned long long now_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

/* The wake-up probe (one thread).  go and started are page-locked host memory
   mapped into the device, read and written through volatile pointers: say that the
   kernel runs (*started = trial), then spin until the host writes *go = trial.
   After timeout_ns give up and say so (*started = -trial): no bug hangs the GPU. */
__global__ void wait_for_go(volatile int *go, volatile int *started, int trial,
                            unsigned long long timeout_ns)
{
    unsigned long long t0 = now_ns();
    *started = trial;
    __threadfence_system();
    while (*go != trial) {
        if (now_ns() - t0 > timeout_ns) {
            *started = -trial;
            __threadfence_system();
            return;
        }
    }
}

/* Busy for ns nanoseconds (one thread). */
__global__ void spin_for(unsigned long long ns)
{
    unsigned long long t0 = now_ns();
    while (now_ns() - t0 < ns) { }
}
"""

# (key, label) of the ways to wait in the wake-up part; the first is the floor.
WAKE = [
    ("sync", "stream.synchronize()"),
    ("await", "await stream"),
    ("await_cb", "await stream, no spin window"),
    ("executor", "await run_in_executor(synchronize)"),
    ("poll", "poll is_done(), sleep 50 us"),
    ("pass", "one pass of the event loop (await asyncio.sleep(0)), no GPU"),
]
# (key, label) of the waits in the CPU part.
CPU = [
    ("await", "await stream"),
    ("sync", "stream.synchronize()"),
    ("event", "event.synchronize()"),
    ("event_blocking", "event.synchronize(), BLOCKING_SYNC event"),
]


def _wake_name(label: str, stat: str) -> str:
    return f"wake-up, {label}, {stat}"


def _cpu_name(label: str) -> str:
    return f"CPU during a {CPU_SECONDS:g} s wait, {label}"


def _server_name(n: int) -> str:
    return f"server req/s, {n} stream{'s' if n > 1 else ''}, await stream"


def row_names() -> list[tuple[str, str]]:
    """(name, unit) of every row, in order."""
    names = [(_wake_name(label, stat), "us") for _, label in WAKE for stat in ("median", "p99")]
    names += [(_cpu_name(label), "% of a core") for _, label in CPU]
    names += [(_server_name(n), "req/s") for n in STREAMS]
    return names


def _skipped(note: str) -> list[dict[str, Any]]:
    return [row(name, None, unit, note=note) for name, unit in row_names()]


def run() -> list[dict[str, Any]]:
    from barecuda import driver as drv

    try:
        drv.init()
        count = drv.Device.count()
    except drv.Error as exc:
        why = str(exc).splitlines()[0]
        return _skipped(f"skipped: no GPU ({why[:60]}{'...' if len(why) > 60 else ''})")
    if count == 0:
        return _skipped("skipped: no GPU found")
    ctx = drv.Device(0).retain_primary_context()
    ctx.push()
    try:
        return asyncio.run(_measure(drv))
    finally:
        drv.Context.pop()
        ctx.detach()


async def _measure(drv: Any) -> list[dict[str, Any]]:
    from barecuda.compiler import SourceModule

    module = SourceModule(KERNELS)
    stream = drv.Stream()
    rows = await asyncio.wait_for(_wake_up_rows(drv, module, stream), PART_TIMEOUT)
    rows += await asyncio.wait_for(_cpu_rows(drv, module, stream), PART_TIMEOUT)
    rows += await _server_rows(drv)
    return rows


# ------------------------------------------------------------------ wake-up

class _Probe:
    """The wake-up probe: two words of mapped page-locked memory and the kernel
    that waits on them."""

    def __init__(self, drv: Any, module: Any, stream: Any) -> None:
        self.words = drv.pagelocked_zeros(64, np.int32, mem_flags=drv.host_alloc_flags.DEVICEMAP)
        base = self.words.base.get_device_pointer()
        self.go, self.started = base, base + 128        # words 0 and 32: other cache lines
        self.kernel = module.get_function("wait_for_go").prepare("PPiQ")
        self.stream = stream
        self.trial = 0

    def launch(self) -> None:
        self.trial += 1
        self.kernel.prepared_async_call((1, 1), (1, 1, 1), self.stream, self.go, self.started,
                                        self.trial, SPIN_TIMEOUT_NS)

    def release(self) -> int:
        """Wait until the kernel runs, let SETTLE pass, write go; returns t0 (ns)."""
        words, trial = self.words, self.trial
        deadline = time.perf_counter() + 5.0
        while words[32] != trial:
            if words[32] == -trial or time.perf_counter() > deadline:
                raise RuntimeError(f"the probe kernel of trial {trial} did not start in time")
        time.sleep(SETTLE)
        words[0] = trial
        return time.perf_counter_ns()

    def check(self) -> None:
        if self.words[32] != self.trial:
            raise RuntimeError(f"the probe kernel of trial {self.trial} timed out: it never "
                               "saw the host's write")


async def _wake_sync(p: _Probe) -> int:
    p.launch()
    t0 = p.release()
    p.stream.synchronize()
    return time.perf_counter_ns() - t0


async def _wake_await(p: _Probe) -> int:
    p.launch()
    done = p.stream.done()          # what `await stream` awaits, made before go
    t0 = p.release()
    await done
    return time.perf_counter_ns() - t0


async def _wake_await_callback(p: _Probe) -> int:
    from barecuda import driver as drv
    p.launch()
    previous = drv.set_await_spin(0)
    try:
        done = p.stream.done()
    finally:
        drv.set_await_spin(previous)
    t0 = p.release()
    await done
    return time.perf_counter_ns() - t0


async def _wake_executor(p: _Probe) -> int:
    p.launch()
    done = asyncio.get_running_loop().run_in_executor(None, p.stream.synchronize)
    t0 = p.release()
    await done
    return time.perf_counter_ns() - t0


async def _wake_poll(p: _Probe) -> int:
    p.launch()
    t0 = p.release()
    while not p.stream.is_done():
        await asyncio.sleep(POLL)
    return time.perf_counter_ns() - t0


async def _one_pass(p: _Probe) -> int:
    t0 = time.perf_counter_ns()
    await asyncio.sleep(0)
    return time.perf_counter_ns() - t0


_WAITERS: dict[str, Callable[[_Probe], Awaitable[int]]] = {
    "sync": _wake_sync, "await": _wake_await, "await_cb": _wake_await_callback,
    "executor": _wake_executor, "poll": _wake_poll, "pass": _one_pass}


async def _wake_up_rows(drv: Any, module: Any, stream: Any) -> list[dict[str, Any]]:
    probe = _Probe(drv, module, stream)
    keys = [k for k, _ in WAKE]
    times: dict[str, list[float]] = {k: [] for k in keys}
    gc.collect()
    gc.disable()
    try:
        for i in range(WARMUP + TRIALS):
            for key in keys[i % len(keys):] + keys[:i % len(keys)]:   # each goes first in turn
                ns = await _WAITERS[key](probe)
                probe.check()
                if i >= WARMUP:
                    times[key].append(ns / 1e3)
    finally:
        gc.enable()
    med = {k: statistics.median(v) for k, v in times.items()}
    p99 = {k: float(np.percentile(v, 99)) for k, v in times.items()}
    rows = []
    for key, label in WAKE:
        note = None
        if key == "sync":
            note = "the floor"
        elif key == "await":
            ok = (med["await"] <= LATENCY_GOAL * med["sync"] and med["await"] < med["executor"]
                  and med["await"] < med["poll"])
            note = (f"goal: median <= {LATENCY_GOAL}x synchronize, below the executor "
                    f"({med['executor']:.1f} us) and the poller ({med['poll']:.1f} us): "
                    f"{'met' if ok else 'MISSED'}; the kernel ends {SETTLE * 1e3:g} ms "
                    "into the await, within its spin window (a longer wait: the row "
                    "below)")
        elif key == "await_cb":
            note = ("the driver's callback thread, then the loop's epoll, each woken: "
                    "the cost the spin window saves")
        elif key == "poll":
            note = "epoll's timeout has millisecond resolution"
        elif key == "pass":
            note = (f"the loop's own resolution: await stream = synchronize + "
                    f"{(med['await'] - med['sync']) / med['pass']:.1f} passes")
        rows.append(row(_wake_name(label, "median"), med[key], "us", med[key] / med["sync"],
                        f"synchronize {med['sync']:.1f} us", note))
        rows.append(row(_wake_name(label, "p99"), p99[key], "us", p99[key] / p99["sync"],
                        f"synchronize p99 {p99['sync']:.1f} us", f"{TRIALS} trials"))
    return rows


# ------------------------------------------------------------ CPU while waiting

async def _cpu_rows(drv: Any, module: Any, stream: Any) -> list[dict[str, Any]]:
    spin = module.get_function("spin_for").prepare("Q")

    async def await_stream() -> None:
        await stream

    async def sync_stream() -> None:
        stream.synchronize()

    async def sync_event() -> None:
        drv.Event().record(stream).synchronize()

    async def sync_event_blocking() -> None:
        drv.Event(drv.event_flags.BLOCKING_SYNC).record(stream).synchronize()

    waits = {"await": await_stream, "sync": sync_stream, "event": sync_event,
             "event_blocking": sync_event_blocking}
    spin.prepared_async_call((1, 1), (1, 1, 1), stream, 1_000_000)   # warm-up: 1 ms
    await stream
    got = {}
    for key, _ in CPU:
        spin.prepared_async_call((1, 1), (1, 1, 1), stream, int(CPU_SECONDS * 1e9))
        c0, w0 = time.process_time(), time.perf_counter()
        await waits[key]()
        c1, w1 = time.process_time(), time.perf_counter()
        got[key] = (100 * (c1 - c0) / (w1 - w0), w1 - w0)
    rows = []
    for key, label in CPU:
        pct, wall = got[key]
        note = f"waited {wall:.2f} s"
        if wall < 0.5 * CPU_SECONDS:
            note += " (less than the kernel should take: figure doubtful)"
        if key == "await":
            note = (f"goal <= {CPU_GOAL:g}%: {'met' if pct <= CPU_GOAL else 'MISSED'}; {note}")
        elif key in ("sync", "event"):
            note = f"default context flags, may spin: no target; {note}"
        vs = f"synchronize {got['sync'][0]:.1f}%" if key == "await" else None
        rows.append(row(_cpu_name(label), pct, "% of a core", None, vs, note))
    return rows


# ------------------------------------------------------------------- server

def _load_example() -> tuple[ModuleType | None, str | None]:
    """examples/async_server.py of the source tree this module lies in (an editable
    install), else of the current directory (the checkout's root), or (None, why not)."""
    dirs = [p / "examples" for p in Path(__file__).resolve().parents] + [Path.cwd() / "examples"]
    for d in dirs:
        path = d / "async_server.py"
        if path.is_file():
            spec = importlib.util.spec_from_file_location("_barecuda_example_async_server", path)
            assert spec is not None and spec.loader is not None
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            return mod, None
    return None, "skipped: examples/async_server.py not found (run from the checkout's root)"


def _calibrate(drv: Any, example: ModuleType) -> tuple[int, float]:
    """Newton steps that make the example's kernel take about KERNEL_US on FLOATS
    elements, and the microseconds it then takes (median of 5, timed with events)."""
    from barecuda.compiler import SourceModule

    kernel = SourceModule(example.KERNEL).get_function("newton_sqrt").prepare("Pii")
    x = np.random.default_rng(2).uniform(1, 100, FLOATS).astype(np.float32)
    dev = drv.to_device(x)
    stream = drv.Stream()

    def kernel_us(steps: int) -> float:
        ts: list[float] = []
        for _ in range(5):
            start = drv.Event().record(stream)
            kernel.prepared_async_call(example.GRID, example.BLOCK, stream, dev, FLOATS, steps)
            stop = drv.Event().record(stream).synchronize()
            ts.append(float(start.time_till(stop)) * 1e3)
        return statistics.median(ts)

    kernel_us(10)                                   # warm-up
    steps = max(10, min(10_000_000, round(example.STEPS * KERNEL_US / kernel_us(example.STEPS))))
    took = kernel_us(steps)
    dev.free()
    return steps, took


async def _drive(example: ModuleType, server: Any, payloads: list[Any],
                 requests: int) -> tuple[float, int]:
    """Send `requests` requests from len(payloads) concurrent clients (client k
    sends payloads[k] each time); returns (seconds, wrong answers)."""
    host, port = server.sockets[0].getsockname()[:2]
    left, wrong = requests, 0

    async def one_client(x: Any) -> None:
        nonlocal left, wrong
        reader, writer = await asyncio.open_connection(host, port)
        first = None
        try:
            while left > 0:
                left -= 1
                y = await example.request(reader, writer, x)
                if first is None:
                    first = y
                    wrong += not np.allclose(y, np.sqrt(x), rtol=1e-5)
                elif not np.array_equal(y, first):
                    wrong += 1
        finally:
            writer.close()
            await writer.wait_closed()

    t0 = time.perf_counter()
    await asyncio.gather(*(one_client(x) for x in payloads))
    return time.perf_counter() - t0, wrong


async def _server_rows(drv: Any) -> list[dict[str, Any]]:
    example, why = _load_example()
    if example is None:
        return [row(_server_name(n), None, "req/s", note=why) for n in STREAMS]
    steps, took = _calibrate(drv, example)
    rng = np.random.default_rng(1)
    payloads = [rng.uniform(1, 100, FLOATS).astype(np.float32) for _ in range(CLIENTS)]
    rows = []
    for n in STREAMS:
        servers = {w: await example.serve(n, wait=w, steps=steps) for w in ("await", "executor")}
        elapsed = dict.fromkeys(servers, 0.0)
        wrong = 0
        try:
            for w in servers:                                       # warm-up: a request each
                wrong += (await asyncio.wait_for(_drive(example, servers[w], payloads, CLIENTS),
                                                 PART_TIMEOUT))[1]
            for order in (("await", "executor"), ("executor", "await")):
                for w in order:
                    t, bad = await asyncio.wait_for(
                        _drive(example, servers[w], payloads, REQUESTS // 2), PART_TIMEOUT)
                    elapsed[w] += t
                    wrong += bad
        finally:
            for s in servers.values():
                s.close()
                await s.wait_closed()
        done = 2 * (REQUESTS // 2)
        ours, theirs = done / elapsed["await"], done / elapsed["executor"]
        note = (f"{CLIENTS} clients, {done} requests of {FLOATS * 4 // 1024} KiB each way, "
                f"kernel {took:.0f} us ({steps} steps)")
        if wrong:
            note = f"WRONG ANSWERS: {wrong}; {note}"
        rows.append(row(_server_name(n), ours, "req/s", ours / theirs,
                        f"run_in_executor {theirs:.0f} req/s", note))
    return rows
