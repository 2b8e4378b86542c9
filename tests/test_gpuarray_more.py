# SPDX-License-Identifier: MIT
"""The GPUArray additions of the PyCUDA 2026.1 gap list: gpuarray.vec (CUDA vector
dtypes), stack/transpose/reshape, reverse, any/all, logical_*, where, subset_sum,
multi_take/put/take_put, splay, 0-d operands, order="A", F-order reshape,
real/imag layout, mul_add(out=), NumPy shapes, CAI strides, cumath's
stream_or_out and ldexp.  CPU tests (registry, argument checks, NVRTC compiles of
every new kernel) run anywhere; GPU tests compare with NumPy on random data."""

import numpy as np
import pytest
from conftest import DTYPE_COVER, full_or, nvrtc_check, nvrtc_check_many

from barecuda import cumath, tools
from barecuda._array import gather as _gather
from barecuda._array import logic as _logic
from barecuda._kernels import vec as _vec
from barecuda import driver as drv
from barecuda import gpuarray as ga
from barecuda.elementwise import ElementwiseKernel

gpu = pytest.mark.gpu

NUM = [np.dtype(t) for t in (np.bool_, np.int8, np.int32, np.int64, np.uint8, np.uint16,
                             np.uint64, np.float16, np.float32, np.float64, np.complex64,
                             np.complex128)]
SHAPES = [(0,), (1,), (777,), (3, 5), (4, 3, 2)]
#: The dtypes whose kernels the CPU tests compile (all of NUM with BARECUDA_FULL_TEMPLATES=1).
COMPILED = full_or(NUM, DTYPE_COVER)


def rand(rng, shape, dt):
    dt = np.dtype(dt)
    if dt.kind == "b":
        return rng.random(shape) > 0.5
    if dt.kind in "iu":
        a = rng.integers(0 if dt.kind == "u" else -20, 20, size=shape)
        a[rng.random(shape) < 0.3] = 0      # zeros matter for truth tests
        return a.astype(dt)
    a = rng.standard_normal(shape)
    a[rng.random(shape) < 0.3] = 0
    if dt.kind == "c":
        b = rng.standard_normal(shape)
        b[rng.random(shape) < 0.5] = 0
        a = a + 1j * b
    return a.astype(dt)


def check(g, h):
    assert isinstance(g, ga.GPUArray)
    got = g.get()
    assert got.shape == np.shape(h), (got.shape, np.shape(h))
    assert got.dtype == np.asarray(h).dtype, (got.dtype, np.asarray(h).dtype)
    np.testing.assert_array_equal(got, h)


def check_close(g, h, rtol=1e-6):
    """check() up to `rtol` (same shape and dtype; infinities and NaNs where NumPy has them)."""
    got = g.get()
    assert got.shape == np.shape(h) and got.dtype == np.asarray(h).dtype
    np.testing.assert_allclose(got, h, rtol=rtol)


# ================================================================== CPU: vec registry

def test_vec_types_registered():
    names = [f"{b}{n}" for b in ("char", "uchar", "short", "ushort", "int", "uint", "long",
                                 "ulong", "longlong", "ulonglong", "float", "double")
             for n in (1, 2, 3, 4)]
    for name in names:
        dt = getattr(ga.vec, name)
        assert dt is _vec.VECTOR_TYPES[name]
        n = int(name[-1])
        assert dt.names == ("x", "y", "z", "w")[:n]
        comp = dt.fields["x"][0]
        assert dt.itemsize == n * comp.itemsize
        assert [dt.fields[f][1] for f in dt.names] == [k * comp.itemsize for k in range(n)]
        # the C name parses back to the dtype; dtype_to_ctype gives a CUDA name of it
        assert tools.get_or_register_dtype(name) == dt
        assert tools.parse_c_arg(f"{name} *p").dtype == dt
        assert tools.get_or_register_dtype(tools.dtype_to_ctype(dt)) == dt
    assert tools.dtype_to_ctype(ga.vec.float3) == "float3"
    assert tools.dtype_to_ctype(ga.vec.uchar4) == "uchar4"
    assert tools.dtype_to_ctype(ga.vec.double2) == "double2"
    # long is LP64: long2 and longlong2 are one dtype
    assert ga.vec.long2 == ga.vec.longlong2
    assert tools.dtype_to_ctype(np.dtype([("x", np.float32), ("y", np.float32)])) == "float2"


@pytest.mark.parametrize("name,align", [("float1", 4), ("float2", 8), ("float3", 4),
                                        ("float4", 16), ("double2", 16), ("double3", 8),
                                        ("char2", 2), ("char3", 1), ("uchar4", 4),
                                        ("short4", 8), ("int2", 8), ("longlong2", 16)])
def test_vec_cuda_alignment(name, align):
    assert _vec.cuda_alignment(name) == align
    assert _vec.cuda_alignment(getattr(ga.vec, name)) == align
    with pytest.raises(KeyError):
        _vec.cuda_alignment(np.float32)


