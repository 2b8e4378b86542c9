# SPDX-License-Identifier: MIT
"""GPUArray against NumPy on random data: every dtype, 0-size, 1-element and
non-contiguous shapes, errors."""

import numpy as np
import pytest

from barecuda import driver as drv
from barecuda import gpuarray as ga

pytestmark = pytest.mark.gpu

DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                np.uint16, np.uint32, np.uint64, np.float16, np.float32,
                                np.float64, np.complex64, np.complex128)]
SHAPES = [(0,), (1,), (1000,), (3, 5), (2, 0, 3), (4, 3, 2)]
ARITH = ["add", "subtract", "multiply", "true_divide", "floor_divide", "remainder", "power"]
COMPARE = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]
PYOP = {"add": "__add__", "subtract": "__sub__", "multiply": "__mul__",
        "true_divide": "__truediv__", "floor_divide": "__floordiv__", "remainder": "__mod__",
        "power": "__pow__", "equal": "__eq__", "not_equal": "__ne__", "less": "__lt__",
        "less_equal": "__le__", "greater": "__gt__", "greater_equal": "__ge__"}


def rand(rng, shape, dt, positive=False, nonzero=False, small=False):
    dt = np.dtype(dt)
    if dt.kind == "b":
        return (rng.random(shape) > 0.5) | (bool(nonzero))
    if dt.kind in "iu":
        lo = 1 if (positive or nonzero or dt.kind == "u") else -40
        hi = 4 if small else 40
        a = rng.integers(lo if not small else 0, hi, size=shape).astype(dt)
        if nonzero:
            a[a == 0] = 1
        return a
    if dt.kind == "f":
        a = rng.standard_normal(shape)
        if positive:
            a = np.abs(a) + 0.5
        if small:
            a = rng.random(shape) * 3
        return a.astype(dt)
    a = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
    return a.astype(dt)


def tol(dt):
    dt = np.dtype(dt)
    if dt in (np.float16,):
        return dict(rtol=2e-3, atol=2e-3)
    if dt in (np.float32, np.complex64):
        return dict(rtol=2e-5, atol=1e-5)
    return dict(rtol=1e-12, atol=1e-12)


def check(got, want, dt=None):
    if isinstance(got, ga.GPUArray):
        got = got.get()
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, equal_nan=True, **tol(dt or want.dtype))
    else:
        np.testing.assert_array_equal(got, want)


def np_op(op, a, b):
    with np.errstate(all="ignore"):
        return getattr(np, op)(a, b)


# ------------------------------------------------------------------ creation, transfers

