# SPDX-License-Identifier: MIT
"""PyCUDA's remaining driver and tools names: to_device/from_device, mem_alloc_like,
mem_get_address_range, the CUDA-array copies (memcpy_dtoa/atod/atoa, py_memcpy_*),
as_buffer, the profiler calls, set_debugging, HostPointer, the pools re-exported
by driver, and tools' DeviceData, OccupancyRecord, DebugMemoryPool,
get_default_device, get_arg_type, base_dtype_to_ctype; plus host copies refusing
arrays of Python objects and launch dimensions given as floats or NumPy ints."""

import io
import warnings

import numpy as np
import pytest

from barecuda import _driver
from barecuda import compiler
from barecuda import driver as drv
from barecuda import tools

BLOCK = (32, 1, 1)
SOME_PTR = 0x10000   # any int: the CPU tests fail before the driver sees it


def fake(max_threads=1024):
    return _driver._test_function("k", max_threads=max_threads)


# ------------------------------------------------------------ CPU: names exist

@pytest.mark.parametrize("name", [
    "to_device", "from_device", "from_device_like", "mem_alloc_like", "HostPointer",
    "mem_get_address_range", "memcpy_atoa", "memcpy_atod", "memcpy_dtoa", "py_memcpy_htoa",
    "py_memcpy_atoh", "aligned_zeros_like", "start_profiler", "stop_profiler",
    "initialize_profiler", "profiler_output_mode", "set_debugging", "CUDA_DEBUGGING",
    "have_gl_ext", "DeviceMemoryPool", "PageLockedMemoryPool", "PageLockedAllocator",
    "PooledHostAllocation", "PooledDeviceAllocation", "bitlog2", "PagelockedHostAllocation",
    "AlignedHostAllocation", "TRSA_OVERRIDE_FORMAT", "TRSF_READ_AS_INTEGER",
    "TRSF_NORMALIZED_COORDINATES", "TR_DEFAULT", "PointerHolderBase",
])
def test_driver_has_pycuda_name(name):
    assert hasattr(drv, name)


@pytest.mark.parametrize("name", [
    "get_default_device", "make_default_context", "DeviceData", "OccupancyRecord",
    "DebugMemoryPool", "DeviceMemoryPool", "PageLockedMemoryPool", "PageLockedAllocator",
    "bitlog2", "base_dtype_to_ctype", "dtype_to_ctype", "get_arg_type", "parse_c_arg",
    "register_dtype", "get_or_register_dtype", "Argument", "VectorArg", "ScalarArg",
    "context_dependent_memoize", "clear_context_caches", "mark_cuda_test",
    "init_cuda_context_fixture", "context_dependent_memoized_functions",
])
def test_tools_has_pycuda_name(name):
    assert hasattr(tools, name)


def test_driver_and_tools_share_the_pools():
    assert drv.DeviceMemoryPool is tools.DeviceMemoryPool
    assert drv.PageLockedMemoryPool is tools.PageLockedMemoryPool
    assert drv.PageLockedAllocator is tools.PageLockedAllocator
    assert drv.bitlog2 is tools.bitlog2
    assert issubclass(tools.DebugMemoryPool, tools.DeviceMemoryPool)


def test_small_driver_helpers():
    assert drv.have_gl_ext() is False
    assert drv.py_memcpy_htoa is _driver.memcpy_htoa
    assert drv.py_memcpy_atoh is _driver.memcpy_atoh
    assert issubclass(drv.HostAllocation, drv.HostPointer)
    assert issubclass(drv.RegisteredHostMemory, drv.HostPointer)
    assert not issubclass(drv.DeviceAllocation, drv.HostPointer)
    assert drv.profiler_output_mode.CSV == 1 and drv.profiler_output_mode.KEY_VALUE_PAIR == 0
    assert (drv.TRSF_NORMALIZED_COORDINATES, drv.TR_DEFAULT) == (2, -1)
    with pytest.raises(drv.RuntimeError, match="removed in CUDA 12"):
        drv.initialize_profiler("cfg", "out", drv.profiler_output_mode.CSV)


