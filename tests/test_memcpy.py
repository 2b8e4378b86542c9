# SPDX-License-Identifier: MIT
"""Copies and fills: memset_*, memcpy_htod/dtoh/dtod (+ async), Memcpy2D/3D/3DPeer,
peer copies, and the C-loop copy floor.

CPU tests cover the checks made before the driver is touched (argument types,
contiguity, writability, sizes against host buffers, copy-descriptor regions);
GPU tests move random data and compare with NumPy.
"""

import gc
import weakref

import numpy as np
import pytest

from barecuda import _driver
from barecuda import driver as drv

# ------------------------------------------------------------------ CPU tests


def test_host_side_checks_before_driver():
    noncontig = np.zeros((4, 4))[:, ::2]
    with pytest.raises(ValueError, match=r"memcpy_htod\(\): src is a non-contiguous array"):
        drv.memcpy_htod(0, noncontig)
    with pytest.raises(ValueError, match=r"memcpy_dtoh\(\): dest is a non-contiguous array"):
        drv.memcpy_dtoh(noncontig, 0)
    with pytest.raises(ValueError, match=r"memcpy_htod_async\(\): src is a non-contiguous"):
        drv.memcpy_htod_async(0, noncontig)
    ro = np.zeros(4)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"memcpy_dtoh\(\): dest is a read-only array"):
        drv.memcpy_dtoh(ro, 0)
    with pytest.raises(ValueError, match=r"memcpy_dtoh\(\): dest is read-only"):
        drv.memcpy_dtoh(b"abcd", 0)
    with pytest.raises(ValueError, match="not a contiguous buffer"):
        drv.memcpy_htod(0, memoryview(bytearray(8))[::2])
    with pytest.raises(TypeError, match=r"memcpy_htod\(\): src must be host memory"):
        drv.memcpy_htod(0, [1, 2, 3])
    with pytest.raises(TypeError, match="src must be host memory"):
        drv.memcpy_htod(0, 5)


@pytest.mark.parametrize("bad, exc, msg", [
    (1.5, TypeError, "expected device memory, not float"),
    (True, TypeError, "expected device memory, not bool"),
    ("0x10", TypeError, "expected device memory"),
    (-1, ValueError, "device pointer out of range"),
    (2**64, ValueError, "device pointer out of range"),
])
def test_device_side_checks_before_driver(bad, exc, msg):
    with pytest.raises(exc, match=msg):
        drv.memcpy_htod(bad, b"x")
    with pytest.raises(exc, match=msg):
        drv.memcpy_dtoh(bytearray(1), bad)
    with pytest.raises(exc, match=msg):
        drv.memset_d8(bad, 0, 1)


