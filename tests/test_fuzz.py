# SPDX-License-Identifier: MIT
"""Hostile input, fuzzed with hypothesis: random argument lists and values for
launches, prepared calls, copies, fills, Memcpy2D fields, kernel declarations
and GPUArray indexing.  Only Python exceptions may come out: never a crash, a
hang or memory written outside the buffers (a guard pattern around them is
checked after every case)."""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from barecuda import driver as drv
from barecuda.compiler import SourceModule
from barecuda.elementwise import ElementwiseKernel

pytestmark = pytest.mark.gpu
FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
EXPECTED = (TypeError, ValueError, OverflowError, IndexError, drv.Error, BufferError,
            AttributeError)

KERNEL = """
__global__ void store(int *out, int a, float b, long long c)
{
    if (threadIdx.x == 0 && blockIdx.x == 0) { out[0] = a; out[1] = (int)b; out[2] = (int)c; }
}
"""

# a 4 KiB buffer between two 4 KiB guard zones, in one allocation
GUARD = 4096


@pytest.fixture(scope="module")
def env():
    dev = drv.Device(0)
    ctx = dev.retain_primary_context()
    ctx.push()
    mod = SourceModule(KERNEL, cache_dir=False)
    f = mod.get_function("store")
    whole = drv.mem_alloc(3 * GUARD)
    drv.memset_d8(whole, 0xAB, 3 * GUARD)
    yield f, whole
    drv.Context.synchronize()
    del f, mod
    whole.free()
    drv.Context.pop()
    ctx.detach()


def guards_intact(whole):
    drv.Context.synchronize()
    host = np.empty(3 * GUARD, np.uint8)
    drv.memcpy_dtoh(host, whole)
    return (host[:GUARD] == 0xAB).all() and (host[2 * GUARD:] == 0xAB).all()


values = st.one_of(
    st.integers(-2**70, 2**70), st.floats(allow_nan=True), st.none(), st.text(max_size=3),
    st.booleans(), st.sampled_from([np.int32(7), np.float32(1.5), np.int64(-3), np.uint8(1),
                                    np.float64(2.0), np.complex64(1j), np.void(b"abcd")]),
    st.builds(lambda n: np.zeros(n, np.int32), st.integers(0, 3)),
    st.lists(st.integers(), max_size=3), st.just(object()))
dims = st.one_of(st.tuples(st.integers(-2, 2**33)), st.tuples(st.integers(-2, 70000), st.integers(-2, 70000)),
                 st.tuples(st.integers(-2, 2000), st.integers(-2, 3), st.integers(-2, 70)),
                 st.integers(-1, 5), st.none(), st.text(max_size=2))

counts = {}


@pytest.fixture(scope="module", autouse=True)
def _report_counts():
    """Append the cases each target ran to $BARECUDA_FUZZ_REPORT (one line per
    target and process; .ci/gpu sums them into its summary)."""
    yield
    path = os.environ.get("BARECUDA_FUZZ_REPORT")
    if path and counts:
        with open(path, "a", encoding="utf-8") as f:
            for name, n in sorted(counts.items()):
                f.write(f"{name} {n}\n")


def count(name):
    counts[name] = counts.get(name, 0) + 1


@FUZZ
@given(args=st.lists(values, max_size=6), block=dims, grid=dims)
def test_fuzz_launch(env, args, block, grid):
    f, whole = env
    count("launch")
    try:
        f(drv.mem_alloc(16), *args, block=block, grid=grid)
    except EXPECTED:
        pass
    assert guards_intact(whole)


@FUZZ
@given(args=st.lists(values, min_size=0, max_size=6), fmt=st.sampled_from(["Pifq", "Pif", "PPPP", "iifq", "Pifq"]))
def test_fuzz_prepared(env, args, fmt):
    f, whole = env
    count("prepared")
    try:
        f.prepare(fmt)
        f.prepared_call((1, 1), (1, 1, 1), int(whole) + GUARD, *args)
    except EXPECTED:
        pass
    assert guards_intact(whole)


@FUZZ
@given(offset=st.integers(-10, 3 * GUARD), size=st.integers(-10, 2 * GUARD + 10),
       host_len=st.integers(0, 2 * GUARD), value=st.integers(-2**40, 2**40),
       which=st.sampled_from(["htod", "dtoh", "dtod", "d8", "d16", "d32"]))
