# SPDX-License-Identifier: MIT
"""cumath against NumPy, curandom's statistics, characterize."""

import numpy as np
import pytest
from conftest import need_curand_headers

from barecuda import characterize, cumath, curandom
from barecuda import driver as drv
from barecuda import gpuarray as ga

pytestmark = pytest.mark.gpu

NP = {"fabs": np.fabs, "ceil": np.ceil, "floor": np.floor, "exp": np.exp, "log": np.log,
      "log10": np.log10, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos, "tan": np.tan,
      "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
      "tanh": np.tanh}
DOMAIN01 = {"asin", "acos"}
POSITIVE = {"log", "log10", "sqrt"}


def _data(rng, name, dt, n=1000):
    if name in DOMAIN01:
        x = rng.uniform(-0.99, 0.99, n)
    elif name in POSITIVE:
        x = rng.uniform(0.01, 10, n)
    else:
        x = rng.uniform(-3, 3, n)
    if np.dtype(dt).kind == "c":
        x = x + 1j * rng.uniform(-1, 1, n)
    if np.dtype(dt).kind in "iu":
        x = np.abs(x) * 3 + (1 if name in POSITIVE | DOMAIN01 else 0)
        if name in DOMAIN01:
            x = np.zeros(n)
    return x.astype(dt)


@pytest.mark.parametrize("name", sorted(NP))
@pytest.mark.parametrize("dt", [np.float16, np.float32, np.float64, np.int32, np.complex64, np.complex128],
                         ids=str)
def test_unary(ctx, rng, name, dt):
    x = _data(rng, name, dt)
    f = getattr(cumath, name)
    try:
        want = NP[name](x)
    except TypeError:
        with pytest.raises(TypeError):
            f(ga.to_gpu(x))
        return
    if np.dtype(dt).kind == "c" and name not in cumath._COMPLEX_OK:
        with pytest.raises(TypeError, match="complex"):
            f(ga.to_gpu(x))
        return
    got = f(ga.to_gpu(x))
    assert got.dtype == want.dtype
    r = {np.float16: 2e-3, np.float32: 2e-5, np.complex64: 2e-5}.get(want.dtype.type, 1e-12)
    np.testing.assert_allclose(got.get(), want, rtol=r * 10, atol=r * 10)
    out = ga.empty(x.shape, want.dtype)
    s = drv.Stream()
    assert f(ga.to_gpu(x), stream=s, out=out) is out
    s.synchronize()
    np.testing.assert_allclose(out.get(), want, rtol=r * 10, atol=r * 10)


def test_noncontiguous_and_out_errors(ctx, rng):
    x = rng.uniform(-3, 3, (10, 10))
    np.testing.assert_allclose(cumath.sin(ga.to_gpu(x)[::2, ::3]).get(), np.sin(x[::2, ::3]))
    with pytest.raises(TypeError, match="out has dtype float32"):
        cumath.sin(ga.to_gpu(x), out=ga.empty((10, 10), np.float32))
    with pytest.raises(ValueError, match="out has shape"):
        cumath.sin(ga.to_gpu(x), out=ga.empty(3, np.float64))
    with pytest.raises(TypeError, match="takes a GPUArray"):
        cumath.sin(x)


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=str)
def test_fmod_frexp_ldexp_modf(ctx, rng, dt):
    x = rng.uniform(-20, 20, 500).astype(dt)
    m = rng.uniform(0.5, 5, 500).astype(dt)
    np.testing.assert_allclose(cumath.fmod(ga.to_gpu(x), ga.to_gpu(m)).get(), np.fmod(x, m), rtol=1e-5)
    np.testing.assert_allclose(cumath.fmod(ga.to_gpu(x), 3.0).get(), np.fmod(x, dt(3.0)), rtol=1e-5)
    s, e = cumath.frexp(ga.to_gpu(x))
    ws, we = np.frexp(x)
    np.testing.assert_array_equal(s.get(), ws)
    np.testing.assert_array_equal(e.get(), we)
    np.testing.assert_array_equal(cumath.ldexp(s, e).get(), x)
    np.testing.assert_array_equal(cumath.ldexp(ga.to_gpu(x), 3).get(), np.ldexp(x, 3))
    f, n = cumath.modf(ga.to_gpu(x))
    wf, wn = np.modf(x)
    np.testing.assert_array_equal(f.get(), wf)
    np.testing.assert_array_equal(n.get(), wn)


def test_int_fmod(ctx, rng):
    x = rng.integers(-50, 50, 300).astype(np.int32)
    m = rng.integers(1, 7, 300).astype(np.int32)
    np.testing.assert_array_equal(cumath.fmod(ga.to_gpu(x), ga.to_gpu(m)).get(), np.fmod(x, m))


@pytest.mark.parametrize("dt", [np.float16, np.float32, np.float64], ids=str)
def test_rand(ctx, dt):
    a = curandom.rand((1000, 1000), dt)
    assert a.shape == (1000, 1000) and a.dtype == dt
    h = a.get().astype(np.float64)
    assert h.min() >= 0 and h.max() < 1
    assert abs(h.mean() - 0.5) < 0.01 and abs(h.var() - 1 / 12) < 0.01
    b = curandom.rand(1000, dt).get()
    assert not np.array_equal(b, h.ravel()[:1000].astype(dt))


def test_xorwow(ctx):
    need_curand_headers()
    g1 = curandom.XORWOWRandomNumberGenerator(seed=42)
    g2 = curandom.XORWOWRandomNumberGenerator(seed=42)
    a, b = g1.gen_uniform(10000, np.float64).get(), g2.gen_uniform(10000, np.float64).get()
    np.testing.assert_array_equal(a, b)
    c = g1.gen_uniform(10000, np.float64).get()
    assert not np.array_equal(a, c)
    n = g1.gen_normal((500, 1000), np.float32).get().astype(np.float64)
    assert abs(n.mean()) < 0.01 and abs(n.std() - 1) < 0.01
    arr = ga.empty(777, np.float32)
    assert g1.fill_uniform(arr) is arr
    assert 0 < arr.get().min() and arr.get().max() <= 1      # curand's (0, 1]
    with pytest.raises(TypeError, match="does not produce"):
        g1.gen_uniform(10, np.complex64)


def test_characterize(ctx):
    assert characterize.has_double_support()
    assert characterize.sizeof("double") == 8
    assert characterize.sizeof("pycuda::complex<float>") == 8
    assert characterize.sizeof("struct_t", preamble="struct struct_t { char c; double d; };") == 16
