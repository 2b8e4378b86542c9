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


def _median_import(stmt):
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", stmt], capture_output=True, cwd="/")
        times.append(time.perf_counter() - t0)
        if r.returncode != 0:
            return None
    return statistics.median(times)


def run():
    bare = _median_import("pass")
    numpy = _median_import("import numpy")
    ours = _median_import("import numpy, barecuda.driver")
    rows = [
        dict(name="import python (bare)", value=bare, unit="s"),
        dict(name="import numpy", value=numpy, unit="s"),
        dict(name="import barecuda.driver", value=ours, unit="s",
             ratio=None, vs="numpy", note=f"+{ours - numpy:.4f} s over numpy (target <= 0.03)"),
    ]
    for peer, stmt in (("cupy", "import numpy, cupy"), ("cuda.core", "import numpy, cuda.core"),
                       ("pycuda", "import numpy, pycuda.driver")):
        t = _median_import(stmt)
        if t is not None:
            rows.append(dict(name=f"import {peer}", value=t, unit="s", vs="numpy",
                             note=f"+{t - numpy:.4f} s over numpy"))
    return rows