def test_fuzz_copies_and_fills(env, offset, size, host_len, value, which):
    f, whole = env
    count("copies")
    inner = drv.mem_alloc(GUARD)
    host = np.zeros(host_len, np.uint8)
    try:
        if which == "htod":
            drv.memcpy_htod(inner, host)
        elif which == "dtoh":
            drv.memcpy_dtoh(host, inner)
        elif which == "dtod":
            drv.memcpy_dtod(inner, int(whole) + GUARD, size)
        else:
            getattr(drv, "memset_" + which)(inner, value, size)
    except EXPECTED:
        pass
    inner.free()
    assert guards_intact(whole)


@FUZZ
@given(fields=st.dictionaries(
    st.sampled_from(["src_x_in_bytes", "src_y", "src_pitch", "dst_x_in_bytes", "dst_y",
                     "dst_pitch", "width_in_bytes", "height"]),
    st.one_of(st.integers(-5, 3 * GUARD), st.floats(), st.text(max_size=2))))
def test_fuzz_memcpy2d(env, fields):
    f, whole = env
    count("memcpy2d")
    host = np.zeros((16, 64), np.uint8)
    dst = drv.mem_alloc(GUARD)  # a sized allocation: every region must be checked
    c = drv.Memcpy2D()
    try:
        c.set_src_host(host)
        c.set_dst_device(dst)
        c.width_in_bytes, c.height, c.src_pitch, c.dst_pitch = 64, 16, 64, 256
        for k, v in fields.items():
            setattr(c, k, v)
        c()
    except EXPECTED:
        pass
    dst.free()
    assert guards_intact(whole)


@FUZZ
@given(decl=st.text(alphabet="floatintdouble *,xyz_0123[] ", max_size=30),
       op=st.text(alphabet="xyz[i]=+*;0123 ", max_size=20))
def test_fuzz_elementwise_declarations(env, decl, op):
    count("elementwise")
    try:
        k = ElementwiseKernel(decl, op or "x[i] = 0")
        k(*[drv.mem_alloc(4)] * len(k.args))
    except EXPECTED + (drv.CompileError,):
        pass


@FUZZ
@given(index=st.one_of(st.integers(-20, 20), st.slices(20), st.tuples(st.integers(-5, 5), st.slices(8)),
                       st.just(Ellipsis), st.none(), st.text(max_size=2), st.floats()))
def test_fuzz_gpuarray_indexing(env, index):
    from barecuda import gpuarray
    count("gpuarray")
    h = np.arange(20 * 8, dtype=np.float32).reshape(20, 8)
    g = gpuarray.to_gpu(h)
    try:
        want = h[index]
    except Exception as exc:  # noqa: BLE001 - NumPy says no: so must we, with a Python error
        with pytest.raises(Exception) as info:
            g[index]
        assert not isinstance(info.value, SystemError), exc
        return
    got = g[index]
    np.testing.assert_array_equal(got.get() if hasattr(got, "get") else got, want)



@FUZZ
@given(fields=st.dictionaries(
    st.sampled_from(["src_x_in_bytes", "src_y", "src_z", "src_pitch", "src_height",
                     "dst_x_in_bytes", "dst_y", "dst_z", "dst_pitch", "dst_height",
                     "width_in_bytes", "height", "depth"]),
    st.one_of(st.integers(-5, 2 * GUARD), st.floats(), st.none())))
def test_fuzz_memcpy3d(env, fields):
    f, whole = env
    count("memcpy3d")
    host = np.zeros((4, 8, 64), np.uint8)
    dst = drv.mem_alloc(GUARD)
    c = drv.Memcpy3D()
    try:
        c.set_src_host(host)
        c.set_dst_device(dst)
        c.width_in_bytes, c.height, c.depth = 64, 8, 4
        c.src_pitch, c.src_height, c.dst_pitch, c.dst_height = 64, 8, 128, 8
        for k, v in fields.items():
            setattr(c, k, v)
        c()
    except EXPECTED:
        pass
    dst.free()
    assert guards_intact(whole)


@FUZZ
@given(decl=st.sampled_from(["float *x", "int *x, float s", "double *x, double *y", "float x",
                             "", "float *x, int *x", "char *x"]),
       reduce_expr=st.text(alphabet="ab+*-()<>?: max", max_size=12),
       map_expr=st.one_of(st.none(), st.text(alphabet="xyi[]*+s0.5", max_size=10)),
       n_args=st.integers(0, 3), size=st.integers(0, 300))
