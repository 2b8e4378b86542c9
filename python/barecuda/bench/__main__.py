# SPDX-License-Identifier: MIT
"""``python -m barecuda.bench [--json FILE] [--svg FILE] [--only NAME ...]``: barecuda's figures.

Runs the sections of ``barecuda.bench.SECTIONS`` (or those named after ``--only``)
and prints a table to stdout (progress to stderr); ``--json`` also writes the
environment, rows and errors to a file, ``--svg`` draws the launch figures.
``--from-json FILE`` runs nothing and reads the rows of an earlier ``--json``
file instead (to redraw the chart).  The exit status is 1 when a section failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from barecuda import bench


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m barecuda.bench",
                                     description=__doc__.splitlines()[0].split(": ", 1)[-1])
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE")
    parser.add_argument("--only", nargs="+", metavar="NAME", choices=bench.SECTIONS,
                        help=f"run only these sections (of: {', '.join(bench.SECTIONS)})")
    parser.add_argument("--svg", metavar="FILE", help="also draw the launch figures as an SVG chart")
    parser.add_argument("--from-json", metavar="FILE",
                        help="run nothing: read the rows of an earlier --json FILE (for --svg)")
    args = parser.parse_args(argv)
    errors: list[dict[str, str]] = []
    if args.from_json:
        with open(args.from_json) as f:
            rows = json.load(f)["rows"]
    else:
        rows, errors = bench.collect(args.only, out=sys.stderr)
    sys.stdout.write(bench.format_table(rows, errors))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": bench.environment(), "rows": rows, "errors": errors}, f, indent=2)
            f.write("\n")
    if args.svg:
        svg = bench.launch_chart_svg(rows)
        if svg is None:
            sys.stderr.write("no launch figures to draw\n")
        else:
            with open(args.svg, "w") as f:
                f.write(svg)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
