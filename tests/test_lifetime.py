# SPDX-License-Identifier: MIT
"""Lifetimes: released objects raise LogicError, children keep their parents,
exports keep memory alive, cycles are collected, exit is clean."""

import gc
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest

from barecuda import driver as drv
from barecuda.compiler import SourceModule

pytestmark = pytest.mark.gpu

KERNEL = """
__global__ void add_one(float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] += 1.0f;
}
"""


def test_every_released_object_raises_logic_error(ctx):
    a = drv.mem_alloc(64)
    a.free()
    a.free()  # idempotent
    for use in (lambda: int(a), lambda: drv.memcpy_htod(a, np.zeros(4, np.float32)),
                lambda: drv.memset_d8(a, 0, 4)):
        with pytest.raises(drv.LogicError, match="DeviceAllocation was freed"):
            use()
    s = drv.Stream()
    s.close()
    s.close()
    for use in (s.synchronize, s.is_done):
        with pytest.raises(drv.LogicError, match="Stream was closed"):
            use()
    with pytest.raises(drv.LogicError, match="Stream was closed"):
        drv.memcpy_htod_async(drv.mem_alloc(16), np.zeros(4, np.float32), s)
    e = drv.Event()
    e.close()
    with pytest.raises(drv.LogicError, match="Event was closed"):
        e.record()
    with pytest.raises(drv.LogicError, match="Event was closed"):
        e.synchronize()
    mod = SourceModule(KERNEL, cache_dir=False)
    f = mod.get_function("add_one")
    mod.module.unload()
    mod.module.unload()
    with pytest.raises(drv.LogicError, match="Module was unloaded"):
        mod.get_function("add_one")
    with pytest.raises(drv.LogicError, match="unloaded"):
        f(drv.mem_alloc(16), np.int32(4), block=(4, 1, 1))
    h = drv.pagelocked_empty(16, np.float32)
    h.base.free()
    with pytest.raises(drv.LogicError, match="HostAllocation was freed"):
        h.base.get_device_pointer()


def test_children_keep_their_parents(ctx, rng):
    mod = SourceModule(KERNEL, cache_dir=False)
    f = mod.get_function("add_one")
    module_ref = weakref.ref(mod.module)
    del mod
    gc.collect()
    assert module_ref() is not None  # the Function holds its Module
    data = rng.standard_normal(100).astype(np.float32)
    buf = drv.mem_alloc(data.nbytes)
    drv.memcpy_htod(buf, data)
    f(buf, np.int32(100), block=(128, 1, 1))
    out = np.empty_like(data)
    drv.memcpy_dtoh(out, buf)
    np.testing.assert_allclose(out, data + 1)
    del f
    gc.collect()
    assert module_ref() is None  # and lets it go afterwards


def test_detach_cascades_to_children():
    own = drv.Device(0).make_context()
    s = drv.Stream()
    e = drv.Event()
    a = drv.mem_alloc(256)
    mod = SourceModule(KERNEL, cache_dir=False)
    f = mod.get_function("add_one")
    own.detach()
    for use in (s.synchronize, lambda: e.record(s), lambda: int(a),
                lambda: mod.get_function("add_one"),
                lambda: f(a, np.int32(4), block=(4, 1, 1))):
        with pytest.raises(drv.LogicError, match="detached"):
            use()
    # releasing them afterwards is a quiet no-op
    s.close()
    e.close()
    a.free()
    del s, e, a, mod, f
    gc.collect()


def test_exported_memory_stays_alive(ctx, rng):
    h = drv.pagelocked_empty((32,), np.float64)
    base = weakref.ref(h.base)
    view = h[4:12]
    del h
    gc.collect()
    assert base() is not None  # the view's base chain keeps the pinned memory
    view[:] = rng.standard_normal(8)
    dev = drv.mem_alloc(view.nbytes)
    drv.memcpy_htod(dev, view)
    back = np.empty_like(view)
    drv.memcpy_dtoh(back, dev)
    np.testing.assert_array_equal(back, view)
    del view
    gc.collect()
    assert base() is None


def test_async_copy_keeps_its_host_buffer_until_the_stream_is_done(ctx):
    s = drv.Stream()
    host = np.arange(1 << 20, dtype=np.float32)
    ref = weakref.ref(host)
    dev = drv.mem_alloc(host.nbytes)
    drv.memcpy_htod_async(dev, host, s)
    del host
    gc.collect()
    assert ref() is not None
    s.synchronize()
    gc.collect()
    assert ref() is None