def test_argument_counts_and_names():
    with pytest.raises(TypeError, match=r"memcpy_htod\(\) missing required argument 'src'"):
        drv.memcpy_htod(0)
    with pytest.raises(TypeError, match="takes at most 2 arguments"):
        drv.memcpy_htod(0, b"", 1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'stream'"):
        drv.memcpy_htod(0, b"", stream=None)
    with pytest.raises(TypeError, match="multiple values for argument 'dest'"):
        drv.memcpy_htod(0, b"", dest=0)
    with pytest.raises(TypeError, match="stream must be a Stream"):
        drv.memcpy_htod_async(0, b"x", "s")
    with pytest.raises(ValueError, match="size must not be negative"):
        drv.memcpy_dtod(0, 0, -1)
    with pytest.raises(TypeError):
        drv.memcpy_dtod(0, 0, 1.0)


def test_memset_checks_before_driver():
    with pytest.raises(ValueError, match=r"memset value must be in \[-128, 255\]"):
        drv.memset_d8(0, 256, 1)
    with pytest.raises(ValueError, match=r"memset value must be in \[-32768, 65535\]"):
        drv.memset_d16(0, 1 << 16, 1)
    with pytest.raises(ValueError, match=r"memset value must be in"):
        drv.memset_d32(0, 1 << 32, 1)
    with pytest.raises(ValueError, match="count must not be negative"):
        drv.memset_d32(0, 1, -3)
    with pytest.raises(ValueError, match=r"memset_d2d32\(\): a row of 40 bytes does not fit the pitch of 32"):
        drv.memset_d2d32(0, 32, 0, 10, 2)
    with pytest.raises(ValueError, match="pitch must not be negative"):
        drv.memset_d2d8(0, -1, 0, 1, 1)


def test_zero_byte_copies_need_no_driver():
    drv.memcpy_htod(0, b"")
    drv.memcpy_dtoh(bytearray(), 0)
    drv.memcpy_dtod(0, 0, 0)
    drv.memset_d8(0, 1, 0)
    drv.memset_d2d16(0, 4, 1, 0, 3)


def test_memcpy2d_fields_and_checks():
    c = drv.Memcpy2D()
    assert (c.src_x_in_bytes, c.src_y, c.src_pitch, c.width_in_bytes, c.height) == (0, 0, 0, 0, 0)
    assert c.src_memory_type is None and c.dst_memory_type is None
    assert not hasattr(c, "depth")
    with pytest.raises(TypeError, match="takes no arguments"):
        drv.Memcpy2D(1)
    with pytest.raises(ValueError, match="must not be negative"):
        c.height = -1
    with pytest.raises(TypeError):
        c.width_in_bytes = 1.5
    with pytest.raises(AttributeError):
        del c.src_y
    c.width_in_bytes, c.height = 4, 2
    with pytest.raises(ValueError, match=r"Memcpy2D: no src set \(call set_src_host"):
        c()
    src = np.arange(8, dtype=np.uint8)
    c.set_src_host(src)
    assert c.src_memory_type == drv.memorytype.HOST
    c.src_pitch = 4
    with pytest.raises(ValueError, match="no dst set"):
        c()
    c.set_dst_host(np.zeros(8, np.uint8))
    c.dst_pitch = 3
    with pytest.raises(ValueError, match=r"dst_pitch \(3\) is less than width_in_bytes \(4\)"):
        c()
    c.dst_pitch = 4
    c.src_y = 1
    with pytest.raises(ValueError, match=r"reaches past the end of the source \(8 bytes\)"):
        c()
    c.src_y, c.src_x_in_bytes = 0, 1
    with pytest.raises(ValueError, match="past the end of the source"):
        c()
    with pytest.raises(ValueError, match="not contiguous and writable"):
        c.set_dst_host(b"abcdefgh")
    with pytest.raises(ValueError, match="non-contiguous"):
        c.set_src_host(np.zeros((4, 4))[:, ::2])
    with pytest.raises(TypeError, match="expected host memory"):
        c.set_src_host(3)
    with pytest.raises(TypeError, match="expected device memory"):
        c.set_src_device(1.5)
    with pytest.raises(TypeError, match="stream must be"):
        c("stream")


def test_memcpy3d_fields_and_checks():
    c = drv.Memcpy3D()
    for name in ("src_z", "src_lod", "src_height", "dst_z", "dst_lod", "dst_height", "depth"):
        assert getattr(c, name) == 0
        setattr(c, name, 3)
        assert getattr(c, name) == 3
    c.src_lod = c.dst_lod = c.src_z = c.dst_z = 0
    c.set_src_host(np.zeros(4 * 3 * 3, np.uint8))
    c.set_dst_host(np.zeros(4 * 3 * 3, np.uint8))
    c.width_in_bytes, c.height, c.depth = 4, 3, 3
    c.src_pitch = c.dst_pitch = 4
    c.src_height, c.dst_height = 2, 3
    with pytest.raises(ValueError, match=r"Memcpy3D: src_height \(2\) is less than height \(3\)"):
        c()
    c.src_height = 3
    c.dst_z = 1
    with pytest.raises(ValueError, match="past the end of the destination"):
        c()
    p = drv.Memcpy3DPeer()
    with pytest.raises(TypeError, match="expected a Context"):
        p.set_src_context(3)
    with pytest.raises(TypeError, match="expected a Context"):
        p.set_dst_context(None)


def test_bench_copy_checks_kind():
    with pytest.raises(ValueError, match="bad kind nope"):
        _driver._bench_copy("nope", 10, 1)
    with pytest.raises(ValueError):
        _driver._bench_copy("dtod", 0, 1)


def test_docstrings_carry_signatures():
    import inspect
    assert str(inspect.signature(drv.memcpy_htod_async)) == "(dest, src, stream=None)"
    assert str(inspect.signature(drv.memset_d2d32)) == "(dest, pitch, data, width, height)"
    assert str(inspect.signature(drv.memcpy_peer)) == (
        "(dest, src, size, dest_context=None, src_context=None)")


# ------------------------------------------------------------------ GPU tests

DTYPES = [np.uint8, np.int16, np.float32, np.float64, np.complex64]


def _rand(rng, shape, dtype):
    dt = np.dtype(dtype)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=dt)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_htod_dtoh_round_trip(ctx, rng, dtype):
    data = _rand(rng, (37, 11), dtype)
    dev = drv.mem_alloc(data.nbytes)
    drv.memcpy_htod(dev, data)
    out = np.empty_like(data)
    drv.memcpy_dtoh(out, dev)
    np.testing.assert_array_equal(out, data)
    fdata = np.asfortranarray(data)
    drv.memcpy_htod(dev, fdata)  # Fortran-contiguous is contiguous too
    fout = np.empty_like(fdata)
    drv.memcpy_dtoh(fout, dev)
    np.testing.assert_array_equal(fout, fdata)


