# SPDX-License-Identifier: MIT
"""The C small-op fast paths of the array layer (src/gpuarray.c): GPUArray's fields
in a C base, the kernels' HotEntry, and the _OpTable behind `a + b`, `a * 2.0`,
`-a` and `a.sum()`.  The table must be right whenever it answers, and answer None
(the general path) whenever anything is unusual."""

import gc
import weakref

import numpy as np
import pytest

from barecuda import _driver
from barecuda import driver as drv
from barecuda import gpuarray
from barecuda.gpuarray import _ELEMENTWISE, _SUMS, _UNARY, GPUArray
from barecuda.reduction import ReductionKernel

gpu = pytest.mark.gpu


# ------------------------------------------------------------ without a GPU

def test_gpuarray_keeps_its_fields_in_the_c_base():
    assert issubclass(GPUArray, _driver._ArrayBase)
    z = GPUArray.__new__(GPUArray)
    with pytest.raises(AttributeError):
        z.shape
    z.shape, z._c = (3,), True
    assert z.shape == (3,) and z._c is True
    assert "shape" not in z.__dict__    # the field is in C, not in the instance dict
    z.library_field = 1                 # PyCUDA's arrays take attributes of their own
    assert z.__dict__ == {"library_field": 1}
    assert weakref.ref(z)() is z


def test_a_gpuarray_in_a_cycle_is_collected():
    z = GPUArray.__new__(GPUArray)
    z.base = z
    r = weakref.ref(z)
    del z
    gc.collect()
    assert r() is None


def test_optable_refuses_bad_construction():
    with pytest.raises(TypeError, match="subclass of _ArrayBase"):
        _driver._OpTable(int, "unary", "neg")
    with pytest.raises(ValueError, match="kind must be 'elementwise', 'unary' or 'reduce', not 'binary'"):
        _driver._OpTable(GPUArray, "binary", "add")
    with pytest.raises(TypeError):
        _driver._OpTable(GPUArray, "unary", b"neg")


def test_optable_call_checks_its_arguments_and_answers_none_for_strangers():
    t = _driver._OpTable(GPUArray, "elementwise", "test add")
    with pytest.raises(TypeError, match=r"test add takes 3 positional arguments \(x, y, stream\)"):
        t(1, 2)
    with pytest.raises(TypeError):
        t(1, 2, None, stream=None)
    assert t(1, 2, None) is None                      # not a GPUArray
    assert t(GPUArray.__new__(GPUArray), 1.0, None) is None   # fields never set
    assert len(t) == 0
    u = _driver._OpTable(GPUArray, "reduce", "test sum")
    with pytest.raises(TypeError, match=r"test sum takes 2 positional arguments \(x, stream\)"):
        u(1, 2, 3)
    assert u(np.zeros(3), None) is None


def test_optable_put_checks_its_arguments():
    t = _driver._OpTable(GPUArray, "elementwise", "add")
    f32 = np.dtype(np.float32)
    with pytest.raises(TypeError, match="numpy dtypes"):
        t.put("float32", f32, f32, None)
    with pytest.raises(TypeError, match="a numpy dtype or a type"):
        t.put(f32, 1.0, f32, None)
    with pytest.raises(TypeError, match="hot must be a HotEntry, not NoneType"):
        t.put(f32, f32, f32, None)
    with pytest.raises(TypeError, match="takes 4 or 5 arguments"):
        t.put(f32, f32, f32)
    u = _driver._OpTable(GPUArray, "unary", "neg")
    with pytest.raises(TypeError, match="key must be None for a unary table"):
        u.put(f32, f32, f32, None)
    assert len(t) == len(u) == 0


def test_hot_entry_checks_its_arguments():
    with pytest.raises(TypeError, match="ctx must be a Context, not int"):
        _driver._HotEntry(1, None, None, 1, 256, 256)
    with pytest.raises(TypeError):
        _driver._HotEntry(1, None, None)


# ------------------------------------------------------------ on the GPU

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.int8, np.float16,
          np.complex64, np.complex128, np.uint32, np.uint64, np.int16]
SIZES = [1, 1000, 4097, 300_000, (1 << 20) + 3]


def _random(rng, n, dt):
    dt = np.dtype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    if dt.kind == "f":
        return rng.standard_normal(n).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -50), min(info.max, 50), n, endpoint=True).astype(dt)


def _twice(fn):
    """fn() by the general path (it fills the table), then by the table."""
    first, second = fn(), fn()
    return first, second


def _close(got, want, dt):
    tol = {np.float16: 2e-3, np.float32: 2e-6, np.complex64: 2e-6}.get(np.dtype(dt).type, 1e-12)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


