# SPDX-License-Identifier: MIT
"""Function launches: argument packing, prepared calls, launch_ex, attributes,
occupancy, and every bad input.  CPU tests use _driver._test_function (a Function
of an unloaded stand-in Module) to check validation and packing without a GPU."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from barecuda import _driver
from barecuda import driver as drv

BLOCK = (1, 1, 1)


def fake(params=None, max_threads=1024):
    return _driver._test_function("k", params=params, max_threads=max_threads)


# ------------------------------------------------------------------ CPU: packing

def test_pack_natural_alignment_without_param_info():
    f = fake()
    assert f.num_params is None and f.param_info is None
    got = _driver._pack_args(f, np.int8(-2), np.int16(3), np.int32(-4), np.int64(5),
                             np.float32(1.5), np.float64(-2.25), np.uintp(0xDEAD))
    want = np.zeros(1, np.dtype({"names": list("abcdefg"),
                                 "formats": [np.int8, np.int16, np.int32, np.int64,
                                             np.float32, np.float64, np.uint64],
                                 "offsets": [0, 2, 4, 8, 16, 24, 32], "itemsize": 40}))
    want[0] = (-2, 3, -4, 5, 1.5, -2.25, 0xDEAD)
    assert got == want.tobytes()


def test_pack_uses_kernel_offsets():
    f = fake(params=[(0, 1), (8, 8), (16, 4)])
    got = _driver._pack_args(f, np.uint8(7), np.float64(3.0), np.float32(1.0))
    assert len(got) == 20
    assert got[0] == 7
    assert np.frombuffer(got[8:16], np.float64)[0] == 3.0
    assert np.frombuffer(got[16:20], np.float32)[0] == 1.0


def test_pack_struct_complex_half_bool():
    dt = np.dtype([("a", np.int8), ("b", np.float64), ("c", np.int32)], align=True)
    rec = np.zeros(1, dt)
    rec[0] = (3, -1.5, 42)
    f = fake()
    got = _driver._pack_args(f, np.int8(1), rec[0], rec, np.complex64(1 + 2j),
                             np.float16(1.5), np.bool_(True))
    assert got[0] == 1
    assert got[8:32] == rec.tobytes()          # aligned to 8
    assert got[32:56] == rec.tobytes()
    assert np.frombuffer(got[56:64], np.complex64)[0] == 1 + 2j
    assert np.frombuffer(got[64:66], np.float16)[0] == 1.5
    assert got[66] == 1


def test_pack_pointer_kinds():
    class G:
        gpudata = 0x1234

    class CAI:
        __cuda_array_interface__ = {"data": (0x5678, False), "shape": (1,),
                                    "typestr": "<f4", "version": 3}

    class Tex:
        _kernel_arg_handle = 77

    got = np.frombuffer(_driver._pack_args(fake(), G(), CAI(), Tex()), np.uint64)
    assert list(got) == [0x1234, 0x5678, 77]


@pytest.mark.parametrize("arg,match", [
    (1, "Python int.*np.int32.*np.uintp"),
    (True, "Python bool"),
    (1.5, "Python float.*np.float32"),
    (1j, "Python complex"),
    (np.zeros(3, np.float32), "array of 3 elements.*In/Out/InOut or to_gpu"),
    (object(), "invalid type on parameter #0"),
    (np.longdouble(1), "no CUDA C type"),
    ("text", "invalid type on parameter #0"),
])
def test_call_bad_argument_types(arg, match):
    with pytest.raises(TypeError, match=match):
        _driver._pack_args(fake(), arg)


def test_call_argument_count_and_size_checked():
    f = fake(params=[(0, 8), (8, 4)])
    with pytest.raises(TypeError, match="kernel 'k' takes 2 arguments, got 1"):
        f(np.uintp(0), block=BLOCK)
    with pytest.raises(TypeError, match=r"parameter #1 \(0-based\) of kernel 'k' is 4 bytes.*int64"):
        f(np.uintp(0), np.int64(1), block=BLOCK)


@pytest.mark.parametrize("kwargs,exc,match", [
    ({}, ValueError, "must specify block size"),
    ({"block": (0, 1, 1)}, ValueError, "block dimensions must be positive"),
    ({"block": (-4, 1, 1)}, ValueError, "block dimensions must be positive"),
    ({"block": (1, 1, 1, 1)}, ValueError, "block must have 1 to 3 dimensions"),
    ({"block": ()}, ValueError, "block must have 1 to 3 dimensions"),
    ({"block": (2048, 1, 1)}, ValueError, "too large"),
    ({"block": (1, 1, 65)}, ValueError, "too large"),
    ({"block": (32, 32, 2)}, ValueError, "2048 threads.*at most 1024"),
    ({"block": "abc"}, TypeError, "block must be a tuple"),
    ({"block": (1.5, 1, 1)}, TypeError, "block must be a tuple of ints"),
    ({"block": BLOCK, "grid": (0, 1)}, ValueError, "grid dimensions must be positive"),
    ({"block": BLOCK, "grid": (1, 1, 1, 1)}, ValueError, "grid must have 1 to 3"),
    ({"block": BLOCK, "grid": (1, 70000)}, ValueError, "65535"),
    ({"block": BLOCK, "grid": (2**31, 1)}, ValueError, "too large"),
    ({"block": BLOCK, "shared": -1}, ValueError, "shared memory size"),
    ({"block": BLOCK, "stream": "s"}, TypeError, "stream must be"),
    ({"block": BLOCK, "bogus": 1}, TypeError, "unexpected keyword argument 'bogus'"),
    ({"block": BLOCK, "texrefs": [1]}, TypeError, "texture references"),
])
def test_call_bad_launch_configuration(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        fake()(**kwargs)


def test_block_limited_by_function_max_threads():
    f = fake(max_threads=64)
    with pytest.raises(ValueError, match="128 threads but kernel 'k' allows at most 64"):
        f(block=(128, 1, 1))


def test_call_on_unloaded_module_is_logic_error():
    with pytest.raises(drv.LogicError, match="unloaded"):
        fake()(np.int32(1), block=BLOCK)
    f = fake().prepare("i")
    with pytest.raises(drv.LogicError, match="unloaded"):
        f.prepared_call((1,), BLOCK, 1)


# ------------------------------------------------------------------ CPU: prepare

def test_prepare_string_and_layout():
    f = fake()
    assert f.prepare("PPi") is f
    assert f.arg_format == "PPi"
    got = _driver._pack_prepared(f, 1, 2, -3)
    assert np.frombuffer(got[:16], np.uint64).tolist() == [1, 2]
    assert np.frombuffer(got[16:20], np.int32)[0] == -3


def test_prepare_repeat_counts_and_blobs():
    f = fake().prepare("b3P16s")
    got = _driver._pack_prepared(f, 1, 2, 3, 4, bytes(range(16)))
    assert len(got) == 8 + 24 + 16
    assert got[32:] == bytes(range(16))


def test_prepare_dtype_list():
    dt = np.dtype([("x", np.float32), ("y", np.int64)], align=True)
    f = fake().prepare([np.int8, np.float64, dt, np.intp, np.complex64])
    assert f.arg_format == "bd16slF"
    rec = np.zeros(1, dt)
    rec[0] = (1.5, -7)
    got = _driver._pack_prepared(f, -1, 2, rec[0], 0x10, 1 + 1j)
    assert got[0] == 0xFF
    assert np.frombuffer(got[8:16], np.float64)[0] == 2.0
    assert got[16:32] == rec.tobytes()
    assert np.frombuffer(got[32:40], np.int64)[0] == 0x10
    assert np.frombuffer(got[40:48], np.complex64)[0] == 1 + 1j


def test_prepared_conversions_accept_python_and_numpy_numbers():
    f = fake().prepare("iIqQfdP?")
    got = _driver._pack_prepared(f, np.int16(-5), 4000000000, -(2**63), 2**64 - 1,
                                 np.float64(0.5), 3, np.uint64(99), True)
    v = np.frombuffer(got, np.dtype({"names": list("abcdefgh"),
                                     "formats": ["<i4", "<u4", "<i8", "<u8", "<f4", "<f8",
                                                 "<u8", "u1"],
                                     "offsets": [0, 4, 8, 16, 24, 32, 40, 48],
                                     "itemsize": 49}))[0]
    assert tuple(v) == (-5, 4000000000, -(2**63), 2**64 - 1, 0.5, 3.0, 99, 1)


@pytest.mark.parametrize("fmt,value", [
    ("b", 128), ("b", -129), ("B", 256), ("B", -1), ("h", 2**15), ("H", -1),
    ("i", 2**31), ("i", -(2**31) - 1), ("I", 2**32), ("I", -1), ("q", 2**63),
    ("Q", -1), ("Q", 2**64), ("P", -1), ("?", 2),
])
def test_prepared_range_checks(fmt, value):
    f = fake().prepare(fmt)
    with pytest.raises(OverflowError, match="out of range"):
        _driver._pack_prepared(f, value)


def test_prepared_float_overflow_and_types():
    f = fake().prepare("f")
    with pytest.raises(OverflowError, match="too large for float32"):
        _driver._pack_prepared(f, 1e300)
    with pytest.raises(TypeError, match="expected a float"):
        _driver._pack_prepared(f, "x")
    with pytest.raises(TypeError, match="expected a real number"):
        _driver._pack_prepared(f, 1j)
    g = fake().prepare("i")
    with pytest.raises(TypeError, match="expected an int"):
        _driver._pack_prepared(g, 1.5)
    p = fake().prepare("P")
    with pytest.raises(TypeError, match="expected a device pointer"):
        _driver._pack_prepared(p, 1.5)
    s = fake().prepare("8s")
    with pytest.raises(ValueError, match="struct of 8 bytes expected, got 4"):
        _driver._pack_prepared(s, b"abcd")


def test_prepared_call_errors():
    f = fake()
    with pytest.raises(drv.LogicError, match="prepare"):
        f.prepared_call((1,), BLOCK)
    f.prepare("Pi")
    with pytest.raises(TypeError, match=r"takes 2 arguments \(Pi\), got 3"):
        f.prepared_call((1,), BLOCK, 1, 2, 3)
    with pytest.raises(TypeError, match="needs grid, block"):
        f.prepared_call((1,))
    with pytest.raises(TypeError, match="needs grid, block, stream"):
        f.prepared_async_call((1,), BLOCK)
    with pytest.raises(TypeError, match="unexpected keyword argument 'shared'"):
        f.prepared_call((1,), BLOCK, 1, 2, shared=3)
    with pytest.raises(ValueError, match="block dimensions must be positive"):
        f.prepared_call((1,), (0, 1, 1), 1, 2)


@pytest.mark.parametrize("fmt,exc,match", [
    ("Z", ValueError, "unknown type letter 'Z'"),
    ("s", ValueError, "byte count"),
    (3, TypeError, "struct-style string or a list"),
    ([np.object_], TypeError, "no CUDA C type"),
    ([np.longdouble], TypeError, "no CUDA C type"),
])
def test_prepare_bad_signatures(fmt, exc, match):
    with pytest.raises(exc, match=match):
        fake().prepare(fmt)


def test_prepare_checked_against_kernel():
    f = fake(params=[(0, 8), (8, 4)])
    with pytest.raises(ValueError, match="takes 2 arguments, the signature 'P' has 1"):
        f.prepare("P")
    with pytest.raises(ValueError, match=r"parameter #1 \(0-based\) of kernel 'k' is 4 bytes"):
        f.prepare("Pd")
    f.prepare("Pi")
    assert len(_driver._pack_prepared(f, 1, 2)) == 12


def test_launch_ex_validation():
    f = fake()
    with pytest.raises(ValueError, match="multiple of cluster"):
        f.launch_ex((3, 1, 1), BLOCK, cluster=(2, 1, 1))
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        f.launch_ex((1,), BLOCK, bogus=1)
    with pytest.raises(ValueError, match="cluster dimensions must be positive"):
        f.launch_ex((1,), BLOCK, cluster=(0, 1, 1))


def test_in_out_validation():
    with pytest.raises(TypeError, match="needs a numpy.ndarray"):
        drv.In([1, 2, 3])
    with pytest.raises(ValueError, match="contiguous"):
        drv.InOut(np.zeros((4, 4))[:, ::2])
    ro = np.zeros(4)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        drv.Out(ro)
    drv.In(ro)  # reading a read-only array is fine


def test_function_docs_have_signatures():
    import inspect
    f = fake()
    assert str(inspect.signature(f.prepared_call)) == "(grid, block, *args, shared_size=0)"
    assert "stream" in str(inspect.signature(f.prepared_async_call))
    assert "cluster" in str(inspect.signature(f.launch_ex))


# ------------------------------------------------------------------ GPU

ECHO_SRC = r"""
struct S { char a; double b; int c; };
__global__ void echo(signed char i8, short i16, int i32, long long i64, float f32,
                     double f64, S s, float2 c64, unsigned short h, unsigned char *out)
{
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    *(signed char *)(out + 0) = i8;
    *(short *)(out + 2) = i16;
    *(int *)(out + 4) = i32;
    *(long long *)(out + 8) = i64;
    *(float *)(out + 16) = f32;
    *(double *)(out + 24) = f64;
    *(S *)(out + 32) = s;
    *(float2 *)(out + 56) = c64;
    *(unsigned short *)(out + 64) = h;
}