def test_reference_cycles_are_collected(ctx):
    s = drv.Stream()
    fired = []

    class Holder:
        pass

    h = Holder()
    h.stream = s
    h.self = h
    s.add_callback(lambda: fired.append(h))  # stream -> callback -> holder -> stream
    s.synchronize()
    ref = weakref.ref(h)
    del h, s
    gc.collect()
    assert fired and ref() is not None  # still held by `fired`
    fired.clear()
    gc.collect()
    assert ref() is None


def test_interpreter_exit_with_every_kind_of_live_object():
    code = (
        "import numpy as np\n"
        "import barecuda.driver as d\n"
        "from barecuda.compiler import SourceModule\n"
        "from barecuda import gpuarray\n"
        f"mod = SourceModule('''{KERNEL}''', cache_dir=False)\n"
        "f = mod.get_function('add_one')\n"
        "own = d.Device(0).make_context()\n"
        "a = d.mem_alloc(1 << 20); s = d.Stream(); e = d.Event().record(s)\n"
        "h = d.pagelocked_zeros(1024, np.float32); m = d.managed_zeros(64, np.float32)\n"
        "d.Context.pop()\n"
        "g = gpuarray.to_gpu(np.ones(10)); x = d.mem_alloc_async(4096)\n"
        # kernels cached in both contexts (cycles the last collections break) and
        # blocks in the block caches
        "t = (g + g).sum(); del t\n"
        "own.push(); o = gpuarray.to_gpu(np.ones(5)) * 2; r = o.sum(); del o; d.Context.pop()\n"
        "keep = [mod, f, own, a, s, e, h, m, g, x, r]\n"
        "print('done')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd="/", env=dict(os.environ))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "done"
    assert r.stderr == ""


def test_primary_context_reset_releases_old_objects_and_starts_afresh():
    code = (
        "import numpy as np\n"
        "from barecuda import driver as drv\n"
        "from barecuda.compiler import SourceModule\n"
        "buf = drv.mem_alloc(1024); s = drv.Stream()\n"
        "m = SourceModule('__global__ void k(float *a) { a[0] = 1; }', cache_dir=False)\n"
        "drv.Device(0).reset_primary_context()\n"
        "for use in (lambda: int(buf), s.synchronize, lambda: m.get_function('k')):\n"
        "    try:\n"
        "        use()\n"
        "    except drv.LogicError as e:\n"
        "        print('OLD OBJECT', 'reset' in str(e))\n"
        "m2 = SourceModule('__global__ void twice(float *a) { a[threadIdx.x] *= 2; }', cache_dir=False)\n"
        "x = np.arange(32, dtype=np.float32)\n"
        "d = drv.mem_alloc(x.nbytes)\n"
        "drv.memcpy_htod(d, x)\n"
        "m2.get_function('twice')(d, block=(32, 1, 1))\n"
        "out = np.empty_like(x)\n"
        "drv.memcpy_dtoh(out, d)\n"
        "print('FRESH', bool((out == 2 * x).all()))\n"
        "del buf, s, m\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd="/", env=dict(os.environ))
    assert r.stdout.count("OLD OBJECT True") == 3, r.stdout + r.stderr
    assert "FRESH True" in r.stdout, r.stdout + r.stderr
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_sticky_fault_fails_clearly_ever_after():
    # The driver cannot recover from an illegal address inside the process (cuda.h:
    # "the process must be terminated and relaunched"); every later call must say so
    # clearly, and exit must still be clean.
    code = (
        "import numpy as np\n"
        "from barecuda import driver as drv\n"
        "from barecuda.compiler import SourceModule\n"
        "buf = drv.mem_alloc(1024)\n"
        "m = SourceModule('__global__ void bad(int *p) { p[threadIdx.x] = 1; }', cache_dir=False)\n"
        "m.get_function('bad')(np.uintp(8), block=(32, 1, 1))\n"
        "for call in (drv.Context.synchronize, lambda: drv.mem_alloc(16), drv.Stream,\n"
        "             lambda: drv.memcpy_htod(buf, np.zeros(4, np.float32))):\n"
        "    try:\n"
        "        call()\n"
        "        print('NO ERROR')\n"
        "    except drv.Error as e:\n"
        "        print('FAULT', type(e).__name__, e.name, 'new process' in str(e))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       cwd="/", env=dict(os.environ))
    assert "NO ERROR" not in r.stdout and r.stdout.count("FAULT ") == 4, r.stdout + r.stderr
    assert r.stdout.count("FAULT LaunchError CUDA_ERROR_ILLEGAL_ADDRESS True") >= 2, r.stdout
    assert r.returncode == 0 and r.stderr == "", r.stderr