def test_set_debugging_adds_device_debug_and_skips_caches(capsys):
    assert drv.CUDA_DEBUGGING is False
    src = "__global__ void k(float *x) { x[0] = 1.0f; }"
    plain = compiler.compile(src, arch="sm_90", cache_dir=False)
    drv.set_debugging()
    try:
        assert drv.CUDA_DEBUGGING is True
        debug = compiler.compile(src, arch="sm_90")
    finally:
        drv.set_debugging(False)
    assert drv.CUDA_DEBUGGING is False
    assert debug != plain and len(debug) > len(plain)   # device debug information
    capsys.readouterr()


def test_aligned_zeros_like_keeps_layout():
    like = np.ones((5, 7), np.float32, order="F")
    z = drv.aligned_zeros_like(like, alignment=256)
    assert z.shape == like.shape and z.dtype == like.dtype and z.flags.f_contiguous
    assert z.ctypes.data % 256 == 0 and not z.any()
    assert isinstance(z.base, drv.HostPointer)


# ---------------------------------------------- CPU: argument validation

def test_to_device_refuses_non_buffers_and_objects():
    with pytest.raises(TypeError, match="buffer protocol"):
        drv.to_device(3)
    with pytest.raises(TypeError, match="Python objects"):
        drv.to_device(np.array([1, "a"], dtype=object))


def test_mem_alloc_like_needs_an_array():
    with pytest.raises(TypeError, match="needs an array"):
        drv.mem_alloc_like([1, 2, 3])


def test_from_device_refuses_object_dtype():
    with pytest.raises(TypeError, match="Python objects"):
        drv.from_device(SOME_PTR, (3,), object)
    with pytest.raises(TypeError, match="Python objects"):
        drv.from_device_like(SOME_PTR, np.array([None, None]))


OBJECT_ARRAYS = [
    np.array([1, "x", None], dtype=object),
    np.zeros(4, dtype=[("a", "O"), ("b", np.int32)]),
]


@pytest.mark.parametrize("host", OBJECT_ARRAYS + [memoryview(OBJECT_ARRAYS[0])])
@pytest.mark.parametrize("call", [
    lambda h: drv.memcpy_htod(SOME_PTR, h),
    lambda h: drv.memcpy_dtoh(h, SOME_PTR),
    lambda h: drv.memcpy_htod_async(SOME_PTR, h),
    lambda h: drv.memcpy_dtoh_async(h, SOME_PTR),
    lambda h: drv.Memcpy2D().set_src_host(h),
    lambda h: drv.Memcpy3D().set_dst_host(h),
])
def test_host_copies_refuse_python_objects(call, host):
    with pytest.raises(TypeError, match="Python objects.*only plain data"):
        call(host)


@pytest.mark.parametrize("cls", [drv.In, drv.Out, drv.InOut])
def test_argument_handlers_refuse_python_objects(cls):
    with pytest.raises(TypeError, match="Python objects"):
        cls(np.array([1, None], dtype=object))


def test_field_named_O_is_not_an_object():
    # a struct field called "O" must not be mistaken for the object code
    rec = np.zeros(3, dtype=[("O", np.float32), ("b", np.int32)])
    m = drv.Memcpy2D()
    m.set_src_host(memoryview(rec))
    m.set_src_host(rec)


@pytest.mark.parametrize("kwargs,match", [
    ({"block": (16.0, 1, 1)}, r"block must be a tuple of ints, got the float 16\.0.*int\("),
    ({"block": BLOCK, "grid": (218.12, 1, 1)}, r"grid .*float 218\.12"),
    ({"block": BLOCK, "grid": (np.float64(4.0), 1)}, "grid must be a tuple of ints"),
    ({"block": (np.float32(32), 1, 1)}, "block must be a tuple of ints.*float32"),
    ({"block": BLOCK, "grid": 4.0}, "grid must be a tuple of 1 to 3 ints, not float"),
    ({"block": BLOCK, "grid": (True, 1)}, "grid must be a tuple of ints.*bool"),
])
def test_float_dimensions_are_refused_as_in_pycuda(kwargs, match):
    with pytest.raises(TypeError, match=match):
        fake()(**kwargs)


