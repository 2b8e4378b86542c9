# SPDX-License-Identifier: MIT
"""Memory: device, pitched, stream-ordered, pinned, aligned, registered, managed and
IPC memory, pointer attributes, and the memory pools of tools.

CPU tests cover what is checked before the driver is touched; GPU tests check every
kind of memory with random data against NumPy.
"""

import gc
import multiprocessing
import os
import weakref

import numpy as np
import pytest

from barecuda import tools
from barecuda import driver as drv

HAF = drv.host_alloc_flags
MAF = drv.mem_attach_flags
IPC_LAZY_ENABLE_PEER_ACCESS = 1  # CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS


# ------------------------------------------------------------------ CPU tests

@pytest.mark.parametrize("fn", [drv.pagelocked_empty, drv.pagelocked_zeros, drv.managed_empty,
                                drv.managed_zeros, drv.aligned_empty, drv.aligned_zeros])
def test_host_array_makers_check_shape_dtype_order(fn):
    name = fn.__name__
    with pytest.raises(ValueError, match=rf"{name}\(\): negative dimension -1"):
        fn((2, -1), np.float32)
    with pytest.raises(TypeError, match=rf"{name}\(\): dtype .* holds Python objects"):
        fn(3, object)
    with pytest.raises(ValueError, match=rf"{name}\(\): order must be 'C' or 'F'"):
        fn(3, np.float32, "K")
    with pytest.raises(ValueError, match="too large"):
        fn((2**40, 2**40), np.float64)
    with pytest.raises(TypeError):
        fn("abc", np.float32)


def test_pagelocked_flags_checked_before_driver():
    with pytest.raises(ValueError, match="mem_flags: unknown bits"):
        drv.pagelocked_empty(4, np.float32, "C", 8)
    with pytest.raises(ValueError, match="mem_flags"):
        drv.pagelocked_zeros_like(np.zeros(3), mem_flags=-1)
    with pytest.raises(TypeError, match="expected a numpy.ndarray"):
        drv.pagelocked_empty_like([1, 2, 3])


@pytest.mark.parametrize("flags", [MAF.SINGLE, 3, 8, -1])
def test_managed_flags_checked_before_driver(flags):
    with pytest.raises(ValueError, match="mem_flags"):
        drv.managed_empty(4, np.float32, mem_flags=flags)
    with pytest.raises(ValueError, match="mem_flags"):
        drv.managed_zeros_like(np.zeros(3), mem_flags=flags)


def test_aligned_empty_is_aligned_and_owned(rng):
    for alignment in (8, 64, 4096, 1 << 16):
        a = drv.aligned_empty((5, 7), np.float32, "F", alignment=alignment)
        assert a.ctypes.data % alignment == 0
        assert a.flags.f_contiguous and a.shape == (5, 7) and a.dtype == np.float32
        assert isinstance(a.base, drv.HostAllocation)
        assert a.base.size == a.nbytes and not a.base.pagelocked and a.base.context is None
        data = rng.standard_normal((5, 7)).astype(np.float32)
        a[...] = data
        view = a[1:3]
        del a
        gc.collect()
        np.testing.assert_array_equal(view, data[1:3])  # the view keeps the memory alive
    z = drv.aligned_zeros(1000, np.int64)
    assert not z.any() and z.ctypes.data % 4096 == 0
    e = drv.aligned_empty_like(np.zeros((3, 4), order="F"), alignment=128)
    assert e.flags.f_contiguous and e.shape == (3, 4) and e.ctypes.data % 128 == 0
    empty = drv.aligned_empty(0, np.float32)
    assert empty.shape == (0,)


def test_aligned_checks_alignment():
    for bad in (3, 0, 6, 4):
        with pytest.raises(ValueError, match=r"aligned_empty\(\): alignment must be a power of two"):
            drv.aligned_empty(4, np.float32, alignment=bad)
    with pytest.raises(ValueError, match="must not be negative"):
        drv.aligned_zeros(4, np.float32, alignment=-8)


