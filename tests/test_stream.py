# SPDX-License-Identifier: MIT
"""Streams: ordering with events, host callbacks, foreign handles, capture."""

import sys
import threading

import numpy as np
import pytest

from barecuda import driver as drv

SRC = r"""
__global__ void spin(long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
__global__ void write_after_spin(int *p, int v, long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
    p[threadIdx.x] = v;
}
__global__ void copy_plus(int *dst, const int *src, int add)
{
    dst[threadIdx.x] = src[threadIdx.x] + add;
}
"""


@pytest.fixture
def mod(ctx):
    from barecuda.compiler import SourceModule
    return SourceModule(SRC)


# ------------------------------------------------------------------ CPU

def test_from_handle_type_checked():
    with pytest.raises(TypeError, match="handle must be an int"):
        drv.Stream.from_handle("0")
    with pytest.raises(TypeError, match="handle must be an int"):
        drv.Stream.from_handle(1.0)


def test_stream_flags_checked():
    with pytest.raises(ValueError, match="unknown flags"):
        drv.Stream(flags=0x80)


# ------------------------------------------------------------------ GPU

@pytest.mark.gpu
def test_attributes_and_protocol(ctx):
    s = drv.Stream(flags=drv.stream_flags.NON_BLOCKING)
    assert s.flags & drv.stream_flags.NON_BLOCKING
    least, greatest = drv.Context.get_stream_priority_range()
    hi = drv.Stream(priority=greatest)
    assert hi.priority == greatest
    assert s.__cuda_stream__() == (0, s.handle)
    assert s.context == ctx
    assert s.is_done()


@pytest.mark.gpu
def test_from_handle_is_borrowed_and_compares_by_handle(ctx):
    s = drv.Stream()
    owner = object()
    b = drv.Stream.from_handle(s.handle, owner=owner)
    assert b == s and hash(b) == hash(s) and b is not s
    assert len({b, s}) == 1
    assert b != drv.Stream()
    b.close()                      # never destroys a borrowed handle
    s.synchronize()
    del b
    s.close()
    s.close()
    with pytest.raises(drv.LogicError, match="closed"):
        s.synchronize()


@pytest.mark.gpu
def test_wait_for_event_orders_streams(mod, rng):
    write = mod.get_function("write_after_spin")
    copy = mod.get_function("copy_plus")
    a = drv.mem_alloc(4 * 32)
    b = drv.mem_alloc(4 * 32)
    drv.memcpy_htod(a, np.zeros(32, np.int32))
    s1, s2 = drv.Stream(flags=1), drv.Stream(flags=1)
    v = int(rng.integers(1, 1000))
    write(a, np.int32(v), np.int64(20_000_000), block=(32, 1, 1), stream=s1)
    evt = drv.Event().record(s1)
    s2.wait_for_event(evt)
    copy(b, a, np.int32(1), block=(32, 1, 1), stream=s2)
    s2.synchronize()
    got = np.zeros(32, np.int32)
    drv.memcpy_dtoh(got, b)
    assert (got == v + 1).all()
    with pytest.raises(TypeError, match="expected an Event"):
        s2.wait_for_event(s1)


@pytest.mark.gpu
def test_callbacks_run_in_order_with_the_gil(mod):
    spin = mod.get_function("spin")
    s = drv.Stream()
    seen = []
    threads = set()
    for i in range(10):
        spin(np.int64(100_000), block=(1, 1, 1), stream=s)
        s.add_callback(lambda i=i: (seen.append(i), threads.add(threading.get_ident())))
    s.synchronize()
    assert seen == list(range(10))
    assert threading.get_ident() not in threads


@pytest.mark.gpu
def test_callback_exception_is_unraisable(ctx, monkeypatch):
    caught = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: caught.append(u.exc_value))
    s = drv.Stream()

    def boom():
        raise ValueError("from callback")
    s.add_callback(boom)
    s.synchronize()
    assert len(caught) == 1 and "from callback" in str(caught[0])
    with pytest.raises(TypeError, match="must be callable"):
        s.add_callback(3)


@pytest.mark.gpu
def test_capture(mod):
    s = drv.Stream()
    assert not s.is_capturing()
    s.begin_capture()
    assert s.is_capturing()
    mod.get_function("spin")(np.int64(10), block=(1, 1, 1), stream=s)
    g = s.end_capture()
    assert not s.is_capturing()
    assert isinstance(g, drv.Graph) and g.num_nodes == 1
    with pytest.raises(ValueError):
        s.begin_capture(mode=99)


@pytest.mark.gpu
def test_closing_a_capturing_stream_ends_the_capture(ctx):
    s = drv.Stream()
    s.begin_capture()
    with pytest.raises(drv.LogicError, match="STREAM_CAPTURE"):
        drv.mem_alloc(16)  # GLOBAL capture mode forbids allocations everywhere
    s.close()
    drv.mem_alloc(16).free()  # the capture ended with the stream


@pytest.mark.gpu
@pytest.mark.parametrize("closed", [False, True], ids=["open", "closed"])
def test_detach_waits_for_a_kept_streams_copies_then_lets_their_buffers_go(ctx, rng, closed):
    # The pinned source of an asynchronous copy is kept by its stream until the
    # stream is next known idle.  A stream still held after detach() can no longer
    # be synchronized: its list kept the page-locked memory, and with it the
    # detached wrapper's retain, for as long as the stream lived.  detach() now
    # waits for such streams' copies and lets their buffers go.
    x = rng.standard_normal(16 << 20).astype(np.float32)   # 64 MiB: still in flight
    dest = drv.mem_alloc(x.nbytes)                        # made in the test's wrapper
    other = drv.Context.get_device().retain_primary_context()
    other.push()   # the newest wrapper of the primary context: the stream is made in it
    try:
        s = drv.Stream()
        pinned = drv.pagelocked_empty(x.shape, x.dtype)
        pinned[:] = x
        drv.memcpy_htod_async(dest, pinned, s)
        if closed:
            s.close()
        del pinned
    finally:
        drv.Context.pop()
    other.detach()
    assert repr(other).endswith("(primary, detached)>"), repr(other)
    with pytest.raises(drv.LogicError, match="detached|closed"):
        s.synchronize()
    back = np.empty_like(x)
    drv.memcpy_dtoh(back, dest)
    np.testing.assert_array_equal(back, x)
