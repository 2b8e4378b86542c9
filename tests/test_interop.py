# SPDX-License-Identifier: MIT
"""Zero-copy exchange: DLPack capsules (src/dlpack.c), GPUArray.__dlpack__ /
__cuda_array_interface__, gpuarray.from_dlpack / asarray, and interop with CuPy,
PyTorch and Numba (GPU tests; skipped when the library is missing)."""

import ctypes
import gc
import sys
import threading
import weakref

import numpy as np
import pytest

from barecuda import _driver
from barecuda import driver as drv
from barecuda import gpuarray

FAKE_PTR = 0x7F00_0000_1000


class Owner:
    """Something to keep alive; weakref-able so its release can be observed."""


def _capsule_name(cap):
    return repr(cap).split('"')[1]


# ------------------------------------------------------------------ CPU: capsules

@pytest.mark.parametrize("versioned,name", [(True, "dltensor_versioned"), (False, "dltensor")])
def test_capsule_roundtrip_fake_pointer(versioned, name):
    owner = Owner()
    ref = weakref.ref(owner)
    cap = _driver._to_dlpack(owner, FAKE_PTR, (3, 4), None, 2, 32, 0, versioned)
    assert _capsule_name(cap) == name
    del owner
    assert ref() is not None  # the capsule keeps it
    ptr, shape, strides, typestr, dev_type, dev_id, keep, ro = _driver._from_dlpack(cap)
    assert (ptr, shape, strides, typestr, dev_type, dev_id, ro) == \
        (FAKE_PTR, (3, 4), (16, 4), "<f4", 2, 0, False)
    assert _capsule_name(cap) == "used_" + name
    del cap
    gc.collect()
    assert ref() is not None  # consumed: the keepalive owns the tensor now
    del keep
    gc.collect()
    assert ref() is None  # deleter ran


@pytest.mark.parametrize("versioned", [True, False])
def test_unconsumed_capsule_releases_owner_once(versioned):
    owner = Owner()
    ref = weakref.ref(owner)
    before = sys.getrefcount(owner)
    cap = _driver._to_dlpack(owner, FAKE_PTR, (5,), None, 0, 64, 0, versioned)
    assert sys.getrefcount(owner) == before + 1
    del cap
    assert sys.getrefcount(owner) == before
    del owner
    assert ref() is None


@pytest.mark.parametrize("code,bits,typestr", [
    (0, 32, "<i4"), (0, 64, "<i8"), (1, 8, "|u1"), (2, 16, "<f2"), (2, 64, "<f8"),
    (5, 64, "<c8"), (5, 128, "<c16"), (6, 8, "|b1"), (0, 8, "|i1")])
def test_dtypes(code, bits, typestr):
    cap = _driver._to_dlpack(Owner(), FAKE_PTR, (2, 3), (1, 2), code, bits, 1, True)
    ptr, shape, strides, ts, _, dev_id, keep, _ = _driver._from_dlpack(cap)
    isz = bits // 8
    assert (ts, shape, strides, dev_id) == (typestr, (2, 3), (isz, 2 * isz), 1)
    assert np.dtype(ts).itemsize == isz


def test_read_only_and_copied_flags():
    cap = _driver._to_dlpack(Owner(), FAKE_PTR, (2,), None, 2, 32, 0, True, read_only=True,
                             copied=True)
    assert _driver._from_dlpack(cap)[7] is True
    # IS_COPIED is bit 1 of flags, at byte 24 of DLManagedTensorVersioned
    cap = _driver._to_dlpack(Owner(), FAKE_PTR, (2,), None, 2, 32, 0, True, copied=True)
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    p = get(cap, b"dltensor_versioned")
    version = (ctypes.c_uint32 * 2).from_address(p)
    assert tuple(version) == (1, 0)
    assert ctypes.c_uint64.from_address(p + 24).value == 2