def test_host_allocation_free_is_idempotent_and_refuses_while_exported():
    a = drv.aligned_empty(16, np.uint8)
    base = a.base
    m = memoryview(base)
    with pytest.raises(BufferError, match="still in use"):
        base.free()
    m.release()
    base.free()
    base.free()
    assert base.freed
    with pytest.raises(drv.LogicError, match="HostAllocation was freed"):
        memoryview(base)
    with pytest.raises(drv.LogicError, match="was freed"):
        base.get_device_pointer()


def test_ipc_handle_checked_before_driver():
    with pytest.raises(ValueError, match=r"IPCMemoryHandle\(\): handle must be 64 bytes, got 10"):
        drv.IPCMemoryHandle(b"x" * 10)
    with pytest.raises(TypeError, match="handle must be the bytes from mem_get_ipc_handle"):
        drv.IPCMemoryHandle(12)
    with pytest.raises(ValueError, match="unknown bits"):
        drv.IPCMemoryHandle(bytes(64), flags=2)


def test_alloc_arguments_checked_before_driver():
    with pytest.raises(ValueError, match=r"mem_alloc_pitch\(\): access_size must be 4, 8 or 16"):
        drv.mem_alloc_pitch(10, 10, 3)
    with pytest.raises(ValueError, match="width and height must be positive"):
        drv.mem_alloc_pitch(0, 10, 4)
    with pytest.raises(ValueError, match="must not be negative"):
        drv.mem_alloc_pitch(-1, 10, 4)
    with pytest.raises(ValueError, match=r"mem_alloc_async\(\): nbytes must be positive"):
        drv.mem_alloc_async(0)
    with pytest.raises(ValueError, match="must not be negative"):
        drv.mem_alloc_async(-5)
    with pytest.raises(TypeError, match="pool must be a MemPool or None"):
        drv.mem_alloc_async(16, None, 3)
    with pytest.raises(TypeError):
        drv.mem_alloc_async(1.5)


def test_register_host_memory_checked_before_driver():
    with pytest.raises(ValueError, match="not contiguous"):
        drv.register_host_memory(np.zeros((4, 4))[:, ::2])
    with pytest.raises(TypeError, match="expected a NumPy array or another buffer"):
        drv.register_host_memory(5)
    with pytest.raises(ValueError, match="the array is empty"):
        drv.register_host_memory(np.zeros(0))
    with pytest.raises(ValueError, match="unknown bits"):
        drv.register_host_memory(np.zeros(4), flags=0x100)


def test_pool_bins():
    sizes = [1, 255, 256, 257, 1000, 1024, 1025, 3000, 4096, 10**6, 10**9 + 7]
    for n in sizes:
        nr = tools.DeviceMemoryPool.bin_number(n)
        size = tools.DeviceMemoryPool.alloc_size(nr)
        assert size >= max(n, 256)
        assert size <= max(n, 256) * 1.25 + 1
        assert tools.DeviceMemoryPool.bin_number(size) == nr
    nrs = [tools.DeviceMemoryPool.bin_number(n) for n in range(256, 70000, 97)]
    assert nrs == sorted(nrs)


def test_pools_check_arguments_before_driver():
    pool = tools.DeviceMemoryPool()
    with pytest.raises(ValueError, match="must not be negative"):
        pool.allocate(-1)
    with pytest.raises(TypeError, match="int size"):
        pool.allocate(1.5)
    hpool = tools.PageLockedMemoryPool()
    with pytest.raises(TypeError, match="holds Python objects"):
        hpool.allocate(3, object)
    with pytest.raises(ValueError, match="order must be"):
        hpool.allocate(3, np.float32, "K")
    with pytest.raises(ValueError, match="negative dimension"):
        hpool.allocate((3, -1), np.float32)
    assert pool.held_blocks == 0 and pool.active_blocks == 0 and pool.managed_bytes == 0


def test_signatures():
    import inspect
    for fn in (drv.pagelocked_empty, drv.managed_zeros_like, drv.mem_alloc_async, drv.aligned_empty,
               drv.register_host_memory, drv.mem_prefetch_async, drv.mem_advise,
               drv.pointer_get_attributes, drv.mem_get_ipc_handle, drv.mem_alloc_pitch):
        assert inspect.signature(fn) is not None
    assert str(inspect.signature(drv.mem_alloc_async)) == "(nbytes, stream=None, pool=None)"


# ------------------------------------------------------------------ GPU tests

