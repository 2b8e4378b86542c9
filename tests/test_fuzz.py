# SPDX-License-Identifier: MIT
"""Hostile input, fuzzed with hypothesis: random argument lists and values for
launches, prepared calls, copies, fills, Memcpy2D fields, kernel declarations
and GPUArray indexing.  Only Python exceptions may come out: never a crash, a
hang or memory written outside the buffers (a guard pattern around them is
checked after every case)."""

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


def test_report_counts():
    # printed in the GPU log so the closing note can say how many cases ran
    print("fuzz cases:", counts)