def test_zero_dim_and_empty():
    ptr, shape, strides, ts, *_ = _driver._from_dlpack(
        _driver._to_dlpack(Owner(), FAKE_PTR, (), None, 2, 64, 0, True))
    assert (shape, strides, ts) == ((), (), "<f8")
    ptr, shape, strides, ts, *_ = _driver._from_dlpack(
        _driver._to_dlpack(Owner(), 0, (0, 3), None, 2, 32, 0, False))
    assert (ptr, shape, strides) == (0, (0, 3), (12, 4))


def test_consumed_capsule_cannot_be_reused():
    cap = _driver._to_dlpack(Owner(), FAKE_PTR, (4,), None, 2, 32, 0, True)
    _driver._from_dlpack(cap)
    with pytest.raises(BufferError, match="already consumed"):
        _driver._from_dlpack(cap)


def test_from_dlpack_bad_input():
    with pytest.raises(TypeError, match="expected a DLPack capsule, not int"):
        _driver._from_dlpack(3)
    other = ctypes.pythonapi.PyCapsule_New
    other.restype, other.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                       ctypes.c_void_p]
    with pytest.raises(TypeError, match="not a DLPack capsule"):
        _driver._from_dlpack(other(FAKE_PTR, b"something_else", None))


def test_unsupported_dtype_leaves_capsule_unconsumed():
    owner = Owner()
    ref = weakref.ref(owner)
    cap = _driver._to_dlpack(owner, FAKE_PTR, (4,), None, 4, 16, 0, True)  # bfloat16
    del owner
    with pytest.raises(BufferError, match="dtype code 4"):
        _driver._from_dlpack(cap)
    assert _capsule_name(cap) == "dltensor_versioned"
    cap2 = _driver._to_dlpack(Owner(), FAKE_PTR, (4,), None, 2, 12, 0, False)
    with pytest.raises(BufferError, match="12-bit"):
        _driver._from_dlpack(cap2)
    del cap
    assert ref() is None


def test_to_dlpack_bad_arguments():
    with pytest.raises(ValueError, match="strides has 1 items, shape 2"):
        _driver._to_dlpack(Owner(), FAKE_PTR, (2, 2), (1,), 2, 32, 0, True)
    with pytest.raises(ValueError, match="bad dtype"):
        _driver._to_dlpack(Owner(), FAKE_PTR, (2,), None, 2, 0, 0, True)
    with pytest.raises(TypeError):
        _driver._to_dlpack(Owner(), FAKE_PTR, (2, "x"), None, 2, 32, 0, True)
    with pytest.raises(OverflowError):
        _driver._to_dlpack(Owner(), -1, (2,), None, 2, 32, 0, True)


@pytest.mark.parametrize("versioned", [True, False])
def test_deleter_called_from_a_thread_without_the_gil(versioned):
    owner = Owner()
    ref = weakref.ref(owner)
    cap = _driver._to_dlpack(owner, FAKE_PTR, (4,), None, 2, 32, 0, versioned)
    del owner
    name = b"dltensor_versioned" if versioned else b"dltensor"
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    setname = ctypes.pythonapi.PyCapsule_SetName
    setname.restype, setname.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
    p = get(cap, name)
    deleter_at = p + (16 if versioned else 56)   # after version+manager_ctx / DLTensor+ctx
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(ctypes.c_void_p.from_address(deleter_at).value)
    used = ctypes.create_string_buffer(b"used_" + name)   # must outlive the capsule
    assert setname(cap, used) == 0
    t = threading.Thread(target=fn, args=(p,))   # CFUNCTYPE calls release the GIL
    t.start()
    t.join()
    assert ref() is None
    del cap   # consumed: the destructor must not free again


