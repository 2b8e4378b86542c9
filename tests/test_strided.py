# SPDX-License-Identifier: MIT
"""Arithmetic on strided views and mixed dtypes (python/barecuda/_array/strided.py, the
strided and mixed-itemsize C fast paths of src/gpuarray.c).

CPU: layout collapsing checked against NumPy's own views, the generated kernel
sources and their NVRTC compilation for every variant, the argument layout the C
fast path packs.  GPU: results against NumPy on random data for positive and
negative steps, 2-d slices, transposes, every dtype pair, scalars, 0-d operands,
in-place forms on views, out= arguments, overlapping operands and bad input."""

import itertools
import types

import numpy as np
import pytest
from conftest import DTYPE_COVER, FULL_TEMPLATES, full_or, nvrtc_check_many

from barecuda._array import arith as _arith
from barecuda._array import strided as _strided
from barecuda import gpuarray as ga

gpu = pytest.mark.gpu
DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                np.uint16, np.uint32, np.uint64, np.float16, np.float32,
                                np.float64, np.complex64, np.complex128)]
NUMERIC = [d for d in DTYPES if d != np.bool_]
COMPILED = full_or(DTYPES, DTYPE_COVER)    # the dtypes whose kernels the CPU tests compile


# ------------------------------------------------------------------ layouts (CPU)

def _views(rng):
    """NumPy views of many layouts (with their base array)."""
    a = np.arange(7 * 9 * 5, dtype=np.float32).reshape(7, 9, 5)
    yield a
    yield a[::2]
    yield a[:, 1::3]
    yield a[::-1, ::2, 1:4]
    yield a.T
    yield a.transpose(1, 0, 2)[2:, :, ::-2]
    yield a[3]
    yield a[:, 4, :]
    yield a[..., 2]
    yield a[:1, :1, 2:3]
    yield a[:, :0]
    b = np.arange(1000, dtype=np.float64)
    yield b[::3]
    yield b[::-7]
    yield b[5:6]
    yield b.reshape(10, 100)[:, ::10].T
    for _ in range(20):
        shape = tuple(rng.integers(1, 5, rng.integers(1, 5)))
        c = np.zeros(shape, np.int16)
        sl = tuple(slice(int(rng.integers(0, 2)), None, int(rng.choice([1, 2, -1, -2])))
                   for _ in shape)
        v = c[sl]
        yield v.transpose(rng.permutation(v.ndim))


def _offsets(v):
    """Byte offsets of v's elements in C order from its first element."""
    if v.size == 0:
        return np.zeros(0, np.int64)
    idx = np.indices(v.shape).reshape(v.ndim, -1)
    return (idx * np.array(v.strides, np.int64)[:, None]).sum(0)


def _walk(dims, est, n):
    out = np.zeros(n, np.int64)
    for i in range(n):
        r, off = i, 0
        for d in reversed(range(1, len(dims))):
            off += (r % dims[d]) * est[d]
            r //= dims[d]
        off += r * est[0] if dims else 0
        out[i] = off
    return out


def test_collapse_matches_numpy_views():
    rng = np.random.default_rng(1)
    for v in _views(rng):
        w = np.empty(v.shape, np.float64)          # a dense C-order result beside it
        lay = _strided.collapse(v.shape, [v.strides, w.strides], [v.itemsize, w.itemsize])
        assert lay is not None
        dims, (vs, ws) = lay
        assert all(d > 1 for d in dims) or v.size == 0
        assert int(np.prod(dims)) == v.size or v.size == 0 or (v.size == 1 and dims == ())
        if v.size > 1:
            np.testing.assert_array_equal(_walk(dims, vs, v.size) * v.itemsize, _offsets(v))
            np.testing.assert_array_equal(_walk(dims, ws, v.size), np.arange(v.size))