def test_vec_make():
    a = ga.vec.make_float3(1, 2.5, -3)
    assert isinstance(a, np.ndarray) and a.shape == () and a.dtype == ga.vec.float3
    assert (a["x"], a["y"], a["z"]) == (1.0, 2.5, -3.0)
    b = ga.vec.make_int2(7, y=-8)
    assert b.dtype == ga.vec.int2 and (b["x"], b["y"]) == (7, -8)
    c = ga.vec.make_uchar4(1, 2, 3, 250)
    assert c.tobytes() == bytes([1, 2, 3, 250])
    assert ga.vec.make_double1(0.5)["x"] == 0.5
    with pytest.raises(TypeError, match="takes 3 components"):
        ga.vec.make_float3(1, 2)
    with pytest.raises(TypeError, match="unexpected keyword"):
        ga.vec.make_float2(1, q=2)
    with pytest.raises(TypeError, match="numbers"):
        ga.vec.make_float2(1, [2, 3])
    with pytest.raises(TypeError, match="namespace"):
        ga.vec()
    dest = np.empty(4, ga.vec.float3)
    dest[:] = a
    assert (dest == a).all()


def test_vec_struct_argument_transport():
    arg = tools.ScalarArg(ga.vec.float3, "p")
    assert arg.struct_char == "12s"
    assert tools.VectorArg(ga.vec.float3, "p").struct_char == "P"
    k = ElementwiseKernel("float3 pt, float3 *ns, float *rs",
                          "rs[i] = ns[i].x - pt.x + ns[i].y * pt.y + pt.z", "vec_arg")
    assert k._sig.fmt == "12sPP"
    conv = k._sig.converters[0][0]
    want = np.array((1, 2, 3), ga.vec.float3).tobytes()
    assert conv(ga.vec.make_float3(1, 2, 3)) == want
    assert conv((1, 2, 3)) == want
    assert conv(np.array([(1, 2, 3)], ga.vec.float3)[0]) == want   # a NumPy void scalar
    with pytest.raises(ValueError):
        conv(np.zeros(3, ga.vec.float3))
    # a GPUArray of a vec dtype is supported
    assert ga._check_dtype(ga.vec.int4) == ga.vec.int4


# ================================================================== CPU: NVRTC compiles


def _compile_all(kernels):
    nvrtc_check_many(k.source() for k in kernels)


def test_compile_vec_kernels():
    ks = [ga._fill_kernel(dt) for dt in _vec.VECTOR_TYPES.values()]
    ks.append(ElementwiseKernel("float3 pt, float3 *ns, float *rs",
                                "rs[i] = sqrt(pow(pt.x-ns[i].x,2)+pow(pt.y-ns[i].y,2)"
                                "+pow(pt.z-ns[i].z,2))", "euclidean_distance",
                                preamble="#include <math.h>"))
    ks.append(ga._strided_copy_kernel(ga.vec.double3, 2))
    _compile_all(ks)


def test_compile_new_elementwise_kernels():
    ks = []
    for dt in COMPILED:
        ks.append(ga._reverse_kernel(dt))
        ks.append(_logic._not_kernel(dt))
        for other in (dt, np.dtype(np.float64)):
            for cop in ("&&", "||"):
                ks.append(_logic._logical_kernel(
                    cop, ["bool *z", f"{tools.dtype_to_ctype(dt)} *x0",
                          f"{tools.dtype_to_ctype(other)} *x1"],
                    [_logic._truth("x0[i]", dt), _logic._truth("x1[0]", other)]))
        ks.append(_logic._logical_kernel("&&", ["bool *z", f"{tools.dtype_to_ctype(dt)} *x0"],
                                         [_logic._truth("x0[i]", dt), "true"]))
        res = np.result_type(dt, np.int32)
        zt = tools.dtype_to_ctype(res)
        ks.append(_logic._where_kernel(
            dt, res, [f"{zt} *z", f"{tools.dtype_to_ctype(dt)} *c", f"{zt} v0", "int *v1"],
            ["v0", "v1[i]"], (("s",), ("a", np.dtype(np.int32), False))))
        for idt in (np.dtype(np.int32), np.dtype(np.uint64)):
            ks.append(_gather._take_kernel(dt, idt))
            ks.append(_gather._multi_kernel("take", dt, idt, 3))
            ks.append(_gather._multi_kernel("put", dt, idt, 2))
            ks.append(_gather._multi_kernel("take_put", dt, idt, 2, False))
            ks.append(_gather._multi_kernel("take_put", dt, idt, 16, True))
        for op in ("add", "multiply", "less", "true_divide"):
            for mode in ("x0", "y0"):
                try:
                    r = ga._result_dtype(op, dt, np.dtype(np.float32))
                except TypeError:
                    continue
                ks.append(ga._binary_kernel(op, dt, np.dtype(np.float32), mode, False, r,
                                            ga._compute_dtype(op, dt, np.dtype(np.float32), r)))
    _compile_all(ks)


@pytest.mark.parametrize("dt", COMPILED, ids=str)
def test_compile_new_reductions(dt):
    rs = [_logic._any_all_kernel("any", dt), _logic._any_all_kernel("all", dt)]
    acc = ga._sum_dtype(dt)
    acc = np.dtype(np.float32) if acc == np.float16 else acc
    rs.append(_gather._subset_sum_kernel(np.dtype(np.int32), dt, acc))
    for k in rs:
        nvrtc_check(k.source())


def test_nvrtc_std_header_standins():
    nvrtc_check("#include <math.h>\n#include <cmath>\n#include <stdio.h>\n#include <cstdio>\n"
                   'extern "C" __global__ void f(float *x) { double h = HUGE_VAL; '
                   'x[0] = sqrtf(x[1]) + M_PI + INFINITY + NAN + h; printf("%f", x[0]); }')


