# SPDX-License-Identifier: MIT
"""Inclusive and exclusive scans against NumPy (sizes across tile and recursion edges)."""

import numpy as np
import pytest

from barecuda import gpuarray as ga
from barecuda.scan import ExclusiveScanKernel, InclusiveScanKernel

pytestmark = pytest.mark.gpu

SIZES = [0, 1, 2, 255, 2048, 2049, 10_000, 2048 * 2048 + 17, 5_000_000]


@pytest.mark.parametrize("n", SIZES)
def test_inclusive_exclusive_sum(ctx, rng, n):
    x = rng.integers(-100, 100, n).astype(np.int64)
    inc = InclusiveScanKernel(np.int64, "a+b")
    exc = ExclusiveScanKernel(np.int64, "a+b", "0")
    g = ga.to_gpu(x)
    out = ga.empty_like(g)
    assert inc(g, out) is out
    np.testing.assert_array_equal(out.get(), np.cumsum(x))
    exc(g, out)
    want = np.concatenate([[0], np.cumsum(x)[:-1]]) if n else x
    np.testing.assert_array_equal(out.get(), want)
    inc(g)  # in place, as PyCUDA
    np.testing.assert_array_equal(g.get(), np.cumsum(x))


@pytest.mark.parametrize("dt", [np.int8, np.uint16, np.int32, np.float32, np.float64, np.complex64], ids=str)
def test_dtypes(ctx, rng, dt):
    x = (rng.standard_normal(7777) * 3).astype(dt) if np.dtype(dt).kind in "fc" else \
        rng.integers(0, 3, 7777).astype(dt)
    got = InclusiveScanKernel(dt, "a+b")(ga.to_gpu(x), ga.empty(7777, dt)).get()
    with np.errstate(all="ignore"):
        want = np.cumsum(x, dtype=dt)
    if np.dtype(dt).kind in "fc":
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-2)
    else:
        np.testing.assert_array_equal(got, want)


def test_max_scan_and_noncommutative(ctx, rng):
    x = rng.standard_normal(100_000).astype(np.float32)
    got = InclusiveScanKernel(np.float32, "a > b ? a : b")(ga.to_gpu(x), ga.empty(100_000, np.float32))
    np.testing.assert_array_equal(got.get(), np.maximum.accumulate(x))
    # "last non-zero wins" is associative but not commutative: order must be kept
    y = rng.integers(0, 4, 100_000).astype(np.int32) * rng.integers(0, 2, 100_000).astype(np.int32)
    k = InclusiveScanKernel(np.int32, "(b != 0 ? b : a)")
    got = k(ga.to_gpu(y), ga.empty(100_000, np.int32)).get()
    want = np.zeros_like(y)
    last = 0
    for j, v in enumerate(y):
        last = v if v != 0 else last
        want[j] = last
    np.testing.assert_array_equal(got, want)


def test_errors(ctx):
    k = InclusiveScanKernel(np.int32, "a+b")
    with pytest.raises(TypeError, match="dtype float32"):
        k(ga.zeros(4, np.float32))
    with pytest.raises(ValueError, match="output has 3 elements"):
        k(ga.zeros(4, np.int32), ga.zeros(3, np.int32))
    with pytest.raises(ValueError, match="not contiguous"):
        k(ga.zeros(8, np.int32)[::2])
    with pytest.raises(TypeError, match="must be a GPUArray"):
        k(np.zeros(4, np.int32))
