# SPDX-License-Identifier: MIT
"""CUDA arrays: descriptors, Array, host/device <-> array copies, np_to_array & co.

CPU tests cover everything that is checked before the driver is touched
(descriptor fields, dtype -> format mapping, shapes and orders of the helpers);
GPU tests round-trip random data through arrays of every kind.
"""

import gc
import inspect
import types

import numpy as np
import pytest

from barecuda import driver as drv

AF = drv.array_format
FL = drv.array3d_flags

DTYPES = [np.uint8, np.uint16, np.uint32, np.int8, np.int16, np.int32, np.float16, np.float32]
FORMAT_OF = {
    np.uint8: "UNSIGNED_INT8", np.uint16: "UNSIGNED_INT16", np.uint32: "UNSIGNED_INT32",
    np.int8: "SIGNED_INT8", np.int16: "SIGNED_INT16", np.int32: "SIGNED_INT32",
    np.float16: "HALF", np.float32: "FLOAT",
}


def random_data(rng, shape, dtype):
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dt)


# ------------------------------------------------------------------ CPU tests

def test_descriptor_defaults_and_fields():
    d = drv.ArrayDescriptor()
    assert (d.width, d.height, d.format, d.num_channels) == (0, 0, None, 1)
    d.width, d.height, d.format, d.num_channels = 16, 8, AF.FLOAT, 4
    assert d.format is AF.FLOAT and d.num_channels == 4
    assert d == drv.ArrayDescriptor(width=16, height=8, format=AF.FLOAT, num_channels=4)
    assert d != drv.ArrayDescriptor(width=16, height=9, format=AF.FLOAT, num_channels=4)
    assert repr(d) == ("ArrayDescriptor(width=16, height=8, format=array_format.FLOAT, "
                       "num_channels=4)")
    assert not hasattr(d, "depth")


def test_descriptor3d_fields():
    d = drv.ArrayDescriptor3D(width=4, height=3, depth=2, format=AF.HALF, num_channels=2,
                              flags=FL.LAYERED | FL.SURFACE_LDST)
    assert (d.width, d.height, d.depth, d.num_channels) == (4, 3, 2, 2)
    assert d.format is AF.HALF
    assert d.flags == FL.LAYERED | FL.SURFACE_LDST
    assert isinstance(d.flags, FL)
    assert "depth=2" in repr(d) and "flags=0x3" in repr(d)
    d.format = None
    assert d.format is None
    assert drv.ArrayDescriptor3D() != drv.ArrayDescriptor()  # different types


@pytest.mark.parametrize("field,value,exc,msg", [
    ("width", -1, ValueError, "width must not be negative"),
    ("width", 2.0, TypeError, "width must be an int"),
    ("height", 1 << 70, ValueError, "height is too large"),
    ("num_channels", 3, ValueError, "num_channels must be 1, 2 or 4"),
    ("num_channels", 0, ValueError, "num_channels must be 1, 2 or 4"),
    ("format", 0x55, ValueError, "unsupported array format 85"),
    ("format", int(AF.NV12), ValueError, "unsupported array format"),
    ("format", "FLOAT", TypeError, "format must be an int"),
])
def test_descriptor_rejects_bad_values(field, value, exc, msg):
    for d in (drv.ArrayDescriptor(), drv.ArrayDescriptor3D()):
        with pytest.raises(exc, match=msg):
            setattr(d, field, value)
    with pytest.raises(exc, match=msg):
        drv.ArrayDescriptor(**{field: value})


def test_descriptor3d_rejects_bad_flags_and_delete():
    d = drv.ArrayDescriptor3D()
    with pytest.raises(ValueError, match="flags: unknown bits"):
        d.flags = int(FL.SPARSE)
    with pytest.raises(ValueError, match="depth must not be negative"):
        d.depth = -3
    with pytest.raises(AttributeError, match="cannot delete width"):
        del d.width
    with pytest.raises(TypeError):
        drv.ArrayDescriptor(1, 2, 3, 4, 5)


