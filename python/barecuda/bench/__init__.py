# SPDX-License-Identifier: MIT
"""barecuda's benchmark: ``python -m barecuda.bench [--json FILE] [--svg FILE] [--only NAME ...]``.

Importable without a GPU: ``collect()`` runs sections and returns ``(rows, errors)``;
``interleaved_times`` and ``row`` are the helpers the sections share;
``format_table`` and ``launch_chart_svg`` render the rows (``__main__`` is the
command line).

Sections
--------
``SECTIONS`` lists the sections in the order they run, by the names users type
after ``--only``.  Section ``NAME`` lives in the module ``barecuda.bench.NAME``
(``NAME_`` when ``NAME`` is a Python keyword: section ``import`` is
``bench/import_.py``; see ``module_name``).  Adding a section takes two steps:
write ``bench/NAME.py`` (and add it to meson.build's install list), then list
``NAME`` in ``SECTIONS``.  A listed section whose module is not installed is
skipped silently, so the list may name a module still to come.

The contract of a section module:

- It imports without a GPU or a driver (no device work at import time; import
  CuPy and other peers inside ``run``, and treat their absence as a note).
- ``run()`` takes no arguments and returns a list of dicts with the keys
  ``name`` (unique within the section), ``value`` (a number, or None when the
  figure could not be taken), ``unit``, ``ratio``, ``vs`` and ``note``; any of
  the last four may be missing or None.  ``ratio`` compares ``value`` with what
  ``vs`` names; the module's docstring says which way it is taken (times over
  times for launches: less is better; rates over rates for copies: more is
  better).  ``row()`` builds such a dict.
- A figure that cannot be taken (a peer missing, an operation not supported)
  becomes a row with ``value=None`` and a note; an exception escaping ``run()``
  fails the whole section, which ``collect`` reports while the other sections
  still run.
- Figures that compare two things are taken in the same process run, rounds of
  the two alternating (``interleaved_times``), so drift favours neither.
"""

from __future__ import annotations

import importlib
import importlib.util
import keyword
import platform
import statistics
import time
import traceback
from types import ModuleType
from typing import IO, Any, Callable, Iterable, Sequence

SECTIONS = ["copies", "launch", "compile", "gpuarray", "elementwise", "interop", "import", "trace", "peer",
            "aio"]

_KEYS = ("name", "value", "unit", "ratio", "vs", "note")

Row = dict[str, Any]


def module_name(section: str) -> str:
    """The module that holds `section`: ``barecuda.bench.<section>``, with a
    trailing underscore when the name is a Python keyword (``import_``)."""
    return f"{__name__}.{section}_" if keyword.iskeyword(section) else f"{__name__}.{section}"


def row(name: str, value: float | None, unit: str, ratio: float | None = None,
        vs: str | None = None, note: str | None = None) -> Row:
    """One figure as a section returns it."""
    return {"name": name, "value": value, "unit": unit, "ratio": ratio, "vs": vs, "note": note}


def interleaved_times(fns: Sequence[Callable[[], object]],
                      syncs: Iterable[Callable[[], object] | None] | None = None,
                      iterations: int = 2000, rounds: int = 21, warmup: int = 1) -> list[float]:
    """Median seconds per call of each of `fns`, timed in `rounds` rounds that each
    run every function's loop of `iterations` calls once, in turn, so that all of
    them see the same host and GPU state (clocks, other load) and a drift favours
    none.  ``syncs[i]`` (if given) is called after each loop of ``fns[i]`` and is
    inside its time (device work is then counted to its end).  Each function is
    first called `warmup` times."""
    sync_list = list(syncs) if syncs is not None else [None] * len(fns)
    if len(sync_list) != len(fns):
        raise ValueError(f"{len(fns)} functions but {len(sync_list)} syncs")
    for fn, sync in zip(fns, sync_list):
        for _ in range(warmup):
            fn()
        if sync is not None:
            sync()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, sync, ts in zip(fns, sync_list, times):
            t0 = time.perf_counter()
            for _ in range(iterations):
                fn()
            if sync is not None:
                sync()
            ts.append((time.perf_counter() - t0) / iterations)
    return [statistics.median(ts) for ts in times]


def _load(section: str) -> ModuleType | None:
    """The section's module, or None when it is not installed."""
    modname = module_name(section)
    try:
        return importlib.import_module(modname)
    except ModuleNotFoundError as exc:
        if exc.name == modname:
            return None
        raise


def available() -> list[str]:
    """The sections of SECTIONS whose modules are installed, in order."""
    return [s for s in SECTIONS if importlib.util.find_spec(module_name(s)) is not None]