# ================================================================== CPU: argument checks

def test_ndarray_shape_normalised():
    assert ga._norm_shape(np.array(3)) == (3,)
    assert ga._norm_shape(np.array([2, 3])) == (2, 3)
    assert ga._norm_shape(np.array([4], np.uint8)) == (4,)
    assert ga._norm_shape(np.int64(5)) == (5,)
    with pytest.raises(TypeError, match="integers"):
        ga._norm_shape(np.array([2.0, 3.0]))
    with pytest.raises(TypeError, match="0-d or 1-d"):
        ga._norm_shape(np.ones((2, 2), int))
    with pytest.raises(ValueError, match="negative"):
        ga._norm_shape(np.array([2, -1]))
    with pytest.raises(TypeError, match="shape"):
        ga._norm_shape("abc")


class _FakeDev:
    warp_size = 32
    multiprocessor_count = 132
    max_blocks_per_multiprocessor = 32


@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 1000, 32 * 4 * 32 * 132 - 1,
                               32 * 4 * 32 * 132, 10 ** 8])
def test_splay(n):
    dev = _FakeDev()
    (blocks, one), block = ga.splay(n, dev)
    assert one == 1 and block[1:] == (1, 1)
    threads = block[0]
    assert threads % 32 == 0 and 32 <= threads <= 128
    assert 1 <= blocks <= 4 * 32 * 132
    if n <= 4 * 32 * 132 * 128:
        assert blocks * threads >= n   # a single pass covers small n
    with pytest.raises(ValueError, match=">= 0"):
        ga.splay(-1, dev)
    with pytest.raises(TypeError):
        ga.splay(2.5, dev)


def _bare_gpuarray():
    return ga.GPUArray.__new__(ga.GPUArray)


def test_validation_without_device():
    with pytest.raises(ValueError, match="need at least one array"):
        ga.stack([])
    with pytest.raises(ValueError, match="need at least one array"):
        ga.concatenate([])
    with pytest.raises(TypeError, match="GPUArray"):
        ga.stack([np.zeros(3)])
    with pytest.raises(TypeError, match="sequence"):
        ga.stack(5)
    with pytest.raises(TypeError, match="GPUArray"):
        ga.concatenate([np.zeros(3), np.zeros(3)])
    with pytest.raises(TypeError, match="GPUArray"):
        ga.transpose(np.zeros((2, 3)))
    with pytest.raises(TypeError, match="GPUArray"):
        ga.reshape(np.zeros(6), 2, 3)
    with pytest.raises(TypeError, match="GPUArray"):
        ga.any(np.ones(3))
    with pytest.raises(TypeError, match="GPUArray"):
        ga.all([1, 2])
    with pytest.raises(TypeError, match="GPUArrays or numbers"):
        ga.logical_and("a", 1)
    with pytest.raises(TypeError, match="GPUArrays or numbers"):
        ga.logical_or(np.zeros(3), 1)
    with pytest.raises(TypeError, match="GPUArrays or numbers"):
        ga.logical_not([1, 2])
    with pytest.raises(TypeError, match="criterion"):
        ga.where(np.ones(3), 1, 2)
    with pytest.raises(TypeError, match="GPUArray"):
        ga.take(np.zeros(3), np.zeros(3, int))
    with pytest.raises(TypeError, match="GPUArray"):
        ga.subset_sum(np.zeros(3, int), np.zeros(3))
    with pytest.raises(TypeError, match="GPUArray"):
        ga.multi_take([np.zeros(3)], np.zeros(3, int))
    assert ga.multi_take([], None) == []
    assert ga.multi_put([], None) == []
    assert ga.multi_take_put([], None, None) == []
    with pytest.raises(TypeError, match="GPUArray"):
        ga.zeros_like(np.zeros(3))
    with pytest.raises(TypeError, match="GPUArray"):
        cumath.ldexp(np.zeros(3), 2)


def test_cumath_stream_or_out():
    g = _bare_gpuarray()
    s = object()
    assert cumath._stream_or_out("exp", None, None, None) == (None, None)
    assert cumath._stream_or_out("exp", g, None, None) == (None, g)
    assert cumath._stream_or_out("exp", s, None, g) == (s, g)
    assert cumath._stream_or_out("exp", None, s, g) == (s, g)
    with pytest.raises(TypeError, match="out given twice"):
        cumath._stream_or_out("exp", g, None, g)
    with pytest.raises(TypeError, match="stream given twice"):
        cumath._stream_or_out("exp", s, s, None)


# ================================================================== GPU

@gpu
def test_vector_kernel_argument_and_array(ctx):
    from barecuda.compiler import SourceModule
    mod = SourceModule("__global__ void set_them(float3 *dest, float3 x, int2 k)\n"
                       "{ const int i = threadIdx.x; dest[i] = x; dest[i].y += k.x * i + k.y; }")
    f = mod.get_function("set_them")
    a = ga.vec.make_float3(1.5, -2, 3)
    dest = np.empty(64, ga.vec.float3)
    f(drv.Out(dest), a, ga.vec.make_int2(3, 1), block=(64, 1, 1))
    i = np.arange(64)
    np.testing.assert_array_equal(dest["x"], 1.5)
    np.testing.assert_array_equal(dest["y"], -2 + 3 * i + 1)
    np.testing.assert_array_equal(dest["z"], 3)
    # prepared with a list of dtypes
    f.prepare([np.intp, ga.vec.float3, ga.vec.int2])
    g = ga.empty(64, ga.vec.float3)
    f.prepared_call((1, 1), (64, 1, 1), g.gpudata, a, ga.vec.make_int2(0, 0))
    np.testing.assert_array_equal(g.get(), np.full(64, a, ga.vec.float3))