def test_collapse_cases():
    assert _strided.collapse((4, 6), [(24, 4), (48, 8)], [4, 8]) == ((24,), [(1,), (1,)])
    assert _strided.collapse((4, 6), [(96, 8)], [4]) == ((4, 6), [(24, 2)])
    assert _strided.collapse((3, 1, 5), [(-20, 0, 4)], [4]) == ((3, 5), [(-5, 1)])
    assert _strided.collapse((1, 1), [(4, 4)], [4]) == ((), [()])
    assert _strided.collapse((), [()], [8]) == ((), [()])
    assert _strided.collapse((5,), [(6,)], [4]) is None    # not a multiple of the item
    assert _strided.dense_strides((3, 4, 5)) == (20, 5, 1)
    assert _strided.fits32((2**20,), [(2047,)]) and not _strided.fits32((2**20,), [(2049,)])
    assert _strided.extent((3, 4), (-10, 2)) == 26


def _fake(ptr, shape, strides, itemsize=4):
    return types.SimpleNamespace(ptr=ptr, shape=shape, strides=strides,
                                 size=int(np.prod(shape)), dtype=np.dtype(f"i{itemsize}"))


def test_overlap_and_clash():
    a = _fake(1000, (10,), (4,))
    assert _strided.overlaps(a, _fake(1036, (5,), (4,)))
    assert not _strided.overlaps(a, _fake(1040, (5,), (4,)))
    assert _strided.overlaps(_fake(1036, (10,), (-4,)), _fake(1000, (1,), (4,)))
    assert not _strided.overlaps(a, _fake(1000, (0,), (4,)))
    assert not _strided.clash(a, a)                              # element for element
    assert _strided.clash(a, _fake(1004, (10,), (4,)))           # shifted by one
    assert _strided.clash(_fake(1000, (5,), (8,)), _fake(1000, (5,), (8,), 8))  # items differ
    assert _strided.clash(_fake(1000, (5,), (8,)), _fake(1000, (5,), (4,)))


# ------------------------------------------------------------------ kernels (CPU)

def test_source_shapes():
    f32, f64 = np.dtype(np.float32), np.dtype(np.float64)
    args, op = _strided.binary_source("add", f32, f64, "a", False, f64, f64, 1, False, True)
    assert args == "double *z, float *x, double *y, int xs0, int ys0"
    assert "z[i] = bc_cast<double>(a + b)" in op and "x[xo]" in op and "y[yo]" in op
    args, op = _strided.binary_source("subtract", f32, None, "s", True, f32, f32, 1, False, True)
    assert args == "float *z, float *x, float s, int xs0"
    assert "const float a = bc_cast<float>(s); const float b = bc_cast<float>(x[xo])" in op
    args, op = _strided.binary_source("multiply", f32, f64, "0", False, f64, np.dtype(np.int32),
                                      3, True, False)
    assert args.startswith("int *z, float *x, double *y, long long xs0")
    assert "long long zs2" in args and "unsigned long long sh1, unsigned long long sh2" in args
    assert "y[0]" in op and "z[zo] = bc_cast<int>(" in op and "r % sh2" in op
    with pytest.raises(ValueError, match="1 to"):
        _strided.binary_source("add", f32, f32, "a", False, f32, f32, _strided.MAX_DIMS + 1,
                               False, True)


def test_hot_layout_is_what_the_c_table_packs():
    """The 1-d dense kernel's prepared layout: pointers, the scalar, int strides, n."""
    f32, f64, i32 = (np.dtype(t) for t in (np.float32, np.float64, np.int32))
    k = _strided.binary_kernel("add", f32, f64, "a", False, f64, f64, 1, False, True)
    assert k._sig.fmt + "i" == "PPPiii"
    k = _strided.binary_kernel("multiply", i32, None, "s", False, f64, f64, 1, False, True)
    assert k._sig.fmt + "i" == "PPdii"
    assert _strided.binary_kernel("multiply", i32, None, "s", False, f64, f64, 1, False,
                                  True) is k


def _nvrtc(kernels):
    nvrtc_check_many((k.source(False, False) for k in kernels), size=250)


def _variants(pairs, ops, layouts):
    ks = []
    for (xd, yd), op, (ymode, rev, nd, wide, zdense) in itertools.product(pairs, ops, layouts):
        try:
            if ymode == "s":
                sc = {"c": 1j, "f": 2.5}.get(yd.kind, 3)
                res = _arith._result_dtype(op, xd, sc)
                cd = _arith._compute_dtype(op, xd, sc, res)
            else:
                res = _arith._result_dtype(op, xd, yd)
                cd = _arith._compute_dtype(op, xd, yd, res)
        except (TypeError, OverflowError):
            continue
        ks.append(_strided.binary_kernel(op, xd, None if ymode == "s" else yd, ymode, rev, cd,
                                         res, nd, wide, zdense))
    return ks


