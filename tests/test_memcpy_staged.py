# SPDX-License-Identifier: MIT
"""PyCUDA's copy calls at the staged rate (issue 32), on the GPU: memcpy_htod,
memcpy_dtoh, to_device / from_device / from_device_like and In / Out / InOut on
sizes around the staging threshold (1 MiB) and large ones, compared with NumPy
on random data; their ordering on the default stream; and bad arguments.  The
same paths on the CPU: tests/test_memcpy_fakedriver.py."""

import numpy as np
import pytest

from barecuda import driver as drv

pytestmark = pytest.mark.gpu

MiB = 1 << 20
# small, just below the threshold, at it, just above, odd sizes not a multiple of
# the 2 MiB chunk, more chunks than workers, large
SIZES = [1, 4096, MiB - 1, MiB, MiB + 1, 3 * MiB + 17, 9 * MiB + 5, 40 * MiB + 123, 64 * MiB,
         64 * MiB + 7]

KERNELS = r"""
extern "C" __global__ void add_one(unsigned char *a, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        a[i] += 1;
}
extern "C" __global__ void spin_then_fill(unsigned char *a, size_t n, unsigned char v,
                                          long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {}
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        a[i] = v;
}
"""


@pytest.fixture
def kernels(ctx):
    from barecuda.compiler import SourceModule

    mod = SourceModule(KERNELS, no_extern_c=True)
    return mod.get_function("add_one"), mod.get_function("spin_then_fill")


def launch(f, *args):
    f(*args, block=(256, 1, 1), grid=(256, 1))


@pytest.mark.parametrize("n", SIZES)
def test_memcpy_round_trip(ctx, rng, n):
    host = rng.integers(0, 256, n, dtype=np.uint8)
    dev = drv.mem_alloc(n)
    drv.memcpy_htod(dev, host)
    fresh = np.empty(n, np.uint8)
    drv.memcpy_dtoh(fresh, dev)
    np.testing.assert_array_equal(fresh, host)
    existing = rng.integers(0, 256, n, dtype=np.uint8)   # in memory, other contents
    drv.memcpy_dtoh(existing, dev)
    np.testing.assert_array_equal(existing, host)
    # other host buffers and an int pointer as the device end
    drv.memcpy_htod(int(dev), host[::-1].tobytes())
    back = bytearray(n)
    drv.memcpy_dtoh(memoryview(back), int(dev))
    assert bytes(back) == host[::-1].tobytes()


