# SPDX-License-Identifier: MIT
"""Benchmark section: the cost of `import barecuda` in a fresh interpreter.

Targets (shared/PERFORMANCE.md): `import barecuda.driver, barecuda.gpuarray` at most
0.015 s more than `import numpy` alone (tests/test_import_cost.py checks it with a
margin on every CI run); `import barecuda.driver` at most 0.03 s more.  Each figure is
the median wall time of fresh interpreters, measured in the same run.
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
    triples = [(_once("import numpy"), _once("import numpy, barecuda.driver"),
                _once("import numpy, barecuda.driver, barecuda.gpuarray"))
               for _ in range(REPEATS)]
    numpy = statistics.median(t[0] for t in triples)
    rows = [
        dict(name="import python (bare)", value=bare, unit="s"),
        dict(name="import numpy", value=numpy, unit="s"),
    ]
    for k, (what, target) in enumerate((("barecuda.driver", 0.03),
                                        ("barecuda.driver, barecuda.gpuarray", 0.015)), 1):
        ours = statistics.median(t[k] for t in triples)
        extra = statistics.median(t[k] - t[0] for t in triples)
        rows.append(dict(name=f"import {what}", value=ours, unit="s", vs="numpy",
                         note=f"+{extra:.4f} s over numpy, median of paired runs "
                              f"(target <= {target})"))
    for peer, stmt in (("cupy", "import numpy, cupy"), ("cuda.core", "import numpy, cuda.core"),
                       ("pycuda", "import numpy, pycuda.driver")):
        t = _median_import(stmt)
        if t is not None:
            rows.append(dict(name=f"import {peer}", value=t, unit="s", vs="numpy",
                             note=f"+{t - numpy:.4f} s over numpy"))
    return rows