def test_compile_mixed_pairs_1d():
    """Every dtype pair (of the cover, unless BARECUDA_FULL_TEMPLATES=1), 1-d strided
    with a dense result (the C fast path's kernel)."""
    ops = ["add", "multiply"] + (["subtract", "true_divide", "less", "maximum"]
                                 if FULL_TEMPLATES else [])
    ks = _variants([(x, y) for x in COMPILED for y in COMPILED], ops, [("a", False, 1, False, True)])
    assert len(ks) >= 2 * len(COMPILED) ** 2 - 8
    _nvrtc(ks)


def test_compile_every_layout_variant():
    """Each walk depth, 32/64-bit offsets, dense or strided result, array / 0-d /
    scalar second operand, both operand orders, on a few dtype pairs and all ops."""
    layouts = [(m, r, nd, w, zd) for m in ("a", "0", "s") for r in (False, True)
               for nd in (1, 2, 3, _strided.MAX_DIMS) for w in (False, True) for zd in (False, True)
               if not (m == "a" and r)]
    pairs = [(np.dtype(np.float32), np.dtype(np.float32)),
             (np.dtype(np.int32), np.dtype(np.float64)),
             (np.dtype(np.float16), np.dtype(np.complex64))]
    ks = _variants(pairs, ["add"], layouts)
    ks += _variants(pairs[:2], list(_arith._BINOPS) + ["floor_divide", "remainder", "power"],
                    [("a", False, 2, False, False), ("s", True, 1, True, True)])
    _nvrtc(ks)


# ------------------------------------------------------------------ GPU

def _rand(rng, shape, dt):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return rng.random(shape) > 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -50), min(info.max, 50), shape, endpoint=True).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    return (rng.standard_normal(shape) * 4).astype(dt)


def _close(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape
    if want.dtype.kind in "fc":
        tol = 2e-3 if want.dtype in (np.float16,) else 1e-5
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


SLICES = [
    ((64,), (slice(None, None, 2),)),
    ((64,), (slice(None, None, -3),)),
    ((64,), (slice(5, 60, 7),)),
    ((12, 18), (slice(None, None, 2), slice(1, None, 3))),
    ((12, 18), (slice(None, None, -1), slice(None, None, 2))),
    ((6, 7, 8), (slice(1, None, 2), slice(None), slice(None, None, -2))),
]


@gpu
@pytest.mark.parametrize("shape,index", SLICES)
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "true_divide", "maximum", "less"])
def test_strided_views_match_numpy(shape, index, op):
    rng = np.random.default_rng(2)
    hx, hy = _rand(rng, shape, np.float32), _rand(rng, shape, np.float32)
    x, y = ga.to_gpu(hx), ga.to_gpu(hy)
    f = getattr(np, op)
    _close(_arith._binary(op, x[index], y[index]).get(), f(hx[index], hy[index]))
    # a strided operand beside a contiguous one, and a scalar on each side
    c = ga.to_gpu(np.ascontiguousarray(hy[index]))
    _close(_arith._binary(op, x[index], c).get(), f(hx[index], hy[index]))
    _close(_arith._binary(op, x[index], 2.5).get(), f(hx[index], 2.5))
    if op != "less":
        _close(_arith._binary(op, x[index], 3, reverse=True).get(), f(3, hx[index]))