def _desc3(**kw):
    base = dict(width=8, height=8, depth=0, format=AF.FLOAT, num_channels=1, flags=0)
    base.update(kw)
    return drv.ArrayDescriptor3D(**base)


@pytest.mark.parametrize("desc,msg", [
    (lambda: drv.ArrayDescriptor(width=8, height=8), "format is not set"),
    (lambda: drv.ArrayDescriptor(width=0, height=8, format=AF.FLOAT), "width must be at least 1"),
    (lambda: _desc3(width=0), "width must be at least 1"),
    (lambda: _desc3(flags=FL.LAYERED), "LAYERED array needs depth >= 1"),
    (lambda: _desc3(height=0, depth=4), "3D array needs height >= 1"),
    (lambda: _desc3(height=4, depth=6, flags=FL.CUBEMAP), "CUBEMAP array needs width == height"),
    (lambda: _desc3(depth=5, flags=FL.CUBEMAP), "CUBEMAP array needs"),
    (lambda: _desc3(depth=12, flags=FL.CUBEMAP), "CUBEMAP array needs"),
])
def test_array_rejects_bad_descriptor_before_the_driver(desc, msg):
    with pytest.raises(ValueError, match=msg):
        drv.Array(desc())


def test_array_rejects_non_descriptor():
    with pytest.raises(TypeError, match="Array\\(\\) takes an ArrayDescriptor"):
        drv.Array((8, 8))
    with pytest.raises(TypeError):
        drv.Array()


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtype_to_array_format(dtype):
    fmt = drv.dtype_to_array_format(dtype)
    assert fmt is getattr(AF, FORMAT_OF[dtype])
    assert drv.dtype_to_array_format(np.dtype(dtype).newbyteorder(">")) is fmt


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_dtype_to_array_format_refuses_doubles(dtype):
    with pytest.raises(TypeError, match="hold no doubles.*allow_double_hack=True"):
        drv.dtype_to_array_format(dtype)


@pytest.mark.parametrize("dtype", [np.int64, np.uint64, np.bool_, object, "U3"])
def test_dtype_to_array_format_refuses_others(dtype):
    with pytest.raises(TypeError, match="no CUDA array format holds dtype"):
        drv.dtype_to_array_format(dtype)


def test_np_to_array_rejections_before_the_driver():
    a = np.zeros((4, 5), np.float32)
    with pytest.raises(ValueError, match="order must be 'C' or 'F'"):
        drv.np_to_array(a, "X")
    with pytest.raises(TypeError, match="hold no doubles"):
        drv.np_to_array(a.astype(np.float64))
    with pytest.raises(ValueError, match="1, 2 or 3 dimensions.*num_channels"):
        drv.np_to_array(np.zeros((2, 3, 4, 5), np.float32))
    with pytest.raises(ValueError, match="1, 2 or 3 dimensions"):
        drv.np_to_array(np.float32(1.0))
    with pytest.raises(ValueError, match="empty shape"):
        drv.np_to_array(np.zeros((0, 5), np.float32))
    with pytest.raises(ValueError, match="layered data must be"):
        drv.np_to_array(np.zeros(5, np.float32), layered=True)
    with pytest.raises(ValueError, match="channel axis of shape \\(4, 5\\) must have 2"):
        drv.np_to_array(a, num_channels=2)
    with pytest.raises(ValueError, match="num_channels must be 1, 2 or 4"):
        drv.np_to_array(np.zeros((4, 3), np.float32), num_channels=3)
    with pytest.raises(ValueError, match="cannot be combined with dtype complex64"):
        drv.np_to_array(np.zeros((4, 2), np.complex64), num_channels=2)
    with pytest.raises(TypeError, match="no CUDA array format"):
        drv.np_to_array(np.zeros((4, 2), np.int64))


