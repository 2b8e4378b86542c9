# SPDX-License-Identifier: MIT
"""ElementwiseKernel against NumPy: dtypes, scalars, range/slice, streams, errors."""

import numpy as np
import pytest

from barecuda import driver as drv
from barecuda import gpuarray as ga
from barecuda.elementwise import ElementwiseKernel
from barecuda.tools import dtype_to_ctype

pytestmark = pytest.mark.gpu

DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                np.uint16, np.uint32, np.uint64, np.float16, np.float32,
                                np.float64, np.complex64, np.complex128)]


def test_axpy(ctx, rng):
    k = ElementwiseKernel("float a, float *x, float *y, float *z", "z[i] = a * x[i] + y[i]", "axpy")
    for n in (0, 1, 1000, 1 << 20):
        x = rng.standard_normal(n).astype(np.float32)
        y = rng.standard_normal(n).astype(np.float32)
        gx, gy, gz = ga.to_gpu(x), ga.to_gpu(y), ga.empty(n, np.float32)
        k(2.5, gx, gy, gz)
        np.testing.assert_allclose(gz.get(), np.float32(2.5) * x + y, rtol=1e-5, atol=1e-6)  # FMA on the GPU


@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_copy_with_scalar_every_dtype(ctx, rng, dt):
    ct = dtype_to_ctype(dt)
    k = ElementwiseKernel(f"{ct} *z, {ct} *x, {ct} s", "z[i] = (i % 2) ? x[i] : s", "sel")
    x = (rng.standard_normal(101) * 10).astype(dt) if dt.kind != "c" else \
        (rng.standard_normal(101) + 1j * rng.standard_normal(101)).astype(dt)
    s = dt.type(1 + 2j) if dt.kind == "c" else dt.type(True if dt.kind == "b" else 3)
    gz, gx = ga.empty(101, dt), ga.to_gpu(x)
    k(gz, gx, s)
    want = x.copy()
    want[::2] = s
    np.testing.assert_array_equal(gz.get(), want)


def test_range_and_slice(ctx, rng):
    k = ElementwiseKernel("float *z, float *x", "z[i] = 2 * x[i]", "twice")
    x = rng.standard_normal(100).astype(np.float32)
    for r in (range(10, 50), range(0, 100, 3), range(99, 0, -7)):
        gz = ga.zeros(100, np.float32)
        k(gz, ga.to_gpu(x), range=r)
        want = np.zeros(100, np.float32)
        idx = np.array(list(r))
        want[idx] = 2 * x[idx]
        np.testing.assert_array_equal(gz.get(), want)
    gz = ga.zeros(100, np.float32)
    k(gz, ga.to_gpu(x), slice=slice(5, None, 2))
    want = np.zeros(100, np.float32)
    want[5::2] = 2 * x[5::2]
    np.testing.assert_array_equal(gz.get(), want)


def test_preamble_loop_prep_after_loop_stream(ctx, rng):
    k = ElementwiseKernel("double *z, double *x", "z[i] = SQ(x[i]) + offset", "pre",
                          preamble="#define SQ(v) ((v) * (v))", loop_prep="double offset = 1.0",
                          after_loop="(void)offset")
    x = rng.standard_normal(5000)
    gz = ga.empty(5000, np.float64)
    s = drv.Stream()
    k(gz, ga.to_gpu(x), stream=s)
    s.synchronize()
    np.testing.assert_allclose(gz.get(), x * x + 1)


def test_errors(ctx):
    k = ElementwiseKernel("float *z, float *x, int s", "z[i] = x[i] * s", "k")
    z = ga.zeros(10, np.float32)
    with pytest.raises(TypeError, match="argument 'x' .* must be a GPUArray of float32, got one of float64"):
        k(z, ga.zeros(10, np.float64), 1)
    with pytest.raises(TypeError, match="argument 's' .* is a scalar"):
        k(z, z, z)
    with pytest.raises(ValueError, match="argument 'x' .* is not contiguous"):
        k(z, ga.zeros(20, np.float32)[::2], 1)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        k(z, z)
    with pytest.raises(OverflowError, match="argument 's'"):
        k(z, z, 2**40)
    with pytest.raises(TypeError, match="range= must be a range"):
        k(z, z, 1, range=(0, 3))


def test_cache_per_context(ctx):
    k = ElementwiseKernel("int *z", "z[i] = i", "iota")
    z = ga.empty(10, np.int32)
    k(z)
    f1 = k.get_function()
    k(z)
    assert k.get_function() is f1
    np.testing.assert_array_equal(z.get(), np.arange(10))


def test_large_index_64bit(ctx):
    # 2^31 + 5 one-byte elements needs 64-bit indices.
    n = (1 << 31) + 5
    try:
        z = ga.empty(n, np.uint8)
    except drv.MemoryError:
        pytest.skip("not enough device memory")
    k = ElementwiseKernel("unsigned char *z", "z[i] = (unsigned char)(i & 0xff)", "low8")
    k(z)
    tail = z[n - 5:].get()
    np.testing.assert_array_equal(tail, (np.arange(n - 5, n) & 0xff).astype(np.uint8))


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 255, 257, 2**20 + 3, 3 * 2**21 + 1])
def test_wide_kernels_cover_every_element(ctx, rng, n):
    """float32 + float64 and float64 + float64 (one block per BLOCK elements), through
    the array layer, an ElementwiseKernel call and its slice variant, against NumPy."""
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n)
    gx, gy = ga.to_gpu(x), ga.to_gpu(y)
    np.testing.assert_array_equal((gx + gy).get(), x + y)
    np.testing.assert_array_equal((gy + gy).get(), y + y)
    k = ElementwiseKernel("double *z, float *x, double *y", "z[i] = 2 * x[i] - y[i]", "wide")
    z = ga.zeros(n, np.float64)
    k(z, gx, gy)
    np.testing.assert_allclose(z.get(), 2 * x.astype(np.float64) - y, rtol=1e-12)
    z.fill(-7.0)
    lo, hi = n // 3, n - n // 5
    k(z, gx, gy, slice=slice(lo, hi, 3))
    want = np.full(n, -7.0)
    want[lo:hi:3] = 2 * x[lo:hi:3].astype(np.float64) - y[lo:hi:3]
    np.testing.assert_allclose(z.get(), want, rtol=1e-12)
