# SPDX-License-Identifier: MIT
"""Benchmark section: the cost of `import barecuda` in a fresh interpreter.

Target (shared/PERFORMANCE.md): at most 0.03 s more than `import numpy` alone.
Each figure is the median wall time of fresh interpreters, measured in the same run.
"""

import statistics
import subprocess
import sys
import time

REPEATS = 15


def _once(stmt):
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", stmt], capture_output=True, cwd="/")
    return time.perf_counter() - t0 if r.returncode == 0 else None


def _median_import(stmt):
    times = [_once(stmt) for _ in range(REPEATS)]
    return None if None in times else statistics.median(times)


def run():
    # numpy alone and numpy + barecuda alternate, so machine noise falls on both;
    # the figure is the median of the paired differences.
    bare = _median_import("pass")
    pairs = [(_once("import numpy"), _once("import numpy, barecuda.driver"))
             for _ in range(REPEATS)]
    numpy = statistics.median(p[0] for p in pairs)
    ours = statistics.median(p[1] for p in pairs)
    extra = statistics.median(b - a for a, b in pairs)
    rows = [
        dict(name="import python (bare)", value=bare, unit="s"),
        dict(name="import numpy", value=numpy, unit="s"),
        dict(name="import barecuda.driver", value=ours, unit="s", vs="numpy",
             note=f"+{extra:.4f} s over numpy, median of paired runs (target <= 0.03)"),
    ]
    for peer, stmt in (("cupy", "import numpy, cupy"), ("cuda.core", "import numpy, cuda.core"),
                       ("pycuda", "import numpy, pycuda.driver")):
        t = _median_import(stmt)
        if t is not None:
            rows.append(dict(name=f"import {peer}", value=t, unit="s", vs="numpy",
                             note=f"+{t - numpy:.4f} s over numpy"))
    return rows