def test_matrix_and_multichannel_rejections():
    with pytest.raises(ValueError, match="expected a 2D matrix"):
        drv.matrix_to_array(np.zeros((2, 3, 4), np.float32))
    with pytest.raises(ValueError, match="order must be"):
        drv.matrix_to_array(np.zeros((2, 3), np.float32), "Z")
    with pytest.raises(TypeError, match="hold no doubles"):
        drv.matrix_to_array(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="expected a 3D array"):
        drv.make_multichannel_2d_array(np.zeros((4, 4), np.float32), "C")
    with pytest.raises(ValueError, match="num_channels must be 1, 2 or 4"):
        drv.make_multichannel_2d_array(np.zeros((4, 4, 3), np.float32), "C")
    with pytest.raises(ValueError, match="num_channels must be 1, 2 or 4"):
        drv.make_multichannel_2d_array(np.zeros((3, 4, 4), np.float32), "F")


def test_gpuarray_to_array_checks_layout_before_the_driver():
    fake = types.SimpleNamespace(gpudata=0, shape=(4, 5), dtype=np.float32, strides=(40, 4))
    with pytest.raises(ValueError, match="must be C-contiguous for order 'C'"):
        drv.gpuarray_to_array(fake)
    fake.strides = (20, 4)  # C order: fine for "C", not for "F"
    with pytest.raises(ValueError, match="must be Fortran-contiguous for order 'F'"):
        drv.gpuarray_to_array(fake, "F")
    fake.dtype = np.float64
    with pytest.raises(TypeError, match="hold no doubles"):
        drv.gpuarray_to_array(types.SimpleNamespace(gpudata=0, shape=(4, 5), dtype=np.float64))


def test_copies_reject_non_arrays():
    buf = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match="expected a barecuda.driver.Array, not numpy.ndarray"):
        drv.memcpy_htoa(buf, 0, buf)
    with pytest.raises(TypeError, match="expected a barecuda.driver.Array, not int"):
        drv.memcpy_atoh(buf, 5, 0)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        drv.memcpy_htoa(buf, 0)


def test_signatures():
    assert str(inspect.signature(drv.memcpy_htoa)) == "(ary, index, src)"
    assert str(inspect.signature(drv.memcpy_atoh)) == "(dest, ary, index)"
    assert str(inspect.signature(drv.Array)) == "(descriptor)"
    assert "src, pitch=None" in str(inspect.signature(drv.Array.set))
    assert "num_channels=1" in str(inspect.signature(drv.ArrayDescriptor))
    assert "flags=0" in str(inspect.signature(drv.ArrayDescriptor3D))
    # defined in barecuda._core.cuda_arrays, shown (reprs, pickles, the API reference)
    # as the driver face's, as are the C functions
    assert drv.np_to_array.__module__ == "barecuda.driver"
    assert drv.mem_alloc.__module__ == drv.memcpy_htoa.__module__ == "barecuda.driver"


# ------------------------------------------------------------------ GPU tests

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(37,), (13, 37), (5, 13, 37)])
def test_np_to_array_round_trip(ctx, rng, dtype, shape):
    a = random_data(rng, shape, dtype)
    ary = drv.np_to_array(a)
    assert ary.shape == shape and ary.dtype == np.dtype(dtype)
    assert ary.nbytes == a.nbytes
    back = ary.get()
    assert back.dtype == np.dtype(dtype) and back.shape == shape
    np.testing.assert_array_equal(back, a)
    ary.free()


@pytest.mark.gpu
def test_array_descriptors_round_trip(ctx):
    d2 = drv.ArrayDescriptor(width=33, height=7, format=AF.UNSIGNED_INT16, num_channels=2)
    ary = drv.Array(d2)
    assert ary.get_descriptor() == d2
    d3 = ary.get_descriptor_3d()
    assert (d3.width, d3.height, d3.depth, d3.flags) == (33, 7, 0, 0)
    assert ary.shape == (7, 33, 2) and ary.dtype == np.uint16
    assert isinstance(ary.handle, int) and ary.handle != 0
    assert ary.context is not None and ary.users == 0

    one_d = drv.Array(drv.ArrayDescriptor(width=100, format=AF.FLOAT))
    assert one_d.shape == (100,)
    d = drv.ArrayDescriptor3D(width=16, height=8, depth=3, format=AF.FLOAT, num_channels=4,
                              flags=FL.LAYERED | FL.SURFACE_LDST)
    layered = drv.Array(d)
    assert layered.get_descriptor_3d() == d
    assert layered.shape == (3, 8, 16, 4)
    with pytest.raises(drv.LogicError, match="3D or layered.*get_descriptor_3d"):
        layered.get_descriptor()
    cube = drv.Array(_desc3(width=8, height=8, depth=6, flags=FL.CUBEMAP))
    assert cube.get_descriptor_3d().flags == FL.CUBEMAP
    for x in (ary, one_d, layered, cube):
        x.free()