@pytest.mark.gpu
def test_other_buffers_and_pointers(ctx, rng):
    raw = rng.integers(0, 255, 256, dtype=np.uint8).tobytes()
    dev = drv.mem_alloc(256)
    drv.memcpy_htod(dev, raw)
    out = bytearray(256)
    drv.memcpy_dtoh(out, dev)
    assert bytes(out) == raw
    part = bytearray(16)
    drv.memcpy_dtoh(memoryview(part), int(dev) + 100)  # a bare pointer: size unknown
    assert bytes(part) == raw[100:116]
    drv.memcpy_htod(np.uint64(int(dev)), b"\x01\x02")  # anything with __index__
    drv.memcpy_dtoh(part, dev)
    assert bytes(part[:2]) == b"\x01\x02"

    class Holder:
        def __init__(self, a):
            self.gpudata = a
    drv.memcpy_dtoh(out, Holder(dev))
    with pytest.raises(ValueError, match="copying 257 bytes, but the source device memory has only 256"):
        drv.memcpy_dtoh(bytearray(257), Holder(dev))


@pytest.mark.gpu
def test_too_large_copies_are_value_errors(ctx):
    dev = drv.mem_alloc(100)
    with pytest.raises(ValueError, match=r"memcpy_htod\(\): copying 101 bytes, but the destination device "
                                         r"memory has only 100 bytes"):
        drv.memcpy_htod(dev, np.zeros(101, np.uint8))
    with pytest.raises(ValueError, match=r"copying 800 bytes, but the source device memory has only 100"):
        drv.memcpy_dtoh(np.zeros(100, np.float64), dev)
    other = drv.mem_alloc(50)
    with pytest.raises(ValueError, match="copying 60 bytes, but the source device memory has only 50"):
        drv.memcpy_dtod(dev, other, 60)
    with pytest.raises(ValueError, match="copying 101 bytes, but the destination"):
        drv.memcpy_dtod(dev, dev, 101)
    with pytest.raises(ValueError, match="copying 101 bytes"):
        drv.memcpy_htod_async(dev, np.zeros(101, np.uint8))
    with pytest.raises(ValueError, match="copying 404 bytes, but the device memory has only 100"):
        drv.memset_d32(dev, 0, 101)
    with pytest.raises(ValueError, match="device memory has only 100"):
        drv.memset_d2d8(dev, 20, 0, 10, 6)
    drv.memcpy_htod(dev, np.zeros(99, np.uint8))  # smaller is fine


