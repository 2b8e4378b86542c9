# SPDX-License-Identifier: MIT
"""Contexts: primary and owned, the per-thread stack, detach, cleanup at exit."""

import os
import subprocess
import sys
import threading

import pytest

from barecuda import driver as drv

pytestmark = pytest.mark.gpu


def run_python(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd="/", env=dict(os.environ))


def in_thread(fn):
    box = {}

    def target():
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - reported to the test thread
            box["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join(60)
    if "error" in box:
        raise box["error"]
    return box.get("value")


def test_primary_context_push_pop_and_with(ctx):
    assert drv.Context.get_current() is ctx
    assert ctx.is_primary and not ctx.released
    assert ctx.device == drv.Device(0)
    assert drv.Context.get_device() == drv.Device(0)
    other = drv.Device(0).retain_primary_context()
    assert other == ctx and other.handle == ctx.handle
    with other:
        assert drv.Context.get_current() == other
    # two objects hold a retain each on the same primary context: equal, not identical
    assert drv.Context.get_current() == ctx
    other.detach()
    other.detach()  # idempotent
    assert other.released


def test_make_context_pushes_and_pop_returns_it(ctx):
    mine = drv.Device(0).make_context()
    try:
        assert not mine.is_primary
        assert drv.Context.get_current() is mine
        assert mine != ctx
        assert mine.get_api_version() >= 3020
        popped = drv.Context.pop()
        assert popped is mine
        assert drv.Context.get_current() is ctx
    finally:
        mine.detach()
    with pytest.raises(drv.LogicError, match="detached"):
        mine.push()
    with pytest.raises(drv.LogicError, match="detached"):
        mine.get_api_version()


def test_with_is_exception_safe(ctx):
    mine = drv.Device(0).make_context()
    drv.Context.pop()
    try:
        with pytest.raises(ZeroDivisionError):
            with mine:
                assert drv.Context.get_current() is mine
                1 / 0
        assert drv.Context.get_current() is ctx
    finally:
        mine.detach()


def test_stack_is_per_thread(ctx):
    # A new thread starts with no current context and its pushes stay its own.
    assert in_thread(drv.Context.get_current) is None

    def push_and_report():
        with ctx:
            inner = drv.Context.get_current()
        return inner, drv.Context.get_current()

    inner, after = in_thread(push_and_report)
    assert inner == ctx and after is None
    assert drv.Context.get_current() is ctx


def test_pop_on_empty_stack_is_logic_error():
    def pop_empty():
        with pytest.raises(drv.LogicError, match="no context is current"):
            drv.Context.pop()
        return True

    assert in_thread(pop_empty)


def test_default_context_is_activated_lazily():
    def alloc_without_context():
        assert drv.Context.get_current() is None
        a = drv.mem_alloc(1024)
        cur = drv.Context.get_current()
        a.free()
        return cur

    cur = in_thread(alloc_without_context)
    assert cur is not None and cur.is_primary


def test_limits_and_cache_config(ctx):
    old = drv.Context.get_limit(drv.limit.STACK_SIZE)
    drv.Context.set_limit(drv.limit.STACK_SIZE, old + 1024)
    assert drv.Context.get_limit(drv.limit.STACK_SIZE) >= old + 1024
    drv.Context.set_limit(drv.limit.STACK_SIZE, old)
    drv.Context.set_cache_config(drv.func_cache.PREFER_SHARED)
    assert drv.Context.get_cache_config() in (drv.func_cache.PREFER_SHARED, drv.func_cache.PREFER_NONE)
    drv.Context.set_cache_config(drv.func_cache.PREFER_NONE)
    with pytest.raises(ValueError, match="out of range"):
        drv.Context.get_limit(999)
    with pytest.raises(TypeError, match="must be an int"):
        drv.Context.get_limit("STACK_SIZE")
    least, greatest = drv.Context.get_stream_priority_range()
    assert greatest <= least
    drv.Context.synchronize()


def test_children_outlive_a_dropped_context_reference():
    dev = drv.Device(0)
    ctx = dev.make_context()
    a = drv.mem_alloc(4096)
    drv.Context.pop()
    del ctx  # the allocation still holds its context
    assert a.context is not None and not a.context.released
    a.free()
    a.context.detach()


def test_detach_makes_children_fail_cleanly():
    ctx = drv.Device(0).make_context()
    a = drv.mem_alloc(4096)
    ctx.detach()  # destroys the context (and its memory)
    with pytest.raises(drv.LogicError, match="detached"):
        int(a)
    a.free()  # a quiet no-op: the memory went with the context
    del a


def test_primary_context_is_shared_with_cupy(ctx):
    cupy = pytest.importorskip("cupy")
    cupy.cuda.runtime.free(cupy.cuda.runtime.malloc(16))  # make CuPy initialise its context
    handle = cupy.cuda.runtime.ctxGetCurrent() if hasattr(cupy.cuda.runtime, "ctxGetCurrent") else None
    if handle is None:
        from cupy.cuda import driver as cdrv
        handle = cdrv.ctxGetCurrent()
    assert int(handle) == ctx.handle


def test_interpreter_exit_with_live_objects_is_clean():
    code = (
        "import barecuda.driver as d\n"
        "c = d.Device(0).make_context()\n"
        "p = d.Device(0).retain_primary_context(); p.push()\n"
        "a = d.mem_alloc(1 << 20); s = d.Stream()\n"
        "keep = [c, p, a, s]\n"
        "print('done')\n"
    )
    r = run_python(code)
    assert r.returncode == 0 and r.stdout.strip() == "done"
    assert r.stderr == ""


def test_autoinit_and_autoprimaryctx():
    r = run_python(
        "import barecuda.autoinit as ai, barecuda.autoprimaryctx as ap, barecuda.driver as d\n"
        "assert d.Context.get_current() == ai.context and ai.context.is_primary\n"
        "assert ap.device == ai.device == d.Device(0)\n"
        "a = d.mem_alloc(100)\n"
        "print('ok')\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok" and r.stderr == ""


def test_cuda_device_env_picks_the_device():
    r = subprocess.run([sys.executable, "-c",
                        "import barecuda.autoinit as ai; print(ai.device.handle)"],
                       capture_output=True, text=True, timeout=120, cwd="/",
                       env=dict(os.environ, CUDA_DEVICE="0"))
    assert r.returncode == 0 and r.stdout.strip() == "0", r.stderr
    r = subprocess.run([sys.executable, "-c", "import barecuda.autoinit"],
                       capture_output=True, text=True, timeout=120, cwd="/",
                       env=dict(os.environ, CUDA_DEVICE="99"))
    assert r.returncode != 0 and "device" in r.stderr
