# SPDX-License-Identifier: MIT
"""The order of driver calls when a context or a stream goes (detach, reset,
garbage collection, Stream.close), checked on the CPU against
tests/fake_driver/libcuda_log.c, a stand-in libcuda that logs them.

On a GPU, freeing memory into an array pool after cuMemPoolDestroy made the
driver crash (SIGFPE, SIGSEGV) or hang in a later cuMemAllocFromPoolAsync: every
free into a context's pool must come before the pool's destruction, and the
pool must only go once the context is idle (cuCtxSynchronize)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FAKE = Path(__file__).parent / "fake_driver" / "libcuda_log.c"

PROLOGUE = (
    "import gc\n"
    "from barecuda import driver as drv, _driver\n"
    "drv.init()\n"
    "dev = drv.Device(0)\n"
    "ctx = dev.retain_primary_context()\n"
    "ctx.push()\n"
    "big = _driver._array_alloc(4 << 20)\n"     # past the block cache: from the pool
    "small = _driver._array_alloc(100)\n"       # a block, kept by the cache once freed
    "ctx.kernel_cache['state'] = big\n"         # as rand()'s generator state is
    "del big, small\n"
    "drv.Context.pop()\n")

FIRST, SECOND = "0x100000000", "0x100400000"   # the fake's first two addresses
# a context's array pool is made keeping what is freed into it
POOL_MADE = ["cuMemPoolCreate", "cuMemPoolSetAttribute release threshold 0xffffffffffffffff"]
EXPECTED_END = [f"cuMemFreeAsync {FIRST}", f"cuMemFreeAsync {SECOND}", "cuCtxSynchronize",
                "cuMemPoolDestroy", "cuDevicePrimaryCtxRelease 0"]


@pytest.fixture(scope="module")
def fake_libcuda(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler to build the fake driver")
    out = tmp_path_factory.mktemp("fake_driver") / "libcuda.so.1"
    subprocess.run([cc, "-O1", "-shared", "-fPIC", str(FAKE), "-o", str(out)], check=True)
    return out


def run_logged(fake_libcuda, tmp_path, code):
    log = tmp_path / "calls.log"
    env = dict(os.environ, BARECUDA_LIBCUDA=str(fake_libcuda), FAKE_CUDA_LOG=str(log))
    env.pop("CUDA_DEVICE", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, cwd="/", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok", r.stdout + r.stderr
    return log.read_text().splitlines()


def test_the_fake_driver_logs_allocations(fake_libcuda, tmp_path):
    calls = run_logged(fake_libcuda, tmp_path, PROLOGUE + "print('ok')\n")
    assert calls[:5] == ["cuDevicePrimaryCtxRetain", *POOL_MADE,
                         f"cuMemAllocFromPoolAsync {FIRST}", f"cuMemAllocFromPoolAsync {SECOND}"]


@pytest.mark.parametrize("ending", [
    "ctx.detach()\nassert ctx.released and ctx.array_pool is None\n",
    # the kernel cache's arrays hold the context: a cycle the collector breaks
    "del ctx\ngc.collect()\n",
], ids=["detach", "collected"])
def test_every_free_into_the_pool_comes_before_destroying_it(fake_libcuda, tmp_path, ending):
    calls = run_logged(fake_libcuda, tmp_path, PROLOGUE + ending + "print('ok')\n")
    assert calls[5:] == EXPECTED_END


def test_reset_frees_before_destroying(fake_libcuda, tmp_path):
    calls = run_logged(fake_libcuda, tmp_path, PROLOGUE + (
        "dev.reset_primary_context()\n"
        "assert ctx.released\n"
        "print('ok')\n"))
    # a reset frees the memory itself; what matters is that no free comes after the
    # pool's destruction
    destroyed = calls.index("cuMemPoolDestroy")
    assert calls.index(f"cuMemFreeAsync {FIRST}") < destroyed
    assert calls.index("cuCtxSynchronize") < destroyed
    assert not any(c.startswith("cuMemFreeAsync") for c in calls[destroyed:])


MARK = "mark = lambda text: open(os.environ['FAKE_CUDA_LOG'], 'a').write(text + '\\n')\n"

KEEP = (
    "import gc, os\n"
    "from barecuda import driver as drv, _driver\n"
    + MARK +
    "drv.init()\n"
    "ctx = drv.Device(0).retain_primary_context()\n"
    "ctx.push()\n"
    "kept = _driver._array_alloc(4 << 20)\n"
    "plain = drv.mem_alloc(1000)\n"
    "drv.Context.pop()\n"
    "ctx.detach()\n"
    "mark('-- detached')\n"
    "assert ctx.released and ctx.array_pool is None and kept.context is ctx\n"
    "for obj in (kept, plain):\n"
    "    try:\n"
    "        int(obj)\n"
    "    except drv.LogicError as e:\n"
    "        assert 'detached' in str(e), e\n"
    "    else:\n"
    "        raise AssertionError('a detached context\\'s memory was usable')\n")

# detach() with memory alive: the retain and the pool stay, but the pool gives back
# what is freed into it from then on
KEPT_START = ["cuDevicePrimaryCtxRetain", *POOL_MADE, f"cuMemAllocFromPoolAsync {FIRST}",
              f"cuMemAlloc {SECOND}", "cuMemPoolSetAttribute release threshold 0",
              "cuMemPoolTrimTo 0", "-- detached"]


def test_memory_kept_past_detach_is_freed_into_a_live_pool_then_the_retain_goes(
        fake_libcuda, tmp_path):
    # Another retain (another wrapper, CuPy, PyTorch) may keep the primary context
    # alive: memory kept past detach() must still be freed, into a pool that is
    # not destroyed yet, and the retain given back only after the last of it.
    calls = run_logged(fake_libcuda, tmp_path, KEEP + (
        "assert 'retained until 2 allocation(s) made in it are freed' in repr(ctx), repr(ctx)\n"
        "plain.free()\n"
        "mark('-- plain freed')\n"
        "assert 'retained until 1 allocation(s)' in repr(ctx), repr(ctx)\n"
        "del kept\n"
        "gc.collect()\n"
        "assert repr(ctx).endswith('(primary, detached)>'), repr(ctx)\n"
        "print('ok')\n"))
    assert calls == KEPT_START + [f"cuMemFree {SECOND}", "-- plain freed",
                                  f"cuMemFreeAsync {FIRST}", "cuCtxSynchronize",
                                  "cuMemPoolDestroy", "cuDevicePrimaryCtxRelease 0"]


def test_memory_kept_past_detach_and_freed_on_another_thread_lets_the_context_go_there(
        fake_libcuda, tmp_path):
    # that thread has no context current: the free, the synchronize and the pool's
    # destruction run with the detached context pushed for them, then popped
    calls = run_logged(fake_libcuda, tmp_path, KEEP + (
        "import threading\n"
        "plain.free()\n"
        "seen = []\n"
        "def work():\n"
        "    kept.free()\n"
        "    seen.append(drv.Context.get_current())\n"
        "t = threading.Thread(target=work)\n"
        "t.start()\n"
        "t.join()\n"
        "assert seen == [None], seen\n"
        "assert repr(ctx).endswith('(primary, detached)>'), repr(ctx)\n"
        "print('ok')\n"))
    assert calls == KEPT_START + [f"cuMemFree {SECOND}", f"cuMemFreeAsync {FIRST}",
                                  "cuCtxSynchronize", "cuMemPoolDestroy",
                                  "cuDevicePrimaryCtxRelease 0"]


# a script's start for host memory and streams: the primary context pushed, and
# mark() to write a line of its own into the log
HOST_START = (
    "import gc, os\n"
    "import numpy as np\n"
    "from barecuda import driver as drv\n"
    + MARK +
    "drv.init()\n"
    "ctx = drv.Device(0).retain_primary_context()\n"
    "ctx.push()\n")


def test_host_memory_kept_past_detach_holds_the_retain_until_it_is_freed(fake_libcuda, tmp_path):
    calls = run_logged(fake_libcuda, tmp_path, (
        HOST_START +
        "pinned = drv.pagelocked_empty(1000, np.float32)\n"
        "pinned[:] = 1.5\n"
        "registered = drv.register_host_memory(np.ones(4096, np.uint8))\n"
        "drv.Context.pop()\n"
        "ctx.detach()\n"
        "mark('-- detached')\n"
        "assert float(pinned.sum()) == 1500.0\n"  # host memory stays readable
        "try:\n"
        "    registered.base.get_device_pointer()\n"
        "except drv.LogicError as e:\n"
        "    assert 'detached' in str(e), e\n"
        "else:\n"
        "    raise AssertionError('registered memory of a detached context was used')\n"
        "del pinned\n"
        "gc.collect()\n"
        "mark('-- pinned freed')\n"
        "registered.base.unregister()\n"
        "print('ok')\n"))
    assert calls == ["cuDevicePrimaryCtxRetain", "cuMemHostAlloc", "cuMemHostRegister 4096 bytes",
                     "-- detached", "cuMemFreeHost", "-- pinned freed", "cuMemHostUnregister",
                     "cuDevicePrimaryCtxRelease 0"]


@pytest.mark.parametrize("stream_left", ["open", "closed"])
def test_detach_lets_streams_go_of_the_host_buffers_they_keep(fake_libcuda, tmp_path, stream_left):
    # A stream keeps the host buffer of an asynchronous copy until it is next known
    # idle.  A stream the program still holds after detach() can no longer be
    # synchronized, so its list held page-locked memory, and through it the
    # context's retain, for as long as the stream lived.  detach() synchronizes
    # such streams first and lets the buffers go (a closed one after a synchronize of
    # the context: close() does not wait for its copies); a stream that keeps
    # nothing, synchronized before, is not synchronized again.
    calls = run_logged(fake_libcuda, tmp_path, (
        HOST_START +
        "s, idle = drv.Stream(), drv.Stream()\n"
        "pinned = drv.pagelocked_empty(1000, np.float32)\n"
        "drv.memcpy_htod_async(0x200000000, pinned, s)\n"
        "drv.memcpy_htod_async(0x200000000, pinned, idle)\n"
        "idle.synchronize()\n"
        + ("s.close()\n" if stream_left == "closed" else "") +
        "del pinned\n"
        "gc.collect()\n"
        "drv.Context.pop()\n"
        "mark('-- detaching')\n"
        "ctx.detach()\n"
        "mark('-- detached')\n"
        "assert repr(ctx).endswith('(primary, detached)>'), repr(ctx)\n"
        "print('ok')\n"))
    start = ["cuDevicePrimaryCtxRetain", "cuStreamCreate 1", "cuStreamCreate 2", "cuMemHostAlloc",
             "cuStreamSynchronize 2"]
    if stream_left == "open":
        assert calls == start + ["-- detaching", "cuStreamSynchronize 1", "cuMemFreeHost",
                                 "cuDevicePrimaryCtxRelease 0", "-- detached"]
    else:  # a closed stream's copies may still run: the whole context is waited for
        assert calls == start + ["cuStreamDestroy 1", "-- detaching", "cuCtxSynchronize",
                                 "cuMemFreeHost", "cuDevicePrimaryCtxRelease 0", "-- detached"]


def test_a_reset_gives_back_the_retain_that_kept_memory_was_holding(fake_libcuda, tmp_path):
    # a reset frees all of the context's memory: what was kept is never freed again
    calls = run_logged(fake_libcuda, tmp_path, KEEP + (
        "drv.Device(0).reset_primary_context()\n"
        "mark('-- reset')\n"
        "del kept, plain\n"
        "gc.collect()\n"
        "print('ok')\n"))
    # (the reset first retains and releases the context once, to learn its handle)
    assert calls == KEPT_START + ["cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease 0",
                                  "cuCtxSynchronize", "cuMemPoolDestroy",
                                  "cuDevicePrimaryCtxRelease 0", "-- reset"]


def test_a_context_of_make_context_is_destroyed_at_detach_even_with_memory_kept(
        fake_libcuda, tmp_path):
    # its memory goes with it: nothing to wait for, and nothing freed afterwards
    calls = run_logged(fake_libcuda, tmp_path, (
        "import gc\n"
        "from barecuda import driver as drv\n"
        "drv.init()\n"
        "ctx = drv.Device(0).make_context()\n"
        "kept = drv.mem_alloc(1000)\n"
        "ctx.detach()\n"
        "assert ctx.released\n"
        "del kept\n"
        "gc.collect()\n"
        "print('ok')\n"))
    assert calls == ["cuCtxCreate", f"cuMemAlloc {FIRST}", "cuCtxDestroy"]


def test_memory_of_a_closed_stream_is_freed_on_the_legacy_stream_after_a_synchronize(
        fake_libcuda, tmp_path):
    # a free on a destroyed stream handle would be a use after free in the driver;
    # while the stream lives, the allocation keeps it, and frees on it first
    calls = run_logged(fake_libcuda, tmp_path, (
        "from barecuda import driver as drv, _driver\n"
        "drv.init()\n"
        "s = drv.Stream()\n"
        "a = _driver._array_alloc(4 << 20, s)\n"
        "s.close()\n"
        "del a\n"
        "t = drv.Stream()\n"
        "b = _driver._array_alloc(4 << 20, t)\n"
        "del t, b\n"
        "print('ok')\n"))
    contract = ["cuDevicePrimaryCtxRetain", "cuStreamCreate 1", *POOL_MADE,
                f"cuMemAllocFromPoolAsync {FIRST} on stream 1", "cuStreamDestroy 1",
                "cuCtxSynchronize", f"cuMemFreeAsync {FIRST}",
                "cuStreamCreate 2", f"cuMemAllocFromPoolAsync {SECOND} on stream 2",
                f"cuMemFreeAsync {SECOND} on stream 2", "cuStreamDestroy 2"]
    assert calls[:len(contract)] == contract
    # then, if the context is let go at exit, in order: idle, its pool, its retain
    assert calls[len(contract):] in (
        [], ["cuCtxSynchronize", "cuMemPoolDestroy", "cuDevicePrimaryCtxRelease 0"])
