# SPDX-License-Identifier: MIT
"""ReductionKernel against NumPy: custom expressions, several inputs, out=, stream=, range=."""

import numpy as np
import pytest

from barecuda import driver as drv
from barecuda import gpuarray as ga
from barecuda.reduction import ReductionKernel

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("n", [0, 1, 255, 2049, 1_000_000, 10_000_019])
def test_dot(ctx, rng, n):
    k = ReductionKernel(np.float64, "0", "a+b", "x[i]*y[i]", "double *x, double *y", name="dotk")
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    r = k(ga.to_gpu(x), ga.to_gpu(y))
    assert r.shape == () and r.dtype == np.float64
    np.testing.assert_allclose(r.get(), np.dot(x, y), rtol=1e-9, atol=1e-9)


def test_max_abs_and_int_types(ctx, rng):
    k = ReductionKernel(np.int64, "0", "a > b ? a : b", "(x[i] < 0 ? -(long long)x[i] : x[i])",
                        "int *x", name="maxabs")
    x = rng.integers(-10**9, 10**9, 100_000).astype(np.int32)
    assert int(k(ga.to_gpu(x)).get()) == np.max(np.abs(x.astype(np.int64)))


def test_single_arg_map_default_and_types(ctx, rng):
    for dt, ct in ((np.float32, "float"), (np.uint32, "unsigned int"), (np.complex64, "pycuda::complex<float>")):
        k = ReductionKernel(dt, "0", "a+b", arguments=f"{ct} *in")
        x = (rng.standard_normal(3333) * 5).astype(dt) if dt != np.uint32 else rng.integers(0, 100, 3333).astype(dt)
        got = k(ga.to_gpu(x)).get()
        np.testing.assert_allclose(got, np.sum(x.astype(np.complex128)), rtol=1e-4)


def test_scalar_argument_out_stream_range(ctx, rng):
    k = ReductionKernel(np.float32, "0", "a+b", "x[i] * s", "float *x, float s", name="scaled")
    x = rng.standard_normal(10000).astype(np.float32)
    gx = ga.to_gpu(x)
    out = ga.empty((), np.float32)
    s = drv.Stream()
    r = k(gx, 2.0, out=out, stream=s)
    s.synchronize()
    assert r is out
    np.testing.assert_allclose(out.get(), 2 * x.sum(dtype=np.float64), rtol=1e-4, atol=1e-3)
    r = k(gx, 1.0, range=range(100, 5000, 3))
    np.testing.assert_allclose(r.get(), x[100:5000:3].sum(dtype=np.float64), rtol=1e-4, atol=1e-3)
    r = k(gx, 1.0, slice=slice(None, None, -2))
    np.testing.assert_allclose(r.get(), x[::-2].sum(dtype=np.float64), rtol=1e-4, atol=1e-3)


def test_errors(ctx):
    k = ReductionKernel(np.float32, "0", "a+b", "x[i]", "float *x")
    with pytest.raises(TypeError, match="must be a GPUArray of float32"):
        k(ga.zeros(3, np.float64))
    with pytest.raises(TypeError, match="out= must be"):
        k(ga.zeros(3, np.float32), out=ga.zeros(2, np.float32))
    with pytest.raises(TypeError, match="takes 1 arguments"):
        k()