@pytest.mark.parametrize("kwargs", [
    {"block": (np.int64(32), np.uint8(1), 1)},
    {"block": BLOCK, "grid": (np.int32(7), np.uint16(2), 1)},
    {"block": BLOCK, "grid": np.int64(7)},
    {"block": np.uint32(64)},
    {"block": [32, 2], "grid": [3]},
])
def test_numpy_integer_dimensions_are_accepted(kwargs):
    # parsing succeeds, so the call reaches the (unloaded) module check
    with pytest.raises(drv.LogicError, match="unloaded"):
        fake()(**kwargs)


@pytest.mark.parametrize("fn,args", [
    ("memcpy_dtoa", (1, 0, SOME_PTR)),
    ("memcpy_atod", (SOME_PTR, 1, 0, 4, 5)),
    ("memcpy_atoa", (1, 0, 1, 0)),
])
def test_array_copies_check_argument_count(fn, args):
    with pytest.raises(TypeError, match=f"{fn}\\(\\) takes"):
        getattr(drv, fn)(*args)


@pytest.mark.parametrize("call", [
    lambda: drv.memcpy_dtoa("not an array", 0, SOME_PTR, 4),
    lambda: drv.memcpy_atod(SOME_PTR, None, 0, 4),
    lambda: drv.memcpy_atoa(1, 0, 2, 0, 4),
])
def test_array_copies_need_arrays(call):
    with pytest.raises(TypeError):
        call()


@pytest.mark.parametrize("length,exc,match", [
    (-1, ValueError, "len must not be negative"),
    (2**70, ValueError, "len is too large"),
    (4.0, TypeError, "len must be an int"),
])
def test_array_copies_check_length(length, exc, match):
    with pytest.raises(exc, match=match):
        drv.memcpy_dtoa(None, 0, SOME_PTR, length)


def test_mem_get_address_range_argument_errors():
    with pytest.raises(TypeError):
        drv.mem_get_address_range("x")
    with pytest.raises(ValueError, match="out of range"):
        drv.mem_get_address_range(-1)


class _Holder(drv.PointerHolderBase):
    def __init__(self, ptr):
        super().__init__()
        self.ptr = ptr

    def get_pointer(self):
        return self.ptr


@pytest.mark.parametrize("size,offset,exc,match", [
    (-1, 0, ValueError, "size must not be negative"),
    ("8", 0, TypeError, "size must be an int"),
    (8, -3, ValueError, "offset must not be negative"),
    (8, 1.5, TypeError, "offset must be an int"),
])
def test_pointer_holder_as_buffer_argument_errors(size, offset, exc, match):
    with pytest.raises(exc, match=match):
        _Holder(SOME_PTR).as_buffer(size, offset)


def test_pointer_holder_needs_get_pointer():
    with pytest.raises(NotImplementedError, match="get_pointer"):
        drv.PointerHolderBase().as_buffer(4)


# ------------------------------------------------------------ CPU: tools

@pytest.mark.parametrize("n", [1, 2, 3, 255, 256, 257, 2**40 + 5])
def test_bitlog2(n):
    assert tools.bitlog2(n) == int(np.floor(np.log2(float(n)))) if n < 2**40 else n.bit_length() - 1


@pytest.mark.parametrize("bad,exc", [(0, ValueError), (-4, ValueError), (2.0, TypeError),
                                     (True, TypeError)])
def test_bitlog2_bad(bad, exc):
    with pytest.raises(exc):
        tools.bitlog2(bad)


@pytest.mark.parametrize("decl,char", [
    ("float *x", "P"), ("const double *__restrict__ y", "P"), ("int n", "i"),
    ("unsigned int n", "I"), ("float a", "f"), ("double b", "d"), ("long long c", np.dtype(np.int64).char),
    ("unsigned long long d", np.dtype(np.uint64).char), ("short s", "h"), ("signed char c", "b"),
    ("pycuda::complex<float> *z", "P"), ("pycuda::complex<double> w", "D"),
])
def test_get_arg_type(decl, char):
    assert tools.get_arg_type(decl) == char


def test_struct_char_of_arguments():
    assert tools.VectorArg(np.float32, "x").struct_char == "P"
    assert tools.ScalarArg(np.int16, "n").struct_char == "h"
    rec = np.dtype([("a", np.int32), ("b", np.float64)])
    assert tools.ScalarArg(rec, "s").struct_char == f"{rec.itemsize}s"


