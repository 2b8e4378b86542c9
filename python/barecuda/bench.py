# SPDX-License-Identifier: MIT
"""``python -m barecuda.bench [--json FILE] [--only NAME ...]``: barecuda's figures.

Each section is a module ``barecuda._bench_<name>`` with ``run()`` returning a
list of dicts with keys ``name``, ``value``, ``unit``, ``ratio``, ``vs`` and
``note`` (any of the last four may be None).  ``ratio`` compares the figure
with what ``vs`` names; each section's docstring says which way it is taken
(times over times for launches: less is better; rates over rates for copies:
more is better).  Sections run in the fixed order of
SECTIONS; a section whose module does not exist is skipped silently, a section
that fails is reported and the others still run.  A table goes to stdout and,
with ``--json``, the rows and errors to a file.

Importable as ``barecuda.bench``: ``collect()`` returns ``(rows, errors)``.
"""

import argparse
import importlib
import json
import platform
import statistics
import sys
import time
import traceback

SECTIONS = ["copies", "launch", "compile", "gpuarray", "interop", "import", "peer"]

_KEYS = ("name", "value", "unit", "ratio", "vs", "note")


def interleaved_times(fns, syncs=None, iterations=2000, rounds=21, warmup=1):
    """Median seconds per call of each of `fns`, timed in `rounds` rounds that each
    run every function's loop of `iterations` calls once, in turn, so that all of
    them see the same host and GPU state (clocks, other load) and a drift favours
    none.  ``syncs[i]`` (if given) is called after each loop of ``fns[i]`` and is
    inside its time (device work is then counted to its end).  Each function is
    first called `warmup` times."""
    syncs = list(syncs) if syncs is not None else [None] * len(fns)
    if len(syncs) != len(fns):
        raise ValueError(f"{len(fns)} functions but {len(syncs)} syncs")
    for fn, sync in zip(fns, syncs):
        for _ in range(warmup):
            fn()
        if sync is not None:
            sync()
    times = [[] for _ in fns]
    for _ in range(rounds):
        for fn, sync, ts in zip(fns, syncs, times):
            t0 = time.perf_counter()
            for _ in range(iterations):
                fn()
            if sync is not None:
                sync()
            ts.append((time.perf_counter() - t0) / iterations)
    return [statistics.median(ts) for ts in times]


def _load(name):
    """The section module, or None when it does not exist."""
    modname = f"barecuda._bench_{name}"
    try:
        return importlib.import_module(modname)
    except ModuleNotFoundError as exc:
        if exc.name == modname:
            return None
        raise


def collect(sections=None, out=None):
    """Run the sections (all of SECTIONS by default); returns (rows, errors).

    Each row is a dict of _KEYS plus ``section``; each error a dict with
    ``section`` and ``error`` (the traceback's last line) and ``traceback``.
    """
    rows, errors = [], []
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
        for row in got or []:
            full = {key: row.get(key) for key in _KEYS}
            full["section"] = name
            rows.append(full)
        if out is not None:
            out.write(f"[{name}] {len(got or [])} figures in {took:.1f} s\n")
    return rows, errors


def _fmt(value):
    if value is None:
        return ""
    if isinstance(value, float):
        if value == 0 or 0.01 <= abs(value) < 1e6:
            return f"{value:.4g}" if abs(value) < 1000 else f"{value:.1f}"
        return f"{value:.3e}"
    return str(value)


def format_table(rows, errors=()):
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


def launch_chart_svg(rows):
    """An SVG bar chart (standard library only) of the launch overhead rows, with
    the C floor of the __call__ row as the first bar."""
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


def _environment():
    env = {"python": platform.python_version(), "platform": platform.platform()}
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


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m barecuda.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    parser.add_argument("--only", nargs="+", metavar="SECTION", choices=SECTIONS,
                        help="run only these sections")
    parser.add_argument("--svg", metavar="FILE", help="also draw the launch figures as an SVG chart")
    parser.add_argument("--from-json", metavar="FILE",
                        help="run nothing: read the rows of an earlier --json FILE (for --svg)")
    args = parser.parse_args(argv)
    if args.from_json:
        with open(args.from_json) as f:
            rows, errors = json.load(f)["rows"], []
    else:
        rows, errors = collect(args.only, out=sys.stderr)
    sys.stdout.write(format_table(rows, errors))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": _environment(), "rows": rows, "errors": errors}, f, indent=2)
            f.write("\n")
    if args.svg:
        svg = launch_chart_svg(rows)
        if svg is None:
            sys.stderr.write("no launch figures to draw\n")
        else:
            with open(args.svg, "w") as f:
                f.write(svg)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