@pytest.mark.gpu
def test_mem_alloc_and_free(ctx):
    a = drv.mem_alloc(1000)
    assert a.size == 1000 and int(a) != 0 and a.context == ctx and not a.freed
    assert not a.is_async and a.stream is None
    a.free()
    a.free()
    assert a.freed
    with pytest.raises(drv.LogicError, match="this DeviceAllocation was freed"):
        int(a)
    with pytest.raises(drv.LogicError, match="freed"):
        drv.memcpy_htod(a, np.zeros(4, np.uint8))
    with pytest.raises(ValueError, match="nbytes must be positive"):
        drv.mem_alloc(0)
    with pytest.raises(drv.MemoryError):
        drv.mem_alloc(1 << 60)


@pytest.mark.gpu
def test_mem_alloc_pitch(ctx, rng):
    for width, height, access in ((1, 1, 4), (100, 7, 8), (1000, 3, 16)):
        a, pitch = drv.mem_alloc_pitch(width, height, access)
        assert pitch >= width and a.size == pitch * height
        data = rng.integers(0, 255, size=a.size, dtype=np.uint8)
        drv.memcpy_htod(a, data)
        back = np.empty_like(data)
        drv.memcpy_dtoh(back, a)
        np.testing.assert_array_equal(back, data)
        a.free()


@pytest.mark.gpu
def test_mem_get_info(ctx):
    free, total = drv.mem_get_info()
    assert 0 < free <= total


@pytest.mark.gpu
@pytest.mark.serial
def test_many_alloc_free_cycles_leave_free_memory(ctx):
    free0, _ = drv.mem_get_info()
    for i in range(100_000):
        drv.mem_alloc(256 + (i % 7) * 1024).free()
    free1, _ = drv.mem_get_info()
    assert abs(free0 - free1) <= 8 << 20, (free0, free1)


@pytest.mark.gpu
@pytest.mark.serial
def test_dropped_allocations_are_released(ctx):
    free0, _ = drv.mem_get_info()
    for _ in range(50):
        drv.mem_alloc(16 << 20)
    gc.collect()
    free1, _ = drv.mem_get_info()
    assert abs(free0 - free1) <= 16 << 20


@pytest.mark.gpu
def test_mem_alloc_async_on_a_stream(ctx, rng):
    s = drv.Stream()
    pool = drv.MemPool.default()
    assert isinstance(pool, drv.MemPool) and pool.device == ctx.get_device()
    assert drv.MemPool.default(0).handle == pool.handle
    data = rng.standard_normal(4096).astype(np.float32)
    host = drv.pagelocked_empty_like(data)
    host[...] = data
    a = drv.mem_alloc_async(data.nbytes, s)
    assert a.is_async and a.stream is s and a.size == data.nbytes
    assert pool.used >= data.nbytes and pool.reserved >= pool.used
    assert pool.used_high >= pool.used and pool.reserved_high >= pool.reserved
    drv.memcpy_htod_async(a, host, s)
    out = drv.pagelocked_zeros_like(data)
    drv.memcpy_dtoh_async(out, a, s)
    a.free()
    s.synchronize()
    np.testing.assert_array_equal(out, data)
    with pytest.raises(drv.LogicError, match="freed"):
        int(a)


@pytest.mark.gpu
def test_mem_alloc_async_free_on_another_stream_and_pool_settings(ctx, rng):
    s1, s2 = drv.Stream(), drv.Stream()
    pool = drv.MemPool.default()
    old = pool.release_threshold
    try:
        pool.release_threshold = 64 << 20
        assert pool.release_threshold == 64 << 20
        a = drv.mem_alloc_async(1 << 20, s1, pool)
        drv.memset_d8_async(a, 7, 1 << 20, s1)
        s1.synchronize()
        a.free(stream=s2)
        s2.synchronize()
        pool.trim_to(0)
        assert pool.reserved >= pool.used
        with pytest.raises(ValueError, match=r"must be 0 to 2\*\*64 - 1, not -1"):
            pool.release_threshold = -1
        with pytest.raises(ValueError, match=r"must be 0 to 2\*\*64 - 1"):
            pool.release_threshold = 2**64
        with pytest.raises(TypeError, match="must be an int, not float"):
            pool.release_threshold = 1.5
        pool.release_threshold = 2**64 - 1          # the driver's "keep everything"
        assert pool.release_threshold == 2**64 - 1
        with pytest.raises(ValueError):
            pool.trim_to(-1)
    finally:
        pool.release_threshold = old