@pytest.mark.parametrize("dt", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_roundtrip(ctx, rng, dt, shape):
    h = rand(rng, shape, dt)
    g = ga.to_gpu(h)
    assert g.shape == h.shape and g.dtype == h.dtype and g.size == h.size
    if h.size:  # NumPy 2.5 gives empty arrays zero strides; ours keep C strides
        assert g.strides == h.strides
    assert g.nbytes == h.nbytes and g.ndim == h.ndim
    assert g.flags.c_contiguous and g.mem_size == h.size
    check(g.get(), h)
    out = np.empty_like(h)
    assert g.get(out) is out
    check(out, h)
    h2 = rand(rng, shape, dt)
    g.set(h2)
    check(g, h2)
    s = drv.Stream()
    g.set_async(h, stream=s)
    got = g.get_async(stream=s)
    s.synchronize()
    check(got, h)
    check(g.get(pagelocked=True), h)


def test_fortran_order(ctx, rng):
    h = np.asfortranarray(rng.standard_normal((5, 7)))
    g = ga.to_gpu(h)
    assert g.flags.f_contiguous and not g.flags.c_contiguous and g.strides == h.strides
    check(g, h)
    check(g + 1, h + 1)
    check(g.T, h.T)


@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_creation(ctx, dt):
    check(ga.zeros((3, 4), dt), np.zeros((3, 4), dt))
    check(ga.ones(7, dt), np.ones(7, dt))
    check(ga.full((2, 2), 1, dt), np.full((2, 2), 1, dt))
    e = ga.empty((0,), dt)
    assert e.size == 0 and e.get().shape == (0,)
    a = ga.zeros((2, 3), dt)
    assert ga.empty_like(a).shape == (2, 3) and ga.empty_like(a).dtype == dt
    check(ga.zeros_like(a), np.zeros((2, 3), dt))
    check(ga.ones_like(a), np.ones((2, 3), dt))
    if dt.kind not in "bc":
        check(ga.arange(0, 10, 2, dtype=dt), np.arange(0, 10, 2, dtype=dt))


def test_arange_defaults(ctx):
    check(ga.arange(10), np.arange(10))
    check(ga.arange(1.5, 4.0, 0.5), np.arange(1.5, 4.0, 0.5))
    check(ga.arange(5, 0, -1), np.arange(5, 0, -1))
    check(ga.arange(0), np.arange(0))
    with pytest.raises(ValueError, match="step may not be zero"):
        ga.arange(0, 5, 0)


def test_allocator(ctx, rng):
    calls = []

    def alloc(n):
        calls.append(n)
        return drv.mem_alloc(n)
    h = rand(rng, (100,), np.float32)
    g = ga.to_gpu(h, allocator=alloc)
    assert calls == [400]
    r = g + g
    assert calls == [400, 400]
    check(r, h + h)
    if hasattr(__import__("barecuda.tools").tools, "DeviceMemoryPool"):
        from barecuda.tools import DeviceMemoryPool
        pool = DeviceMemoryPool()
        g2 = ga.to_gpu(h, allocator=pool.allocate)
        check(g2 * 2, h * 2)


def test_set_get_errors(ctx):
    g = ga.zeros(10, np.float32)
    with pytest.raises(ValueError, match="size 5 does not fit"):
        g.set(np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="dtype float64"):
        g.set(np.zeros(10, np.float64))
    with pytest.raises(ValueError, match="has size 3"):
        g.get(np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="has dtype int32"):
        g.get(np.zeros(10, np.int32))


# ------------------------------------------------------------------ arithmetic

@pytest.mark.parametrize("dt", DTYPES, ids=str)
@pytest.mark.parametrize("op", ARITH + COMPARE + ["maximum", "minimum"])
def test_binary_same_dtype(ctx, rng, dt, op):
    shape = (3, 50)
    a = rand(rng, shape, dt, small=(op == "power"))
    b = rand(rng, shape, dt, nonzero=op in ("true_divide", "floor_divide", "remainder"),
             small=(op == "power"))
    try:
        want = np_op(op, a, b)
    except (TypeError, ValueError) as exc:
        with pytest.raises(type(exc)):
            getattr(ga, op)(ga.to_gpu(a), ga.to_gpu(b)) if op in ("maximum", "minimum") else \
                getattr(ga.to_gpu(a), PYOP[op])(ga.to_gpu(b))
        return
    ga_a, ga_b = ga.to_gpu(a), ga.to_gpu(b)
    if op in ("maximum", "minimum"):
        got = getattr(ga, op)(ga_a, ga_b)
    else:
        got = getattr(ga_a, PYOP[op])(ga_b)
    if op == "power" and dt.kind == "c":
        np.testing.assert_allclose(got.get(), want, rtol=1e-4 if dt == np.complex64 else 1e-10)
        return
    check(got, want, dt)


MIXED = [(np.int8, np.float32), (np.uint8, np.int8), (np.int32, np.float64), (np.float16, np.float32),
         (np.complex64, np.float64), (np.bool_, np.int16), (np.uint64, np.int64), (np.uint32, np.int32),
         (np.int16, np.float16), (np.complex128, np.int32)]


@pytest.mark.parametrize("dts", MIXED, ids=str)
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "true_divide", "less", "equal"])
def test_binary_mixed(ctx, rng, dts, op):
    a = rand(rng, (40,), dts[0])
    b = rand(rng, (40,), dts[1], nonzero=True)
    try:
        want = np_op(op, a, b)
    except TypeError:
        with pytest.raises(TypeError):
            getattr(ga.to_gpu(a), PYOP[op])(ga.to_gpu(b))
        return
    check(getattr(ga.to_gpu(a), PYOP[op])(ga.to_gpu(b)), want)