@pytest.mark.parametrize("versioned", [True, False])
def test_numpy_consumes_our_capsule(versioned):
    a = np.arange(24, dtype=np.float64).reshape(4, 6)
    owner = Owner()
    ref = weakref.ref(owner)
    v = a[::2, 1::2]

    class Producer:
        def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
            return _driver._to_dlpack(owner, v.ctypes.data, v.shape,
                                      [s // 8 for s in v.strides], 2, 64, 0, versioned,
                                      device_type=1)

        def __dlpack_device__(self):
            return (1, 0)

    b = np.from_dlpack(Producer())
    del owner
    np.testing.assert_array_equal(b, v)
    assert b.ctypes.data == v.ctypes.data
    assert ref() is not None
    del b
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("dt", [np.float32, np.int64, np.complex64, np.bool_, np.uint8])
def test_we_consume_numpy_capsules(dt):
    a = np.ones((3, 5), dtype=dt)
    for cap in (a.__dlpack__(), a.__dlpack__(max_version=(1, 0)), a[:, ::2].T.__dlpack__()):
        ptr, shape, strides, ts, dev_type, dev_id, keep, _ = _driver._from_dlpack(cap)
        assert dev_type == 1 and ptr == a.ctypes.data
        assert np.dtype(ts) == np.dtype(dt)
    ptr, shape, strides, *_ = _driver._from_dlpack(a[:, ::2].T.__dlpack__())
    assert shape == (3, 3) and strides == (2 * a.itemsize, 5 * a.itemsize)


# ------------------------------------------------------------------ CPU: the Python layer

class FakeCAI:
    def __init__(self, **cai):
        self.__cuda_array_interface__ = dict(cai)


class FakeDLPack:
    """A CUDA producer of fake pointers; `old` mimics DLPack < 1.0 producers."""

    def __init__(self, owner, old=False):
        self.owner, self.old, self.calls = owner, old, []

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None, **kwargs):
        if self.old and kwargs:
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        self.calls.append((stream, kwargs.get("max_version")))
        return _driver._to_dlpack(self.owner, FAKE_PTR, (4, 2), (1, 4), 2, 32, 0,
                                  bool(kwargs.get("max_version")))


@pytest.mark.parametrize("old", [False, True])
def test_from_dlpack_fake_cuda_producer(old):
    owner = Owner()
    ref = weakref.ref(owner)
    prod = FakeDLPack(owner, old)
    del owner
    g = gpuarray.from_dlpack(prod)
    assert prod.calls == ([(1, None)] if old else [(1, (1, 0))])
    assert (g.ptr, g.shape, g.strides, g.dtype) == (FAKE_PTR, (4, 2), (4, 16), np.float32)
    assert not g.flags.c_contiguous and g.flags.f_contiguous
    del prod
    gc.collect()
    assert ref() is not None   # the view keeps the exported tensor
    del g
    gc.collect()
    assert ref() is None


def test_from_dlpack_rejects_host_and_non_dlpack():
    with pytest.raises(BufferError, match=r"device \(1, 0\).*kDLCUDA=2 needed"):
        gpuarray.from_dlpack(np.arange(3))
    with pytest.raises(TypeError, match="list does not support the DLPack protocol"):
        gpuarray.from_dlpack([1, 2])
    with pytest.raises(BufferError, match="DLPack device type 1"):
        gpuarray.from_dlpack(np.arange(3).__dlpack__())


def test_from_dlpack_takes_a_capsule():
    cap = _driver._to_dlpack(Owner(), FAKE_PTR, (6,), None, 0, 32, 0, False)
    g = gpuarray.from_dlpack(cap)
    assert (g.ptr, g.shape, g.dtype) == (FAKE_PTR, (6,), np.int32)


def test_asarray_cai_view():
    src = FakeCAI(shape=(3, 4), typestr="<f8", data=(FAKE_PTR, False), version=3,
                  strides=None, stream=None)
    g = gpuarray.asarray(src)
    assert (g.ptr, g.shape, g.strides, g.dtype) == (FAKE_PTR, (3, 4), (32, 8), np.float64)
    assert g.base is src
    src2 = FakeCAI(shape=(3,), typestr="<i4", data=(FAKE_PTR, False), version=2,
                   strides=(8,))
    g2 = gpuarray.asarray(src2)
    assert (g2.shape, g2.strides, g2.dtype) == ((3,), (8,), np.int32)
    assert gpuarray.asarray(g2) is g2


def test_asarray_cai_errors():
    with pytest.raises(TypeError, match="masked CUDA arrays"):
        gpuarray.asarray(FakeCAI(shape=(3,), typestr="<f4", data=(FAKE_PTR, False), version=3,
                                 mask=object()))
    with pytest.raises(TypeError, match="must have shape, typestr and data"):
        gpuarray.asarray(FakeCAI(shape=(3,), version=3))
    with pytest.raises(TypeError, match="does not support dtype"):
        gpuarray.asarray(FakeCAI(shape=(3,), typestr="|O8", data=(FAKE_PTR, False), version=3))


