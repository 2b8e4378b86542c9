# SPDX-License-Identifier: MIT
"""See what the GPU did: a timeline of launches, copies, synchronizations and NVTX ranges.

``with trace() as t:`` records every kernel launch (``Function.__call__``,
``prepared_*call``, ``launch_ex``, and so ElementwiseKernel, ReductionKernel, scan
and GPUArray operations), graph launch, memcpy/memset (1D, 2D, 3D, peer, arrays;
sync and async), allocation (``mem_alloc``, pitch, pool, managed, page-locked,
GPUArray blocks) and synchronize (Context, Stream, Event) that barecuda issues,
plus NVTX ranges and marks.  Each record has the host call's begin/end
(``time.perf_counter_ns``) and, for work queued on a stream, GPU begin/end from
CUDA events recorded on that stream around the op, put on the same clock.

Afterwards ``t.events`` is the list of :class:`TraceEvent`, ``t.to_chrome(path)``
writes Chrome-trace/Perfetto JSON (open it at https://ui.perfetto.dev),
``t.to_svg(path)`` draws a self-contained SVG timeline and ``t.summary()`` sums
time per kernel and copy direction, GPU busy time and idle gaps.

Rules: one trace records at a time in a process (starting a second raises
RuntimeError); every thread's operations are recorded, each with its thread id;
a Trace records once.  When no trace is active the library pays one pointer test
per operation (src/trace.c keeps the records in C until the trace ends).  GPU
times are measured against one base event of the context current at start;
work on another context's streams and launches captured into a graph keep host
times only.  Timing events serialise nothing, but do add a few microseconds of
host time per recorded op.

NVTX (``nvtx_range``, ``nvtx_push``/``nvtx_pop``, ``nvtx_mark``) goes to Nsight
Systems through the NVTX library found at run time (src/nvtx.c) and, while a
trace records, into its timeline as host spans.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from barecuda import _driver

# Imported where they are used, not here: json, tempfile and threading (which
# writing a trace needs, not recording one) and pathlib, whose import pulls in
# urllib (pathlib.Path.as_uri); escape() below is xml.sax.saxutils's, whose import
# pulls in urllib, http.client and email.  barecuda.tools imports this module.

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from pathlib import Path
    from types import TracebackType
    from typing import ParamSpec, TypeVar

    _P = ParamSpec("_P")
    _R = TypeVar("_R")

__all__ = ["Trace", "TraceEvent", "TraceSummary", "trace", "trace_dir", "nvtx_range",
           "nvtx_push", "nvtx_pop", "nvtx_mark", "nvtx_range_start", "nvtx_range_end",
           "nvtx_available", "nvtx_name_thread"]

nvtx_available = _driver.nvtx_available
nvtx_push = _driver.nvtx_push
nvtx_pop = _driver.nvtx_pop
nvtx_mark = _driver.nvtx_mark
nvtx_range_start = _driver.nvtx_range_start
nvtx_range_end = _driver.nvtx_range_end
nvtx_name_thread = _driver.nvtx_name_thread

KINDS = ("kernel", "copy", "memset", "alloc", "sync", "graph", "range", "mark")
COLORS = {"kernel": "#4e79a7", "copy": "#f28e2b", "memset": "#edc948", "alloc": "#b07aa1",
          "sync": "#e15759", "graph": "#59a14f", "range": "#bab0ac", "mark": "#000000"}
GPU_KINDS = frozenset({"kernel", "copy", "memset", "graph"})


@dataclass(frozen=True)
class TraceEvent:
    """One recorded operation.  Times are ``time.perf_counter_ns`` values; the GPU
    ones are None when the op was not timed on the GPU (host-only kinds, captured
    launches, another context's streams)."""

    kind: str
    name: str
    stream: int
    thread: int
    host_start_ns: int
    host_end_ns: int
    gpu_start_ns: int | None = None
    gpu_end_ns: int | None = None
    bytes: int = 0
    grid: tuple[int, int, int] | None = None
    block: tuple[int, int, int] | None = None
    shared: int = 0
    failed: bool = False

    @property
    def on_gpu(self) -> bool:
        """Whether GPU begin and end times are known."""
        return self.gpu_start_ns is not None and self.gpu_end_ns is not None

    @property
    def host_ns(self) -> int:
        """Nanoseconds the host call took."""
        return self.host_end_ns - self.host_start_ns

    @property
    def gpu_ns(self) -> int | None:
        """Nanoseconds the GPU spent on it, or None when not timed on the GPU."""
        if self.gpu_start_ns is None or self.gpu_end_ns is None:
            return None
        return self.gpu_end_ns - self.gpu_start_ns


@dataclass
class TraceSummary:
    """Sums over a trace's events (GPU times).  ``kernels`` maps a kernel name to
    (launches, total ns); ``copies`` a direction (HtoD, DtoH, DtoD, ...) to
    (copies, bytes, total ns); ``busy_ns`` is the union of GPU spans, ``span_ns``
    first GPU start to last GPU end, ``gaps`` the idle (start, end) intervals
    inside it, longest first."""

    kernels: dict[str, tuple[int, int]]
    copies: dict[str, tuple[int, int, int]]
    busy_ns: int
    span_ns: int
    gaps: list[tuple[int, int]]
    host_only: int

    @property
    def idle_ns(self) -> int:
        """GPU idle time inside the span (nanoseconds)."""
        return self.span_ns - self.busy_ns

    @staticmethod
    def rate(nbytes: int, ns: int) -> float:
        """GB/s of `nbytes` moved in `ns` nanoseconds (0 for no time)."""
        return nbytes / ns if ns > 0 else 0.0

    def __str__(self) -> str:
        lines = [f"{'kernel':40s} {'launches':>8s} {'total ms':>10s} {'mean us':>9s}"]
        for name, (n, ns) in sorted(self.kernels.items(), key=lambda kv: -kv[1][1]):
            lines.append(f"{name[:40]:40s} {n:8d} {ns / 1e6:10.3f} {ns / n / 1e3:9.2f}")
        lines.append(f"{'copy':10s} {'count':>6s} {'MB':>10s} {'total ms':>10s} {'GB/s':>8s}")
        for name, (n, nbytes, ns) in sorted(self.copies.items()):
            lines.append(f"{name:10s} {n:6d} {nbytes / 1e6:10.2f} {ns / 1e6:10.3f} "
                         f"{self.rate(nbytes, ns):8.2f}")
        gap = max((e - s for s, e in self.gaps), default=0)
        lines.append(f"GPU busy {self.busy_ns / 1e6:.3f} ms of {self.span_ns / 1e6:.3f} ms "
                     f"({100 * self.busy_ns / self.span_ns if self.span_ns else 0:.0f}%), "
                     f"idle {self.idle_ns / 1e6:.3f} ms in {len(self.gaps)} gaps "
                     f"(longest {gap / 1e3:.1f} us)")
        if self.host_only:
            lines.append(f"{self.host_only} GPU ops without GPU times (captured or "
                         "on another context)")
        return "\n".join(lines)


def _merge(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, disjoint union of half-open intervals."""
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def summarize(events: Sequence[TraceEvent]) -> TraceSummary:
    """The TraceSummary of `events`."""
    kernels: dict[str, tuple[int, int]] = {}
    copies: dict[str, tuple[int, int, int]] = {}
    spans = []
    host_only = 0
    for ev in events:
        if ev.kind not in GPU_KINDS:
            continue
        ns = ev.gpu_ns
        if ns is None or ev.gpu_start_ns is None or ev.gpu_end_ns is None:
            host_only += 1
            continue
        spans.append((ev.gpu_start_ns, ev.gpu_end_ns))
        if ev.kind in ("kernel", "graph"):
            n, total = kernels.get(ev.name, (0, 0))
            kernels[ev.name] = (n + 1, total + ns)
        elif ev.kind == "copy":
            n, nbytes, total = copies.get(ev.name, (0, 0, 0))
            copies[ev.name] = (n + 1, nbytes + ev.bytes, total + ns)
    merged = _merge(spans)
    busy = sum(e - s for s, e in merged)
    span = merged[-1][1] - merged[0][0] if merged else 0
    gaps = sorted(((a[1], b[0]) for a, b in zip(merged, merged[1:])),
                  key=lambda g: g[0] - g[1])
    return TraceSummary(kernels, copies, busy, span, gaps, host_only)


def _check_path(path: object, what: str) -> Path:
    from pathlib import Path

    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what}(): path must be a str or os.PathLike, not {type(path).__name__}")
    p = Path(path)
    if p.is_dir():
        raise IsADirectoryError(f"{what}(): {p} is a directory; give a file name")
    return p


class Trace:
    """A timeline recording; use it as ``with trace() as t:`` (or start()/stop()).

    Its results (``events``, ``to_chrome``, ``to_svg``, ``summary``) are there once
    it has stopped; before, they raise RuntimeError."""

    def __init__(self) -> None:
        self._events: list[TraceEvent] | None = None
        self._start_ns: int | None = None
        self._recording = False

    @classmethod
    def from_events(cls, events: Iterable[TraceEvent], start_ns: int | None = None) -> Trace:
        """An ended Trace holding `events` (for tests, or records kept elsewhere)."""
        t = cls()
        t._events = list(events)
        for ev in t._events:
            if not isinstance(ev, TraceEvent):
                raise TypeError(f"from_events(): expected TraceEvent, not {type(ev).__name__}")
        t._start_ns = start_ns if start_ns is not None else min(
            (ev.host_start_ns for ev in t._events), default=0)
        return t

    def start(self) -> Trace:
        """Synchronize the current context and start recording (RuntimeError when
        another trace records, or this one has recorded already)."""
        if self._recording or self._events is not None:
            raise RuntimeError("this Trace has recorded already: make a new one with trace()")
        self._start_ns = _driver._trace_start()
        self._recording = True
        return self

    def stop(self) -> Trace:
        """Stop recording, wait for the recorded GPU work and collect the events."""
        if not self._recording:
            raise RuntimeError("this Trace is not recording")
        self._recording = False
        self._events = [TraceEvent(*r) for r in _driver._trace_stop()]
        return self

    def __enter__(self) -> Trace:
        """start(), returning the Trace."""
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """stop(), also when the block raised (the exception propagates)."""
        if self._recording:
            self.stop()

    @property
    def recording(self) -> bool:
        """True between start() and stop()."""
        return self._recording

    @property
    def events(self) -> list[TraceEvent]:
        """The recorded events in the order their host calls began."""
        if self._events is None:
            raise RuntimeError("the trace has not ended yet: read its events after the "
                               "`with trace()` block (or stop())")
        return self._events

    @property
    def start_ns(self) -> int:
        """The perf_counter_ns time the trace started at (time 0 of its outputs)."""
        self.events  # noqa: B018 - raises before the end
        assert self._start_ns is not None
        return self._start_ns

    def summary(self) -> TraceSummary:
        """Time per kernel and copy direction, GPU busy time and idle gaps."""
        return summarize(self.events)

    def chrome(self) -> dict[str, Any]:
        """The Chrome trace / Perfetto JSON object: one track for each host thread,
        one for each stream; "X" complete events, times in microseconds."""
        return _chrome(self.events, self.start_ns)

    def to_chrome(self, path: str | os.PathLike[str]) -> Path:
        """Write chrome() as JSON to `path`; returns the path."""
        import json

        p = _check_path(path, "to_chrome")
        data = self.chrome()
        p.write_text(json.dumps(data, separators=(",", ":")))
        return p

    def svg(self, width: int = 1200) -> str:
        """A self-contained SVG timeline: a row per host thread and per stream."""
        return _svg(self.events, self.start_ns, width)

    def to_svg(self, path: str | os.PathLike[str], width: int = 1200) -> Path:
        """Write svg() to `path`; returns the path."""
        p = _check_path(path, "to_svg")
        text = self.svg(width)
        p.write_text(text)
        return p

    def save(self, directory: str | os.PathLike[str], stem: str = "trace") -> tuple[Path, Path]:
        """Write <stem>.json and <stem>.svg into `directory` (made if needed)."""
        from pathlib import Path

        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        return self.to_chrome(d / f"{stem}.json"), self.to_svg(d / f"{stem}.svg")


def trace() -> Trace:
    """A new Trace, to use as ``with trace() as t:``; see the module docstring."""
    return Trace()


def trace_dir(arg: str | None = None) -> Path:
    """Where to write timelines: `arg` if given, else $BARECUDA_TRACE_DIR, else a new
    temporary directory."""
    from pathlib import Path

    chosen = arg or os.environ.get("BARECUDA_TRACE_DIR")
    if chosen:
        return Path(chosen)
    import tempfile

    return Path(tempfile.mkdtemp(prefix="barecuda-trace-"))


class nvtx_range:
    """An NVTX range, as a context manager (``with nvtx_range("step"):``) or a
    decorator (``@nvtx_range("step")``); nested per thread (push/pop)."""

    def __init__(self, name: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"nvtx_range(): name must be a str, not {type(name).__name__}")
        self.name = name

    def __enter__(self) -> nvtx_range:
        """Open the range (nvtx_push)."""
        nvtx_push(self.name)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Close the range (nvtx_pop), also when the block raised."""
        nvtx_pop()

    def __call__(self, func: Callable[_P, _R]) -> Callable[_P, _R]:
        """Decorate `func`: each call runs inside the range."""
        name = self.name

        @functools.wraps(func)
        def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            nvtx_push(name)
            try:
                return func(*args, **kwargs)
            finally:
                nvtx_pop()
        return wrapper


# ------------------------------------------------------------------ outputs

def _rows(events: Sequence[TraceEvent]) -> tuple[list[int], list[int]]:
    """Host threads and streams in order of first appearance."""
    threads: dict[int, None] = {}
    streams: dict[int, None] = {}
    for ev in events:
        threads.setdefault(ev.thread, None)
        if ev.on_gpu:
            streams.setdefault(ev.stream, None)
    return list(threads), list(streams)


def _thread_label(ident: int) -> str:
    import threading

    main = threading.main_thread().ident
    return "host (main thread)" if ident == main else f"host thread {ident}"


def _stream_label(handle: int) -> str:
    return "default stream" if handle == 0 else f"stream {handle:#x}"


def _args(ev: TraceEvent) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": ev.kind}
    if ev.bytes:
        out["bytes"] = ev.bytes
    if ev.grid is not None:
        out["grid"] = list(ev.grid)
        out["block"] = list(ev.block) if ev.block is not None else None
        out["shared"] = ev.shared
    if ev.kind in GPU_KINDS:
        out["stream"] = _stream_label(ev.stream)
    if ev.failed:
        out["failed"] = True
    return out


def _chrome(events: Sequence[TraceEvent], start_ns: int) -> dict[str, Any]:
    pid = os.getpid()
    threads, streams = _rows(events)
    tid_of_thread = {t: i + 1 for i, t in enumerate(threads)}
    tid_of_stream = {s: 1000 + i for i, s in enumerate(streams)}
    out: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "barecuda"}}]
    for t, tid in tid_of_thread.items():
        out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                    "args": {"name": _thread_label(t)}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                    "args": {"sort_index": tid}})
    for s, tid in tid_of_stream.items():
        out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                    "args": {"name": _stream_label(s)}})
        out.append({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid,
                    "args": {"sort_index": tid}})

    def us(ns: int) -> float:
        return round((ns - start_ns) / 1e3, 3)

    for ev in events:
        tid = tid_of_thread[ev.thread]
        if ev.kind == "mark":
            out.append({"name": ev.name, "cat": ev.kind, "ph": "i", "s": "t", "pid": pid,
                        "tid": tid, "ts": us(ev.host_start_ns)})
            continue
        args = _args(ev)
        out.append({"name": ev.name, "cat": ev.kind, "ph": "X", "pid": pid, "tid": tid,
                    "ts": us(ev.host_start_ns), "dur": round(ev.host_ns / 1e3, 3), "args": args})
        if ev.gpu_start_ns is not None and ev.gpu_end_ns is not None:
            out.append({"name": ev.name, "cat": ev.kind, "ph": "X", "pid": pid,
                        "tid": tid_of_stream[ev.stream], "ts": us(ev.gpu_start_ns),
                        "dur": round((ev.gpu_end_ns - ev.gpu_start_ns) / 1e3, 3), "args": args})
    return {"traceEvents": out, "displayTimeUnit": "ms"}