@gpu
def test_transposes_and_operators():
    rng = np.random.default_rng(3)
    ha, hb = _rand(rng, (33, 17), np.float64), _rand(rng, (17, 33), np.float32)
    a, b = ga.to_gpu(ha), ga.to_gpu(hb)
    _close((a + b.T).get(), ha + hb.T)
    _close((a.T * b).get(), ha.T * hb)
    _close((a.T - b.T.T).get(), ha.T - hb)
    _close((a[::2, ::-3] / 4).get(), ha[::2, ::-3] / 4)
    _close((a[1::2] ** 2).get(), ha[1::2] ** 2)
    _close((a[::3] == a[::3]).get(), ha[::3] == ha[::3])
    h3 = _rand(rng, (4, 5, 6, 7), np.int32)
    g3 = ga.to_gpu(h3)
    v, hv = g3.transpose((3, 1, 0, 2))[::2, ::-1, 1:, ::3], h3.transpose((3, 1, 0, 2))[::2, ::-1, 1:, ::3]
    _close((v + v).get(), hv + hv)
    _close((v * 1.5).get(), hv * 1.5)


@gpu
def test_mixed_dtype_pairs_match_numpy():
    rng = np.random.default_rng(4)
    n = 301
    for xd, yd in itertools.product(DTYPES, DTYPES):
        hx, hy = _rand(rng, 2 * n, xd), _rand(rng, 2 * n, yd)
        x, y = ga.to_gpu(hx), ga.to_gpu(hy)
        for op in ("add", "multiply"):
            try:
                want = getattr(np, op)(hx, hy)
            except TypeError:
                with pytest.raises(TypeError):
                    _arith._binary(op, x, y)
                continue
            for _ in range(2):   # the second call may take the C fast path
                _close(_arith._binary(op, x, y).get(), want)
                _close(_arith._binary(op, x[::2], y[1::2]).get(),
                       getattr(np, op)(hx[::2], hy[1::2]))


@gpu
def test_mixed_results_through_the_c_table_have_dense_layouts():
    rng = np.random.default_rng(5)
    hx, hy = _rand(rng, (40, 30), np.float32), _rand(rng, (40, 30), np.float64)
    cases = [(ga.to_gpu(hx), ga.to_gpu(hy), "C"),                   # C order
             (ga.to_gpu(hx.T.copy()).T, ga.to_gpu(hy.T.copy()).T, "F")]   # F order
    for x, y, order in cases:
        for _ in range(3):   # the first call takes the general path, then the C table
            z = x + y
            assert z.dtype == np.float64
            assert z.strides == np.empty(z.shape, np.float64, order=order).strides
            assert (z.flags.c_contiguous, z.flags.f_contiguous) == (order == "C", order == "F")
            _close(z.get(), hx + hy)
            _close((x * 2).get(), hx * 2)
    hi = np.arange(5, dtype=np.int32)
    for _ in range(3):
        w = ga.to_gpu(hi) * 0.5
        assert w.strides == (8,)
        _close(w.get(), hi * 0.5)
    assert len(_arith._ELEMENTWISE[False]["add"]) >= 1


@gpu
def test_strided_1d_goes_through_the_c_table():
    rng = np.random.default_rng(6)
    hx, hy = _rand(rng, 4000, np.float32), _rand(rng, 4000, np.float32)
    x, y = ga.to_gpu(hx), ga.to_gpu(hy)
    _ = x[::2] + y[::2]                    # the general path remembers the kernel
    z = _arith._ELEMENTWISE[False]["add"](x[::2], y[::2], None)
    assert z is not None and z.strides == (4,) and z.flags.c_contiguous
    _close(z.get(), hx[::2] + hy[::2])
    z = _arith._ELEMENTWISE[False]["add"](x[-2::-3], y[1::3], None)
    assert z is not None
    _close(z.get(), hx[-2::-3] + hy[1::3])
    _ = x[::2] * 2.0
    z = _arith._ELEMENTWISE[False]["multiply"](x[::-5], 3.0, None)
    assert z is not None
    _close(z.get(), hx[::-5] * 3.0)
    # 2-d views are not for the table: None, and the general path answers
    assert _arith._ELEMENTWISE[False]["add"](x.reshape(40, 100)[:, ::2],
                                             y.reshape(40, 100)[:, ::2], None) is None


@gpu
def test_zero_d_operands_with_strided_views():
    rng = np.random.default_rng(7)
    hx = _rand(rng, (10, 12), np.float32)
    hs = np.array(2.5, np.float64)
    x, s = ga.to_gpu(hx), ga.to_gpu(hs)
    _close((x[::2, ::-3] * s).get(), hx[::2, ::-3] * hs)
    _close((s - x[::2, ::-3]).get(), hs - hx[::2, ::-3])