@pytest.mark.gpu
def test_mem_alloc_async_default_stream_and_closed_stream(ctx, rng):
    a = drv.mem_alloc_async(4096)
    data = rng.integers(0, 255, 4096, dtype=np.uint8)
    drv.memcpy_htod(a, data)
    back = np.empty_like(data)
    drv.memcpy_dtoh(back, a)
    np.testing.assert_array_equal(back, data)
    a.free()
    s = drv.Stream()
    b = drv.mem_alloc_async(4096, s)
    s.close()
    b.free()  # its stream is gone: synchronizes, then frees
    c = drv.mem_alloc_async(4096, drv.Stream())
    del c
    gc.collect()
    ctx.synchronize()


@pytest.mark.gpu
@pytest.mark.parametrize("flags", [0, HAF.PORTABLE, HAF.DEVICEMAP, HAF.WRITECOMBINED,
                                   HAF.PORTABLE | HAF.DEVICEMAP | HAF.WRITECOMBINED])
def test_pagelocked_arrays(ctx, rng, flags):
    a = drv.pagelocked_empty((33, 17), np.float64, "F", mem_flags=flags)
    assert a.flags.f_contiguous and a.shape == (33, 17) and a.dtype == np.float64
    assert isinstance(a.base, drv.HostAllocation)
    assert a.base.flags == int(flags) and a.base.size == a.nbytes and a.base.pagelocked
    assert a.base.context == ctx
    z = drv.pagelocked_zeros((5, 6), np.int32, mem_flags=flags)
    assert not z.any() and z.flags.c_contiguous
    data = rng.standard_normal((33, 17))
    a[...] = data
    dev = drv.mem_alloc(a.nbytes)
    drv.memcpy_htod(dev, a)
    back = drv.pagelocked_zeros_like(a, mem_flags=flags)
    assert back.flags.f_contiguous
    drv.memcpy_dtoh(back, dev)
    np.testing.assert_array_equal(back, data)
    attrs = drv.pointer_get_attributes(a)
    assert attrs["memory_type"] == drv.memorytype.HOST
    if flags & HAF.DEVICEMAP:
        dptr = a.base.get_device_pointer()
        assert isinstance(dptr, int) and dptr != 0
        other = drv.mem_alloc(a.nbytes)
        drv.memcpy_dtod(other, dptr, a.nbytes)  # read the host memory through its device pointer
        again = np.empty_like(back)
        drv.memcpy_dtoh(again, other)
        np.testing.assert_array_equal(again, data)
    like = drv.pagelocked_empty_like(np.zeros((3, 4), np.int16))
    assert like.shape == (3, 4) and like.dtype == np.int16 and isinstance(like.base, drv.HostAllocation)


@pytest.mark.gpu
def test_pagelocked_lifetime_and_free(ctx):
    a = drv.pagelocked_zeros(1 << 20, np.uint8)
    view = a[10:20]
    base = weakref.ref(a.base)
    del a
    gc.collect()
    assert base() is not None and not view.any()
    del view
    gc.collect()
    assert base() is None
    b = drv.pagelocked_empty(16, np.float32)
    b.base.free()
    b.base.free()
    assert b.base.freed
    with pytest.raises(drv.LogicError, match="freed"):
        b.base.get_device_pointer()
    empty = drv.pagelocked_empty(0, np.float32)
    assert empty.size == 0


@pytest.mark.gpu
def test_pagelocked_memory_released_after_detach_quietly():
    dev = drv.Device(0)
    c = dev.make_context()
    try:
        a = drv.pagelocked_empty(1024, np.uint8)
        d = drv.mem_alloc(1024)
    finally:
        drv.Context.pop()
    c.detach()
    base = a.base
    del a
    with pytest.raises(drv.LogicError, match="detached"):
        int(d)
    del d, base
    gc.collect()  # no warning, no crash


@pytest.mark.gpu
@pytest.mark.parametrize("flags", [0, drv.mem_host_register_flags.PORTABLE,
                                   drv.mem_host_register_flags.DEVICEMAP])