def _nice_step(span: float, max_ticks: int = 10) -> float:
    """A tick step of 1, 2 or 5 times a power of ten giving at most max_ticks ticks."""
    if span <= 0:
        return 1.0
    raw = span / max_ticks
    power = 10.0 ** int(f"{raw:e}".split("e")[1])
    for m in (1, 2, 5, 10):
        if m * power >= raw:
            return m * power
    return 10 * power


def escape(text: str) -> str:
    """`text` with &, < and > as XML entities (xml.sax.saxutils.escape, without
    importing xml: see the imports)."""
    return text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


def _svg(events: Sequence[TraceEvent], start_ns: int, width: int) -> str:
    if not isinstance(width, int) or width < 200:
        raise ValueError("svg(): width must be an int of at least 200")
    threads, streams = _rows(events)
    rows = [(_thread_label(t), ("host", t)) for t in threads] + \
           [(_stream_label(s), ("stream", s)) for s in streams]
    index = {key: i for i, (_, key) in enumerate(rows)}
    left, right, top, row_h, pad = 170, 20, 50, 24, 4
    height = top + max(len(rows), 1) * row_h + 40
    plot_w = width - left - right
    ends = [ev.host_end_ns for ev in events] + [ev.gpu_end_ns for ev in events
                                                if ev.gpu_end_ns is not None]
    span_ns = max(max(ends, default=start_ns) - start_ns, 1)

    def x(ns: int) -> float:
        return left + (ns - start_ns) / span_ns * plot_w

    unit, scale = ("ms", 1e6) if span_ns >= 2e6 else ("us", 1e3)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
             f'<rect width="{width}" height="{height}" fill="white"/>']
    lx = left
    for kind in KINDS:  # legend
        parts.append(f'<rect x="{lx}" y="8" width="10" height="10" fill="{COLORS[kind]}"/>'
                     f'<text x="{lx + 14}" y="17">{kind}</text>')
        lx += 24 + 7 * len(kind)
    for i, (label, _) in enumerate(rows):
        y = top + i * row_h
        fill = "#f4f4f4" if i % 2 == 0 else "#ffffff"
        parts.append(f'<rect x="0" y="{y}" width="{width}" height="{row_h}" fill="{fill}"/>'
                     f'<text x="6" y="{y + row_h - 8}" class="row">{escape(label)}</text>')
    step = _nice_step(span_ns / scale)
    axis_y = top + len(rows) * row_h + 4
    parts.append(f'<line x1="{left}" y1="{axis_y}" x2="{left + plot_w}" y2="{axis_y}" '
                 'stroke="#333"/>')
    k = 0
    while k * step * scale <= span_ns * 1.0001:
        tx = x(start_ns + int(k * step * scale))
        parts.append(f'<line x1="{tx:.1f}" y1="{top}" x2="{tx:.1f}" y2="{axis_y + 4}" '
                     f'stroke="#ccc"/><text x="{tx:.1f}" y="{axis_y + 16}" '
                     f'text-anchor="middle">{k * step:g} {unit}</text>')
        k += 1

    def bar(key: tuple[str, int], s: int, e: int, ev: TraceEvent) -> None:
        y = top + index[key] * row_h + pad
        x0, w = x(s), max((e - s) / span_ns * plot_w, 0.5)
        tip = f"{ev.name} ({ev.kind}) {(e - s) / 1e3:.1f} us"
        if ev.bytes:
            tip += f", {ev.bytes} bytes"
        color = COLORS.get(ev.kind, "#888888")
        parts.append(f'<g><title>{escape(tip)}</title><rect x="{x0:.2f}" y="{y}" '
                     f'width="{w:.2f}" height="{row_h - 2 * pad}" fill="{color}" '
                     f'fill-opacity="{0.5 if ev.kind == "range" else 0.9}"/>')
        if w > 7 * len(ev.name) + 6:
            parts.append(f'<text x="{x0 + 3:.2f}" y="{y + row_h - 2 * pad - 4}" '
                         f'fill="white">{escape(ev.name)}</text>')
        parts.append("</g>")

    for ev in events:
        if ev.kind == "mark":
            mx = x(ev.host_start_ns)
            y = top + index[("host", ev.thread)] * row_h
            parts.append(f'<g><title>{escape(ev.name)}</title><line x1="{mx:.2f}" y1="{y}" '
                         f'x2="{mx:.2f}" y2="{y + row_h}" stroke="black" stroke-width="2"/></g>')
            continue
        bar(("host", ev.thread), ev.host_start_ns, ev.host_end_ns, ev)
        if ev.gpu_start_ns is not None and ev.gpu_end_ns is not None:
            bar(("stream", ev.stream), ev.gpu_start_ns, ev.gpu_end_ns, ev)
    parts.append(f'<text x="{width - right}" y="{height - 6}" text-anchor="end" '
                 f'fill="#666">barecuda trace: {len(events)} events, '
                 f'{span_ns / scale:.3f} {unit}</text>')
    parts.append("</svg>")
    return "\n".join(parts)
