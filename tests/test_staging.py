# SPDX-License-Identifier: MIT
"""Staged pageable copies (src/staging.c) behind GPUArray's to_gpu/set/get."""

import threading

import numpy as np
import pytest

from barecuda import _driver
from barecuda import driver as drv
from barecuda import gpuarray

pytestmark = pytest.mark.gpu

MiB = 1 << 20
# below the staging threshold, at it, odd sizes, several threads' worth
SIZES = [1, 4095, MiB - 1, MiB, 3 * MiB + 17, 9 * MiB + 5, 40 * MiB + 123, 200 * MiB + 7]


@pytest.mark.parametrize("n", SIZES)
def test_round_trip_matches(ctx, rng, n):
    host = rng.integers(0, 256, n, dtype=np.uint8)
    dev = drv.mem_alloc(n)
    _driver._htod_staged(dev, host)
    back = np.empty(n, np.uint8)
    _driver._dtoh_staged(back, dev)
    np.testing.assert_array_equal(back, host)
    # the device really holds it (read back the plain way)
    plain = np.empty(n, np.uint8)
    drv.memcpy_dtoh(plain, dev)
    np.testing.assert_array_equal(plain, host)


def test_gpuarray_transfers_every_layout(ctx, rng):
    for dtype in (np.float64, np.complex64, np.int16, np.bool_):
        a = (rng.standard_normal((700, 3001)) * 50).astype(dtype)
        for host in (a, np.asfortranarray(a)):
            g = gpuarray.to_gpu(host)
            np.testing.assert_array_equal(g.get(), host)
            g.set(host[::-1].copy(order="K"))
            np.testing.assert_array_equal(g.get(), host[::-1])
            out = np.empty_like(host)
            assert g.get(out) is out
            np.testing.assert_array_equal(out, host[::-1])


def test_pinned_and_stream_ordered(ctx, rng):
    n = 16 * MiB
    pinned = drv.pagelocked_empty(n, np.uint8)
    pinned[:] = rng.integers(0, 256, n, dtype=np.uint8)
    dev = drv.mem_alloc(n)
    _driver._htod_staged(dev, pinned)           # known memory: straight to the driver
    back = np.empty(n, np.uint8)
    _driver._dtoh_staged(back, dev)
    np.testing.assert_array_equal(back, pinned)
    s = drv.Stream()
    drv.memset_d8_async(dev, 7, n, s)           # queued before the copy on the same stream
    _driver._dtoh_staged(back, dev, s)
    assert (back == 7).all()
    g = gpuarray.to_gpu(pinned, stream=s)
    np.testing.assert_array_equal(g.get(stream=s), pinned)


def test_threads_at_once(ctx, rng):
    """Four threads copy at once: one gets the staging buffers, the others the
    driver's path; all results are right."""
    n = 24 * MiB + 3
    hosts = [rng.integers(0, 256, n, dtype=np.uint8) for _ in range(4)]
    errors = []

    def work(h):
        try:
            ctx.push()
            try:
                for _ in range(3):
                    g = gpuarray.to_gpu(h)
                    if not np.array_equal(g.get(), h):
                        errors.append("mismatch")
            finally:
                drv.Context.pop()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(h,)) for h in hosts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def round_trip_in_a_context_then_end_it(host):
    """Staged copies of `host` both ways in a make_context() context, which then
    ends (and with it the staging buffers' registration)."""
    own = drv.Device(0).make_context()
    try:
        np.testing.assert_array_equal(gpuarray.to_gpu(host).get(), host)
    finally:
        drv.Context.pop()
        own.detach()


def test_staging_buffers_survive_their_context(rng):
    """The staging buffers registered while a make_context() context was current
    lose their registration with it; the next copy in another context renews it."""
    n = 32 * MiB
    host = rng.integers(0, 256, n, dtype=np.uint8)
    round_trip_in_a_context_then_end_it(host)
    prim = drv.Device(0).retain_primary_context()
    prim.push()
    try:
        np.testing.assert_array_equal(gpuarray.to_gpu(host[::-1].copy()).get(), host[::-1])
    finally:
        drv.Context.pop()
        prim.detach()


def test_staging_buffers_never_write_into_later_pinned_memory(rng):
    """Once the context the staging buffers were registered in is gone, pinned
    memory allocated afterwards may sit where memory of that context was.  Copies
    from then on must land in their destination only: every byte of 96 pinned
    buffers made meanwhile keeps its pattern, and the copies round-trip."""
    n = 48 * MiB + 5
    host = rng.integers(0, 256, n, dtype=np.uint8)
    round_trip_in_a_context_then_end_it(host)
    prim = drv.Device(0).retain_primary_context()
    prim.push()
    try:
        pins = [drv.pagelocked_empty(MiB, np.uint8) for _ in range(96)]
        for i, p in enumerate(pins):
            p.fill(i % 251)
        dev = gpuarray.to_gpu(host[::-1].copy())
        back = np.empty(n, np.uint8)
        dev.get(back)
        np.testing.assert_array_equal(back, host[::-1])
        np.testing.assert_array_equal(dev.get(), host[::-1])
        for i, p in enumerate(pins):
            assert (p == i % 251).all(), f"pinned buffer {i} was written by a staged copy"
    finally:
        drv.Context.pop()
        prim.detach()


def test_bad_arguments(ctx):
    dev = drv.mem_alloc(1024)
    with pytest.raises(ValueError, match="copying 2048 bytes, but the device memory has only 1024"):
        _driver._htod_staged(dev, np.zeros(2048, np.uint8))
    with pytest.raises(ValueError, match="only 1024"):
        _driver._dtoh_staged(np.zeros(2048, np.uint8), dev)
    ro = np.zeros(16, np.uint8)
    ro.flags.writeable = False
    with pytest.raises(TypeError, match="writable"):
        _driver._dtoh_staged(ro, dev)
    with pytest.raises(TypeError, match="contiguous"):
        _driver._htod_staged(dev, np.zeros((8, 8), np.uint8)[:, ::2])
    with pytest.raises(TypeError, match="contiguous"):
        _driver._htod_staged(dev, 3.5)
    with pytest.raises(TypeError):
        _driver._htod_staged("dev", np.zeros(4, np.uint8))
    with pytest.raises(TypeError, match="2 or 3 arguments"):
        _driver._htod_staged(dev)
    with pytest.raises(TypeError):
        _driver._htod_staged(dev, np.zeros(4, np.uint8), "stream")
    dev.free()
    with pytest.raises(drv.LogicError):
        _driver._htod_staged(dev, np.zeros(4, np.uint8))
    _driver._htod_staged(drv.mem_alloc(4), b"")   # nothing to copy