__global__ void scale(float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

__global__ void axpy(float *out, const float *x, const float *y, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a * x[i] + y[i];
}

__global__ void __launch_bounds__(64) bounded(int *x) { x[threadIdx.x] = threadIdx.x; }

__global__ void where(unsigned int *out)
{
    unsigned int rank;
    asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    out[blockIdx.x] = rank;
}

__global__ void big_shared(int *out)
{
    extern __shared__ int buf[];
    buf[threadIdx.x] = threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = buf[blockDim.x - 1 - threadIdx.x];
}

__device__ int dev_value[4];
__global__ void read_global(int *out) { out[threadIdx.x] = dev_value[threadIdx.x] * 2; }
"""

S_DTYPE = np.dtype([("a", np.int8), ("b", np.float64), ("c", np.int32)], align=True)
OUT_DTYPE = np.dtype({
    "names": ["i8", "i16", "i32", "i64", "f32", "f64", "s", "c64", "h"],
    "formats": [np.int8, np.int16, np.int32, np.int64, np.float32, np.float64, S_DTYPE,
                np.complex64, np.float16],
    "offsets": [0, 2, 4, 8, 16, 24, 32, 56, 64], "itemsize": 72})


@pytest.fixture
def mod(ctx):
    from barecuda.compiler import SourceModule
    return SourceModule(ECHO_SRC)


def _echo_values(rng):
    s = np.zeros(1, S_DTYPE)
    s[0] = (int(rng.integers(-128, 127)), float(rng.standard_normal()),
            int(rng.integers(-2**31, 2**31 - 1)))
    return dict(i8=np.int8(rng.integers(-128, 127)), i16=np.int16(rng.integers(-2**15, 2**15)),
                i32=np.int32(rng.integers(-2**31, 2**31 - 1)),
                i64=np.int64(rng.integers(-2**62, 2**62)),
                f32=np.float32(rng.standard_normal()), f64=np.float64(rng.standard_normal()),
                s=s, c64=np.complex64(complex(*rng.standard_normal(2))),
                h=np.float16(rng.standard_normal()))


def _check_echo(out, v):
    rec = np.frombuffer(out.tobytes(), OUT_DTYPE)[0]
    for key in ("i8", "i16", "i32", "i64", "f32", "f64", "c64", "h"):
        assert rec[key] == v[key], key
    for field in ("a", "b", "c"):       # field by field: struct padding is not copied
        assert rec["s"][field] == v["s"][0][field], field


@pytest.mark.gpu
def test_call_every_scalar_kind_and_struct(mod, rng):
    f = mod.get_function("echo")
    assert f.num_params == 10
    v = _echo_values(rng)
    out = drv.mem_alloc(OUT_DTYPE.itemsize)
    f(v["i8"], v["i16"], v["i32"], v["i64"], v["f32"], v["f64"], v["s"][0], v["c64"], v["h"],
      out, block=(1, 1, 1), grid=(1, 1))
    host = np.zeros(OUT_DTYPE.itemsize, np.uint8)
    drv.memcpy_dtoh(host, out)
    _check_echo(host, v)
    # a size-1 structured array passes by value too, and Out() fetches the result
    host2 = np.zeros(OUT_DTYPE.itemsize, np.uint8)
    f(v["i8"], v["i16"], v["i32"], v["i64"], v["f32"], v["f64"], v["s"], v["c64"], v["h"],
      drv.Out(host2), block=(1, 1, 1))
    _check_echo(host2, v)


@pytest.mark.gpu
def test_prepared_echo_converts_python_numbers(mod, rng):
    f = mod.get_function("echo")
    f.prepare([np.int8, np.int16, np.int32, np.int64, np.float32, np.float64, S_DTYPE,
               np.complex64, np.uint16, np.intp])
    v = _echo_values(rng)
    out = drv.mem_alloc(OUT_DTYPE.itemsize)
    f.prepared_call((1, 1), (1, 1, 1), int(v["i8"]), int(v["i16"]), int(v["i32"]),
                    int(v["i64"]), float(v["f32"]), float(v["f64"]), v["s"][0],
                    complex(v["c64"]), int(v["h"].view(np.uint16)), out)
    host = np.zeros(OUT_DTYPE.itemsize, np.uint8)
    drv.memcpy_dtoh(host, out)
    _check_echo(host, v)


@pytest.mark.gpu
def test_pointer_argument_kinds(mod, rng):
    f = mod.get_function("scale")
    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    d = drv.mem_alloc(x.nbytes)

    class HasGpudata:
        gpudata = d

    class HasCAI:
        __cuda_array_interface__ = {"data": (int(d), False), "shape": (n,),
                                    "typestr": "<f4", "version": 3}

    drv.memcpy_htod(d, x)
    expect = x.copy()
    for arg in (d, HasGpudata(), HasCAI(), np.uintp(int(d))):
        f(arg, np.float32(2.0), np.int32(n), block=(128, 1, 1), grid=((n + 127) // 128, 1))
        expect *= np.float32(2.0)
    got = np.empty_like(x)
    drv.memcpy_dtoh(got, d)
    np.testing.assert_array_equal(got, expect)


@pytest.mark.gpu
def test_in_out_inout(mod, rng):
    f = mod.get_function("axpy")
    n = 4097
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    f(drv.Out(out), drv.In(x), drv.In(y), np.float32(3.0), np.int32(n),
      block=(256, 1, 1), grid=((n + 255) // 256, 1))
    np.testing.assert_allclose(out, 3 * x + y, rtol=1e-5, atol=1e-6)  # FMA on the GPU
    g = mod.get_function("scale")
    z = x.copy()
    stream = drv.Stream()
    g(drv.InOut(z), np.float32(-1.0), np.int32(n), block=(256, 1, 1),
      grid=((n + 255) // 256, 1), stream=stream)
    stream.synchronize()
    np.testing.assert_array_equal(z, -x)


@pytest.mark.gpu
def test_time_kernel_and_prepared_timed_call(mod, rng):
    f = mod.get_function("scale")
    d = drv.mem_alloc(4 * 1024)
    t = f(d, np.float32(1.0), np.int32(1024), block=(256, 1, 1), grid=(4, 1), time_kernel=True)
    assert isinstance(t, float) and 0 <= t < 1
    f.prepare("Pfi")
    timer = f.prepared_timed_call((4, 1), (256, 1, 1), d, 1.0, 1024)
    assert 0 <= timer() < 1
    stream = drv.Stream()
    assert f.prepared_async_call((4, 1), (256, 1, 1), stream, d, 1.0, 1024) is None
    stream.synchronize()


@pytest.mark.gpu
def test_python_int_rejected_but_prepared_accepts(mod):
    f = mod.get_function("scale")
    d = drv.mem_alloc(16)
    with pytest.raises(TypeError, match="Python int"):
        f(d, np.float32(1), 4, block=(4, 1, 1))
    with pytest.raises(TypeError, match="of kernel 'scale' is 4 bytes.*float64"):
        f(d, np.float64(1), np.int32(4), block=(4, 1, 1))
    with pytest.raises(TypeError, match="takes 3 arguments, got 2"):
        f(d, np.float32(1), block=(4, 1, 1))
    f.prepare("Pfi").prepared_call((1,), (4, 1, 1), int(d), 1, 4)
    drv.Context.synchronize()


@pytest.mark.gpu
def test_block_larger_than_launch_bounds(mod):
    f = mod.get_function("bounded")
    assert f.max_threads_per_block == 64
    d = drv.mem_alloc(4 * 128)
    with pytest.raises(ValueError, match="allows at most 64"):
        f(d, block=(128, 1, 1))
    f(d, block=(64, 1, 1))
    drv.Context.synchronize()


@pytest.mark.gpu
def test_attributes_and_config(mod):
    f = mod.get_function("scale")
    fa = drv.function_attribute
    assert f.num_regs == f.get_attribute(fa.NUM_REGS) >= 1
    assert f.max_threads_per_block == f.get_attribute(fa.MAX_THREADS_PER_BLOCK) >= 64
    assert f.shared_size_bytes == 0
    assert f.local_size_bytes >= 0 and f.const_size_bytes >= 0
    assert f.ptx_version >= 50 and f.binary_version >= 50
    f.set_cache_config(drv.func_cache.PREFER_L1)
    g = mod.get_function("big_shared")
    g.set_attribute(fa.MAX_DYNAMIC_SHARED_SIZE_BYTES, 96 * 1024)
    assert g.max_dynamic_shared_size_bytes == 96 * 1024
    out = drv.mem_alloc(4 * 256)
    g(out, block=(256, 1, 1), shared=96 * 1024)
    got = np.empty(256, np.int32)
    drv.memcpy_dtoh(got, out)
    np.testing.assert_array_equal(got, np.arange(255, -1, -1))
    with pytest.raises(ValueError, match="function attribute"):
        f.get_attribute(10_000)


@pytest.mark.gpu
def test_occupancy(mod):
    f = mod.get_function("scale")
    assert f.max_active_blocks_per_multiprocessor(256) >= 1
    assert f.max_active_blocks_per_multiprocessor(256, dynamic_smem=1024) >= 1
    min_grid, block = f.max_potential_block_size()
    assert min_grid >= 1 and 32 <= block <= 1024
    _, limited = f.max_potential_block_size(block_size_limit=128)
    assert limited <= 128


@pytest.mark.gpu
def test_launch_ex_cluster_cooperative_priority(mod):
    dev = drv.Context.get_device()
    f = mod.get_function("where")
    out = drv.mem_alloc(4 * 8)
    if dev.compute_capability()[0] >= 9:
        f.launch_ex((8, 1, 1), (32, 1, 1), out, cluster=(2, 1, 1))
        got = np.empty(8, np.uint32)
        drv.memcpy_dtoh(got, out)
        np.testing.assert_array_equal(got, [0, 1] * 4)
    g = mod.get_function("scale")
    d = drv.mem_alloc(4 * 256)
    x = np.arange(256, dtype=np.float32)
    drv.memcpy_htod(d, x)
    g.launch_ex((2, 1, 1), (128, 1, 1), d, np.float32(2), np.int32(256), cooperative=True)
    prio = min(drv.Context.get_stream_priority_range())
    g.launch_ex((2, 1, 1), (128, 1, 1), d, np.float32(2), np.int32(256), priority=prio,
                stream=drv.Stream())
    drv.Context.synchronize()
    got = np.empty_like(x)
    drv.memcpy_dtoh(got, d)
    np.testing.assert_array_equal(got, x * 4)


@pytest.mark.gpu
def test_gil_knob_and_c_floor(mod):
    f = mod.get_function("scale")
    d = drv.mem_alloc(4 * 1024)
    args = (d, np.float32(1), np.int32(1024))
    t = _driver._bench_launch(f, (4, 1), (256, 1, 1), args, 50)
    assert 0 < t < 0.01
    t = _driver._bench_launch(f, (4, 1), (256, 1, 1), _driver._pack_args(f, *args), 20, "sync",
                              drv.Stream())
    assert 0 < t < 0.01
    prev = _driver._launch_release_gil(True)
    try:
        f(*args, block=(256, 1, 1), grid=(4, 1))
    finally:
        assert _driver._launch_release_gil(prev) is True
    drv.Context.synchronize()


@pytest.mark.gpu
def test_faulting_kernel_raises_launch_error():
    code = textwrap.dedent("""
        import numpy as np
        from barecuda import driver as drv
        from barecuda.compiler import SourceModule
        m = SourceModule('__global__ void bad(int *p) { p[threadIdx.x] = 1; }')
        m.get_function('bad')(np.uintp(8), block=(32, 1, 1))
        try:
            drv.Context.synchronize()
        except drv.LaunchError as e:
            print('LAUNCH', e.name, 'unusable' in str(e))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "LAUNCH CUDA_ERROR_ILLEGAL_ADDRESS True" in r.stdout, r.stdout + r.stderr


@pytest.mark.gpu
def test_function_keeps_module_alive(ctx):
    from barecuda.compiler import SourceModule
    f = SourceModule("__global__ void k(int *p) { p[0] = 5; }", cache_dir=False).get_function("k")
    import gc
    gc.collect()
    d = drv.mem_alloc(4)
    f(d, block=(1, 1, 1))
    got = np.zeros(1, np.int32)
    drv.memcpy_dtoh(got, d)
    assert got[0] == 5


@pytest.mark.gpu
def test_bench_launch_rows(ctx, monkeypatch):
    from barecuda.bench import launch
    monkeypatch.setattr(launch, "REPEATS", 3)
    monkeypatch.setattr(launch, "N", 50)
    rows = launch.run()
    names = [r["name"] for r in rows]
    for n in launch.ARG_COUNTS:
        assert f"launch __call__, empty kernel, {n} args" in names
        assert f"launch prepared_call, {n} args" in names
    assert any("graph replay" in n for n in names)
    for r in rows:
        if r["value"] is not None:
            assert r["value"] > 0 and r["ratio"] > 0