@pytest.mark.gpu
def test_array_free_is_idempotent_and_final(ctx):
    ary = drv.Array(drv.ArrayDescriptor(width=8, height=8, format=AF.FLOAT))
    ary.free()
    ary.free()
    assert ary.freed
    for call in (lambda: ary.handle, ary.get_descriptor, ary.get_descriptor_3d, ary.get,
                 lambda: ary.set(np.zeros((8, 8), np.float32)),
                 lambda: drv.memcpy_htoa(ary, 0, b"abcd")):
        with pytest.raises(drv.LogicError, match="this Array was freed"):
            call()
    assert "freed" in repr(ary)
    with drv.Array(drv.ArrayDescriptor(width=8, format=AF.FLOAT)) as tmp:
        assert not tmp.freed
    assert tmp.freed


@pytest.mark.gpu
@pytest.mark.parametrize("nc", [1, 2, 4])
@pytest.mark.parametrize("shape", [(17,), (9, 17), (3, 9, 17)])
def test_multichannel_round_trip(ctx, rng, nc, shape):
    a = rng.standard_normal(shape + (nc,)).astype(np.float32)
    ary = drv.np_to_array(a, num_channels=nc)
    assert ary.get_descriptor_3d().num_channels == nc
    expect_shape = shape + ((nc,) if nc > 1 else ())
    np.testing.assert_array_equal(ary.get(), a.reshape(expect_shape))


@pytest.mark.gpu
def test_order_f_reads_the_transpose(ctx, rng):
    a = rng.standard_normal((6, 11)).astype(np.float32)
    ary = drv.np_to_array(a, "F")
    assert ary.get_descriptor().width == 6 and ary.get_descriptor().height == 11
    np.testing.assert_array_equal(ary.get(), a.T)
    m = drv.matrix_to_array(np.asfortranarray(a), "F")
    np.testing.assert_array_equal(m.get(), a.T)
    m2 = drv.matrix_to_array(a, "C")
    np.testing.assert_array_equal(m2.get(), a)
    v = rng.standard_normal((5, 7, 3)).astype(np.float32)
    np.testing.assert_array_equal(drv.np_to_array(v, "F").get(), v.T)


@pytest.mark.gpu
@pytest.mark.parametrize("order", ["C", "F"])
def test_make_multichannel_2d_array(ctx, rng, order):
    img = rng.integers(0, 255, size=(9, 13, 4), dtype=np.uint8)  # (h, w, c)
    src = img if order == "C" else np.ascontiguousarray(img.transpose(2, 1, 0))  # (c, w, h)
    ary = drv.make_multichannel_2d_array(src, order)
    d = ary.get_descriptor()
    assert (d.width, d.height, d.num_channels, d.format) == (13, 9, 4, AF.UNSIGNED_INT8)
    np.testing.assert_array_equal(ary.get(), img)


@pytest.mark.gpu
def test_layered_arrays_round_trip(ctx, rng):
    a1 = rng.standard_normal((4, 29)).astype(np.float32)  # 1D layered: (layers, width)
    l1 = drv.np_to_array(a1, layered=True)
    d = l1.get_descriptor_3d()
    assert (d.width, d.height, d.depth, d.flags) == (29, 0, 4, FL.LAYERED)
    np.testing.assert_array_equal(l1.get(), a1)
    a2 = rng.integers(-100, 100, size=(3, 7, 29), dtype=np.int16)
    l2 = drv.np_to_array(a2, layered=True, allow_surface_bind=True)
    assert l2.get_descriptor_3d().flags == FL.LAYERED | FL.SURFACE_LDST
    np.testing.assert_array_equal(l2.get(), a2)


