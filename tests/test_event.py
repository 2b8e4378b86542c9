# SPDX-License-Identifier: MIT
"""Events: record, synchronize, query, timing, IPC handles, release."""

import numpy as np
import pytest

from barecuda import driver as drv


# ------------------------------------------------------------------ CPU

def test_bad_flags():
    with pytest.raises(ValueError, match="unknown bits"):
        drv.Event(flags=0x100)
    with pytest.raises(ValueError, match="DISABLE_TIMING"):
        drv.Event(flags=drv.event_flags.INTERPROCESS)
    with pytest.raises(TypeError, match="must be an int"):
        drv.Event(flags="x")


def test_from_ipc_handle_length():
    with pytest.raises(ValueError, match="64 bytes, got 3"):
        drv.Event.from_ipc_handle(b"abc")


# ------------------------------------------------------------------ GPU

@pytest.fixture
def spin(ctx):
    from barecuda.compiler import SourceModule
    return SourceModule(r"""
        __global__ void spin(long long cycles)
        {
            long long t0 = clock64();
            while (clock64() - t0 < cycles) { }
        }""").get_function("spin")


@pytest.mark.gpu
def test_record_synchronize_query_timing(spin):
    s = drv.Stream()
    start = drv.Event()
    end = drv.Event(drv.event_flags.BLOCKING_SYNC)
    assert start.record(s) is start
    spin(np.int64(50_000_000), block=(1, 1, 1), stream=s)
    end.record(stream=s)
    assert end.query() is False
    assert end.synchronize() is end
    assert end.query() is True
    ms = end.time_since(start)
    assert ms > 0.5
    assert start.time_till(end) == pytest.approx(ms)
    assert start.context is not None and start.handle != 0


@pytest.mark.gpu
def test_default_stream_and_errors(ctx):
    e = drv.Event().record()
    e.synchronize()
    with pytest.raises(TypeError, match="must be an Event"):
        e.time_since(3)
    nt = drv.Event(drv.event_flags.DISABLE_TIMING).record().synchronize()
    with pytest.raises(drv.Error, match="cuEventElapsedTime"):
        nt.time_since(e)


@pytest.mark.gpu
def test_close_idempotent(ctx):
    e = drv.Event()
    e.close()
    e.close()
    assert e.handle == 0
    with pytest.raises(drv.LogicError, match="closed"):
        e.record()
    with pytest.raises(drv.LogicError, match="closed"):
        drv.Event().time_since(e)


@pytest.mark.gpu
def test_ipc_handle(ctx):
    e = drv.Event(drv.event_flags.INTERPROCESS | drv.event_flags.DISABLE_TIMING)
    h = e.ipc_handle()
    assert isinstance(h, bytes) and len(h) == 64
    e.record().synchronize()