@pytest.mark.parametrize("dt", DTYPES, ids=str)
@pytest.mark.parametrize("scalar", [3, 2.5, True, 1 + 2j, np.float32(1.5), np.int64(2)], ids=repr)
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "true_divide", "greater"])
def test_scalar_ops(ctx, rng, dt, scalar, op):
    a = rand(rng, (30,), dt, nonzero=True)
    for reverse in (False, True):
        try:
            want = np_op(op, scalar, a) if reverse else np_op(op, a, scalar)
        except (TypeError, OverflowError) as exc:
            with pytest.raises(type(exc)):
                g = ga.to_gpu(a)
                name = PYOP[op]
                if reverse:
                    getattr(g, "__r" + name[2:])(scalar)
                else:
                    getattr(g, name)(scalar)
            continue
        g = ga.to_gpu(a)
        if reverse:
            if op == "greater":
                got = g < scalar
            else:
                got = getattr(g, "__r" + PYOP[op][2:])(scalar)
        else:
            got = getattr(g, PYOP[op])(scalar)
        check(got, want, dt)


def test_python_scalar_rules(ctx, rng):
    a = ga.to_gpu(np.arange(5, dtype=np.int8))
    assert (a + 3).dtype == np.int8
    assert (a + 3.0).dtype == np.float64
    with pytest.raises(OverflowError):
        a + 300
    f = ga.to_gpu(np.arange(5, dtype=np.float32))
    assert (f * 2).dtype == np.float32
    assert (f * np.float64(2)).dtype == np.float64
    assert (2 ** f).dtype == np.float32
    check(2 ** f, 2 ** np.arange(5, dtype=np.float32))
    check(10 - f, 10 - np.arange(5, dtype=np.float32))
    check(1 / (f + 1), 1 / (np.arange(5, dtype=np.float32) + 1))
    with pytest.raises(ValueError, match="negative integer powers"):
        a ** -1
    check(a ** 2, np.arange(5, dtype=np.int8) ** 2)
    check(a // 2, np.arange(5, dtype=np.int8) // 2)
    check(-a % 3, (-np.arange(5, dtype=np.int8)) % 3)


@pytest.mark.parametrize("dt", [np.int8, np.int32, np.int64, np.uint16, np.float32, np.float64],
                         ids=str)
def test_floordiv_mod_signs(ctx, dt):
    vals = np.array([7, -7, 7, -7, 0, 5, -5, 3], dtype=np.float64)
    divs = np.array([2, 2, -2, -2, 3, -3, 1, 4], dtype=np.float64)
    if np.dtype(dt).kind == "u":
        vals, divs = np.abs(vals), np.abs(divs)
    a, b = vals.astype(dt), divs.astype(dt)
    check(ga.to_gpu(a) // ga.to_gpu(b), a // b)
    check(ga.to_gpu(a) % ga.to_gpu(b), a % b)
    zero = np.zeros_like(a)
    with np.errstate(all="ignore"):
        check(ga.to_gpu(a) // ga.to_gpu(zero), a // zero)
        check(ga.to_gpu(a) % ga.to_gpu(zero), a % zero)


@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_unary(ctx, rng, dt):
    a = rand(rng, (4, 9), dt)
    g = ga.to_gpu(a)
    check(abs(g), np.abs(a))
    if dt.kind == "b":
        with pytest.raises(TypeError):
            -g
    else:
        with np.errstate(all="ignore"):
            check(-g, -a)
    check(g.conj(), np.conj(a))
    check(+g, a)


@pytest.mark.parametrize("dt", [np.int16, np.uint32, np.float16, np.float32, np.float64, np.complex64],
                         ids=str)
def test_inplace(ctx, rng, dt):
    a = rand(rng, (64,), dt, nonzero=True)
    b = rand(rng, (64,), dt, nonzero=True)
    g = ga.to_gpu(a)
    h = ga.to_gpu(b)
    ref = a.copy()
    g += h
    ref += b
    check(g, ref, dt)
    g *= 2
    ref *= 2
    check(g, ref, dt)
    g -= h
    ref -= b
    check(g, ref, dt)
    if np.dtype(dt).kind in "fc":
        g /= h
        ref /= b
        check(g, ref, dt)
    else:
        with pytest.raises(TypeError, match="same_kind"):
            g /= h


def test_shape_mismatch(ctx):
    a = ga.zeros((3, 4), np.float32)
    b = ga.zeros((4, 3), np.float32)
    with pytest.raises(ValueError, match="shapes"):
        a + b
    with pytest.raises(TypeError, match="numpy.ndarray"):
        a + np.zeros((3, 4), np.float32)


# ------------------------------------------------------------------ views

def test_views_and_noncontiguous_ops(ctx, rng):
    h = rng.standard_normal((6, 8)).astype(np.float32)
    g = ga.to_gpu(h)
    for idx in [(slice(None, None, 2),), (slice(1, 5), slice(None, None, -3)), (2,), (-1, slice(2, 6)),
                (Ellipsis, 3), (slice(None), None, slice(1, 3)), (slice(4, 2),)]:
        v = g[idx]
        check(v, h[idx])
        check(v * 2 + 1, h[idx] * 2 + 1)
        check(v + v, h[idx] + h[idx])
        check(v.copy(), h[idx])
        check(abs(v), np.abs(h[idx]))
    check(g.T, h.T)
    check(g.T + g.T, h.T + h.T)
    check(g.transpose((1, 0)) * 3, h.T * 3)
    check(g[::2, ::3].sum(), np.float32(h[::2, ::3].sum()))
    check(g.reshape(4, 12), h.reshape(4, 12))
    check(g.reshape(-1), h.reshape(-1))
    check(g.T.reshape(48), h.T.reshape(48))
    check(g.ravel(), h.ravel())
    check(g.reshape(1, 6, 1, 8).squeeze(), h)
    check(g.view(np.int32), h.view(np.int32))
    check(g[1], h[1])
    assert len(g) == 6
    with pytest.raises(IndexError, match="out of bounds"):
        g[6]
    with pytest.raises(IndexError, match="too many indices"):
        g[1, 2, 3]
    with pytest.raises(ValueError, match="cannot reshape"):
        g.reshape(5, 5)


def test_setitem_and_set_on_views(ctx, rng):
    h = rng.standard_normal((5, 6))
    g = ga.to_gpu(h)
    g[1:3] = 7.0
    h[1:3] = 7.0
    check(g, h)
    g[:, ::2] = ga.to_gpu(np.arange(15.0).reshape(5, 3))
    h[:, ::2] = np.arange(15.0).reshape(5, 3)
    check(g, h)
    v = g[::2, 1::2]
    new = rng.standard_normal(v.shape)
    v.set(new)
    h[::2, 1::2] = new
    check(g, h)
    g[::-1, 0].fill(-1.5)
    h[::-1, 0] = -1.5
    check(g, h)


def test_inplace_on_view(ctx, rng):
    h = rng.standard_normal((4, 6)).astype(np.float32)
    g = ga.to_gpu(h)
    v = g[:, 1::2]
    v += 1
    h[:, 1::2] += 1
    check(g, h)


@pytest.mark.parametrize("src", DTYPES, ids=str)
def test_astype_and_fill(ctx, rng, src):
    a = rand(rng, (25,), src, positive=True)
    if src.kind == "f":
        a = (np.abs(a) * 10).astype(src)
    g = ga.to_gpu(a)
    for dst in DTYPES:
        if src.kind == "c" and dst.kind != "c":
            continue   # NumPy warns (ComplexWarning) for these
        check(g.astype(dst), a.astype(dst), dst)
    f = ga.empty((3, 7), src)
    val = np.ones(1, src)[0]
    check(f.fill(val), np.full((3, 7), val, src))


def test_real_imag_conj(ctx, rng):
    h = (rng.standard_normal(10) + 1j * rng.standard_normal(10)).astype(np.complex64)
    g = ga.to_gpu(h)
    check(g.real, h.real)
    check(g.imag, h.imag)
    check(g.conj(), np.conj(h))
    check(g.real + g.imag, h.real + h.imag)
    r = ga.to_gpu(np.arange(3.0))
    check(r.real, np.arange(3.0))
    check(r.imag, np.zeros(3))


# ------------------------------------------------------------------ reductions

@pytest.mark.parametrize("dt", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 7, 1000, 100_003, 3_000_001])
def test_sum_max_min(ctx, rng, dt, n):
    a = rand(rng, (n,), dt)
    g = ga.to_gpu(a)
    s = g.sum()
    assert s.shape == () and isinstance(s, ga.GPUArray)
    want = np.sum(a)
    assert s.dtype == want.dtype
    if dt.kind in "fc":
        exact = np.sum(a.astype(np.complex128 if dt.kind == "c" else np.float64))
        r = 1e-2 if dt == np.float16 else (1e-5 if dt in (np.float32, np.complex64) else 1e-11)
        np.testing.assert_allclose(s.get(), exact, rtol=r, atol=r * 3 * np.sqrt(n))
    else:
        check(s, want)
    if dt.kind != "c":
        check(g.max(), np.max(a))
        check(g.min(), np.min(a))
    if dt.kind in "iu":
        check(ga.mean(g), np.mean(a))


def test_reduction_edge_cases(ctx, rng):
    e = ga.zeros(0, np.float32)
    check(e.sum(), np.float32(0))
    with pytest.raises(ValueError, match="zero-size array"):
        e.max()
    h = rng.standard_normal(1000)
    h[500] = np.nan
    g = ga.to_gpu(h)
    assert np.isnan(g.max().get()) and np.isnan(g.min().get())
    assert float(ga.to_gpu(np.arange(10.0)).sum()) == 45.0
    h2 = rng.standard_normal((30, 40))
    np.testing.assert_allclose(ga.to_gpu(h2)[::3, 1::2].sum().get(), h2[::3, 1::2].sum())


@pytest.mark.parametrize("dt", [np.int32, np.float16, np.float32, np.float64, np.complex64, np.complex128],
                         ids=str)
def test_dot_vdot_mean(ctx, rng, dt):
    a = rand(rng, (5000,), dt)
    b = rand(rng, (5000,), dt)
    ga_a, ga_b = ga.to_gpu(a), ga.to_gpu(b)
    r = 1e-2 if dt == np.float16 else (1e-4 if dt in (np.float32, np.complex64) else 1e-10)
    np.testing.assert_allclose(ga.dot(ga_a, ga_b).get(), np.dot(a.astype(np.complex128), b), rtol=r, atol=r)
    np.testing.assert_allclose(ga.vdot(ga_a, ga_b).get(), np.vdot(a.astype(np.complex128), b), rtol=r, atol=r)
    np.testing.assert_allclose(ga.mean(ga_a).get(), np.mean(a.astype(np.complex128)), rtol=r, atol=r)
    assert ga.mean(ga_a).dtype == np.mean(a).dtype
    assert ga.dot(ga_a, ga_b).dtype == np.dot(a, b).dtype
    with pytest.raises(ValueError, match="sizes differ"):
        ga.dot(ga_a, ga_b[:10])


def test_subset_reductions(ctx, rng):
    a = rng.standard_normal(1000)
    b = rng.standard_normal(1000)
    idx = rng.integers(0, 1000, 300).astype(np.int32)
    ga_a, ga_b, ga_i = ga.to_gpu(a), ga.to_gpu(b), ga.to_gpu(idx)
    np.testing.assert_allclose(ga.subset_dot(ga_i, ga_a, ga_b).get(), np.dot(a[idx], b[idx]))
    check(ga.subset_max(ga_i, ga_a), np.max(a[idx]))
    check(ga.subset_min(ga_i, ga_a), np.min(a[idx]))


# ------------------------------------------------------------------ more elementwise

@pytest.mark.parametrize("dt", [np.int32, np.float32, np.float64, np.complex64], ids=str)
def test_if_positive_maximum_minimum_take(ctx, rng, dt):
    c = rng.standard_normal(100)
    t = rand(rng, (100,), dt)
    e = rand(rng, (100,), dt)
    check(ga.if_positive(ga.to_gpu(c), ga.to_gpu(t), ga.to_gpu(e)), np.where(c > 0, t, e))
    if np.dtype(dt).kind != "c":
        check(ga.maximum(ga.to_gpu(t), ga.to_gpu(e)), np.maximum(t, e))
        check(ga.minimum(ga.to_gpu(t), ga.to_gpu(e)), np.minimum(t, e))
        check(ga.maximum(ga.to_gpu(t), 0), np.maximum(t, np.zeros(1, dt)[0]))
    idx = rng.integers(0, 100, 57)
    check(ga.take(ga.to_gpu(t), ga.to_gpu(idx)), t[idx])
    with pytest.raises(ValueError, match="one shape"):
        ga.if_positive(ga.to_gpu(c[:5]), ga.to_gpu(t), ga.to_gpu(e))


def test_maximum_nan(ctx):
    a = np.array([1.0, np.nan, 3.0, -1.0])
    b = np.array([2.0, 0.0, np.nan, -2.0])
    check(ga.maximum(ga.to_gpu(a), ga.to_gpu(b)), np.maximum(a, b))
    check(ga.minimum(ga.to_gpu(a), ga.to_gpu(b)), np.minimum(a, b))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenate(ctx, rng, axis):
    parts = [rng.standard_normal((3, 4)), rng.standard_normal((3, 4)), rng.standard_normal((3, 4))]
    if axis == 0:
        parts[1] = rng.standard_normal((0, 4))
    check(ga.concatenate([ga.to_gpu(p) for p in parts], axis=axis), np.concatenate(parts, axis=axis))
    # mixed dtypes promote, as numpy.concatenate and PyCUDA do
    mixed = ga.concatenate([ga.to_gpu(parts[0].astype(np.float32)), ga.to_gpu(parts[2])], axis=axis)
    check(mixed, np.concatenate([parts[0].astype(np.float32), parts[2]], axis=axis))


def test_scalar_conversions_and_repr(ctx):
    g = ga.to_gpu(np.array([2.5], np.float32))
    assert float(g) == 2.5 and int(g) == 2 and complex(g) == 2.5
    assert repr(g) == repr(np.array([2.5], np.float32))
    assert str(g) == str(np.array([2.5], np.float32))
    with pytest.raises(TypeError, match="only 1-element"):
        float(ga.zeros(3, np.float32))
    with pytest.raises(TypeError, match="len"):
        len(ga.zeros((), np.float32))


def test_cuda_array_interface(ctx):
    g = ga.zeros((3, 4), np.float32)
    cai = g.__cuda_array_interface__
    assert cai["shape"] == (3, 4) and cai["typestr"] == "<f4" and cai["data"][0] == g.ptr
    # strides always given (as PyCUDA): C-contiguous float32 (3, 4) -> (16, 4)
    assert cai["version"] == 3 and cai["strides"] == (16, 4)
    assert g.T.__cuda_array_interface__["strides"] == (4, 16)


def test_streams(ctx, rng):
    s = drv.Stream()
    h = rng.standard_normal(10000).astype(np.float32)
    g = ga.to_gpu_async(h, stream=s)
    r = ga.sum(g, stream=s)
    t = ga.zeros(10000, np.float32, stream=s)
    t.fill(3.0, stream=s)
    s.synchronize()
    np.testing.assert_allclose(r.get(), h.sum(dtype=np.float64), rtol=1e-4)
    check(t, np.full(10000, 3.0, np.float32))


def test_numpy_scalar_on_the_left(ctx):
    g = ga.to_gpu(np.arange(4, dtype=np.float32))
    r = np.float32(2) * g
    assert isinstance(r, ga.GPUArray)
    check(r, np.float32(2) * np.arange(4, dtype=np.float32))
    r = np.float64(1.5) > g
    assert isinstance(r, ga.GPUArray)
    check(r, np.float64(1.5) > np.arange(4, dtype=np.float32))
