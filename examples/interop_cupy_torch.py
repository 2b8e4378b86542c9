# SPDX-License-Identifier: MIT
"""Launching a barecuda kernel on CuPy arrays and PyTorch tensors.

Teaches: GPU libraries share device memory without copies through the
``__cuda_array_interface__`` protocol (a dict with the device pointer, shape and
type).  barecuda accepts any object exposing it as a kernel argument, and
CuPy, PyTorch and barecuda all use the device's primary context, so a pointer
from one is valid in the others.  Work is queued on the default stream here;
with other streams you must order the libraries' work yourself.

Run: python examples/interop_cupy_torch.py
Skips (exit status 0, with a message) when neither CuPy nor PyTorch with CUDA
is installed; otherwise exit status 0 when the kernel's results match NumPy.
"""

import sys
from typing import Any

import numpy as np

import barecuda.autoinit  # noqa: F401  (the primary context of device 0)
from barecuda.compiler import SourceModule

KERNEL = r"""
/* y[i] = y[i] * y[i] + x[i], on memory owned by another library. */
__global__ void square_add(float *y, const float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = y[i] * y[i] + x[i];
}
"""


def frameworks() -> list[tuple[str, Any, Any, Any]]:
    """(name, to_device, to_numpy, synchronize) for each library that imports."""
    found = []
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
        found.append(("CuPy", cupy.asarray, cupy.asnumpy, cupy.cuda.Device().synchronize))
    except Exception as exc:  # not installed, or no usable CUDA build
        print(f"CuPy not usable: {type(exc).__name__}: {exc}")
    try:
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False")
        found.append(("PyTorch", lambda a: torch.from_numpy(a).to("cuda:0"),
                      lambda t: t.cpu().numpy(), torch.cuda.synchronize))
    except Exception as exc:
        print(f"PyTorch not usable: {type(exc).__name__}: {exc}")
    return found


def main() -> int:
    libs = frameworks()
    if not libs:
        print("SKIPPED: neither CuPy nor PyTorch with CUDA is available (exit 0)")
        return 0
    square_add = SourceModule(KERNEL).get_function("square_add")
    n = 100_000
    rng = np.random.default_rng(11)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    want = y * y + x
    ok = True
    for name, to_device, to_numpy, synchronize in libs:
        x_dev, y_dev = to_device(x), to_device(y)       # memory owned by the other library
        synchronize()                                   # its uploads are done
        # The arrays go straight into the launch: barecuda reads their
        # __cuda_array_interface__ to find the device pointers.
        square_add(y_dev, x_dev, np.int32(n), block=(256, 1, 1), grid=((n + 255) // 256, 1))
        synchronize()
        got = to_numpy(y_dev)
        err = float(np.abs(got - want).max())
        print(f"{name:8s} arrays updated in place by a barecuda kernel: max error {err:.1e}")
        if not err < 1e-5:
            print(f"MISMATCH: the kernel's result on {name} memory differs from NumPy",
                  file=sys.stderr)
            ok = False
    if not ok:
        return 1
    print(f"OK: barecuda kernel ran on {' and '.join(n for n, *_ in libs)} memory")
    return 0


if __name__ == "__main__":
    sys.exit(main())
