# SPDX-License-Identifier: MIT
"""Prefix sums (scans) on the GPU with InclusiveScanKernel and ExclusiveScanKernel.

Teaches: what a scan is (out[k] combines x[0] .. x[k], or x[0] .. x[k-1] for
the exclusive flavour), that any associative operator works (here ``+`` and
``max``), and a typical use: an exclusive scan of 0/1 flags gives every kept
element its position in the output of a "stream compaction".

Run: python examples/scan.py [n]
Exit status 0 when every scan equals its NumPy counterpart (numpy.cumsum, maximum.accumulate).
"""

import sys
from typing import Any

import numpy as np
import numpy.typing as npt

import barecuda.autoinit  # noqa: F401
from barecuda import gpuarray
from barecuda.scan import ExclusiveScanKernel, InclusiveScanKernel


def check(name: str, got: npt.NDArray[Any], want: npt.NDArray[Any]) -> bool:
    if np.array_equal(got, want):
        print(f"  {name:28s} ok   (last element {got[-1]})")
        return True
    k = int(np.flatnonzero(got != want)[0])
    print(f"MISMATCH in {name} at {k}: GPU {got[k]}, NumPy {want[k]}", file=sys.stderr)
    return False


def main(argv: list[str]) -> int:
    n = int(argv[1]) if len(argv) > 1 else 1_000_001
    rng = np.random.default_rng(3)
    # Integers make the sums exact, so GPU and NumPy must agree bit for bit.
    x = rng.integers(-100, 100, n).astype(np.int32)
    ok = True

    # Inclusive sum: the kernel text is just the operator, as a C expression of a and b.
    cumsum = InclusiveScanKernel(np.int32, "a + b")
    x_gpu = gpuarray.to_gpu(x)
    out_gpu = gpuarray.empty_like(x_gpu)
    cumsum(x_gpu, out_gpu)                     # out = scan(x); cumsum(x_gpu) alone works in place
    ok &= check("inclusive sum", out_gpu.get(), np.cumsum(x, dtype=np.int32))

    # Exclusive sum needs the operator's identity ("neutral"): out[0] = 0.
    excl = ExclusiveScanKernel(np.int32, "a + b", neutral="0")
    excl(x_gpu, out_gpu)
    want = np.concatenate([[0], np.cumsum(x, dtype=np.int32)[:-1]]).astype(np.int32)
    ok &= check("exclusive sum", out_gpu.get(), want)

    # Running maximum: a different associative operator, same machinery.
    runmax = InclusiveScanKernel(np.int32, "a > b ? a : b")
    runmax(x_gpu, out_gpu)
    ok &= check("running maximum", out_gpu.get(), np.maximum.accumulate(x))

    # Stream compaction: keep the positive values.  The exclusive scan of the
    # keep-flags is where each kept value goes; the last scan + flag is the count.
    flags = (x > 0).astype(np.int32)
    flags_gpu = gpuarray.to_gpu(flags)
    excl(flags_gpu)                            # in place
    positions = flags_gpu.get()
    kept = np.empty(int(positions[-1] + flags[-1]), np.int32)
    kept[positions[flags == 1]] = x[flags == 1]
    ok &= check("compaction of positives", kept, x[x > 0])

    if not ok:
        return 1
    print(f"OK: four scans of {n} elements match NumPy")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