@gpu
def test_in_place_on_views_writes_through():
    rng = np.random.default_rng(8)
    hx, hy = _rand(rng, 100, np.float32), _rand(rng, 100, np.float32)
    x, y = ga.to_gpu(hx), ga.to_gpu(hy)
    v = x[::2]
    v += 1
    hx[::2] += 1
    _close(x.get(), hx)
    xv = x[-2::-3]
    xv *= y[1::3]
    hxv = hx[-2::-3]
    hxv *= hy[1::3]
    _close(x.get(), hx)
    h2 = _rand(rng, (12, 9), np.float64)
    g2 = ga.to_gpu(h2)
    t = g2.T
    t -= ga.to_gpu(np.ascontiguousarray(h2.T))
    _close(g2.get(), np.zeros_like(h2))
    hi = _rand(rng, 50, np.int32)
    gi = ga.to_gpu(hi)
    w = gi[1::2]
    w += 7
    hi[1::2] += 7
    _close(gi.get(), hi)
    with pytest.raises(TypeError, match="same_kind"):
        w += 1.5
    _close(gi.get(), hi)


@gpu
def test_out_arguments_strided_and_cast():
    rng = np.random.default_rng(9)
    hx, hy = _rand(rng, 60, np.float32), _rand(rng, 60, np.float32)
    x, y = ga.to_gpu(hx), ga.to_gpu(hy)
    out = ga.zeros(120, np.float64)
    r = _arith._binary("add", x, y, out=out[::2])
    ho = np.zeros(120)
    np.add(hx, hy, out=ho[::2])
    _close(out.get(), ho)
    assert r.shape == (60,)
    out2 = ga.zeros((6, 10), np.float64)
    _arith._binary("multiply", x.reshape(6, 10)[::-1], y.reshape(6, 10), out=out2)
    _close(out2.get(), (hx.reshape(6, 10)[::-1] * hy.reshape(6, 10)).astype(np.float64))
    with pytest.raises(ValueError, match="shape"):
        _arith._binary("add", x[::2], y[::2], out=ga.zeros(31, np.float32))
    with pytest.raises(TypeError, match="same_kind"):
        _arith._binary("add", x[::2], y[::2], out=ga.zeros(30, np.int32))
    with pytest.raises(TypeError, match="GPUArray"):
        _arith._binary("add", x[::2], y[::2], out=np.zeros(30, np.float32))


@gpu
def test_overlapping_operands_act_as_copies():
    rng = np.random.default_rng(10)
    hx = _rand(rng, 200, np.float32)
    x = ga.to_gpu(hx)
    a = x[1:]
    a += x[:-1]
    hx[1:] += hx[:-1].copy()
    _close(x.get(), hx)
    b = x[::2]
    b += x[::-2]
    hb = hx[::2]
    hb += hx[::-2].copy()
    _close(x.get(), hx)
    _arith._binary("multiply", x[:100], 2.0, out=x[50:150])
    hx[50:150] = hx[:100].copy() * 2.0
    _close(x.get(), hx)


@gpu
def test_bad_input_on_views():
    x = ga.to_gpu(np.arange(20, dtype=np.float32))
    with pytest.raises(ValueError, match="shapes"):
        x[::2] + x[::3]
    with pytest.raises(ValueError, match="shapes"):
        x.reshape(4, 5)[::2] + x.reshape(4, 5).T
    with pytest.raises(TypeError):
        x[::2] + np.arange(10)
    b = ga.to_gpu(np.ones(20, bool))
    with pytest.raises(TypeError):
        b[::2] - b[1::2]


@gpu
def test_empty_and_single_element_views():
    x = ga.to_gpu(np.arange(20, dtype=np.float32))
    z = x[5:5:2] + x[5:5:2]
    assert z.shape == (0,) and z.get().shape == (0,)
    _close((x[7:8:3] * x[3:4]).get(), np.array([21.0], np.float32))
    e = ga.to_gpu(np.zeros((3, 0), np.float32))
    assert (e.T + e.T).shape == (0, 3)