def test_dtype_to_ctype_and_fp_tex_hack():
    assert tools.base_dtype_to_ctype(np.float32) == "float"
    assert tools.dtype_to_ctype(np.float32) == "float"
    assert tools.dtype_to_ctype(np.float32, with_fp_tex_hack=True) == "fp_tex_float"
    assert tools.dtype_to_ctype(np.float64, with_fp_tex_hack=True) == "fp_tex_double"
    assert tools.dtype_to_ctype(np.complex64, with_fp_tex_hack=True) == "fp_tex_cfloat"
    assert tools.dtype_to_ctype(np.complex128, with_fp_tex_hack=True) == "fp_tex_cdouble"
    assert tools.dtype_to_ctype(np.int32, with_fp_tex_hack=True) == "int"
    with pytest.raises(ValueError):
        tools.base_dtype_to_ctype(None)
    with pytest.raises(TypeError, match="no C type"):
        tools.base_dtype_to_ctype(np.dtype("U3"))


def _devdata(**kw):
    d = tools.DeviceData.__new__(tools.DeviceData)
    d.__dict__.update(max_threads=1024, warp_size=32, warps_per_mp=64, thread_blocks_per_mp=32,
                      registers=65536, shared_memory=49152, smem_alloc_granularity=128,
                      smem_granularity=32, register_allocation_unit="warp")
    d.__dict__.update(kw)
    return d


