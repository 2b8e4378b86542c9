# SPDX-License-Identifier: MIT
"""Elementwise kernels without writing the index arithmetic: ElementwiseKernel.

Teaches: that most "one thread per element" kernels differ only in their loop
body, so ``ElementwiseKernel`` takes a C argument list and the body (using
``i``, the element index) and generates the rest: the index, the grid-stride
loop over ``n`` elements and the launch.  Shown with saxpy (z = a*x + y), a
custom expression with several outputs and math functions, and GPUArray
arithmetic, which is built from the same kind of kernel.

Run: python examples/elementwise.py [n]
Exit status 0 when every result matches NumPy (float32 tolerance).
"""

import sys
from typing import Any

import numpy as np
import numpy.typing as npt

import barecuda.autoinit  # noqa: F401
from barecuda import gpuarray
from barecuda.elementwise import ElementwiseKernel


def close(name: str, got: npt.NDArray[Any], want: npt.NDArray[Any], rtol: float = 1e-5,
          atol: float = 1e-6) -> bool:
    err = float(np.max(np.abs(got - want) / (atol + rtol * np.abs(want))))
    print(f"  {name:32s} max error / tolerance = {err:.2f}")
    if not err <= 1.0:
        print(f"MISMATCH: {name} differs from NumPy", file=sys.stderr)
        return False
    return True


def main(argv: list[str]) -> int:
    n = int(argv[1]) if len(argv) > 1 else 2_000_000
    rng = np.random.default_rng(4)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    x_gpu, y_gpu = gpuarray.to_gpu(x), gpuarray.to_gpu(y)
    ok = True

    # 1. saxpy: scalars are passed as Python numbers and converted to the C type.
    saxpy = ElementwiseKernel("float a, const float *x, const float *y, float *z",
                              "z[i] = a * x[i] + y[i]", name="saxpy")
    z_gpu = gpuarray.empty_like(x_gpu)
    saxpy(2.5, x_gpu, y_gpu, z_gpu)
    ok &= close("saxpy 2.5*x + y", z_gpu.get(), np.float32(2.5) * x + y)

    # 2. A custom body: two outputs, a branch and CUDA math functions.
    polar = ElementwiseKernel(
        "const float *x, const float *y, float *r, float *theta",
        """
        r[i] = sqrtf(x[i] * x[i] + y[i] * y[i]);
        theta[i] = atan2f(y[i], x[i]);
        if (theta[i] < 0) theta[i] += 2.0f * 3.14159265f;   /* into [0, 2 pi) */
        """, name="to_polar")
    r_gpu, t_gpu = gpuarray.empty_like(x_gpu), gpuarray.empty_like(x_gpu)
    polar(x_gpu, y_gpu, r_gpu, t_gpu)
    theta = np.arctan2(y, x)
    theta = np.where(theta < 0, theta + np.float32(2 * 3.14159265), theta)
    ok &= close("polar radius", r_gpu.get(), np.hypot(x, y))
    ok &= close("polar angle", t_gpu.get(), theta, atol=1e-5)

    # 3. Only part of the arrays: slice= runs the body for those indices only.
    z_gpu.fill(0)
    saxpy(1.0, x_gpu, y_gpu, z_gpu, slice=slice(0, n, 2))      # even indices
    want = np.zeros_like(x)
    want[::2] = x[::2] + y[::2]
    ok &= close("saxpy on even indices only", z_gpu.get(), want)

    # 4. GPUArray operators generate the same kind of kernel behind the scenes.
    ok &= close("GPUArray 3*x - y/2", (3 * x_gpu - y_gpu / 2).get(),
                np.float32(3) * x - y / np.float32(2))

    if not ok:
        return 1
    print(f"OK: elementwise kernels on {n} elements match NumPy")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