def test_register_host_memory(ctx, rng, flags):
    orig = rng.standard_normal((64, 33)).astype(np.float32)
    reg = drv.register_host_memory(orig, flags)
    assert isinstance(reg.base, drv.RegisteredHostMemory)
    assert reg.base.base is orig and reg.base.registered and reg.base.size == orig.nbytes
    assert np.shares_memory(reg, orig) and reg.shape == orig.shape and reg.dtype == orig.dtype
    assert drv.pointer_get_attributes(reg)["memory_type"] == drv.memorytype.HOST
    dev = drv.mem_alloc(orig.nbytes)
    s = drv.Stream()
    drv.memcpy_htod_async(dev, reg, s)
    out = drv.register_host_memory(np.zeros_like(orig))
    drv.memcpy_dtoh_async(out, dev, s)
    s.synchronize()
    np.testing.assert_array_equal(out, orig)
    if flags & drv.mem_host_register_flags.DEVICEMAP:
        assert reg.base.get_device_pointer() != 0
    reg.base.unregister()
    reg.base.unregister()
    assert not reg.base.registered
    with pytest.raises(drv.LogicError, match="unregistered"):
        reg.base.get_device_pointer()
    np.testing.assert_array_equal(reg, orig)  # still ordinary memory
    again = drv.register_host_memory(orig)
    with pytest.raises(drv.Error, match="cuMemHostRegister"):
        drv.register_host_memory(orig)  # the same range twice
    again.base.unregister()


@pytest.mark.gpu
def test_register_host_memory_read_only(ctx, rng):
    if not ctx.get_device().get_attribute(drv.device_attribute.READ_ONLY_HOST_REGISTER_SUPPORTED):
        pytest.skip("the device cannot register read-only host memory")
    orig = rng.integers(0, 100, 4096, dtype=np.int32)
    orig.flags.writeable = False
    reg = drv.register_host_memory(orig, drv.mem_host_register_flags.READ_ONLY)
    assert not reg.flags.writeable
    dev = drv.mem_alloc(orig.nbytes)
    drv.memcpy_htod(dev, reg)
    with pytest.raises(ValueError, match="read-only"):
        drv.memcpy_dtoh(reg, dev)
    back = np.empty_like(orig)
    drv.memcpy_dtoh(back, dev)
    np.testing.assert_array_equal(back, orig)
    reg.base.unregister()


@pytest.mark.gpu
@pytest.mark.parametrize("mem_flags", [0, MAF.GLOBAL, MAF.HOST])
def test_managed_arrays(ctx, rng, mem_flags):
    a = drv.managed_empty((100, 3), np.float32, "F", mem_flags=mem_flags)
    assert isinstance(a.base, drv.ManagedAllocation) and a.flags.f_contiguous
    assert a.base.get_device_pointer() == int(a.base) == a.ctypes.data
    data = rng.standard_normal((100, 3)).astype(np.float32)
    a[...] = data
    dev = drv.mem_alloc(a.nbytes)
    drv.memcpy_dtod(dev, a.base, a.nbytes)
    back = np.empty_like(a)
    drv.memcpy_dtoh(back, dev)
    np.testing.assert_array_equal(back, data)
    z = drv.managed_zeros((7, 7), np.int64, mem_flags=mem_flags)
    assert not z.any()
    zl = drv.managed_zeros_like(data)
    el = drv.managed_empty_like(data)
    assert zl.shape == el.shape == data.shape and not zl.any()
    attrs = drv.pointer_get_attributes(a)
    assert attrs["is_managed"] and attrs["context"] == ctx
    with pytest.raises(ValueError, match="destination device memory has only"):
        drv.memcpy_dtod(dev, a.base, a.nbytes + 1)


