# SPDX-License-Identifier: MIT
"""IPC between processes of one host (spawn start method): a child opens exported
memory and compares it with NumPy, writes back; an IPC event orders a child's copy
after the parent's kernel; what an importer sees after the exporter exited; and
the misuse errors (same-process open, closed handle, wrong types).

Ownership, as docs/howto/mpi-nccl.md says: the exporter owns the allocation and
frees it; an importer must close() its IPCMemoryHandle before the exporter frees the
memory or exits.  CUDA leaves the importer's mapping undefined once the exporter is gone;
test_importer_after_the_exporter_exited records what the driver does and checks
only that the importer gets data or a barecuda error, never a crash of the process
that did not misbehave (that part runs in a child too)."""

import multiprocessing
import os

import numpy as np
import pytest

from barecuda import driver as drv

pytestmark = pytest.mark.gpu

SPIN_KERNEL = r"""
extern "C" __global__ void spin_then_fill(int *out, int n, long long cycles, int value)
{
    long long start = clock64();
    while (clock64() - start < cycles) { }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = value + i;
}
"""


def _mp():
    return multiprocessing.get_context("spawn")


def _open_in_child(ctx_device=0):
    from barecuda import driver as d
    d.init()
    ctx = d.Device(ctx_device).retain_primary_context()
    ctx.push()
    return d, ctx


# ------------------------------------------------------------ data exchange

def _reader_writer(handle, n, conn):
    d, ctx = _open_in_child()
    try:
        mem = d.IPCMemoryHandle(handle)
        got = np.empty(n, np.float64)
        d.memcpy_dtoh(got, mem)
        d.memcpy_htod(mem, np.sqrt(got) + 1.0)
        mem.close()
        closed_error = None
        try:
            int(mem)
        except d.LogicError as exc:
            closed_error = str(exc)
        conn.send(("ok", got, closed_error))
    except Exception as exc:  # noqa: BLE001 - report instead of hanging the parent
        conn.send(("error", repr(exc), None))
    finally:
        d.Context.pop()
        ctx.detach()


def test_child_reads_and_writes_exported_memory(ctx, rng):
    data = rng.random(10000)
    mem = drv.mem_alloc(data.nbytes)
    drv.memcpy_htod(mem, data)
    parent, child = _mp().Pipe()
    p = _mp().Process(target=_reader_writer, args=(drv.mem_get_ipc_handle(mem), data.size, child))
    p.start()
    status, got, closed_error = parent.recv()
    p.join(60)
    assert status == "ok", got
    assert p.exitcode == 0
    np.testing.assert_array_equal(got, data)
    assert closed_error and "closed" in closed_error
    back = np.empty_like(data)
    drv.memcpy_dtoh(back, mem)
    np.testing.assert_array_equal(back, np.sqrt(data) + 1.0)
    mem.free()


# ------------------------------------------------------- ordering by event

def _event_waiter(mem_handle, event_handle, n, conn):
    d, ctx = _open_in_child()
    try:
        mem = d.IPCMemoryHandle(mem_handle)
        ev = d.Event.from_ipc_handle(event_handle)
        conn.send("opened")
        conn.recv()                                  # the parent has recorded the event
        s = d.Stream(flags=d.stream_flags.NON_BLOCKING)
        s.wait_for_event(ev)                         # order after the parent's kernel
        got = d.pagelocked_empty(n, np.int32)
        d.memcpy_dtoh_async(got, mem, s)
        s.synchronize()
        conn.send(("ok", np.array(got)))
        ev.close()
        mem.close()
    except Exception as exc:  # noqa: BLE001
        conn.send(("error", repr(exc)))
    finally:
        d.Context.pop()
        ctx.detach()