@pytest.mark.parametrize("n", [MiB + 1, 9 * MiB + 5, 64 * MiB])
def test_memcpy_typed_and_fortran(ctx, rng, n):
    a = rng.standard_normal((n // 8 // 7 + 1, 7))
    for host in (a, np.asfortranarray(a), a.astype(np.complex64)):
        dev = drv.mem_alloc(host.nbytes)
        drv.memcpy_htod(dev, host)
        out = np.empty_like(host)
        drv.memcpy_dtoh(out, dev)
        np.testing.assert_array_equal(out, host)


@pytest.mark.parametrize("n", [MiB - 1, MiB, 9 * MiB + 5, 64 * MiB])
def test_ordered_on_the_default_stream(ctx, kernels, n):
    """The copy sees the kernel queued before it (the kernel waits a while first),
    and a kernel queued after the htod copy sees its bytes, as with cuMemcpy."""
    add_one, spin_then_fill = kernels
    dev = drv.mem_alloc(n)
    launch(spin_then_fill, dev, np.uintp(n), np.uint8(9), np.int64(20_000_000))
    out = np.empty(n, np.uint8)
    drv.memcpy_dtoh(out, dev)
    assert (out == 9).all()
    # a blocking stream's work is waited for too (the legacy stream's implicit sync)
    s = drv.Stream()
    spin_then_fill(dev, np.uintp(n), np.uint8(4), np.int64(20_000_000), block=(256, 1, 1),
                   grid=(256, 1), stream=s)
    drv.memcpy_dtoh(out, dev)
    assert (out == 4).all()
    host = np.full(n, 200, np.uint8)
    drv.memcpy_htod(dev, host)
    launch(add_one, dev, np.uintp(n))
    drv.memcpy_dtoh(out, dev)
    assert (out == 201).all()


@pytest.mark.parametrize("n", [4096, MiB, 3 * MiB + 17, 64 * MiB + 7])
def test_to_device_from_device(ctx, rng, n):
    host = rng.integers(0, 256, n, dtype=np.uint8)
    dev = drv.to_device(host)
    np.testing.assert_array_equal(drv.from_device(dev, (n,), np.uint8), host)
    f = rng.standard_normal((n // 64 + 1, 3)).astype(np.float32, order="F")
    dev2 = drv.to_device(f)
    back = drv.from_device(dev2, f.shape, f.dtype, order="F")
    np.testing.assert_array_equal(back, f)
    np.testing.assert_array_equal(drv.from_device_like(dev2, f), f)


@pytest.mark.parametrize("n", [4096, MiB - 1, MiB, MiB + 1, 9 * MiB + 5, 64 * MiB])
def test_in_out_inout(ctx, kernels, rng, n):
    add_one, _ = kernels
    host = rng.integers(0, 255, n, dtype=np.uint8)
    # In: the kernel works on the device copy; the host array is untouched
    h = drv.In(host.copy())
    launch(add_one, h, np.uintp(n))
    out = np.empty(n, np.uint8)
    drv.memcpy_dtoh(out, h.dev_alloc)
    np.testing.assert_array_equal(out, host + 1)
    # InOut: the host array comes back incremented
    io = host.copy()
    launch(add_one, drv.InOut(io), np.uintp(n))
    np.testing.assert_array_equal(io, host + 1)
    # Out: what the kernel leaves in the device copy (set here first)
    res = np.zeros(n, np.uint8)
    o = drv.Out(res)
    drv.memcpy_htod(o.get_device_alloc(), host)
    launch(add_one, o, np.uintp(n))
    np.testing.assert_array_equal(res, host + 1)
    # on a stream, as before: queued there, read after synchronizing
    s = drv.Stream()
    io = host.copy()
    add_one(drv.InOut(io), np.uintp(n), block=(256, 1, 1), grid=(256, 1), stream=s)
    s.synchronize()
    np.testing.assert_array_equal(io, host + 1)


def test_known_memory_and_busy_buffers(ctx, rng):
    import threading

    n = 24 * MiB + 3
    pinned = drv.pagelocked_empty(n, np.uint8)
    pinned[:] = rng.integers(0, 256, n, dtype=np.uint8)
    dev = drv.mem_alloc(n)
    drv.memcpy_htod(dev, pinned)
    back = drv.pagelocked_zeros(n, np.uint8)
    drv.memcpy_dtoh(back, dev)
    np.testing.assert_array_equal(back, pinned)
    # four threads at once: one holds the staging buffers, the others the driver's path
    hosts = [rng.integers(0, 256, n, dtype=np.uint8) for _ in range(4)]
    devs = [drv.mem_alloc(n) for _ in range(4)]
    errors = []

    def work(i):
        ctx.push()
        try:
            for _ in range(3):
                drv.memcpy_htod(devs[i], hosts[i])
                out = np.empty(n, np.uint8)
                drv.memcpy_dtoh(out, devs[i])
                if not np.array_equal(out, hosts[i]):
                    errors.append(i)
        finally:
            drv.Context.pop()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_bad_arguments(ctx):
    n = 2 * MiB
    dev = drv.mem_alloc(n)
    host = np.zeros(2 * n, np.uint8)
    with pytest.raises(ValueError, match="non-contiguous"):
        drv.memcpy_htod(dev, host[::2])
    with pytest.raises(ValueError, match="non-contiguous"):
        drv.memcpy_dtoh(host[::2], dev)
    with pytest.raises(ValueError, match="copying 4194304 bytes"):
        drv.memcpy_htod(dev, host)
    with pytest.raises(ValueError, match="copying 4194304 bytes"):
        drv.memcpy_dtoh(host, dev)
    ro = np.zeros(n, np.uint8)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        drv.memcpy_dtoh(ro, dev)
    with pytest.raises(ValueError, match="contiguous"):
        drv.In(host[::2])
    with pytest.raises(ValueError, match="writeable"):
        drv.Out(ro)
    dev.free()
    with pytest.raises(drv.LogicError):
        drv.memcpy_htod(dev, host[:n])
    with pytest.raises(drv.LogicError):
        drv.memcpy_dtoh(host[:n], dev)