@gpu
@pytest.mark.parametrize("name", ["float3", "char4", "double2", "short3", "uchar1", "int4",
                                  "ulonglong2", "double3"])
def test_vector_fill_and_transfer(ctx, rng, name):
    dt = getattr(ga.vec, name)
    n = int(name[-1])
    comp = dt.fields["x"][0]
    vals = rand(rng, (n,), comp) if comp.kind != "u" else rng.integers(0, 100, n).astype(comp)
    v = getattr(ga.vec, "make_" + name)(*vals.tolist())
    g = ga.empty((7, 3), dt)
    g.fill(v)
    assert g.get().dtype == dt
    np.testing.assert_array_equal(g.get(), np.full((7, 3), v, dt))
    h = np.zeros(20, dt)
    for f in dt.names:
        h[f] = rand(rng, 20, comp) if comp.kind != "u" else rng.integers(0, 100, 20)
    g = ga.to_gpu(h)
    np.testing.assert_array_equal(g.get(), h)
    np.testing.assert_array_equal(g.reverse().get(), h[::-1])
    g[3] = v
    h[3] = v
    np.testing.assert_array_equal(g.get(), h)


@gpu
def test_vec_elementwise_distance(ctx, rng):
    n = ga.zeros((5, 4, 2), ga.vec.float3)
    h = np.zeros((5, 4, 2), ga.vec.float3)
    for f in "xyz":
        h[f] = rng.uniform(-100, 100, (5, 4, 2))
    n.set(h)
    k = ElementwiseKernel("float3 pt, float3 *ns, float *rs",
                          "rs[i] = sqrt(pow(pt.x-ns[i].x,2)+pow(pt.y-ns[i].y,2)+pow(pt.z-ns[i].z,2))",
                          "euclidean_distance", preamble="#include <math.h>")
    r = ga.zeros((5, 4, 2), np.float32)
    pt = ga.vec.make_float3(1, -2, 3)
    k(pt, n, r)
    want = np.sqrt((1 - h["x"]) ** 2 + (-2 - h["y"]) ** 2 + (3 - h["z"]) ** 2)
    np.testing.assert_allclose(r.get(), want, rtol=1e-5)


@gpu
@pytest.mark.parametrize("dt", [np.float32, np.int16, np.complex128, np.bool_], ids=str)
@pytest.mark.parametrize("shape,axis", [((7,), 0), ((7,), -1), ((3, 4), 1), ((3, 4), -3),
                                        ((2, 3, 4), 2), ((0, 3), 0), ((), 0)])
def test_stack(ctx, rng, dt, shape, axis):
    hs = [rand(rng, shape, dt) for _ in range(3)]
    gs = [ga.to_gpu(h) for h in hs]
    check(ga.stack(gs, axis=axis), np.stack(hs, axis=axis))
    # F-ordered and strided inputs, mixed dtypes
    if len(shape) >= 2:
        fs = [ga.to_gpu(np.asfortranarray(h)) for h in hs]
        check(ga.stack(fs, axis=axis), np.stack(hs, axis=axis))
        check(ga.stack([g.T for g in gs], axis=axis), np.stack([h.T for h in hs], axis=axis))
    other = rand(rng, shape, np.float64)
    check(ga.stack([gs[0], ga.to_gpu(other)], axis=axis), np.stack([hs[0], other], axis=axis))
    with pytest.raises(ValueError, match="out of bounds"):
        ga.stack(gs, axis=len(shape) + 1)
    if shape:
        with pytest.raises(ValueError, match="same shape"):
            ga.stack([gs[0], ga.zeros(tuple(s + 1 for s in shape), dt)])


@gpu
@pytest.mark.parametrize("dt", [np.float32, np.int64, np.complex64], ids=str)
def test_concatenate_mixed(ctx, rng, dt):
    a, b = rand(rng, (3, 4), dt), rand(rng, (3, 2), np.float64)
    check(ga.concatenate([ga.to_gpu(a), ga.to_gpu(b)], axis=1), np.concatenate([a, b], axis=1))
    check(ga.concatenate([ga.to_gpu(a).T, ga.to_gpu(a.T)], axis=-2),
          np.concatenate([a.T, a.T], axis=-2))


@gpu
def test_transpose_reshape_functions(ctx, rng):
    h = rand(rng, (4, 3, 5), np.float32)
    g = ga.to_gpu(h)
    check(ga.transpose(g), h.T)
    check(ga.transpose(g, (1, 0, 2)), np.transpose(h, (1, 0, 2)))
    check(ga.reshape(g, 12, 5), h.reshape(12, 5))
    check(ga.reshape(g, (5, -1)), h.reshape(5, -1))
    for order in "CF":
        r = ga.reshape(g, (6, 10), order=order)
        check(r, h.reshape(6, 10, order=order))
        assert (r.flags.c_contiguous if order == "C" else r.flags.f_contiguous)
    r = g.reshape(4, 15, order="F")
    assert r.flags.f_contiguous
    check(r, h.reshape(4, 15, order="F"))
    same = r.reshape(4, 15, order="F")
    assert same.flags.f_contiguous and same.ptr == r.ptr   # already F: a view
    back = r.reshape((4, 15))
    assert back.flags.c_contiguous
    check(back, h.reshape(4, 15, order="F"))
    with pytest.raises(ValueError):
        g.reshape(-1, -1, 4)