@pytest.mark.gpu
def test_freed_and_detached_memory(ctx):
    dev = drv.mem_alloc(64)
    dev.free()
    with pytest.raises(drv.LogicError, match="this DeviceAllocation was freed"):
        drv.memcpy_htod(dev, b"x")
    with pytest.raises(drv.LogicError, match="freed"):
        drv.memcpy_dtoh(bytearray(1), dev)
    with pytest.raises(drv.LogicError, match="freed"):
        drv.memset_d8(dev, 0, 1)
    c = drv.Memcpy2D()
    with pytest.raises(drv.LogicError, match="freed"):
        c.set_src_device(dev)


@pytest.mark.gpu
def test_dtod(ctx, rng):
    data = _rand(rng, 5000, np.float32)
    a, b = drv.mem_alloc(data.nbytes), drv.mem_alloc(data.nbytes)
    drv.memcpy_htod(a, data)
    drv.memcpy_dtod(b, a, data.nbytes)
    out = np.empty_like(data)
    drv.memcpy_dtoh(out, b)
    np.testing.assert_array_equal(out, data)
    drv.memcpy_dtod(int(b) + 4, a, 400)  # offset pointer, partial copy
    drv.memcpy_dtoh(out, b)
    np.testing.assert_array_equal(out[1:101], data[:100])
    np.testing.assert_array_equal(out[101:], data[101:])


@pytest.mark.gpu
def test_async_copies_keep_host_buffers_alive(ctx, rng):
    s = drv.Stream()
    data = _rand(rng, 1 << 18, np.float32)
    host = drv.pagelocked_empty_like(data)
    host[...] = data
    dev, dev2 = drv.mem_alloc(data.nbytes), drv.mem_alloc(data.nbytes)
    drv.memcpy_htod_async(dev, host, s)
    ref = weakref.ref(host)
    del host
    gc.collect()
    assert ref() is not None  # kept by the stream until it is known complete
    drv.memcpy_dtod_async(dev2, dev, data.nbytes, s)
    out = drv.pagelocked_zeros_like(data)
    drv.memcpy_dtoh_async(out, dev2, stream=s)
    s.synchronize()
    gc.collect()
    assert ref() is None
    np.testing.assert_array_equal(out, data)
    out2 = drv.pagelocked_zeros_like(data)
    drv.memcpy_dtoh_async(out2, dev)  # default stream
    ctx.synchronize()
    np.testing.assert_array_equal(out2, data)
    with pytest.raises(drv.LogicError, match="closed"):
        s.close()
        drv.memcpy_htod_async(dev, out, s)


