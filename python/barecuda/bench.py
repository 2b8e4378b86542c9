# SPDX-License-Identifier: MIT
"""``python -m barecuda.bench [--json FILE] [--only NAME ...]``: barecuda's figures.

Each section is a module ``barecuda._bench_<name>`` with ``run()`` returning a
list of dicts with keys ``name``, ``value``, ``unit``, ``ratio``, ``vs`` and
``note`` (any of the last four may be None).  ``ratio`` is the figure divided
by what it is judged against (named by ``vs``), oriented so that more is
better: 1.0 means as fast as the reference.  Sections run in the fixed order of
SECTIONS; a section whose module does not exist is skipped silently, a section
that fails is reported and the others still run.  A table goes to stdout and,
with ``--json``, the rows and errors to a file.

Importable as ``barecuda.bench``: ``collect()`` returns ``(rows, errors)``.
"""

import argparse
import importlib
import json
import platform
import sys
import time
import traceback

SECTIONS = ["copies", "launch", "compile", "gpuarray", "interop", "import"]

_KEYS = ("name", "value", "unit", "ratio", "vs", "note")


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
    args = parser.parse_args(argv)
    rows, errors = collect(args.only, out=sys.stderr)
    sys.stdout.write(format_table(rows, errors))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": _environment(), "rows": rows, "errors": errors}, f, indent=2)
            f.write("\n")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