@gpu
@pytest.mark.parametrize("dt", NUM, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_reverse(ctx, rng, dt, shape):
    h = rand(rng, shape, dt)
    g = ga.to_gpu(h)
    check(g.reverse(), h.ravel()[::-1].reshape(shape))
    if len(shape) >= 2:
        f = ga.to_gpu(np.asfortranarray(h))
        r = f.reverse()
        assert r.flags.f_contiguous
        check(r, h.ravel(order="F")[::-1].reshape(shape, order="F"))
        check(g.T.reverse(), h.T.ravel()[::-1].reshape(h.T.shape))  # F view of C data


@gpu
@pytest.mark.parametrize("dt", NUM, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_any_all(ctx, rng, dt, shape):
    h = rand(rng, shape, dt)
    g = ga.to_gpu(h)
    for name in ("any", "all"):
        want = getattr(np, name)(h)
        for r in (getattr(g, name)(), getattr(ga, name)(g)):
            assert r.shape == () and r.dtype == np.bool_
            assert r.get() == want
    for fill in (0, 1):
        z = ga.to_gpu(np.full(shape, fill, dt))
        assert z.any().get() == np.any(np.full(shape, fill, dt))
        assert z.all().get() == np.all(np.full(shape, fill, dt))
    if dt.kind == "f":
        n = ga.to_gpu(np.full(5, np.nan, dt))
        assert n.all().get() and n.any().get()
    if len(shape) >= 2:
        assert g.T.any().get() == np.any(h.T) and g[:, ::2].all().get() == np.all(h[:, ::2])


@gpu
@pytest.mark.parametrize("dt", NUM, ids=str)
@pytest.mark.parametrize("op", ["logical_and", "logical_or"])
def test_logical_binary(ctx, rng, dt, op):
    for shape in ((0,), (5,), (10, 4)):
        x, y = rand(rng, shape, dt), rand(rng, shape, np.float64)
        gx, gy = ga.to_gpu(x), ga.to_gpu(y)
        fn, ref = getattr(ga, op), getattr(np, op)
        check(fn(gx, gy), ref(x, y))
        check(fn(gy, gx), ref(y, x))
        for s in (0, 1, 0.0, 2.5, True, np.int8(0)):
            check(fn(gx, s), ref(x, s))
            check(fn(s, gx), ref(s, x))
        zero_d = ga.to_gpu(np.array(0, dt))
        check(fn(gx, zero_d), ref(x, np.zeros(shape, dt)))
        out = ga.empty(shape, np.bool_)
        assert fn(gx, gy, out) is out
        check(out, ref(x, y))
        if len(shape) == 2:
            check(fn(gx.T, ga.to_gpu(np.asfortranarray(y.T))), ref(x.T, y.T))
            check(fn(gx[:, ::2], gy[:, ::2]), ref(x[:, ::2], y[:, ::2]))
    check(getattr(ga, op)(1, 0), getattr(np, op)(1, 0))
    with pytest.raises(ValueError, match="differ"):
        getattr(ga, op)(ga.zeros(3, dt), ga.zeros(4, dt))
    with pytest.raises(TypeError, match="dtype bool"):
        getattr(ga, op)(ga.zeros(3, dt), 1, ga.empty(3, np.int8))


@gpu
@pytest.mark.parametrize("dt", NUM, ids=str)
def test_logical_not(ctx, rng, dt):
    for shape in ((0,), (7,), (3, 5)):
        x = rand(rng, shape, dt)
        check(ga.logical_not(ga.to_gpu(x)), np.logical_not(x))
        out = ga.empty(shape, np.bool_)
        assert ga.logical_not(ga.to_gpu(x), out) is out
        check(out, np.logical_not(x))
    check(ga.logical_not(0), np.logical_not(0))
    check(ga.logical_not(ga.to_gpu(x).T), np.logical_not(x.T))
    with pytest.raises(ValueError, match="shape"):
        ga.logical_not(ga.zeros(3, dt), ga.empty(4, np.bool_))


@gpu
@pytest.mark.parametrize("cdt", [np.bool_, np.int32, np.float64, np.complex64], ids=str)
@pytest.mark.parametrize("vdt", [np.int8, np.float32, np.complex128, np.uint64], ids=str)
def test_where(ctx, rng, cdt, vdt):
    for shape in ((0,), (9,), (4, 6)):
        c, t, e = rand(rng, shape, cdt), rand(rng, shape, vdt), rand(rng, shape, vdt)
        gc, gt, ge = ga.to_gpu(c), ga.to_gpu(t), ga.to_gpu(e)
        check(ga.where(gc, gt, ge), np.where(c, t, e))
        check(ga.where(gc, gt, 3), np.where(c, t, 3))
        z = ga.to_gpu(np.array(7, np.int16))
        check(ga.where(gc, z, ge), np.where(c, np.int16(7), e))
        f = rand(rng, shape, np.float64)
        check(ga.where(gc, gt, ga.to_gpu(f)), np.where(c, t, f))
        out = ga.empty(shape, np.dtype(vdt))
        assert ga.where(gc, gt, ge, out=out) is out
        check(out, np.where(c, t, e))
        if len(shape) == 2:
            check(ga.where(gc.T, gt.T, ge.T), np.where(c.T, t.T, e.T))
    with pytest.raises(ValueError, match="broadcasting"):
        ga.where(ga.zeros(3, cdt), ga.zeros(4, vdt), 1)
    with pytest.raises(TypeError):
        ga.where(ga.zeros(3, cdt), "x", 1)


@gpu
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32, np.uint8, np.complex64,
                                np.float16, np.bool_], ids=str)
