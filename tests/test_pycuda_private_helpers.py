# SPDX-License-Identifier: MIT
"""PyCUDA's private helpers that libraries extending PyCUDA call, as barecuda offers
them (tools/api_diff.py lists them): the dtype, flags and layout helpers of gpuarray,
elementwise._get_real_dtype, and PyCUDA's parameter names where they differ from
barecuda's earlier ones.  No GPU: NumPy arrays stand in for GPUArrays (the helpers
read only shape, strides, dtype and flags) and signatures are read, not called."""

import inspect

import numpy as np
import pytest

from barecuda import cumath, curandom, elementwise, gpuarray, scan, tools
from barecuda import driver as drv


@pytest.mark.parametrize("a, b, want", [
    (np.zeros(3, np.float32), 2.0, np.float32),            # a Python scalar is weak
    (np.zeros(3, np.float32), np.float64(2), np.float64),  # a NumPy scalar counts by dtype
    (np.zeros(3, np.float32), np.zeros(2, np.int64), np.float64),
    (np.zeros(3, np.int8), 3, np.int8),
    (np.zeros(3, np.bool_), np.zeros(3, np.bool_), np.bool_),
    (np.zeros(3, np.complex64), np.zeros(3, np.float64), np.complex128),
])
def test_get_common_dtype(a, b, want):
    assert gpuarray._get_common_dtype(a, b) == np.dtype(want)


def test_get_common_dtype_base_narrows_without_double():
    f32, c128 = np.zeros(1, np.float32), np.zeros(1, np.complex128)
    assert gpuarray._get_common_dtype_base(f32, 1.0, True) == np.float32
    assert gpuarray._get_common_dtype_base(f32, np.zeros(1), False) == np.float32
    assert gpuarray._get_common_dtype_base(f32, c128, False) == np.complex64
    assert gpuarray._get_common_dtype_base(f32, c128, True) == np.complex128


class _Like:
    """Records _new_like_me calls, as a GPUArray subclass would see them."""

    def __init__(self, shape, dtype=np.float32):
        self.shape, self.dtype = shape, np.dtype(dtype)

    def _new_like_me(self, dtype=None):
        return ("made by", self, np.dtype(dtype))


def test_get_broadcasted_binary_op_result():
    a, b, s = _Like((2, 3)), _Like((2, 3), np.float64), _Like((), np.int32)
    assert gpuarray._get_broadcasted_binary_op_result(a, b) == ("made by", a, np.float64)
    assert gpuarray._get_broadcasted_binary_op_result(s, a)[1] is a
    assert gpuarray._get_broadcasted_binary_op_result(a, s)[1] is a
    got = gpuarray._get_broadcasted_binary_op_result(a, b, lambda x, y: np.dtype(np.int8))
    assert got[2] == np.int8
    with pytest.raises(NotImplementedError):
        gpuarray._get_broadcasted_binary_op_result(a, _Like((3,)))


@pytest.mark.parametrize("make", [
    lambda: np.zeros((3, 4), np.float32),
    lambda: np.zeros((3, 4), np.float32).T,
    lambda: np.zeros((3, 4), np.float32)[:, ::2],
    lambda: np.zeros((0, 3)),
    lambda: np.zeros((5,)),
    lambda: np.zeros((3, 1, 4))[:, :, :1],
    lambda: np.zeros((4, 4), np.complex64)[::-1],
])
def test_array_flags_from_an_array(make):
    a = make()
    f = gpuarray._ArrayFlags(a)
    assert isinstance(f, gpuarray.ArrayFlags)
    assert f.c_contiguous == a.flags.c_contiguous
    assert f.f_contiguous == a.flags.f_contiguous
    assert f.forc == (a.flags.c_contiguous or a.flags.f_contiguous)


def test_array_like_helper():
    a = np.zeros((3, 4), np.float32)
    assert gpuarray._array_like_helper(a, None, "K") == (np.float32, "C", None)
    assert gpuarray._array_like_helper(a.T, None, "K") == (np.float32, "F", None)
    assert gpuarray._array_like_helper(a.T, None, "A")[1] == "F"
    assert gpuarray._array_like_helper(a, None, "A")[1] == "C"
    assert gpuarray._array_like_helper(a, np.int8, "F") == (np.int8, "F", None)
    dt, order, strides = gpuarray._array_like_helper(a[:, ::2], np.float64, "K")
    assert (dt, strides) == (np.float64, [32, 16])
    with pytest.raises(ValueError):
        gpuarray._array_like_helper(a, None, "Z")