def test_elementwise_rejects_host_arrays_with_dlpack():
    from barecuda.elementwise import ElementwiseKernel
    k = ElementwiseKernel("float *x", "x[i] = 1", "ones")
    with pytest.raises(TypeError, match="argument 'x' of .* must be a GPUArray of float32, not ndarray"):
        k(np.zeros(3, np.float32))


def test_bench_section_is_registered():
    from barecuda import bench
    assert "interop" in bench.SECTIONS
    import barecuda.bench.interop as b
    assert callable(b.run)


# ------------------------------------------------------------------ GPU: our side

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.complex64, np.bool_, np.uint8]


def _random(rng, shape, dt):
    dt = np.dtype(dt)
    if dt == np.bool_:
        return rng.random(shape) > 0.5
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if dt.kind in "iu":
        return rng.integers(0, 100, shape).astype(dt)
    return rng.standard_normal(shape).astype(dt)


@pytest.mark.gpu
def test_gpuarray_protocols(ctx, rng):
    x = _random(rng, (6, 5), np.float32)
    g = gpuarray.to_gpu(x)
    assert g.__dlpack_device__() == (2, ctx.get_device().handle)
    cai = g.__cuda_array_interface__
    assert cai == {"shape": (6, 5), "typestr": "<f4", "data": (g.ptr, False), "version": 3,
                   "strides": (20, 4), "stream": None}
    # "stream": None promises finished data: exporting waits for the default stream
    busy = gpuarray.zeros(1 << 26, np.float32)
    for _ in range(20):
        busy += 1
    assert busy.__cuda_array_interface__["stream"] is None
    assert drv.Stream.from_handle(1).is_done()
    assert g.T.__cuda_array_interface__["strides"] == (4, 20)
    assert _capsule_name(g.__dlpack__()) == "dltensor"
    assert _capsule_name(g.__dlpack__(max_version=(1, 2))) == "dltensor_versioned"
    assert _capsule_name(g.__dlpack__(max_version=(0, 8))) == "dltensor"
    ptr = _driver._from_dlpack(g.__dlpack__(stream=-1))[0]
    assert ptr == g.ptr
    c = gpuarray.from_dlpack(_FromCapsule(g.__dlpack__(copy=True, max_version=(1, 0))))
    assert c.ptr != g.ptr
    np.testing.assert_array_equal(c.get(), x)
    with pytest.raises(BufferError, match="exporting to"):
        g.__dlpack__(dl_device=(1, 0))
    with pytest.raises(ValueError, match="stream 0 is ambiguous"):
        g.__dlpack__(stream=0)
    with pytest.raises(TypeError, match="stream must be an int"):
        g.__dlpack__(stream="s")
    # our own round trip: a view of the same memory
    v = gpuarray.from_dlpack(g.T)
    assert v.ptr == g.ptr and v.strides == g.T.strides
    np.testing.assert_array_equal(v.get(), x.T)


class _FromCapsule:
    def __init__(self, cap):
        self.cap = cap

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, **kwargs):
        return self.cap