@pytest.mark.gpu
def test_surface_flag_keeps_2d_arrays_2d(ctx, rng):
    a = rng.standard_normal((7, 9)).astype(np.float32)
    ary = drv.np_to_array(a, allow_surface_bind=True)
    d = ary.get_descriptor_3d()
    assert (d.width, d.height, d.depth, d.flags) == (9, 7, 0, FL.SURFACE_LDST)
    np.testing.assert_array_equal(ary.get(), a)
    legacy = drv.np_to_array(a, "C", allowSurfaceBind=True)  # PyCUDA's keyword
    assert legacy.get_descriptor_3d().flags == FL.SURFACE_LDST


@pytest.mark.gpu
def test_double_and_complex_hacks(ctx, rng):
    a = rng.standard_normal((5, 6))
    ary = drv.np_to_array(a, allow_double_hack=True)
    d = ary.get_descriptor()
    assert (d.format, d.num_channels, d.width) == (AF.SIGNED_INT32, 2, 6)
    np.testing.assert_array_equal(ary.get().view(np.float64).reshape(5, 6), a)
    m = drv.matrix_to_array(a, "C", allow_double_hack=True)
    np.testing.assert_array_equal(m.get().view(np.float64).reshape(5, 6), a)
    c = (rng.standard_normal((5, 6)) + 1j * rng.standard_normal((5, 6))).astype(np.complex64)
    ca = drv.np_to_array(c)
    assert (ca.get_descriptor().format, ca.get_descriptor().num_channels) == (AF.FLOAT, 2)
    np.testing.assert_array_equal(ca.get().view(np.complex64).reshape(5, 6), c)


@pytest.mark.gpu
def test_set_and_get_check_sizes(ctx, rng):
    ary = drv.Array(drv.ArrayDescriptor(width=8, height=4, format=AF.FLOAT))
    with pytest.raises(ValueError, match="source holds 124 bytes, the array 128"):
        ary.set(np.zeros(31, np.float32))
    with pytest.raises(ValueError, match="must be C-contiguous"):
        ary.set(np.zeros((8, 8), np.float32)[:, ::2])
    with pytest.raises(TypeError, match="pitch applies to device memory only"):
        ary.set(np.zeros((4, 8), np.float32), pitch=64)
    with pytest.raises(ValueError, match="out holds 64 bytes, the array 128"):
        ary.get(np.zeros(16, np.float32))
    with pytest.raises(ValueError, match="writable C-contiguous"):
        ary.get(bytes(128))
    a = rng.standard_normal((4, 8)).astype(np.float32)
    ary.set(a.tobytes())
    out = np.empty((4, 8), np.float32)
    assert ary.get(out) is out
    np.testing.assert_array_equal(out, a)


@pytest.mark.gpu
def test_set_from_device_memory(ctx, rng):
    a = rng.standard_normal((6, 10)).astype(np.float32)
    dev = drv.mem_alloc(a.nbytes)
    drv.memcpy_htod(dev, a)
    ary = drv.Array(drv.ArrayDescriptor(width=10, height=6, format=AF.FLOAT))
    ary.set(dev)
    np.testing.assert_array_equal(ary.get(), a)
    # pitched source: rows 64 bytes apart
    padded = np.zeros((6, 16), np.float32)
    padded[:, :10] = a[::-1]
    pdev = drv.mem_alloc(padded.nbytes)
    drv.memcpy_htod(pdev, padded)
    ary.set(pdev, pitch=64)
    np.testing.assert_array_equal(ary.get(), a[::-1])
    with pytest.raises(ValueError, match="pitch 16 is smaller than a row of the array \\(40"):
        ary.set(pdev, pitch=16)
    small = drv.mem_alloc(100)
    with pytest.raises(ValueError, match="device source holds 100 bytes, the copy needs 240"):
        ary.set(small)
    dev.free()
    with pytest.raises(drv.LogicError, match="DeviceAllocation was freed"):
        ary.set(dev)