def test_fuzz_reduction(env, decl, reduce_expr, map_expr, n_args, size):
    from barecuda import gpuarray
    from barecuda.reduction import ReductionKernel
    f, whole = env
    count("reduction")
    try:
        k = ReductionKernel(np.float32, "0", reduce_expr, map_expr, decl or None)
        args = [gpuarray.zeros(size, np.float32) if i % 2 == 0 else 1.5 for i in range(n_args)]
        k(*args).get()
    except EXPECTED + (drv.CompileError,):
        pass
    assert guards_intact(whole)


_DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.int32, np.int64, np.uint64,
                                 np.float16, np.float32, np.float64, np.complex64)]
_OPS = ["+", "-", "*", "/", "//", "%", "**", "==", "<", ">="]


def _sample(dtype, shape, rng, divisor, nonneg):
    """Values NumPy and CUDA agree on: small (no integer overflow in **), no zero
    where an integer division would by it (NumPy says 0, C says nothing), and no
    negative integer exponent (NumPy checks every value, a kernel cannot)."""
    if dtype.kind == "b":
        return (np.ones(shape, bool) if divisor else rng.integers(0, 2, shape).astype(dtype))
    if dtype.kind in "iu":
        lo = 0 if dtype.kind == "u" or nonneg else -3
        v = rng.integers(lo, 4, shape)
        if divisor:
            v[v == 0] = 1
        return v.astype(dtype)
    v = rng.standard_normal(shape) * 3
    if dtype.kind == "c":
        v = v + 1j * rng.standard_normal(shape)
    return v.astype(dtype)


@FUZZ
@given(xd=st.sampled_from(_DTYPES), yd=st.sampled_from(_DTYPES), op=st.sampled_from(_OPS),
       shape=st.sampled_from([(0,), (1,), (7,), (3, 5)]), other=st.sampled_from(
           ["array", "scalar_int", "scalar_float", "scalar_complex", "np_scalar", "shape", "list"]),
       reverse=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_fuzz_gpuarray_operations(env, xd, yd, op, shape, other, reverse, seed):
    """Random operand types, dtypes, shapes and operators: the result equals
    NumPy's (values and dtype), or both refuse."""
    import operator

    from barecuda import gpuarray
    count("gpuarray_ops")
    rng = np.random.default_rng(seed)
    fn = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
          "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "==": operator.eq,
          "<": operator.lt, ">=": operator.ge}[op]
    divides, nonneg = op in ("//", "%", "/"), op == "**"
    x = _sample(xd, shape, rng, divides and reverse, nonneg)
    if other == "array":
        y = _sample(yd, shape, rng, divides and not reverse, nonneg)
        gy = gpuarray.to_gpu(y)
    elif other == "shape":
        y = _sample(yd, (2,), rng, divides and not reverse, nonneg)
        gy = gpuarray.to_gpu(y)
    elif other == "np_scalar":
        y = gy = _sample(yd, (), rng, divides and not reverse, nonneg)[()]
    elif other == "list":
        y = gy = [1, 2]
    else:
        y = gy = {"scalar_int": 2, "scalar_float": -1.5, "scalar_complex": 0.5 - 2j}[other]
    gx = gpuarray.to_gpu(x)
    a, b = (y, x) if reverse else (x, y)
    ga, gb = (gy, gx) if reverse else (gx, gy)
    try:
        with np.errstate(all="ignore"):
            want = fn(a, b)
    except Exception:  # noqa: BLE001 - NumPy refuses: so must we, with a Python error
        with pytest.raises(Exception) as info:
            fn(ga, gb)
        assert not isinstance(info.value, SystemError)
        return
    try:
        got = fn(ga, gb)
    except (TypeError, ValueError):
        # host lists and broadcasting are refused on purpose; nothing else may be
        if other in ("list", "shape"):
            return
        raise
    if not isinstance(want, np.ndarray):
        want = np.asarray(want)
    got_h = got.get() if hasattr(got, "get") else np.asarray(got)
    assert got_h.dtype == want.dtype, (got_h.dtype, want.dtype)
    assert got_h.shape == want.shape
    tol = 2e-2 if np.float16 in (got_h.dtype, want.dtype) or want.dtype == np.float16 else 1e-5
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got_h, want, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got_h, want)