def collect(sections: Iterable[str] | None = None,
            out: IO[str] | None = None) -> tuple[list[Row], list[dict[str, str]]]:
    """Run the sections (all of SECTIONS by default); returns (rows, errors).

    Each row is a dict of the keys ``name``, ``value``, ``unit``, ``ratio``, ``vs``,
    ``note`` plus ``section``; each error a dict with ``section``, ``error`` (the
    exception's last line) and ``traceback``.  A name not in SECTIONS is an error;
    progress lines go to `out` when given.
    """
    rows: list[Row] = []
    errors: list[dict[str, str]] = []
    for name in sections or SECTIONS:
        if name not in SECTIONS:
            errors.append({"section": name, "error": f"unknown section {name!r}", "traceback": ""})
            continue
        try:
            mod = _load(name)
            if mod is None:
                continue
            if out is not None:
                out.write(f"[{name}] running...\n")
                out.flush()
            t0 = time.perf_counter()
            got = mod.run()
            took = time.perf_counter() - t0
        except Exception as exc:  # noqa: BLE001 - one failing section must not stop the rest
            errors.append({"section": name, "error": f"{type(exc).__name__}: {exc}",
                           "traceback": traceback.format_exc()})
            continue
        for r in got or []:
            full = {key: r.get(key) for key in _KEYS}
            full["section"] = name
            rows.append(full)
        if out is not None:
            out.write(f"[{name}] {len(got or [])} figures in {took:.1f} s\n")
    return rows, errors


def _fmt(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if value == 0 or 0.01 <= abs(value) < 1e6:
            return f"{value:.4g}" if abs(value) < 1000 else f"{value:.1f}"
        return f"{value:.3e}"
    return str(value)


def format_table(rows: Iterable[Row], errors: Iterable[dict[str, str]] = ()) -> str:
    """The rows as a plain-text table (and the errors after it)."""
    head = ("section", "name", "value", "unit", "ratio", "vs", "note")
    cells = [head] + [tuple(_fmt(r.get(k)) for k in head) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head) - 1)]
    lines = []
    for i, c in enumerate(cells):
        lines.append("  ".join(c[j].ljust(widths[j]) for j in range(len(widths))) + "  " + c[-1])
        if i == 0:
            lines.append("  ".join("-" * w for w in widths) + "  ----")
    for e in errors:
        lines.append(f"ERROR in section {e['section']}: {e['error']}")
    return "\n".join(line.rstrip() for line in lines) + "\n"


# Launch rows drawn by --svg: (row name in the launch section, label).
_CHART = [
    ("launch __call__, empty kernel, 4 args", "barecuda __call__"),
    ("launch prepared_call, 4 args", "barecuda prepared_call"),
    ("graph replay (1 kernel node), GraphExec.launch", "barecuda graph replay"),
    ("cuda.core launch, 4 args", "cuda.core launch"),
    ("CuPy RawKernel launch, 4 args", "CuPy RawKernel"),
]


def launch_chart_svg(rows: Iterable[Row]) -> str | None:
    """An SVG bar chart (standard library only) of the launch overhead rows, with
    the C floor of the __call__ row as the first bar; None without launch rows."""
    by_name = {r["name"]: r for r in rows if r.get("section") == "launch"}
    bars = []
    first = by_name.get(_CHART[0][0])
    if first and first.get("value") and first.get("ratio"):
        bars.append(("C floor (cuLaunchKernel loop)", first["value"] / first["ratio"]))
    bars += [(label, by_name[n]["value"]) for n, label in _CHART
             if n in by_name and by_name[n].get("value")]
    if not bars:
        return None
    width, bar_h, gap, left = 640, 26, 10, 210
    top = max(v for _, v in bars)
    scale = (width - left - 80) / top
    height = 40 + len(bars) * (bar_h + gap)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'font-family="sans-serif" font-size="13">',
           '<text x="10" y="20" font-weight="bold">Kernel launch, empty kernel with 4 '
           'arguments (us per launch, less is better)</text>']
    for i, (label, v) in enumerate(bars):
        y = 34 + i * (bar_h + gap)
        colour = "#999" if i == 0 else ("#2a7" if label.startswith("barecuda") else "#c63")
        out.append(f'<text x="{left - 8}" y="{y + 18}" text-anchor="end">{label}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{v * scale:.1f}" height="{bar_h}" '
                   f'fill="{colour}"/>')
        out.append(f'<text x="{left + v * scale + 6:.1f}" y="{y + 18}">{v:.2f}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def environment() -> dict[str, Any]:
    """Python, platform, CUDA headers, driver and devices, for the JSON file; a
    missing driver is recorded, not raised."""
    env: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform()}
    try:
        from barecuda import driver as drv

        env["cuda_headers"] = drv.CUDA_VERSION
        try:
            drv.init()
            env["driver"] = drv.get_driver_version()
            env["devices"] = [drv.Device(i).name() for i in range(drv.Device.count())]
        except drv.Error as exc:
            env["driver_error"] = str(exc)
    except Exception as exc:  # noqa: BLE001
        env["import_error"] = str(exc)
    return env