def _occupancy_by_hand(dd, threads, smem, regs):
    warps = -(-threads // dd.warp_size)
    asmem = -(-smem // dd.smem_alloc_granularity) * dd.smem_alloc_granularity
    aregs = warps * 32 * regs
    limits = [(dd.thread_blocks_per_mp, "device"), (dd.warps_per_mp // warps, "warps")]
    if regs:
        limits.append((dd.registers // aregs, "regs"))
    if smem:
        limits.append((dd.shared_memory // asmem, "smem"))
    tb, why = min(limits)
    return tb, why, tb * warps / dd.warps_per_mp


def test_occupancy_record_matches_hand_arithmetic_on_random_launches():
    rng = np.random.default_rng(7)
    dd = _devdata()
    seen = set()
    for _ in range(300):
        threads = int(rng.integers(1, 1025))
        smem = int(rng.choice([0, int(rng.integers(1, 49153))]))
        regs = int(rng.choice([0, int(rng.integers(1, 64))]))
        try:
            rec = tools.OccupancyRecord(dd, threads, smem, regs)
        except ValueError as e:
            assert "too many registers" in str(e)
            assert -(-threads // 32) * 32 * regs > dd.registers
            continue
        tb, why, occ = _occupancy_by_hand(dd, threads, smem, regs)
        assert (rec.tb_per_mp, rec.limited_by) == (tb, why)
        assert rec.warps_per_mp == tb * -(-threads // 32)
        assert rec.occupancy == pytest.approx(occ) and 0 <= rec.occupancy <= 1
        seen.add(why)
    assert {"warps", "regs", "smem"} <= seen


@pytest.mark.parametrize("args,exc,match", [
    ((2048,), ValueError, "too many threads"),
    ((0,), ValueError, "at least 1"),
    ((-32,), ValueError, "at least 1"),
    ((256, 100000), ValueError, "too much smem"),
    ((1024, 0, 255), ValueError, "too many registers"),
    ((256, -1), ValueError, "must not be negative"),
    ((256.0,), TypeError, "threads must be an int"),
    ((256, 0, "8"), TypeError, "registers must be an int"),
])
def test_occupancy_record_bad_input(args, exc, match):
    with pytest.raises(exc, match=match):
        tools.OccupancyRecord(_devdata(), *args)


def test_occupancy_record_block_register_unit():
    dd = _devdata(register_allocation_unit="block", registers=8192, thread_blocks_per_mp=8,
                  warps_per_mp=24)
    rec = tools.OccupancyRecord(dd, 64, 0, 10)
    assert rec.tb_per_mp == min(8, 24 // 2, 8192 // (4 * 16 * 10))
    with pytest.raises(ValueError, match="allocation unit"):
        tools.OccupancyRecord(_devdata(register_allocation_unit="sm"), 64)


def test_device_data_alignment_helpers():
    dd = _devdata()
    assert [dd.align_bytes(w) for w in (4, 8, 16)] == [64, 128, 128]
    assert dd.align(100) == 128 and dd.align(100, 8) == 128 and dd.align(64) == 64
    assert dd.align_words(4) == 16 and dd.align_words(8) == 16
    assert dd.align_dtype(17, 4) == 32
    assert dd.coalesce(17) == 32 and dd.coalesce(16) == 16
    assert [tools.DeviceData.make_valid_tex_channel_count(n) for n in (1, 2, 3, 4)] == [1, 2, 4, 4]
    with pytest.raises(ValueError):
        dd.align_bytes(2)
    with pytest.raises(ValueError):
        tools.DeviceData.make_valid_tex_channel_count(5)
    with pytest.raises(TypeError, match="driver.Device"):
        tools.DeviceData("gpu0")


def test_get_default_device_warns_and_reads_the_environment(monkeypatch):
    monkeypatch.setenv("CUDA_DEVICE", "not-a-number")
    with pytest.warns(DeprecationWarning, match="make_default_context"):
        with pytest.raises(drv.LogicError, match="CUDA_DEVICE='not-a-number'"):
            tools.get_default_device()


def test_cuda_device_file_is_read(monkeypatch, tmp_path):
    monkeypatch.delenv("CUDA_DEVICE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".cuda_device").write_text("x1\n")
    with pytest.raises(drv.LogicError, match="cuda_device='x1'"):
        tools._requested_device()
    (tmp_path / ".cuda_device").write_text(" 3\n")
    assert tools._requested_device() == 3


def test_page_locked_allocator_flags():
    assert tools.PageLockedAllocator().flags == 0
    assert tools.PageLockedMemoryPool(tools.PageLockedAllocator(1)).allocator.flags == 1
    assert tools.PageLockedMemoryPool(2).allocator.flags == 2
    assert tools.PageLockedMemoryPool().allocator.flags == 0
    with pytest.raises(ValueError, match="unknown host_alloc_flags"):
        tools.PageLockedAllocator(8)
    with pytest.raises(ValueError):
        tools.PageLockedAllocator(-1)
    with pytest.raises(TypeError, match="flags must be an int"):
        tools.PageLockedAllocator("portable")
    with pytest.raises(ValueError, match="negative"):
        tools.PageLockedAllocator()(-5)


def test_mark_cuda_test_marks_without_warning():
    def test_something():
        """doc"""

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        marked = tools.mark_cuda_test(test_something)
    assert marked.__name__ == "test_something" and marked.__doc__ == "doc"
    assert any(m.name == "cuda" for m in getattr(marked, "pytestmark", []))


def test_memoized_functions_are_listed():
    @tools.context_dependent_memoize
    def twice(x):
        return 2 * x

    assert twice in tools.context_dependent_memoized_functions
    with pytest.raises(AttributeError):
        tools.no_such_name  # noqa: B018


# ------------------------------------------------------------------ GPU

RNG = np.random.default_rng(1234)


@pytest.mark.gpu
@pytest.mark.parametrize("host", [
    RNG.standard_normal(1000).astype(np.float32),
    np.asfortranarray(RNG.standard_normal((33, 17))),
    (RNG.standard_normal(64) + 1j * RNG.standard_normal(64)).astype(np.complex64),
    RNG.integers(-2**40, 2**40, size=(5, 6, 7)),
])
def test_to_device_from_device_round_trip(ctx, host):
    d = drv.to_device(host)
    assert d.size == host.nbytes
    back = drv.from_device(d, host.shape, host.dtype, order="F" if host.flags.f_contiguous
                           and not host.flags.c_contiguous else "C")
    np.testing.assert_array_equal(back, host)
    like = drv.from_device_like(d, host)
    assert like.shape == host.shape and like.dtype == host.dtype
    np.testing.assert_array_equal(like, host)


@pytest.mark.gpu
def test_to_device_of_bytes_and_non_contiguous(ctx):
    raw = RNG.integers(0, 256, 100, dtype=np.uint8).tobytes()
    d = drv.to_device(raw)
    assert drv.from_device(d, (100,), np.uint8).tobytes() == raw
    strided = RNG.standard_normal((8, 8)).astype(np.float32)[:, ::2]
    d2 = drv.to_device(strided)
    np.testing.assert_array_equal(drv.from_device(d2, strided.shape, np.float32),
                                  np.ascontiguousarray(strided))
    empty = drv.to_device(np.zeros(0, np.float32))
    assert drv.from_device(empty, (0,), np.float32).shape == (0,)


@pytest.mark.gpu
def test_mem_alloc_like_and_address_range(ctx):
    a = RNG.standard_normal((40, 25)).astype(np.float64)
    d = drv.mem_alloc_like(a)
    assert d.size == a.nbytes
    drv.memcpy_htod(d, a)
    np.testing.assert_array_equal(drv.from_device_like(d, a), a)
    base, size = drv.mem_get_address_range(d)
    assert base == int(d) and size >= a.nbytes
    assert drv.mem_get_address_range(int(d) + 100) == (base, size)
    d.free()
    with pytest.raises(drv.LogicError):
        drv.mem_get_address_range(d)


@pytest.mark.gpu
def test_struct_of_pointers_as_in_pycudas_demo(ctx):
    # demo_struct.py: an int, padding and a pointer packed by struct, read by a kernel
    import struct

    from barecuda.compiler import SourceModule

    data = RNG.standard_normal(37).astype(np.float32)
    d = drv.to_device(data)
    rec = drv.mem_alloc(8 + np.uintp(0).nbytes)
    drv.memcpy_htod(rec, struct.pack("ixP", data.size, int(d)))
    mod = SourceModule("""
    struct Op { int n, pad; float *p; };
    __global__ void twice(Op *op) {
        for (int i = threadIdx.x; i < op->n; i += blockDim.x) op->p[i] *= 2;
    }""")
    mod.get_function("twice")(rec, block=(32, 1, 1), grid=(1, 1))
    np.testing.assert_allclose(drv.from_device(d, data.shape, data.dtype), 2 * data)


def _array1d(n, fmt=None):
    desc = drv.ArrayDescriptor()
    desc.width, desc.height = n, 0
    desc.format = fmt if fmt is not None else drv.array_format.FLOAT
    desc.num_channels = 1
    return drv.Array(desc)


@pytest.mark.gpu
def test_device_array_copies_against_numpy(ctx):
    n = 1000
    host = RNG.standard_normal(n).astype(np.float32)
    src = drv.to_device(host)
    a, b = _array1d(n), _array1d(n)
    drv.memcpy_dtoa(a, 0, src, host.nbytes)                      # whole
    drv.memcpy_atoa(b, 40, a, 0, 400)                            # 100 floats to b[10:110]
    drv.memcpy_dtoa(b, 0, src, 40)                               # b[0:10] = host[0:10]
    out = drv.mem_alloc(host.nbytes)
    drv.memcpy_atod(out, b, 0, 440)
    got = drv.from_device(out, (110,), np.float32)
    np.testing.assert_array_equal(got[:10], host[:10])
    np.testing.assert_array_equal(got[10:110], host[:100])
    back = np.empty(n, np.float32)
    drv.py_memcpy_atoh(back, a, 0)
    np.testing.assert_array_equal(back, host)
    upd = RNG.standard_normal(50).astype(np.float32)
    drv.py_memcpy_htoa(a, 200, upd)
    drv.memcpy_atoh(back, a, 0)
    want = host.copy()
    want[50:100] = upd
    np.testing.assert_array_equal(back, want)


@pytest.mark.gpu
@pytest.mark.parametrize("call,match", [
    (lambda a, d: drv.memcpy_dtoa(a, 3996, d, 8), "run past the destination array"),
    (lambda a, d: drv.memcpy_atod(drv.mem_alloc(8000), a, 0, 4004), "run past the source array"),
    (lambda a, d: drv.memcpy_atoa(a, 0, a, 4000, 4), "run past the source array"),
    (lambda a, d: drv.memcpy_dtoa(a, 0, drv.mem_alloc(16), 32), "device memory has only 16"),
    (lambda a, d: drv.memcpy_atod(drv.mem_alloc(16), a, 0, 32), "device memory has only 16"),
])
def test_device_array_copies_out_of_range(ctx, call, match):
    a, d = _array1d(1000), drv.mem_alloc(4000)
    with pytest.raises(ValueError, match=match):
        call(a, d)


@pytest.mark.gpu
def test_device_array_copies_on_freed_objects(ctx):
    a, d = _array1d(16), drv.mem_alloc(64)
    a.free()
    with pytest.raises(drv.LogicError):
        drv.memcpy_dtoa(a, 0, d, 64)
    b = _array1d(16)
    d.free()
    with pytest.raises(drv.LogicError):
        drv.memcpy_atod(d, b, 0, 64)


@pytest.mark.gpu
def test_as_buffer_of_managed_memory(ctx):
    m = drv.managed_zeros((256,), np.float32)
    ctx.synchronize()
    view = m.base.as_buffer(m.nbytes)
    vals = RNG.standard_normal(256).astype(np.float32)
    np.frombuffer(view, np.float32)[:] = vals
    np.testing.assert_array_equal(m, vals)
    part = np.frombuffer(m.base.as_buffer(40, offset=80), np.float32)
    np.testing.assert_array_equal(part, vals[20:30])
    with pytest.raises(BufferError, match="host view"):
        m.base.free()
    del view, part
    import gc

    gc.collect()
    with pytest.raises(ValueError, match="run past"):
        m.base.as_buffer(m.nbytes, offset=4)


@pytest.mark.gpu
def test_as_buffer_of_device_memory_is_refused(ctx):
    d = drv.mem_alloc(1024)
    with pytest.raises(drv.LogicError, match="device-only memory"):
        d.as_buffer(1024)
    with pytest.raises(ValueError, match="run past"):
        d.as_buffer(1025)
    d.free()
    with pytest.raises(drv.LogicError, match="freed"):
        d.as_buffer(8)
    kept = drv.mem_alloc(64)
    with pytest.raises(drv.LogicError, match="device-only memory"):
        _Holder(int(kept)).as_buffer(64)


@pytest.mark.gpu
def test_pointer_holder_as_buffer_of_host_memory(ctx):
    pinned = drv.pagelocked_empty(64, np.int32, mem_flags=drv.host_alloc_flags.DEVICEMAP)
    pinned[:] = RNG.integers(-1000, 1000, 64)
    h = _Holder(pinned.base.get_device_pointer())
    got = np.frombuffer(h.as_buffer(pinned.nbytes), np.int32)
    np.testing.assert_array_equal(got, pinned)
    managed = drv.managed_empty((32,), np.float64)
    ctx.synchronize()
    managed[:] = RNG.standard_normal(32)
    got = np.frombuffer(_Holder(int(managed.base)).as_buffer(8 * 32), np.float64)
    np.testing.assert_array_equal(got, managed)
    with pytest.raises(ValueError, match="run past"):
        _Holder(int(managed.base)).as_buffer(8 * 32 + 8)


@pytest.mark.gpu
def test_profiler_start_stop(ctx):
    drv.start_profiler()
    drv.stop_profiler()


@pytest.mark.gpu
def test_object_arrays_refused_by_array_copies(ctx):
    a, objs = _array1d(4), np.array([1, 2, 3, 4], dtype=object)
    with pytest.raises(TypeError, match="Python objects"):
        drv.memcpy_htoa(a, 0, objs)
    with pytest.raises(TypeError, match="Python objects"):
        drv.memcpy_atoh(objs, a, 0)
    with pytest.raises(TypeError, match="Python objects"):
        drv.memcpy_htod(drv.mem_alloc(64), objs)


@pytest.mark.gpu
def test_launch_with_numpy_int_dimensions_and_float_refused(ctx):
    from barecuda.compiler import SourceModule

    f = SourceModule("""
    __global__ void scale(float *x, float a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) x[i] *= a;
    }""").get_function("scale")
    n = 1000
    host = RNG.standard_normal(n).astype(np.float32)
    d = drv.to_device(host)
    f(d, np.float32(3), np.int32(n), block=(np.int64(128), 1, 1), grid=np.int32(n // 128 + 1))
    np.testing.assert_allclose(drv.from_device_like(d, host), 3 * host, rtol=1e-6)
    with pytest.raises(TypeError, match="float"):
        f(d, np.float32(3), np.int32(n), block=(128, 1, 1), grid=(n / 128 + 1, 1, 1))


@pytest.mark.gpu
def test_device_data_and_occupancy_on_the_device(ctx):
    dev = ctx.get_device()
    dd = tools.DeviceData()
    assert dd.max_threads == dev.get_attribute(drv.device_attribute.MAX_THREADS_PER_BLOCK)
    assert dd.warp_size == 32
    assert dd.warps_per_mp * 32 == dev.get_attribute(
        drv.device_attribute.MAX_THREADS_PER_MULTIPROCESSOR)
    assert dd.thread_blocks_per_mp >= 8
    rec = tools.OccupancyRecord(dd, 256, shared_mem=1024, registers=32)
    assert 0 < rec.occupancy <= 1 and rec.limited_by in ("device", "warps", "regs", "smem")
    assert tools.DeviceData(dev).warp_size == 32


@pytest.mark.gpu
def test_debug_memory_pool_reports(ctx):
    log = io.StringIO()
    pool = tools.DebugMemoryPool(interactive=False, logfile=log)
    a = pool.allocate(1000)
    b = pool(5000)
    host = RNG.standard_normal(250).astype(np.float32)
    drv.memcpy_htod(a, host)
    np.testing.assert_array_equal(drv.from_device_like(a, host), host)
    text = log.getvalue()
    assert "Allocation of size 1000" in text and "Allocation of size 5000" in text
    assert "test_debug_memory_pool_reports" in text
    assert pool.active_blocks == 2
    a.free()
    b.free()
    assert pool.active_blocks == 0
    with pytest.raises(ValueError):
        pool.allocate(-1)


@pytest.mark.gpu
def test_get_default_device(monkeypatch):
    monkeypatch.delenv("CUDA_DEVICE", raising=False)
    monkeypatch.setenv("HOME", "/nonexistent")
    with pytest.warns(DeprecationWarning):
        dev = tools.get_default_device()
    assert dev == drv.Device(0)


@pytest.mark.gpu
def test_page_locked_pool_with_allocator(ctx):
    pool = tools.PageLockedMemoryPool(tools.PageLockedAllocator(drv.host_alloc_flags.PORTABLE))
    a = pool.allocate((10, 3), np.float64)
    a[:] = RNG.standard_normal((10, 3))
    assert a.base.__class__ is tools.PooledHostAllocation
    assert pool.active_blocks == 1


class _Freeing:
    """An int-like whose __index__ first frees `obj`: re-entrancy into a call."""

    def __init__(self, obj, value=0):
        self.obj, self.value = obj, value

    def __index__(self):
        self.obj.free()
        return self.value


@pytest.mark.gpu
def test_device_array_copies_when_an_index_frees_the_array(ctx):
    d = drv.mem_alloc(64)
    a = _array1d(16)
    with pytest.raises(drv.LogicError, match="freed"):
        drv.memcpy_dtoa(a, _Freeing(a), d, 64)
    dest, src = _array1d(16), _array1d(16)
    with pytest.raises(drv.LogicError, match="freed"):
        drv.memcpy_atoa(dest, _Freeing(dest), src, 0, 16)
    with pytest.raises(drv.LogicError, match="freed"):
        drv.memcpy_atoa(_array1d(16), 0, src, _Freeing(src), 16)
    b = _array1d(16)
    with pytest.raises(drv.LogicError, match="freed"):
        drv.memcpy_htoa(b, _Freeing(b), np.zeros(4, np.float32))


@pytest.mark.gpu
def test_as_buffer_when_its_size_frees_the_allocation(ctx):
    m = drv.managed_zeros((16,), np.float32)
    ctx.synchronize()
    mem = m.base
    del m
    # freed before the driver is asked (unknown address) or after (re-checked)
    with pytest.raises(drv.LogicError, match="freed|not memory CUDA knows of"):
        mem.as_buffer(_Freeing(mem, 64))