@pytest.mark.gpu
def test_managed_prefetch_advise_attach(ctx, rng):
    dev = ctx.get_device()
    if not dev.get_attribute(drv.device_attribute.CONCURRENT_MANAGED_ACCESS):
        pytest.skip("no concurrent managed access on this device")
    a = drv.managed_zeros(1 << 20, np.float32)
    data = rng.standard_normal(1 << 20).astype(np.float32)
    a[...] = data
    s = drv.Stream()
    drv.mem_prefetch_async(a, device=dev, stream=s)
    drv.mem_prefetch_async(a.base, 4096, 0, s)
    drv.mem_prefetch_async(int(a.base), a.nbytes, "host", s)
    s.synchronize()
    np.testing.assert_array_equal(a, data)
    adv = drv.mem_advise
    adv(a, None, drv.mem_advice.SET_READ_MOSTLY)
    adv(a, a.nbytes, drv.mem_advice.UNSET_READ_MOSTLY)
    adv(a.base, None, drv.mem_advice.SET_PREFERRED_LOCATION, dev)
    adv(a.base, None, drv.mem_advice.UNSET_PREFERRED_LOCATION, dev)
    adv(a, None, drv.mem_advice.SET_ACCESSED_BY, dev)
    adv(a, None, drv.mem_advice.UNSET_ACCESSED_BY, dev)
    adv(a, None, drv.mem_advice.SET_PREFERRED_LOCATION, "host")
    with pytest.raises(ValueError, match="nbytes is needed"):
        drv.mem_prefetch_async(int(a.base))
    with pytest.raises(ValueError, match="exceeds"):
        drv.mem_prefetch_async(a, a.nbytes + 1)
    with pytest.raises(ValueError, match="advice"):
        adv(a, None, 99)
    with pytest.raises(ValueError, match="'host'"):
        drv.mem_prefetch_async(a, device="gpu")
    a.base.attach(MAF.HOST, s)
    a.base.attach(MAF.SINGLE, s)
    a.base.attach(MAF.GLOBAL)
    s.synchronize()
    with pytest.raises(ValueError, match="mem_flags"):
        a.base.attach(3)
    np.testing.assert_array_equal(a, data)


@pytest.mark.gpu
def test_pointer_get_attributes(ctx):
    d = drv.mem_alloc(4096)
    at = drv.pointer_get_attributes(d)
    assert at["memory_type"] == drv.memorytype.DEVICE
    assert at["device_ordinal"] == int(os.environ.get("CUDA_DEVICE", "0"))
    assert at["context"] == ctx and not at["is_managed"] and at["mapped"]
    assert at["device_pointer"] == int(d) and at["range_start"] == int(d) and at["range_size"] >= 4096
    assert at["buffer_id"] != 0
    inner = drv.pointer_get_attributes(int(d) + 100)
    assert inner["range_start"] == int(d)
    plain = drv.pointer_get_attributes(np.zeros(16))
    assert plain["memory_type"] is None and plain["context"] is None
    with pytest.raises(TypeError):
        drv.pointer_get_attributes("nope")


def _ipc_child(handle, nbytes, conn, device=0):
    import numpy as np

    from barecuda import driver as drv
    drv.init()
    ctx = drv.Device(device).retain_primary_context()
    ctx.push()
    try:
        mem = drv.IPCMemoryHandle(handle)
        got = np.empty(nbytes, np.uint8)
        drv.memcpy_dtoh(got, mem)
        drv.memcpy_htod(mem, (got.astype(np.uint16) * 3 % 251).astype(np.uint8))
        size = mem.size
        mem.close()
        mem.close()
        conn.send((got.tobytes(), size))
    except Exception as exc:  # report to the parent rather than hang
        conn.send((repr(exc), -1))
    finally:
        drv.Context.pop()
        ctx.detach()


@pytest.mark.gpu
def test_ipc_two_processes(ctx, rng):
    nbytes = 1 << 16
    data = rng.integers(0, 255, nbytes, dtype=np.uint8)
    mem = drv.mem_alloc(nbytes)
    drv.memcpy_htod(mem, data)
    handle = drv.mem_get_ipc_handle(mem)
    assert isinstance(handle, bytes) and len(handle) == 64
    mp = multiprocessing.get_context("spawn")
    parent, child = mp.Pipe()
    p = mp.Process(target=_ipc_child, args=(handle, nbytes, child))
    p.start()
    got, size = parent.recv()
    p.join(60)
    assert p.exitcode == 0
    assert size >= nbytes, got
    assert got == data.tobytes()
    back = np.empty_like(data)
    drv.memcpy_dtoh(back, mem)
    np.testing.assert_array_equal(back, (data.astype(np.uint16) * 3 % 251).astype(np.uint8))