def test_ipc_event_orders_work_across_processes(ctx):
    from barecuda.compiler import SourceModule
    n = 1 << 16
    mem = drv.mem_alloc(n * 4)
    drv.memcpy_htod(mem, np.full(n, -1, np.int32))
    ev = drv.Event(drv.event_flags.INTERPROCESS | drv.event_flags.DISABLE_TIMING)
    fn = SourceModule(SPIN_KERNEL, no_extern_c=True).get_function("spin_then_fill")
    parent, child = _mp().Pipe()
    p = _mp().Process(target=_event_waiter,
                      args=(drv.mem_get_ipc_handle(mem), ev.ipc_handle(), n, child))
    p.start()
    assert parent.recv() == "opened"
    stream = drv.Stream()
    clock = drv.Context.get_device().get_attribute(drv.device_attribute.CLOCK_RATE)  # kHz
    fn(mem, np.int32(n), np.int64(clock * 200), np.int32(1000),   # about 200 ms of spinning
       block=(256, 1, 1), grid=((n + 255) // 256, 1), stream=stream)
    ev.record(stream)
    parent.send("recorded")
    status, got = parent.recv()
    p.join(60)
    assert status == "ok", got
    np.testing.assert_array_equal(got, 1000 + np.arange(n, dtype=np.int32))
    stream.synchronize()
    mem.free()


# ---------------------------------------------------- the exporter exits

def _exporter(n, conn, how="free"):
    d, ctx = _open_in_child()
    mem = d.mem_alloc(n * 8)
    d.memcpy_htod(mem, np.arange(n, dtype=np.float64))
    conn.send(d.mem_get_ipc_handle(mem))
    conn.recv()                                      # the importer has opened it
    if how == "die":
        os._exit(3)                                  # a crash: nothing freed, no teardown
    mem.free()
    d.Context.pop()
    ctx.detach()


def _importer(handle, n, conn):
    d, ctx = _open_in_child()
    try:
        mem = d.IPCMemoryHandle(handle)
        first = np.empty(n, np.float64)
        d.memcpy_dtoh(first, mem)
        conn.send(("opened", first))
        conn.recv()                                  # the exporter has exited
        try:
            later = np.empty(n, np.float64)
            d.memcpy_dtoh(later, mem)
            outcome = ("readable", later)
        except d.Error as exc:
            outcome = ("error", f"{type(exc).__name__}: {exc}")
        try:
            mem.close()
        except d.Error as exc:
            outcome = outcome + (f"close: {type(exc).__name__}: {exc}",)
        conn.send(outcome)
    except Exception as exc:  # noqa: BLE001
        conn.send(("failed", repr(exc)))
    finally:
        try:
            d.Context.pop()
            ctx.detach()
        except d.Error:
            pass


@pytest.mark.parametrize("how", ["free", "die"])
def test_importer_after_the_exporter_exited(how, record_property):
    """The exporter frees and exits, or dies holding the memory (os._exit): the
    importer's next copy either still reads the data or raises a driver.Error, and
    close() does not crash it (docs/howto/mpi-nccl.md's ownership rule: close before
    the exporter frees; what comes after is the driver's choice)."""
    n = 4096
    exp_parent, exp_child = _mp().Pipe()
    imp_parent, imp_child = _mp().Pipe()
    exporter = _mp().Process(target=_exporter, args=(n, exp_child, how))
    exporter.start()
    handle = exp_parent.recv()
    importer = _mp().Process(target=_importer, args=(handle, n, imp_child))
    importer.start()
    status, first = imp_parent.recv()
    assert status == "opened", first
    np.testing.assert_array_equal(first, np.arange(n, dtype=np.float64))
    exp_parent.send("go")                            # the exporter frees and exits
    exporter.join(60)
    assert exporter.exitcode == (0 if how == "free" else 3)
    imp_parent.send("exporter gone")
    outcome = imp_parent.recv()
    importer.join(60)
    assert outcome[0] in ("readable", "error"), outcome
    same = outcome[0] == "readable" and np.array_equal(outcome[1], np.arange(n, dtype=np.float64))
    seen = f"{outcome[0]}{' (the same data)' if same else ''} {outcome[2:] or ''}"
    record_property(f"importer_after_exporter_{how}", seen)
    print(f"importer after the exporter's {how}: {seen}")
    assert importer.exitcode == 0, "the importer crashed after the exporter exited"


# ------------------------------------------------------------------ misuse

def test_same_process_open_is_a_clear_error(ctx):
    mem = drv.mem_alloc(256)
    handle = drv.mem_get_ipc_handle(mem)
    with pytest.raises(drv.LogicError, match="exported by this same process"):
        drv.IPCMemoryHandle(handle)
    ev = drv.Event(drv.event_flags.INTERPROCESS | drv.event_flags.DISABLE_TIMING)
    with pytest.raises(drv.LogicError, match="exported by this same process"):
        drv.Event.from_ipc_handle(ev.ipc_handle())
    mem.free()


def test_wrong_types_and_non_ipc_objects(ctx):
    mem = drv.mem_alloc(256)
    with pytest.raises(TypeError, match="handle must be the bytes from mem_get_ipc_handle"):
        drv.IPCMemoryHandle(mem)
    with pytest.raises(TypeError):
        drv.Event.from_ipc_handle(12)
    with pytest.raises(ValueError, match="64 bytes"):
        drv.Event.from_ipc_handle(b"short")
    with pytest.raises(drv.Error):
        drv.Event().ipc_handle()                    # not an INTERPROCESS event
    mem.free()
    with pytest.raises(drv.LogicError, match="freed"):
        drv.mem_get_ipc_handle(mem)


def _open_event_as_memory(event_handle, conn):
    d, ctx = _open_in_child()
    try:
        d.IPCMemoryHandle(event_handle)
        conn.send("opened?!")
    except d.Error as exc:
        conn.send(f"{type(exc).__name__}: {exc}")
    finally:
        d.Context.pop()
        ctx.detach()


def test_event_handle_is_not_a_memory_handle(ctx):
    ev = drv.Event(drv.event_flags.INTERPROCESS | drv.event_flags.DISABLE_TIMING)
    parent, child = _mp().Pipe()
    p = _mp().Process(target=_open_event_as_memory, args=(ev.ipc_handle(), child))
    p.start()
    got = parent.recv()
    p.join(60)
    assert p.exitcode == 0
    assert got != "opened?!" and "cuIpcOpenMemHandle failed" in got
