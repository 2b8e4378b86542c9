# SPDX-License-Identifier: MIT
"""PyCUDA's copy calls on the CPU, through the stand-in driver (tests/fakecuda.c,
whose device memory is host memory, so copies really move bytes): which path
memcpy_htod / memcpy_dtoh, to_device / from_device and In / Out / InOut take
(the staging of src/staging.c for pageable memory of 1 MiB or more, the driver's
cuMemcpyHtoD / cuMemcpyDtoH otherwise), on which stream the staged DMA runs (the
legacy default stream, as the driver's synchronous copy), that the bytes arrive,
and the errors of bad arguments."""

import os
import subprocess
import sys
import textwrap

import pytest

from test_launch_fakedriver import build_fake_driver, c_compiler, toolkit_include

pytestmark = pytest.mark.skipif(toolkit_include() is None or c_compiler() is None,
                                reason="needs a C compiler and a CUDA toolkit's cuda.h")


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    return build_fake_driver(tmp_path_factory.mktemp("fakecuda_copy"))


SETUP = """
import ctypes, os, threading, time
import numpy as np
from barecuda import driver as drv, _driver
from barecuda.bench import launch as L
drv.init()
ctx = drv.Device(0).retain_primary_context()
ctx.push()
fake = ctypes.CDLL(os.environ["BARECUDA_LIBCUDA"])
MiB = 1 << 20
rng = np.random.default_rng(7)
CHUNK = _driver._staging_config()["chunk_mib"] * MiB

def counts():
    '''Copies since the last call: cuMemcpyHtoD, cuMemcpyDtoH, HtoDAsync, DtoHAsync,
    Async ones on a stream other than the legacy one, Async bytes.'''
    c = (ctypes.c_ulonglong * 6)()
    fake.fake_copy_counts(c)
    return dict(zip(("htod", "dtoh", "htod_async", "dtoh_async", "on_stream", "bytes"), c))

def staged(direction, n):
    '''The counts a staged copy of n bytes leaves: its chunks, Async, legacy stream.'''
    chunks = -(-n // CHUNK)
    return dict(htod=0, dtoh=0, on_stream=0, bytes=n,
                htod_async=chunks if direction == "htod" else 0,
                dtoh_async=chunks if direction == "dtoh" else 0)

def direct(direction):
    return dict(htod=direction == "htod", dtoh=direction == "dtoh", htod_async=0,
                dtoh_async=0, on_stream=0, bytes=0)

def raises(exc, text, fn, *args):
    try:
        fn(*args)
    except exc as e:
        assert text in str(e), (text, str(e))
    else:
        raise AssertionError(f"no {exc.__name__} ({text})")

counts()
"""

# below the threshold, at it, odd sizes, more chunks than workers
SIZES = "[4096, MiB - 1, MiB, MiB + 1, 3 * MiB + 17, 9 * MiB + 5, 21 * MiB + 3]"