def test_get_real_dtype():
    assert elementwise._get_real_dtype(np.complex64) == np.float32
    assert elementwise._get_real_dtype(np.dtype(np.complex128)) == np.float64
    with pytest.raises(AssertionError):
        elementwise._get_real_dtype(np.float32)


def test_reexports():
    from barecuda import compiler
    from barecuda.sparse import coordinate, packeted
    assert cumath.Stream is drv.Stream
    for mod in (scan, coordinate, packeted):
        assert mod.SourceModule is compiler.SourceModule


def _params(f):
    return list(inspect.signature(f).parameters)


def test_pycuda_parameter_names():
    for f in (gpuarray.empty_like, gpuarray.zeros_like, gpuarray.ones_like):
        p = inspect.signature(f).parameters
        assert _params(f)[:3] == ["other_ary", "dtype", "order"]
        assert p["other"].kind is inspect.Parameter.KEYWORD_ONLY   # barecuda's earlier name
    assert _params(tools.get_or_register_dtype) == ["names", "dtype"]
    assert _params(gpuarray.dot)[:5] == ["a", "b", "dtype", "stream", "allocator"]
    assert _params(gpuarray.subset_dot)[:6] == ["subset", "a", "b", "dtype", "stream",
                                                "allocator"]
    p = inspect.signature(scan.ExclusiveScanKernel).parameters
    assert p["neutral"].default is None
    with pytest.raises(ValueError):
        scan.ExclusiveScanKernel(np.int32, "a+b")          # as PyCUDA: neutral is required


def test_like_wants_the_array_once():
    with pytest.raises(TypeError):
        gpuarray.empty_like()
    a = object()
    with pytest.raises(TypeError):
        gpuarray.zeros_like(a, other=a)


def test_make_unary_array_func_names_the_function():
    f = cumath._make_unary_array_func("erf")
    assert f.__name__ == "erf"
    assert "stream_or_out" in _params(f)


# ---------------------------------------------------------------- on a GPU

@pytest.mark.gpu
def test_like_by_either_name(ctx):
    a = gpuarray.to_gpu(np.arange(6, dtype=np.float32).reshape(2, 3))
    for f, fill in ((gpuarray.zeros_like, 0), (gpuarray.ones_like, 1)):
        for r in (f(a), f(other_ary=a), f(other=a), f(a, np.float64)):
            assert r.shape == a.shape
            np.testing.assert_array_equal(r.get(), np.full(a.shape, fill))
    assert gpuarray.empty_like(other_ary=a, dtype=np.int8).dtype == np.int8


@pytest.mark.gpu
def test_dot_result_from_the_allocator(ctx):
    calls = []

    def alloc(nbytes):
        calls.append(nbytes)
        return drv.mem_alloc(nbytes)

    x = gpuarray.to_gpu(np.arange(100, dtype=np.float32))
    r = gpuarray.dot(x, x, allocator=alloc)
    assert calls and float(r.get()) == float(np.dot(x.get(), x.get()))
    idx = gpuarray.to_gpu(np.array([1, 5, 7], np.int32))
    calls.clear()
    r = gpuarray.subset_dot(idx, x, x, allocator=alloc)
    assert calls and float(r.get()) == 1 + 25 + 49


@pytest.mark.gpu
def test_skip_ahead_kernels_as_attributes(ctx):
    for cls, extra in ((curandom.XORWOWRandomNumberGenerator, ["skip_ahead_sequence"]),
                       (curandom.MRG32k3aRandomNumberGenerator,
                        ["skip_ahead_sequence", "skip_ahead_subsequence"]),
                       (curandom.Sobol32RandomNumberGenerator, [])):
        g = cls()
        for name in ["skip_ahead", *extra]:
            assert getattr(g, name) is g.generators[name]
            assert getattr(g, name + "_array") is g.generators[name + "_array"]
        assert set(g._kernels()) == set(g.generators.values())
    # the attribute launched by hand skips as call_skip_ahead does
    a = curandom.XORWOWRandomNumberGenerator(seed=7)
    b = curandom.XORWOWRandomNumberGenerator(seed=7)
    a.call_skip_ahead(1000)
    b.skip_ahead.prepared_async_call((b.block_count, 1, 1), (b.generators_per_block, 1, 1),
                                     None, b.state, b.generator_count, 1000)
    np.testing.assert_array_equal(a.gen_uniform(4096, np.float32).get(),
                                  b.gen_uniform(4096, np.float32).get())