@pytest.mark.gpu
@pytest.mark.parametrize("async_", [False, True])
def test_memset(ctx, async_):
    s = drv.Stream() if async_ else None
    n = 1000
    dev = drv.mem_alloc(4 * n)
    out = np.empty(n, np.uint32)

    def run(name, *args):
        fn = getattr(drv, name + ("_async" if async_ else ""))
        fn(*args, **({"stream": s} if async_ else {}))
        if async_:
            s.synchronize()
        drv.memcpy_dtoh(out, dev)

    run("memset_d32", dev, 0xDEADBEEF, n)
    assert (out == 0xDEADBEEF).all()
    run("memset_d32", dev, -1, n // 2)
    assert (out[: n // 2] == 0xFFFFFFFF).all() and (out[n // 2:] == 0xDEADBEEF).all()
    run("memset_d16", dev, 0x1234, 2 * n)
    assert (out == 0x12341234).all()
    run("memset_d8", int(dev) + 1, 0xAB, 2)  # offset pointer
    assert out[0] == 0x12ABAB34 and (out[1:] == 0x12341234).all()
    run("memset_d8", dev, -1, 4 * n)
    assert (out == 0xFFFFFFFF).all()

    # 2D: rows of `width` elements, `pitch` bytes apart
    pitch, height = 40, 25
    run("memset_d2d8", dev, pitch, 7, 13, height)
    b = out.view(np.uint8)[: pitch * height].reshape(height, pitch)
    assert (b[:, :13] == 7).all() and (b[:, 13:] == 0xFF).all()
    run("memset_d2d16", dev, pitch, 0x0102, 5, height)
    h = out.view(np.uint16)[: pitch * height // 2].reshape(height, pitch // 2)
    assert (h[:, :5] == 0x0102).all()
    run("memset_d2d32", dev, pitch, 0x0A0B0C0D, 9, height)
    w = out[: pitch * height // 4].reshape(height, pitch // 4)
    assert (w[:, :9] == 0x0A0B0C0D).all() and (w[:, 9] == 0xFFFFFFFF).all()


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["unaligned", "aligned", "stream"])
def test_memcpy2d_host_device_host(ctx, rng, mode):
    rows, cols = 19, 13  # float32 elements of the region
    src = _rand(rng, (rows + 5, 23), np.float32)  # odd host pitch: 92 bytes
    sx, sy = 3, 2  # region starts at column 3, row 2
    dev, dpitch = drv.mem_alloc_pitch(cols * 4 + 8, rows + 1, 4)
    c = drv.Memcpy2D()
    c.set_src_host(src)
    c.src_x_in_bytes, c.src_y, c.src_pitch = sx * 4, sy, src.strides[0]
    c.set_dst_device(dev)
    c.dst_x_in_bytes, c.dst_y, c.dst_pitch = 8, 1, dpitch
    c.width_in_bytes, c.height = cols * 4, rows
    s = drv.Stream() if mode == "stream" else None
    if mode == "stream":
        c(s)
    else:
        c(aligned=(mode == "aligned"))
    back = np.zeros((rows + 3, 17), np.float32)  # odd destination pitch: 68 bytes
    d = drv.Memcpy2D()
    d.set_src_device(dev)
    d.src_x_in_bytes, d.src_y, d.src_pitch = 8, 1, dpitch
    d.set_dst_host(back)
    d.dst_x_in_bytes, d.dst_y, d.dst_pitch = 4, 3, back.strides[0]
    d.width_in_bytes, d.height = cols * 4, rows
    d(s) if s is not None else d()
    if s is not None:
        s.synchronize()
    np.testing.assert_array_equal(back[3:3 + rows, 1:1 + cols], src[sy:sy + rows, sx:sx + cols])
    assert not back[:3].any() and not back[:, :1].any()
    # the device end's size is known: a region past it is refused
    d.src_y = rows + 5
    with pytest.raises(ValueError, match="past the end of the source"):
        d()


@pytest.mark.gpu
def test_memcpy2d_device_to_device(ctx, rng):
    data = _rand(rng, (8, 10), np.int16)
    a, b = drv.mem_alloc(data.nbytes), drv.mem_alloc(data.nbytes)
    drv.memcpy_htod(a, data)
    drv.memset_d8(b, 0, data.nbytes)
    c = drv.Memcpy2D()
    c.set_src_device(a)
    c.set_dst_device(b)
    c.src_pitch = c.dst_pitch = 20
    c.src_x_in_bytes = c.dst_x_in_bytes = 6
    c.width_in_bytes, c.height = 10, 8
    c()
    out = np.empty_like(data)
    drv.memcpy_dtoh(out, b)
    expect = np.zeros_like(data)
    expect[:, 3:8] = data[:, 3:8]
    np.testing.assert_array_equal(out, expect)
    c.height = 9
    with pytest.raises(ValueError, match="past the end"):
        c()


def _volume_copy(c, src, dst_shape, region, src_off, dst_off):
    """Host volume -> device (linear, padded) -> host, through copy descriptors."""
    (d, h, w), (sz, sy, sx), (dz, dy, dx) = region, src_off, dst_off
    item = src.itemsize
    dev_pitch, dev_height, dev_depth = dst_shape[2] * item + 12, dst_shape[1] + 1, dst_shape[0]
    dev = drv.mem_alloc(dev_pitch * dev_height * dev_depth)
    drv.memset_d8(dev, 0, dev_pitch * dev_height * dev_depth)
    c.set_src_host(src)
    c.src_x_in_bytes, c.src_y, c.src_z = sx * item, sy, sz
    c.src_pitch, c.src_height = src.strides[1], src.shape[1]
    c.set_dst_device(dev)
    c.dst_x_in_bytes, c.dst_y, c.dst_z = dx * item, dy, dz
    c.dst_pitch, c.dst_height = dev_pitch, dev_height
    c.width_in_bytes, c.height, c.depth = w * item, h, d
    return dev, dev_pitch, dev_height


@pytest.mark.gpu
@pytest.mark.parametrize("cls", ["Memcpy3D", "Memcpy3DPeer"])
@pytest.mark.parametrize("use_stream", [False, True])
def test_memcpy3d_with_odd_pitches_and_offsets(ctx, rng, cls, use_stream):
    src = _rand(rng, (7, 9, 11), np.float32)  # pitch 44 bytes, 9 rows per slice
    region, src_off, dst_off = (4, 5, 6), (2, 3, 4), (1, 2, 3)
    c = getattr(drv, cls)()
    if cls == "Memcpy3DPeer":
        c.set_src_context(ctx)
        c.set_dst_context(ctx)
    dev, dev_pitch, dev_height = _volume_copy(c, src, (6, 8, 10), region, src_off, dst_off)
    s = drv.Stream() if use_stream else None
    c(s) if s else c()
    if s:
        s.synchronize()
    raw = np.empty(dev.size, np.uint8)
    drv.memcpy_dtoh(raw, dev)
    vol = raw.reshape(6, dev_height, dev_pitch)[:, :, : 10 * 4].copy().view(np.float32)
    (d, h, w), (sz, sy, sx), (dz, dy, dx) = region, src_off, dst_off
    expect = np.zeros((6, dev_height, 10), np.float32)
    expect[dz:dz + d, dy:dy + h, dx:dx + w] = src[sz:sz + d, sy:sy + h, sx:sx + w]
    np.testing.assert_array_equal(vol, expect)
    # back to the host with a third descriptor, device -> host
    back = np.zeros_like(src)
    r = getattr(drv, cls)()
    r.set_src_device(dev)
    r.src_x_in_bytes, r.src_y, r.src_z = dx * 4, dy, dz
    r.src_pitch, r.src_height = dev_pitch, dev_height
    r.set_dst_host(back)
    r.dst_x_in_bytes, r.dst_y, r.dst_z = sx * 4, sy, sz
    r.dst_pitch, r.dst_height = back.strides[1], back.shape[1]
    r.width_in_bytes, r.height, r.depth = w * 4, h, d
    r()
    np.testing.assert_array_equal(back[sz:sz + d, sy:sy + h, sx:sx + w], src[sz:sz + d, sy:sy + h, sx:sx + w])
    r.dst_z = 4
    with pytest.raises(ValueError, match="past the end of the destination"):
        r()


@pytest.mark.gpu
def test_memcpy2d_with_arrays(ctx, rng):
    desc = drv.ArrayDescriptor(width=13, height=7, format=drv.array_format.FLOAT, num_channels=1)
    ary = drv.Array(desc)
    data = _rand(rng, (7, 13), np.float32)
    c = drv.Memcpy2D()
    c.set_src_host(data)
    c.src_pitch = data.strides[0]
    c.set_dst_array(ary)
    assert c.dst_memory_type == drv.memorytype.ARRAY
    c.width_in_bytes, c.height = 13 * 4, 7
    c()
    back = np.zeros_like(data)
    d = drv.Memcpy2D()
    d.set_src_array(ary)
    d.set_dst_host(back)
    d.dst_pitch = back.strides[0]
    d.width_in_bytes, d.height = 13 * 4, 7
    d()
    np.testing.assert_array_equal(back, data)
    d.src_x_in_bytes = 4
    with pytest.raises(ValueError, match="exceeds the array's row of 52 bytes"):
        d()
    d.src_x_in_bytes, d.src_y = 0, 1
    with pytest.raises(ValueError, match="exceeds the array's 7 rows"):
        d()
    with pytest.raises(TypeError):
        d.set_src_array(np.zeros(3))


@pytest.mark.gpu
def test_memcpy_peer_same_device(ctx, rng):
    data = _rand(rng, 4096, np.uint8)
    a, b = drv.mem_alloc(4096), drv.mem_alloc(4096)
    drv.memcpy_htod(a, data)
    drv.memcpy_peer(b, a, 4096)
    drv.memcpy_peer(b, a, 4096, dest_context=ctx, src_context=ctx)
    s = drv.Stream()
    drv.memcpy_peer_async(b, a, 2048, ctx, ctx, stream=s)
    s.synchronize()
    out = np.empty_like(data)
    drv.memcpy_dtoh(out, b)
    np.testing.assert_array_equal(out, data)
    with pytest.raises(ValueError, match="copying 4097 bytes"):
        drv.memcpy_peer(b, a, 4097)
    with pytest.raises(TypeError, match="dest_context must be a Context or None"):
        drv.memcpy_peer(b, a, 16, dest_context=3)


@pytest.mark.gpu
def test_memcpy_peer_two_devices(rng):
    if drv.Device.count() < 2:
        pytest.skip("needs two GPUs")
    c0 = drv.Device(0).retain_primary_context()
    c1 = drv.Device(1).retain_primary_context()
    data = _rand(rng, (1 << 20,), np.float32)
    c0.push()
    try:
        a = drv.mem_alloc(data.nbytes)
        drv.memcpy_htod(a, data)
    finally:
        drv.Context.pop()
    c1.push()
    try:
        b = drv.mem_alloc(data.nbytes)
        drv.memcpy_peer(b, a, data.nbytes)  # contexts taken from the allocations
        out = np.empty_like(data)
        drv.memcpy_dtoh(out, b)
        np.testing.assert_array_equal(out, data)
        c = drv.Memcpy3DPeer()
        c.set_src_device(a)
        c.set_dst_device(b)
        c.set_src_context(c0)
        c.set_dst_context(c1)
        c.width_in_bytes, c.height, c.depth = 4096, 1, 1
        drv.memset_d8(b, 0, data.nbytes)
        c()
        drv.memcpy_dtoh(out, b)
        assert out[:1024].tobytes() == data[:1024].tobytes() and not out[1024:].any()
    finally:
        drv.Context.pop()
    # with no context current at all (the example's last step did this and failed
    # with CUDA_ERROR_INVALID_CONTEXT before the default context was made current)
    while drv.Context.get_current() is not None:
        drv.Context.pop()
    drv.memcpy_peer(a, b, data.nbytes)
    c0.push()
    try:
        back = np.empty_like(data)
        drv.memcpy_dtoh(back, a)
        assert back[:1024].tobytes() == data[:1024].tobytes() and not back[1024:].any()
    finally:
        drv.Context.pop()
        c0.detach()
        c1.detach()


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["htod_pinned", "dtoh_pinned", "htod_pageable", "dtoh_pageable", "dtod"])
def test_bench_copy_floor(ctx, kind):
    t = _driver._bench_copy(kind, 1 << 20, 3)
    assert 0 < t < 1


@pytest.mark.gpu
def test_copies_bench_section(ctx, monkeypatch):
    from barecuda.bench import copies
    monkeypatch.setattr(copies, "ROUNDS", 1)
    rows = copies.run()
    names = [r["name"] for r in rows]
    assert "htod pinned 256 MiB bandwidth" in names and "dtod 256 MiB bandwidth (read+write)" in names
    assert all(r["value"] > 0 and r["ratio"] > 0 for r in rows)