@pytest.mark.gpu
def test_ipc_across_two_gpus(ctx, rng):
    if drv.Device.count() < 2:
        pytest.skip("needs two GPUs")
    if not drv.Device(1).can_access_peer(drv.Device(0)):
        pytest.skip("device 1 cannot access device 0's memory")
    nbytes = 1 << 20
    data = rng.integers(0, 255, nbytes, dtype=np.uint8)
    mem = drv.mem_alloc(nbytes)  # on device 0, opened by a process working on device 1
    drv.memcpy_htod(mem, data)
    mp = multiprocessing.get_context("spawn")
    parent, child = mp.Pipe()
    p = mp.Process(target=_ipc_child, args=(drv.mem_get_ipc_handle(mem), nbytes, child, 1))
    p.start()
    got, size = parent.recv()
    p.join(60)
    assert p.exitcode == 0 and size >= nbytes, got
    assert got == data.tobytes()
    back = np.empty_like(data)
    drv.memcpy_dtoh(back, mem)
    np.testing.assert_array_equal(back, (data.astype(np.uint16) * 3 % 251).astype(np.uint8))


@pytest.mark.gpu
def test_ipc_handle_errors(ctx):
    with pytest.raises(drv.Error):
        drv.IPCMemoryHandle(bytes(64))  # not a handle of a live allocation
    with pytest.raises(drv.Error):
        drv.mem_get_ipc_handle(12345)


@pytest.mark.gpu
def test_device_memory_pool(ctx, rng):
    pool = tools.DeviceMemoryPool()
    a = pool.allocate(1000)
    assert isinstance(a, drv.PooledDeviceAllocation) and a.size == 1000 and a.context == ctx
    assert pool.active_blocks == 1 and pool.held_blocks == 0
    assert pool.active_bytes == pool.managed_bytes == pool.alloc_size(pool.bin_number(1000))
    data = rng.integers(0, 255, 1000, dtype=np.uint8)
    drv.memcpy_htod(a, data)
    with pytest.raises(ValueError, match="1001 bytes.*1000 bytes"):
        drv.memcpy_htod(a, np.zeros(1001, np.uint8))
    back = np.empty_like(data)
    drv.memcpy_dtoh(back, a)
    np.testing.assert_array_equal(back, data)
    ptr = int(a)
    a.free()
    a.free()
    assert pool.active_blocks == 0 and pool.held_blocks == 1
    with pytest.raises(drv.LogicError, match="freed"):
        int(a)
    b = pool.allocate(900)  # same bin: the block is reused
    assert int(b) == ptr and pool.held_blocks == 0
    del b
    gc.collect()
    assert pool.held_blocks == 1 and pool.active_blocks == 0
    c = pool(5000)
    pool.free_held()
    assert pool.held_blocks == 0 and pool.managed_bytes == pool.active_bytes
    pool.stop_holding()
    c.free()
    assert pool.held_blocks == 0 and pool.managed_bytes == 0 and pool.active_bytes == 0


@pytest.mark.gpu
def test_page_locked_memory_pool(ctx, rng):
    pool = tools.PageLockedMemoryPool()
    a = pool.allocate((30, 7), np.float32, "F")
    assert a.flags.f_contiguous and a.shape == (30, 7) and a.dtype == np.float32
    assert isinstance(a.base, tools.PooledHostAllocation)
    assert drv.pointer_get_attributes(a)["memory_type"] == drv.memorytype.HOST
    data = rng.standard_normal((30, 7)).astype(np.float32)
    a[...] = data
    dev = drv.mem_alloc(a.nbytes)
    drv.memcpy_htod(dev, a)
    view = a[3:5]
    del a
    gc.collect()
    assert pool.active_blocks == 1  # the view keeps the block lent
    del view
    gc.collect()
    assert pool.active_blocks == 0 and pool.held_blocks == 1
    b = pool.allocate(30 * 7, np.float32)
    drv.memcpy_dtoh(b, dev)
    np.testing.assert_array_equal(b.reshape((30, 7), order="F"), data)
    assert pool.held_blocks == 0
    b.base.free()
    pool.stop_holding()
    assert pool.held_blocks == 0 and pool.managed_bytes == 0