@pytest.mark.parametrize("idt", [np.int32, np.int64, np.uint32], ids=str)
def test_subset_sum(ctx, rng, dt, idt):
    for n, m in ((2000, 1601), (50000, 30000), (10, 0)):
        a = rand(rng, n, dt)
        idx = rng.integers(0, n, m).astype(idt)
        r = ga.subset_sum(ga.to_gpu(idx), ga.to_gpu(a))
        want = a[idx].sum()
        assert r.shape == () and r.dtype == want.dtype
        np.testing.assert_allclose(r.get(), want, rtol=2e-2 if dt == np.float16 else 1e-5)
    uses = []
    pool = drv.mem_alloc

    def alloc(nbytes):
        uses.append(nbytes)
        return pool(nbytes)
    r = ga.subset_sum(ga.to_gpu(idx), ga.to_gpu(a), dtype=np.float64, allocator=alloc)
    assert uses and r.dtype == np.float64


@gpu
@pytest.mark.parametrize("dt", [np.float32, np.int16, np.complex128, np.float16,
                                np.bool_], ids=str)
@pytest.mark.parametrize("count", [1, 3, 17, 40])
def test_multi_take_put(ctx, rng, dt, count):
    n, m = 500, 300
    hs = [rand(rng, n, dt) for _ in range(count)]
    gs = [ga.to_gpu(h) for h in hs]
    idx = rng.integers(0, n, m).astype(np.int32)
    gi = ga.to_gpu(idx)
    for g, h in zip(ga.multi_take(gs, gi), hs):
        check(g, h[idx])
    outs = [ga.empty(m, dt) for _ in range(count)]
    assert ga.multi_take(gs, gi, out=outs) is not None
    for g, h in zip(outs, hs):
        check(g, h[idx])
    # put: a permutation so every destination is written once
    dest = rng.permutation(n).astype(np.int64)
    gd = ga.to_gpu(dest)
    res = ga.multi_put(gs, gd, dest_shape=(n,))
    for g, h in zip(res, hs):
        want = np.empty(n, dt)
        want[dest] = h
        check(g, want)
    # take_put with offsets into the sources
    didx = rng.permutation(m).astype(np.int64)
    sidx = rng.integers(0, n - 50, m).astype(np.int64)
    offs = list(rng.integers(0, 50, count))
    base = [ga.to_gpu(rand(rng, m, dt)) for _ in range(count)]
    before = [b.get() for b in base]
    ga.multi_take_put(gs, ga.to_gpu(didx), ga.to_gpu(sidx), out=base, src_offsets=offs)
    for g, h, o, b in zip(base, hs, offs, before):
        b[didx] = h[sidx + o]
        check(g, b)
    res = ga.multi_take_put(gs, ga.to_gpu(didx), ga.to_gpu(sidx), dest_shape=(m,))
    for g, h in zip(res, hs):   # didx is a permutation: every element is written
        want = np.empty(m, dt)
        want[didx] = h[sidx]
        check(g, want)
    with pytest.raises(TypeError, match="same dtype"):
        ga.multi_take_put(gs, ga.to_gpu(didx), ga.to_gpu(sidx.astype(np.int32)), dest_shape=(m,))
    with pytest.raises(ValueError, match="same shape"):
        ga.multi_take_put(gs, ga.to_gpu(didx), ga.to_gpu(sidx[:-1]), dest_shape=(m,))
    with pytest.raises(ValueError, match="dest_shape"):
        ga.multi_put(gs, gd)
    with pytest.raises(TypeError, match="one dtype"):
        ga.multi_take(gs + [ga.zeros(n, np.float64 if dt != np.float64 else np.int8)], gi)
    with pytest.raises(ValueError, match="1-dimensional"):
        ga.multi_take(gs, ga.zeros((2, 2), np.int32))
    with pytest.raises(TypeError, match="integer"):
        ga.multi_take(gs, ga.zeros(3, np.float32))


_ZERO_D_CASES = [(op, adt, bdt)
                 for op in ["__add__", "__sub__", "__mul__", "__truediv__", "__lt__",
                            "__radd__", "__rsub__", "__rmul__", "__rtruediv__"]
                 for adt, bdt in [(np.float32, np.float32), (np.float32, np.float64),
                                  (np.int32, np.float32), (np.int8, np.int64),
                                  (np.complex64, np.float32)]
                 if not (op == "__lt__" and np.dtype(adt).kind == "c")]  # complex: unordered