class _FakeGPUArray:
    def __init__(self, alloc, shape, dtype, strides=None):
        self.gpudata, self.shape, self.dtype = alloc, shape, np.dtype(dtype)
        if strides is not None:
            self.strides = strides


@pytest.mark.gpu
def test_gpuarray_to_array(ctx, rng):
    a = rng.integers(0, 60000, size=(3, 5, 7), dtype=np.uint16)
    dev = drv.mem_alloc(a.nbytes)
    drv.memcpy_htod(dev, a)
    ary = drv.gpuarray_to_array(_FakeGPUArray(dev, a.shape, a.dtype, a.strides))
    assert ary.get_descriptor_3d().depth == 3
    np.testing.assert_array_equal(ary.get(), a)
    # the same memory read as a Fortran-ordered (7, 5, 3) array
    f = _FakeGPUArray(dev, (7, 5, 3), a.dtype, (2, 14, 70))
    np.testing.assert_array_equal(drv.gpuarray_to_array(f, "F").get(), a)
    s = drv.gpuarray_to_array(_FakeGPUArray(dev, (15, 7), a.dtype), allow_surface_bind=True)
    assert s.get_descriptor_3d().flags == FL.SURFACE_LDST
    np.testing.assert_array_equal(s.get(), a.reshape(15, 7))


@pytest.mark.gpu
def test_gpuarray_to_array_with_real_gpuarray(ctx, rng):
    gpuarray = pytest.importorskip("barecuda.gpuarray")
    a = rng.standard_normal((12, 20)).astype(np.float32)
    g = gpuarray.to_gpu(a)
    np.testing.assert_array_equal(drv.gpuarray_to_array(g).get(), a)


@pytest.mark.gpu
def test_memcpy_htoa_atoh(ctx, rng):
    a = rng.standard_normal(64).astype(np.float32)
    ary = drv.Array(drv.ArrayDescriptor(width=64, format=AF.FLOAT))
    drv.memcpy_htoa(ary, 0, a)
    out = np.empty_like(a)
    drv.memcpy_atoh(out, ary, 0)
    np.testing.assert_array_equal(out, a)
    part = np.empty(8, np.float32)
    drv.memcpy_atoh(part, ary, 40 * 4)
    np.testing.assert_array_equal(part, a[40:48])
    drv.memcpy_htoa(ary, 60 * 4, np.arange(4, dtype=np.float32))
    np.testing.assert_array_equal(ary.get()[60:], np.arange(4, dtype=np.float32))
    with pytest.raises(ValueError, match="8 bytes at offset 252 run past the array's 256"):
        drv.memcpy_htoa(ary, 252, np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="run past"):
        drv.memcpy_atoh(np.empty(65, np.float32), ary, 0)
    with pytest.raises(ValueError, match="index must not be negative"):
        drv.memcpy_atoh(out, ary, -4)
    with pytest.raises(TypeError, match="dest must be a writable contiguous host buffer, not "
                                        "bytes"):
        drv.memcpy_atoh(b"readonly" * 32, ary, 0)
    with pytest.raises(TypeError, match="src must be a contiguous host buffer, not list"):
        drv.memcpy_htoa(ary, 0, [1.0, 2.0])
    with pytest.raises(ValueError, match="src must be a contiguous host buffer; this "
                                         "numpy.ndarray is not contiguous"):
        drv.memcpy_htoa(ary, 0, np.zeros((4, 4), np.float32)[:, ::2])


@pytest.mark.gpu
def test_array_keeps_its_context_and_is_collected(ctx):
    import weakref

    ary = drv.Array(drv.ArrayDescriptor(width=8, format=AF.FLOAT))
    assert ary.context.handle == ctx.handle
    ref = weakref.ref(ary)
    del ary
    gc.collect()
    assert ref() is None