def run_with(lib, body):
    env = dict(os.environ, BARECUDA_LIBCUDA=str(lib))
    r = subprocess.run([sys.executable, "-c", SETUP + textwrap.dedent(body)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
    return r


def test_memcpy_paths_and_bytes(fake_driver):
    run_with(fake_driver, f"""
    for n in {SIZES}:
        host = rng.integers(0, 256, n, dtype=np.uint8)
        dev = drv.mem_alloc(n)
        drv.memcpy_htod(dev, host)
        want = staged("htod", n) if n >= MiB else direct("htod")
        assert counts() == want, (n, want)
        for back in (np.empty(n, np.uint8), np.zeros(n, np.uint8)):   # new, in memory
            drv.memcpy_dtoh(back, dev)
            want = staged("dtoh", n) if n >= MiB else direct("dtoh")
            assert counts() == want, (n, want)
            assert np.array_equal(back, host), n
        # other buffers: bytes, memoryview, Fortran order, another dtype; int pointers
        drv.memcpy_htod(int(dev), host.tobytes())
        back = bytearray(n)
        drv.memcpy_dtoh(memoryview(back), int(dev))
        assert bytes(back) == host.tobytes()
        if n % 8 == 0:
            f = np.asfortranarray(host.view(np.uint32).reshape(2, -1))
            drv.memcpy_htod(dev, f)
            out = np.empty_like(f)
            drv.memcpy_dtoh(out, dev)
            assert np.array_equal(out, f) and out.flags.f_contiguous
        drv.memcpy_htod(dev, host)
        counts()
        # a copy smaller than the allocation, into its start
        if n > 2:
            drv.memcpy_htod(dev, host[: n // 2][::-1].copy())
            drv.memcpy_dtoh(back := np.empty(n, np.uint8), dev)
            assert np.array_equal(back[: n // 2], host[: n // 2][::-1])
            assert np.array_equal(back[n // 2:], host[n // 2:])
        counts()
        dev.free()
    print("ok")
    """)


def test_known_host_memory_goes_to_the_driver(fake_driver):
    run_with(fake_driver, """
    n = 5 * MiB + 3
    dev = drv.mem_alloc(n)
    pinned = drv.pagelocked_empty(n, np.uint8)
    pinned[:] = rng.integers(0, 256, n, dtype=np.uint8)
    counts()
    drv.memcpy_htod(dev, pinned)
    assert counts() == direct("htod")
    back = drv.pagelocked_zeros(n, np.uint8)
    counts()
    drv.memcpy_dtoh(back, dev)
    assert counts() == direct("dtoh")
    assert np.array_equal(back, pinned)
    # registered memory too
    plain = np.zeros(n, np.uint8)
    reg = drv.register_host_memory(plain)
    counts()
    drv.memcpy_dtoh(reg, dev)
    assert counts() == direct("dtoh") and np.array_equal(plain, pinned)
    reg.base.unregister()
    counts()
    drv.memcpy_dtoh(plain, dev)                 # pageable again: staged
    assert counts() == staged("dtoh", n)
    print("ok")
    """)


def test_busy_staging_buffers_leave_the_copy_to_the_driver(fake_driver):
    run_with(fake_driver, """
    n = 8 * MiB
    dev, dev2 = drv.mem_alloc(n), drv.mem_alloc(n)
    a = rng.integers(0, 256, n, dtype=np.uint8)
    b = rng.integers(0, 256, n, dtype=np.uint8)
    fake.fake_set_copy_delay_us(100000)         # every staged chunk takes 0.1 s
    counts()
    t = threading.Thread(target=lambda: (ctx.push(), drv.memcpy_htod(dev, a), drv.Context.pop()))
    t.start()
    seen = {"htod_async": 0}
    while seen["htod_async"] == 0:               # the staged copy has begun
        time.sleep(0.005)
        c = counts()
        seen = {"htod_async": c["htod_async"]}
    drv.memcpy_htod(dev2, b)                     # meanwhile: the driver's copy
    after = counts()
    t.join()
    fake.fake_set_copy_delay_us(0)
    assert after["htod"] == 1, after
    out = np.empty(n, np.uint8)
    drv.memcpy_dtoh(out, dev)
    assert np.array_equal(out, a)
    drv.memcpy_dtoh(out, dev2)
    assert np.array_equal(out, b)
    print("ok")
    """)


def test_to_device_from_device(fake_driver):
    run_with(fake_driver, f"""
    for n in {SIZES}:
        host = rng.standard_normal(n // 8 + 1)
        dev = drv.to_device(host)
        assert counts()["htod_async" if host.nbytes >= MiB else "htod"] >= 1
        back = drv.from_device(dev, host.shape, host.dtype)
        assert np.array_equal(back, host)
        like = drv.from_device_like(dev, host)
        assert np.array_equal(like, host) and like.dtype == host.dtype
        c = counts()
        if host.nbytes >= MiB:
            assert c["dtoh_async"] >= 1 and c["on_stream"] == 0, c   # from_device_like: new array
        dev.free()
    # a non-contiguous buffer is copied contiguously first, as before
    host = rng.standard_normal((600, 600))[:, ::3]
    dev = drv.to_device(host)
    assert np.array_equal(drv.from_device(dev, (600, 200), np.float64), host)
    print("ok")
    """)


def test_argument_handlers(fake_driver):
    run_with(fake_driver, f"""
    module = drv.module_from_buffer(L.kernel_ptx((4,)))
    f = module.get_function("empty4")
    other = drv.mem_alloc(256)
    for n in {SIZES}:
        host = rng.integers(0, 256, n, dtype=np.uint8)
        # In: the array reaches the device copy before the launch
        h = drv.In(host)
        f(h, other, np.int32(n), np.float32(0), block=(32, 1, 1), grid=(1, 1))
        assert counts() == (staged("htod", n) if n >= MiB else direct("htod")), n
        dev_copy = np.empty(n, np.uint8)
        drv.memcpy_dtoh(dev_copy, h.dev_alloc)
        assert np.array_equal(dev_copy, host)
        counts()
        # Out: the device copy (given random contents by the test) comes back
        out = np.zeros(n, np.uint8)
        h = drv.Out(out)
        h.get_device_alloc()
        drv.memcpy_htod(h.dev_alloc, host)
        counts()
        f(h, other, np.int32(n), np.float32(0), block=(32, 1, 1), grid=(1, 1))
        assert counts() == (staged("dtoh", n) if n >= MiB else direct("dtoh")), n
        assert np.array_equal(out, host)
        # InOut: both ways
        io = host[::-1].copy()
        f(drv.InOut(io), other, np.int32(n), np.float32(0), block=(32, 1, 1), grid=(1, 1))
        c = counts()
        if n >= MiB:
            assert c["htod_async"] and c["dtoh_async"] and not c["htod"] and not c["dtoh"], c
        assert np.array_equal(io, host[::-1])
    # on a Stream the handlers queue asynchronous copies on it, as before
    s = drv.Stream()
    n = 3 * MiB
    host = rng.integers(0, 256, n, dtype=np.uint8)
    io = host.copy()
    f(drv.InOut(io), other, np.int32(n), np.float32(0), block=(32, 1, 1), grid=(1, 1), stream=s)
    s.synchronize()
    c = counts()
    assert c["htod_async"] == 1 and c["dtoh_async"] == 1 and c["on_stream"] == 2, c
    assert np.array_equal(io, host)
    print("ok")
    """)


def test_bad_arguments(fake_driver):
    run_with(fake_driver, """
    n = 2 * MiB
    dev = drv.mem_alloc(n)
    host = np.zeros(2 * n, np.uint8)
    raises(ValueError, "non-contiguous", drv.memcpy_htod, dev, host[::2])
    raises(ValueError, "non-contiguous", drv.memcpy_dtoh, host[::2], dev)
    raises(ValueError, "copying 4194304 bytes", drv.memcpy_htod, dev, host)
    raises(ValueError, "copying 4194304 bytes", drv.memcpy_dtoh, host, dev)
    ro = np.zeros(n, np.uint8)
    ro.flags.writeable = False
    raises(ValueError, "read-only", drv.memcpy_dtoh, ro, dev)
    raises(ValueError, "read-only", drv.memcpy_dtoh, bytes(n), dev)
    raises(TypeError, "host memory", drv.memcpy_htod, dev, object())
    raises(ValueError, "contiguous", drv.In, host[::2])
    raises(ValueError, "writeable", drv.Out, ro)
    counts()
    dev.free()
    raises(drv.LogicError, "", drv.memcpy_htod, dev, host[:n])
    raises(drv.LogicError, "", drv.memcpy_dtoh, host[:n], dev)
    assert counts() == dict(htod=0, dtoh=0, htod_async=0, dtoh_async=0, on_stream=0, bytes=0)
    # a staged copy after all of that still works
    dev = drv.mem_alloc(n)
    a = rng.integers(0, 256, n, dtype=np.uint8)
    drv.memcpy_htod(dev, a)
    drv.memcpy_dtoh(host[:n], dev)
    assert np.array_equal(host[:n], a)
    print("ok")
    """)