@gpu
@pytest.mark.parametrize("dt", DTYPES)
def test_fast_binary_and_unary_ops_match_numpy(ctx, rng, dt):
    for n in SIZES:
        x, y = _random(rng, n, dt), _random(rng, n, dt)
        if np.dtype(dt).kind in "iu":
            y[y == 0] = 1
        a, b = gpuarray.to_gpu(x), gpuarray.to_gpu(y)
        for op in ("__add__", "__sub__", "__mul__"):
            first, second = _twice(lambda: getattr(a, op)(b))
            want = getattr(x, op)(y)
            for z in (first, second):
                assert z.dtype == want.dtype and z.shape == want.shape
                _close(z.get(), want, dt)
        for z in _twice(lambda: -a):
            if np.dtype(dt).kind != "u":
                _close(z.get(), -x, dt)
        for z in _twice(lambda: abs(a)):
            _close(z.get(), np.abs(x), dt)
    assert len(_ELEMENTWISE[0]["add"]) >= 1 and len(_UNARY["absolute"]) >= 1


@gpu
def test_the_table_answers_after_one_general_call(ctx, rng):
    x, y = rng.random(1000, dtype=np.float32), rng.random(1000, dtype=np.float32)
    a, b = gpuarray.to_gpu(x), gpuarray.to_gpu(y)
    a + b, a * 2.0, 3.0 - a, -a, a.sum(), a.sum()   # the second sum fills the table
    add, mul, rsub = _ELEMENTWISE[0]["add"], _ELEMENTWISE[0]["multiply"], _ELEMENTWISE[1]["subtract"]
    z = add(a, b, None)
    assert type(z) is GPUArray and z.dtype == np.float32 and z.shape == (1000,)
    assert z.strides == a.strides and z.base is None and z.allocator is None
    np.testing.assert_allclose(z.get(), x + y, rtol=1e-6)
    np.testing.assert_allclose(mul(a, 2.0, None).get(), x * 2, rtol=1e-6)
    np.testing.assert_allclose(rsub(a, 3.0, None).get(), 3 - x, rtol=1e-6)
    np.testing.assert_allclose(_UNARY["negative"](a, None).get(), -x)
    s = _SUMS(a, None)
    assert s.shape == () and s.dtype == np.float32 and s.strides == ()
    assert s.get() == pytest.approx(x.sum(dtype=np.float64), rel=1e-5)
    # results are new memory each time, never a block still in use
    z1, z2 = add(a, b, None), mul(a, 2.0, None)
    assert z1.ptr != z2.ptr
    np.testing.assert_allclose(z1.get(), x + y, rtol=1e-6)


@gpu
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32, np.int64, np.uint8, np.complex64])
@pytest.mark.parametrize("n", [0, 1, 1000, 1025, 300_000, (1 << 22) + 7])
def test_fast_sum_matches_numpy(ctx, rng, dt, n):
    x = _random(rng, n, dt)
    a = gpuarray.to_gpu(x)
    want = x.sum()
    exact = x.astype(np.complex128 if np.dtype(dt).kind == "c" else np.float64).sum()
    single = np.dtype(dt) in (np.float32, np.complex64)
    for s in _twice(lambda: a.sum()):
        assert s.dtype == want.dtype and s.shape == ()
        np.testing.assert_allclose(s.get(), exact, rtol=1e-5 if single else 1e-12,
                                   atol=(1e-4 if single else 1e-10) * np.sqrt(n + 1))


@gpu
def test_scalars_the_table_cannot_pack_go_to_numpys_rules(ctx, rng):
    x = rng.integers(-100, 100, 1000).astype(np.int8)
    a = gpuarray.to_gpu(x)
    (a + 1), (a + 1)                        # the table knows (int8, int) now
    np.testing.assert_array_equal((a + 27).get(), x + 27)
    with pytest.raises(OverflowError):
        a + 1000                            # NumPy 2: out of bounds for int8
    u = gpuarray.to_gpu(x.astype(np.uint8))
    (u * 3), (u * 3)
    with pytest.raises(OverflowError):
        u * -1
    f = gpuarray.to_gpu(x.astype(np.float32))
    (f + 1.5), (f + 1.5)
    np.testing.assert_allclose((f + 2**40).get(), x.astype(np.float32) + np.float32(2**40))
    c = gpuarray.to_gpu(x.astype(np.complex64))
    (c * 1j), (c * 1j)
    np.testing.assert_allclose((c * (2 - 1j)).get(), x.astype(np.complex64) * (2 - 1j), rtol=1e-6)


@gpu
def test_layouts_the_table_does_not_copy_use_the_general_path(ctx, rng):
    x = rng.random((40, 50)).astype(np.float32)
    y = rng.random((40, 50)).astype(np.float32)
    a, b = gpuarray.to_gpu(x), gpuarray.to_gpu(y)
    a + b, a + b
    add = _ELEMENTWISE[0]["add"]
    # a strided view, another shape, F order against C order
    assert add(a[:, ::2], b[:, ::2], None) is None
    np.testing.assert_allclose((a[:, ::2] + b[:, ::2]).get(), x[:, ::2] + y[:, ::2])
    assert add(a, b[:20], None) is None
    af, bf = gpuarray.to_gpu(np.asfortranarray(x)), gpuarray.to_gpu(np.asfortranarray(y))
    assert add(af, b, None) is None
    z = af + bf
    z = af + bf                              # both F: the table copies their strides
    assert z.flags.f_contiguous and z.strides == af.strides
    np.testing.assert_allclose(z.get(), x + y)
    # mixed itemsizes in one order enter the table: one flat index walks both, and
    # the result is dense in that order (C here, F for F operands, as NumPy's)
    d = gpuarray.to_gpu(y.astype(np.float64))
    (a + d), (a + d)
    z = add(a, d, None)
    assert z is not None and z.dtype == np.float64 and z.flags.c_contiguous
    np.testing.assert_allclose(z.get(), x + y.astype(np.float64))
    df = gpuarray.to_gpu(np.asfortranarray(y.astype(np.float64)))
    assert add(a, df, None) is None          # C against F: the general path
    np.testing.assert_allclose((a + df).get(), x + y.astype(np.float64))