@gpu
@pytest.mark.parametrize("op,adt,bdt", _ZERO_D_CASES, ids=str)
def test_zero_d_operands(ctx, rng, op, adt, bdt):
    for shape in ((10,), (3, 4), (0,)):
        a = rand(rng, shape, adt)
        b = np.array(rand(rng, (), bdt) or 3, bdt)
        ga_, gb = ga.to_gpu(a), ga.to_gpu(b)
        with np.errstate(all="ignore"):
            want, want2 = getattr(a, op)(b), getattr(b, op)(a)
            want_t = getattr(a.T, op)(b)
        # complex division may round differently from NumPy's (by an ulp)
        cmp = check_close if "truediv" in op and np.dtype(adt).kind == "c" else check
        cmp(getattr(ga_, op)(gb), want)
        cmp(getattr(gb, op)(ga_), want2)
        if len(shape) == 2:
            cmp(getattr(ga_.T, op)(gb), want_t)
    check(ga.to_gpu(np.float32(2)) + ga.to_gpu(np.float32(3)), np.float32(2) + np.float32(3))
    with pytest.raises(ValueError):
        gb += ga_ if ga_.size else ga.zeros(3, adt)


def _check_power(got, want, rtol):
    """NaN where NumPy has NaN (in either part), close elsewhere."""
    got = np.asarray(got)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=rtol, atol=0)


@gpu
@pytest.mark.parametrize("dt", [np.complex64, np.complex128], ids=str)
def test_complex_power_special_cases(ctx, rng, dt):
    # NumPy's rules: z ** 0 is 1 (a NaN z too); 0 ** w is 0 for Re w > 0 and NaN
    # otherwise (a negative, imaginary or NaN exponent); integer powers below 100 in
    # magnitude are products (exact where the products are)
    rtol = 1e-5 if dt == np.complex64 else 1e-12
    bases = np.array([0, 1 + 1j, -2 + 0.5j, 0.75j, -1.5, np.nan], dt)
    exps = np.array([0, 1j, -1j, 2, -1, 1 + 1j, -1 + 1j, 2.5, -2.5, 3, -3, 99, -7 + 0.25j,
                     np.nan], dt)
    x, y = np.repeat(bases, len(exps)), np.tile(exps, len(bases))
    gx, gy = ga.to_gpu(x), ga.to_gpu(y)
    with np.errstate(all="ignore"):
        _check_power((gx ** gy).get(), x ** y, rtol)
        # real exponents (complex ** real array), and real bases (real array ** complex)
        re = np.array([0, 2, -1, 2.5, -2.5, 3, np.nan], dt(0).real.dtype)
        xr, yr = np.repeat(bases, len(re)), np.tile(re, len(bases))
        _check_power((ga.to_gpu(xr) ** ga.to_gpu(yr)).get(), xr ** yr, rtol)
        _check_power((ga.to_gpu(yr) ** ga.to_gpu(xr)).get(), yr ** xr, rtol)
        # the case the fuzz test found: a bool base of False to complex powers
        b = np.array([True, False] * len(exps), np.bool_)
        e = np.repeat(exps, 2)
        _check_power((ga.to_gpu(b) ** ga.to_gpu(e)).get(), b ** e, rtol)
        # scalar exponents, and in place
        for w in (0, 2, -1, 1j, 2.5, 1 + 1j):
            _check_power((gx ** w).get(), x ** w, rtol)
            _check_power((w ** gx).get(), w ** x, rtol)
        g = gx.copy()
        g **= gy
        _check_power(g.get(), x ** y, rtol)
    # squares and cubes of small Gaussian integers are exact, as in NumPy
    z = (rng.integers(-50, 50, 200) + 1j * rng.integers(-50, 50, 200)).astype(dt)
    for k in (2, 3):
        np.testing.assert_array_equal((ga.to_gpu(z) ** k).get(), z ** k)


@gpu
def test_mul_add(ctx, rng):
    a, b = rand(rng, 100, np.float32), rand(rng, 100, np.float32)
    ga_, gb = ga.to_gpu(a), ga.to_gpu(b)
    np.testing.assert_allclose(ga_.mul_add(2, gb, 3).get(), 2 * a + 3 * b, rtol=1e-6)
    out = ga.empty_like(ga_)
    assert ga_.mul_add(2, gb, 3, out=out) is out
    np.testing.assert_allclose(out.get(), 2 * a + 3 * b, rtol=1e-6)
    s = drv.Stream()
    r = ga_.mul_add(-1.5, gb, 0.25, stream=s)
    s.synchronize()
    np.testing.assert_allclose(r.get(), -1.5 * a + 0.25 * b, rtol=1e-6)
    np.testing.assert_allclose(ga_.mul_add(ga.to_gpu(np.float32(2)), gb, 3).get(),
                               2 * a + 3 * b, rtol=1e-6)
    with pytest.raises(TypeError, match="other"):
        ga_.mul_add(2, b, 3)


@gpu
@pytest.mark.parametrize("func", ["empty_like", "zeros_like", "ones_like"])
def test_like_order_a(ctx, rng, func):
    h = rand(rng, (6, 5), np.float32)
    for src in (ga.to_gpu(h), ga.to_gpu(np.asfortranarray(h)), ga.to_gpu(h)[:, ::2]):
        for order in ("A", "K", "C", "F"):
            r = getattr(ga, func)(src, order=order)
            assert r.shape == src.shape and r.dtype == src.dtype
            if order == "C" or (order in "AK" and not (src.flags.f_contiguous
                                                       and not src.flags.c_contiguous)):
                assert r.flags.c_contiguous and not r.flags.f_contiguous
            else:
                assert r.flags.f_contiguous and not r.flags.c_contiguous
            if func == "ones_like":
                np.testing.assert_array_equal(r.get(), np.ones(src.shape, np.float32))