@pytest.mark.gpu
def test_dlpack_stream_ordering_with_own_streams(ctx):
    """A consumer stream (non-blocking) waits for our default-stream work."""
    from barecuda.compiler import SourceModule
    mod = SourceModule(SPIN_SRC)
    spin, scale = mod.get_function("spin"), mod.get_function("scale")
    n = 1 << 20
    g = gpuarray.zeros(n, np.float32)
    s = drv.Stream(flags=drv.stream_flags.NON_BLOCKING)
    spin(np.int64(200_000_000), block=(1, 1, 1), grid=(1, 1))   # ~0.1 s on the legacy stream
    g.fill(3)
    cap = g.__dlpack__(stream=s.handle, max_version=(1, 0))
    scale(np.uintp(g.ptr), np.float32(2), np.int32(n), block=(256, 1, 1), grid=(n // 256, 1),
          stream=s)
    out = np.empty(n, np.float32)
    drv.memcpy_dtoh_async(out, g.ptr, s)
    s.synchronize()
    assert (out == 6).all()
    del cap


SPIN_SRC = r"""
extern "C" __global__ void spin(long long cycles)
{
    long long t = clock64();
    while (clock64() - t < cycles) { }
}
extern "C" __global__ void scale(float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}
"""


# ------------------------------------------------------------------ GPU: CuPy

@pytest.fixture
def cp(ctx):
    cupy = pytest.importorskip("cupy")
    yield cupy
    cupy.cuda.Device().synchronize()


@pytest.mark.gpu
@pytest.mark.parametrize("dt", DTYPES)
def test_cupy_roundtrip(cp, rng, dt):
    x = _random(rng, (8, 6), dt)
    c = cp.asarray(x)
    for view in (c, c[::2], c.T, c[1:, ::3]):
        host = cp.asnumpy(view)
        g = gpuarray.from_dlpack(view)
        assert g.ptr == view.data.ptr and g.shape == view.shape and g.strides == view.strides
        assert g.dtype.kind in ("bu" if dt == np.bool_ else np.dtype(dt).kind)
        np.testing.assert_array_equal(g.get(), host.astype(g.dtype))
        h = gpuarray.asarray(view)   # through CAI v3
        assert h.ptr == view.data.ptr and h.dtype == np.dtype(dt) and h.strides == view.strides
        np.testing.assert_array_equal(h.get(), host)
    g = gpuarray.to_gpu(x)
    for view, ref in ((g, x), (g[::2], x[::2]), (g.T, x.T), (g[1:, ::3], x[1:, ::3])):
        c1 = cp.from_dlpack(view)
        assert c1.data.ptr == view.ptr and c1.dtype == np.dtype(dt)
        np.testing.assert_array_equal(cp.asnumpy(c1), ref)
        c2 = cp.asarray(view)
        assert c2.data.ptr == view.ptr
        np.testing.assert_array_equal(cp.asnumpy(c2), ref)


@pytest.mark.gpu
def test_cupy_zero_copy_writes(cp, rng):
    x = rng.standard_normal(1000).astype(np.float32)
    c = cp.asarray(x)
    g = gpuarray.from_dlpack(c)
    c *= 2
    np.testing.assert_array_equal(g.get(), x * 2)
    g.fill(5)
    assert (cp.asnumpy(c) == 5).all()
    h = gpuarray.to_gpu(x)
    c2 = cp.from_dlpack(h)
    c2 += 1
    np.testing.assert_array_equal(h.get(), x + 1)
    h.fill(-1)
    assert (cp.asnumpy(cp.asarray(h)) == -1).all()


@pytest.mark.gpu
def test_cupy_lifetimes(cp):
    c = cp.arange(10, dtype=cp.float32)
    g = gpuarray.from_dlpack(c)
    del c
    gc.collect()
    np.testing.assert_array_equal(g.get(), np.arange(10, dtype=np.float32))
    h = gpuarray.arange(10, dtype=np.float32)
    ref = weakref.ref(h)
    c2 = cp.from_dlpack(h)
    del h
    gc.collect()
    assert ref() is not None
    np.testing.assert_array_equal(cp.asnumpy(c2), np.arange(10, dtype=np.float32))
    del c2
    gc.collect()
    assert ref() is None


def _cupy_spin(cp):
    return cp.RawKernel(SPIN_SRC, "spin")


@pytest.mark.gpu
def test_cupy_nonblocking_stream_ordering(cp):
    """Work on a CuPy non-blocking stream is finished before our default stream reads."""
    spin = _cupy_spin(cp)
    s = cp.cuda.Stream(non_blocking=True)
    n = 1 << 20
    with s:
        c = cp.zeros(n, dtype=cp.float32)
        spin((1,), (1,), (np.int64(200_000_000),))
        c.fill(7)
        g = gpuarray.from_dlpack(c)       # CuPy orders its stream before stream 1
        assert (g.get() == 7).all()
        c2 = cp.zeros(n, dtype=cp.float32)
        spin((1,), (1,), (np.int64(200_000_000),))
        c2.fill(9)
        h = gpuarray.asarray(c2)          # CAI v3 stream = s: our stream waits on it
        assert (h.get() == 9).all()
    s.synchronize()


@pytest.mark.gpu
def test_cupy_consumer_stream_waits_for_us(cp, ctx):
    from barecuda.compiler import SourceModule
    spin = SourceModule(SPIN_SRC).get_function("spin")
    n = 1 << 20
    g = gpuarray.zeros(n, np.float32)
    spin(np.int64(200_000_000), block=(1, 1, 1), grid=(1, 1))
    g.fill(4)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        c = cp.from_dlpack(g)     # CuPy passes s: we make it wait on our stream
        out = cp.asnumpy(c * 2, stream=s)
    assert (out == 8).all()


@pytest.mark.gpu
def test_kernel_launch_on_cupy_array(cp, rng):
    from barecuda.compiler import SourceModule
    scale = SourceModule(SPIN_SRC).get_function("scale")
    x = rng.standard_normal(1000).astype(np.float32)
    c = cp.asarray(x)
    scale(c, np.float32(3), np.int32(1000), block=(256, 1, 1), grid=(4, 1))
    np.testing.assert_allclose(cp.asnumpy(c), x * 3, rtol=1e-6)
    one = cp.asarray(np.array([5], np.int32))   # a 1-element int array is a pointer, not 5
    scale2 = SourceModule(r"""extern "C" __global__ void inc(int *p) { *p += 1; }""").get_function("inc")
    scale2(one, block=(1, 1, 1), grid=(1, 1))
    assert int(cp.asnumpy(one)[0]) == 6


@pytest.mark.gpu
def test_elementwise_and_reduction_on_cupy(cp, rng):
    from barecuda.elementwise import ElementwiseKernel
    from barecuda.reduction import ReductionKernel
    x = rng.standard_normal(5000).astype(np.float32)
    y = rng.standard_normal(5000).astype(np.float32)
    cx, cy = cp.asarray(x), cp.asarray(y)
    cz = cp.empty_like(cx)
    k = ElementwiseKernel("float a, float *x, float *y, float *z", "z[i] = a * x[i] + y[i]", "axpy")
    k(np.float32(2), cx, cy, cz)
    np.testing.assert_allclose(cp.asnumpy(cz), 2 * x + y, rtol=1e-5, atol=1e-6)
    gz = gpuarray.empty(5000, np.float32)
    k(np.float32(2), cx, gpuarray.to_gpu(y), gz)   # mixed
    np.testing.assert_allclose(gz.get(), 2 * x + y, rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="must be a GPUArray of float32, got one of float64"):
        k(np.float32(2), cx.astype(cp.float64), cy, cz)
    r = ReductionKernel(np.float32, "0", "a + b", "x[i] * y[i]", "float *x, float *y")
    np.testing.assert_allclose(r(cx, cy).get(), np.dot(x, y), rtol=1e-4, atol=1e-2)


@pytest.mark.gpu
def test_cupy_stream_interop(cp, rng):
    from barecuda.compiler import SourceModule
    from barecuda.elementwise import ElementwiseKernel
    scale = SourceModule(SPIN_SRC).get_function("scale")
    x = rng.standard_normal(1024).astype(np.float32)
    cs = cp.cuda.Stream(non_blocking=True)
    with cs:
        c = cp.asarray(x)
    cs.synchronize()
    scale(c, np.float32(2), np.int32(1024), block=(256, 1, 1), grid=(4, 1), stream=cs.ptr)
    if hasattr(cs, "__cuda_stream__"):
        scale(c, np.float32(2), np.int32(1024), block=(256, 1, 1), grid=(4, 1), stream=cs)
        factor = 4
    else:
        factor = 2
    k = ElementwiseKernel("float *x", "x[i] += 1", "inc1")
    k(c, stream=cs.ptr)
    cs.synchronize()
    np.testing.assert_allclose(cp.asnumpy(c), x * factor + 1, rtol=1e-6)
    ours = drv.Stream(flags=drv.stream_flags.NON_BLOCKING)
    # CuPy takes our Stream through the __cuda_stream__ protocol
    if hasattr(cp.cuda.Stream, "from_external"):
        ext = cp.cuda.Stream.from_external(ours)
    else:
        ext = cp.cuda.ExternalStream(ours.handle)
    g = gpuarray.to_gpu(x)
    with ext:
        c2 = cp.from_dlpack(g)
        c2 *= 3
    ours.synchronize()
    np.testing.assert_allclose(g.get(), x * 3, rtol=1e-6)


# ------------------------------------------------------------------ GPU: PyTorch

@pytest.fixture
def torch(ctx):
    t = pytest.importorskip("torch")
    if not t.cuda.is_available():
        pytest.skip("torch has no CUDA")
    yield t
    t.cuda.synchronize()


TORCH_DTYPES = {np.float32: "float32", np.float64: "float64", np.int32: "int32",
                np.int64: "int64", np.complex64: "complex64", np.bool_: "bool", np.uint8: "uint8"}


@pytest.mark.gpu
@pytest.mark.parametrize("dt", DTYPES)
def test_torch_roundtrip(torch, rng, dt):
    x = _random(rng, (8, 6), dt)
    t = torch.from_numpy(x).cuda()
    for view in (t, t[::2], t.T, t[1:, ::3]):
        host = view.cpu().numpy()
        g = gpuarray.from_dlpack(view)
        assert g.ptr == view.data_ptr() and g.dtype == np.dtype(dt)
        assert g.strides == tuple(s * view.element_size() for s in view.stride())
        np.testing.assert_array_equal(g.get(), host)
        h = gpuarray.asarray(view)
        assert h.ptr == view.data_ptr()
        np.testing.assert_array_equal(h.get(), host)
    g = gpuarray.to_gpu(x)
    for view, ref in ((g, x), (g[::2], x[::2]), (g.T, x.T), (g[1:, ::3], x[1:, ::3])):
        t1 = torch.from_dlpack(view)
        assert t1.data_ptr() == view.ptr and t1.dtype == getattr(torch, TORCH_DTYPES[dt])
        np.testing.assert_array_equal(t1.cpu().numpy(), ref)


@pytest.mark.gpu
def test_torch_zero_copy_writes(torch, rng):
    x = rng.standard_normal(1000).astype(np.float32)
    t = torch.from_numpy(x).cuda()
    g = gpuarray.from_dlpack(t)
    t.mul_(2)
    np.testing.assert_array_equal(g.get(), x * 2)
    g.fill(5)
    assert (t.cpu().numpy() == 5).all()
    h = gpuarray.to_gpu(x)
    t2 = torch.from_dlpack(h)
    t2.add_(1)
    np.testing.assert_array_equal(h.get(), x + 1)


@pytest.mark.gpu
def test_torch_side_stream_ordering(torch):
    n = 1 << 20
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        t = torch.zeros(n, device="cuda")
        torch.cuda._sleep(200_000_000)
        t.fill_(3)
        g = gpuarray.from_dlpack(t)   # torch orders its current stream before stream 1
        assert (g.get() == 3).all()


@pytest.mark.gpu
def test_torch_consumer_stream_waits_for_us(torch, ctx):
    from barecuda.compiler import SourceModule
    spin = SourceModule(SPIN_SRC).get_function("spin")
    n = 1 << 20
    g = gpuarray.zeros(n, np.float32)
    spin(np.int64(200_000_000), block=(1, 1, 1), grid=(1, 1))
    g.fill(4)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        t = torch.from_dlpack(g)      # torch passes s; we make s wait on our stream
        out = (t * 2).cpu().numpy()
    assert (out == 8).all()


@pytest.mark.gpu
def test_kernel_and_elementwise_on_torch(torch, rng):
    from barecuda.compiler import SourceModule
    from barecuda.elementwise import ElementwiseKernel
    from barecuda.reduction import ReductionKernel
    scale = SourceModule(SPIN_SRC).get_function("scale")
    x = rng.standard_normal(1000).astype(np.float32)
    t = torch.from_numpy(x).cuda()
    scale(t, np.float32(3), np.int32(1000), block=(256, 1, 1), grid=(4, 1))
    np.testing.assert_allclose(t.cpu().numpy(), x * 3, rtol=1e-6)
    one = torch.tensor([5], dtype=torch.int32, device="cuda")   # __index__ must not win
    inc = SourceModule(r"""extern "C" __global__ void inc(int *p) { *p += 1; }""").get_function("inc")
    inc(one, block=(1, 1, 1), grid=(1, 1))
    assert int(one.item()) == 6
    k = ElementwiseKernel("float *x, float *z", "z[i] = x[i] + 1", "plus1")
    z = torch.empty_like(t)
    k(t, z)
    np.testing.assert_allclose(z.cpu().numpy(), x * 3 + 1, rtol=1e-6)
    r = ReductionKernel(np.float32, "0", "a + b", "x[i]", "float *x")
    np.testing.assert_allclose(r(t).get(), (x * 3).sum(), rtol=1e-4, atol=1e-2)


# ------------------------------------------------------------------ GPU: Numba

@pytest.fixture
def nb_cuda(ctx):
    numba_cuda = pytest.importorskip("numba.cuda")
    try:
        available = numba_cuda.is_available()
    except Exception as exc:   # numba-cuda's own needs: NVVM (with the toolkit hidden)
        pytest.skip(f"numba.cuda cannot start here: {type(exc).__name__}: "
                    f"{str(exc).splitlines()[0]}")
    if not available:
        pytest.skip("numba.cuda is not available")
    from numba import config
    # the test kernels are tiny on purpose: no occupancy advice (warnings are errors here)
    old = config.CUDA_LOW_OCCUPANCY_WARNINGS
    config.CUDA_LOW_OCCUPANCY_WARNINGS = 0
    yield numba_cuda
    config.CUDA_LOW_OCCUPANCY_WARNINGS = old


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32, np.int64, np.complex64,
                                np.uint8])