@gpu
def test_an_allocator_keeps_the_general_path(ctx, rng):
    from barecuda.tools import DeviceMemoryPool
    pool = DeviceMemoryPool()
    x = rng.random(1000).astype(np.float32)
    a = gpuarray.to_gpu(x, allocator=pool.allocate)
    b = gpuarray.to_gpu(x)
    b + b, b + b
    assert _ELEMENTWISE[0]["add"](a, a, None) is None
    z = a + a
    assert z.allocator is pool.allocate or z.allocator == pool.allocate
    np.testing.assert_allclose(z.get(), 2 * x)
    pool.free_held()


@gpu
def test_the_fast_path_on_a_stream(ctx, rng):
    x = rng.random(5000).astype(np.float32)
    a = gpuarray.to_gpu(x)
    a + a, a + a, a.sum(), a.sum()
    s = drv.Stream()
    z = _ELEMENTWISE[0]["add"](a, a, s)
    t = _SUMS(a, s)
    s.synchronize()
    np.testing.assert_allclose(z.get(), 2 * x)
    assert t.get() == pytest.approx(x.sum(dtype=np.float64), rel=1e-5)
    np.testing.assert_allclose(gpuarray.sum(a, stream=s).get(), x.sum(), rtol=1e-5)
    with pytest.raises(TypeError):
        _ELEMENTWISE[0]["add"](a, a, "not a stream")


@gpu
def test_another_context_refreshes_the_table(ctx, rng):
    x = rng.random(1000).astype(np.float32)
    a = gpuarray.to_gpu(x)
    a + a, a + a, a.sum(), a.sum()
    own = drv.Device(0).make_context()
    try:
        # the entries point at the primary context's kernels: not current now
        assert _ELEMENTWISE[0]["add"](a, a, None) is None
        assert _SUMS(a, None) is None
        b = gpuarray.to_gpu(x)
        for _ in range(3):
            np.testing.assert_allclose((b + b).get(), 2 * x)
            assert b.sum().get() == pytest.approx(x.sum(dtype=np.float64), rel=1e-5)
        z = _ELEMENTWISE[0]["add"](b, b, None)      # refreshed for this context
        assert z is not None
        np.testing.assert_allclose(z.get(), 2 * x)
        del b, z
    finally:
        drv.Context.pop()
        own.detach()
    assert _ELEMENTWISE[0]["add"](a, a, None) is None   # the detached context's kernels
    np.testing.assert_allclose((a + a).get(), 2 * x)
    np.testing.assert_allclose(_ELEMENTWISE[0]["add"](a, a, None).get(), 2 * x)


@gpu
def test_hot_entries_of_the_generators(ctx, rng):
    k = ReductionKernel(np.float32, "0", "a + b", "x[i]", "float *x")
    a = gpuarray.to_gpu(rng.random(100_000).astype(np.float32))
    k(a)
    h = k._hot
    s1 = h.get(drv.Context.get_current())
    assert isinstance(s1, drv.Function) and isinstance(h.second(), drv.Function)
    assert h.get(None) is None and h.block >= 32 and h.per % h.block == 0 and h.extra >= 1
    with pytest.raises(ValueError, match="per >= block"):
        _driver._HotEntry(drv.Context.get_current(), s1, None, 1, 256, 128)
    with pytest.raises(TypeError, match="first must be a Function"):
        _driver._HotEntry(drv.Context.get_current(), 1, None, 1, 256, 256)
    t = _driver._OpTable(GPUArray, "elementwise", "add")
    # a result of another itemsize is laid out densely in x's order (mixed dtypes)
    t.put(np.dtype(np.float32), np.dtype(np.float32), np.dtype(np.float64), h)
    t.put(np.dtype(np.float32), np.dtype(np.float32), np.dtype(np.float64), h, True)
    assert len(t) == 1
    with pytest.raises(TypeError, match="strided must be a bool"):
        t.put(np.dtype(np.float32), np.dtype(np.float32), np.dtype(np.float64), h, 1)
    with pytest.raises(ValueError, match="only elementwise"):
        _driver._OpTable(GPUArray, "unary", "neg").put(np.dtype(np.float32), None,
                                                       np.dtype(np.float32), h, True)