@gpu
@pytest.mark.parametrize("dt", [np.complex64, np.complex128], ids=str)
def test_complex_parts_layout(ctx, rng, dt):
    h = rand(rng, (6, 7), dt)
    for src, hv in ((ga.to_gpu(h), h), (ga.to_gpu(np.asfortranarray(h)), h),
                    (ga.to_gpu(h)[:, ::2], h[:, ::2]), (ga.to_gpu(h).T, h.T)):
        f_only = src.flags.f_contiguous and not src.flags.c_contiguous
        for part, want in ((src.real, hv.real), (src.imag, hv.imag)):
            check(part, want)
            assert part.flags.f_contiguous if f_only else part.flags.c_contiguous
        assert src.conj().flags.forc
        check(src.conj(), np.conj(hv))


@gpu
def test_ndarray_shapes_and_cai(ctx):
    for shape in (np.array(3), np.array([3]), np.array([2, 3]), np.array([2, 3], np.uint16)):
        g = ga.zeros(shape, np.float32)
        assert g.shape == tuple(np.atleast_1d(shape).tolist())
        g = ga.empty(shape, np.float32)
        assert g.shape == tuple(np.atleast_1d(shape).tolist())
    a = np.zeros(10, np.float32)
    cai = ga.to_gpu(a).__cuda_array_interface__
    assert cai["strides"] == a.strides == (4,)
    g = ga.to_gpu(np.zeros((3, 5), np.float64))
    assert g.__cuda_array_interface__["strides"] == (40, 8)
    assert g.T.__cuda_array_interface__["strides"] == (8, 40)


@gpu
@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=str)
def test_cumath_stream_out_kwargs(ctx, rng, dt):
    h = rng.uniform(-3, 3, 300).astype(dt)
    g = ga.to_gpu(h)
    for name, ref in (("exp", np.exp), ("sin", np.sin), ("fabs", np.fabs)):
        fn = getattr(cumath, name)
        out = ga.empty_like(g)
        assert fn(g, out=out) is out
        np.testing.assert_allclose(out.get(), ref(h), rtol=1e-5)
        out = ga.empty_like(g)
        assert fn(g, out) is out
        np.testing.assert_allclose(out.get(), ref(h), rtol=1e-5)
        s = drv.Stream()
        r = fn(g, stream=s)
        s.synchronize()
        np.testing.assert_allclose(r.get(), ref(h), rtol=1e-5)
        r = fn(g, s)
        s.synchronize()
        np.testing.assert_allclose(r.get(), ref(h), rtol=1e-5)
        out = ga.empty_like(g)
        assert fn(g, s, out=out) is out
        s.synchronize()
        np.testing.assert_allclose(out.get(), ref(h), rtol=1e-5)
        with pytest.raises(TypeError, match="twice"):
            fn(g, out, out=out)
        with pytest.raises(TypeError, match="dtype"):
            fn(g, out=ga.empty(300, np.int32))


@gpu
@pytest.mark.parametrize("edt", [np.float32, np.float64, np.int32, np.int64, np.uint8,
                                 np.float16], ids=str)
@pytest.mark.parametrize("sdt", [np.float32, np.float64], ids=str)
def test_ldexp_exponent_types(ctx, rng, edt, sdt):
    s = rng.standard_normal(500).astype(sdt)
    if np.dtype(edt).kind == "f":
        e = rng.uniform(-20, 20, 500).astype(edt)
        ei = np.trunc(e.astype(np.float64)).astype(np.int64)
    else:
        e = rng.integers(0 if np.dtype(edt).kind == "u" else -20, 20, 500).astype(edt)
        ei = e.astype(np.int64)
    r = cumath.ldexp(ga.to_gpu(s), ga.to_gpu(e))
    assert r.dtype == np.dtype(sdt)
    np.testing.assert_array_equal(r.get(), np.ldexp(s, ei).astype(sdt))
    np.testing.assert_array_equal(cumath.ldexp(ga.to_gpu(s), 3.7).get(), np.ldexp(s, 3))
    np.testing.assert_array_equal(cumath.ldexp(ga.to_gpu(s), -2.9).get(), np.ldexp(s, -2))
    nan_e = ga.to_gpu(np.full(500, np.nan, np.float32))
    np.testing.assert_array_equal(cumath.ldexp(ga.to_gpu(s), nan_e).get(), s)
    with pytest.raises(TypeError, match="real"):
        cumath.ldexp(ga.to_gpu(s), ga.zeros(500, np.complex64))
    with pytest.raises(TypeError, match="real"):
        cumath.ldexp(ga.to_gpu(s), 1j)


@gpu
def test_splay_on_device(ctx):
    dev = drv.Context.get_device()
    for n in (1, 100, 10 ** 6):
        (blocks, _), (threads, _, _) = ga.splay(n)
        assert (blocks, threads) == (ga.splay(n, dev)[0][0], ga.splay(n, dev)[1][0])
        assert threads % dev.warp_size == 0