def test_numba_roundtrip(nb_cuda, rng, dt):
    x = _random(rng, (8, 6), dt)
    d = nb_cuda.to_device(x)
    g = gpuarray.asarray(d)
    assert g.ptr == d.__cuda_array_interface__["data"][0]
    np.testing.assert_array_equal(g.get(), x)
    np.testing.assert_array_equal(gpuarray.asarray(d[::2]).get(), x[::2])
    # (numba's own d.T runs a numba kernel; numba-cuda 0.30 cannot compile kernels
    # with NumPy 2.5, so the strided views here are plain slices)
    np.testing.assert_array_equal(gpuarray.asarray(d[:, ::-2]).get(), x[:, ::-2])
    h = gpuarray.to_gpu(x)
    for view, ref in ((h, x), (h[::2], x[::2]), (h.T, x.T)):
        nd = nb_cuda.as_cuda_array(view)
        np.testing.assert_array_equal(nd.copy_to_host(), ref)


@pytest.mark.gpu
def test_numba_zero_copy_and_kernel(nb_cuda, rng):
    x = rng.standard_normal(256).astype(np.float32)
    h = gpuarray.to_gpu(x)
    # numba writes into our memory through the interface (no copy) ...
    nb_cuda.as_cuda_array(h).copy_to_device(x * 2)
    nb_cuda.synchronize()
    np.testing.assert_array_equal(h.get(), x * 2)
    # ... and our kernels take numba's arrays as arguments
    from barecuda.compiler import SourceModule
    add = SourceModule("__global__ void add1(float *a, int n)"
                       "{ int i = threadIdx.x; if (i < n) a[i] += 1.0f; }").get_function("add1")
    nd = nb_cuda.to_device(x)
    add(nd, np.int32(256), block=(256, 1, 1))
    drv.Context.synchronize()
    np.testing.assert_array_equal(nd.copy_to_host(), x + 1)
    d = nb_cuda.to_device(x)
    g = gpuarray.asarray(d)
    g.fill(1)
    assert (d.copy_to_host() == 1).all()
