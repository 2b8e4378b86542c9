# SPDX-License-Identifier: MIT
"""Context.array_pool: the stream-ordered pool GPUArray memory comes from
(src/blockcache.c).  It keeps freed memory across synchronizes (unlike the
device's default pool, whose settings barecuda leaves alone), gives it back on
out-of-memory (mem_alloc included) or on trim_to(0), and goes with its context."""

import os
import subprocess
import sys
import types

import numpy as np
import pytest

from barecuda import driver as drv
from barecuda import gpuarray

N = 1 << 24  # float32 elements: 64 MiB, far above the block cache's 1 MiB classes
KEEP_ALL = 2**64 - 1


def run_python(code):
    return subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True,
                          text=True, timeout=120, cwd="/", env=dict(os.environ))


# ------------------------------------------------------------------ CPU

def test_array_pool_is_a_read_only_documented_property():
    d = drv.Context.__dict__["array_pool"]
    assert isinstance(d, types.GetSetDescriptorType)
    assert "trim_to(0)" in d.__doc__ and "None" in d.__doc__


def test_mempool_has_cuda_core_attribute_names():
    for name in ("used_mem_current", "used_mem_high", "reserved_mem_current",
                 "reserved_mem_high", "release_threshold", "used", "reserved"):
        assert isinstance(drv.MemPool.__dict__[name], types.GetSetDescriptorType), name
        assert drv.MemPool.__dict__[name].__doc__


def test_mem_alloc_documents_the_retry():
    assert "array_pool" in drv.mem_alloc.__doc__


# ------------------------------------------------------------------ GPU

@pytest.mark.gpu
def test_gpuarray_memory_is_kept_in_the_contexts_own_pool(ctx, rng):
    default = drv.MemPool.default()
    threshold0 = default.release_threshold
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    a, b = gpuarray.to_gpu(x), gpuarray.to_gpu(y)
    pool = ctx.array_pool
    assert isinstance(pool, drv.MemPool)
    assert pool.handle != default.handle and pool.device == ctx.get_device()
    assert pool.release_threshold == KEEP_ALL
    assert drv.Context.get_current().array_pool.handle == pool.handle
    c = a * b + a
    np.testing.assert_allclose(c.get(), x * y + x, rtol=1e-6)
    assert pool.used_mem_current >= 3 * x.nbytes
    assert pool.used == pool.used_mem_current and pool.reserved == pool.reserved_mem_current
    del a, b, c
    ctx.synchronize()
    kept = pool.reserved_mem_current
    assert kept >= pool.used_mem_current + 3 * x.nbytes  # freed, yet still held
    # reused without a new mapping: the pool does not grow for the same work again
    a, b = gpuarray.to_gpu(y), gpuarray.to_gpu(x)
    np.testing.assert_allclose((a - b).get(), y - x, rtol=1e-6)
    del a, b
    ctx.synchronize()
    assert pool.reserved_mem_current == kept
    pool.trim_to(0)
    assert pool.reserved_mem_current <= kept - 3 * x.nbytes
    # still works after trimming, and the default pool's settings were never touched
    a = gpuarray.to_gpu(x)
    np.testing.assert_allclose((a * 2).get(), x * 2, rtol=1e-6)
    assert default.release_threshold == threshold0
    # the user may change the array pool's own threshold
    pool.release_threshold = 0
    assert pool.release_threshold == 0
    pool.release_threshold = KEEP_ALL
    with pytest.raises(ValueError):
        pool.trim_to(-1)
    with pytest.raises(TypeError):
        pool.trim_to("0")


@pytest.mark.gpu
def test_array_pool_on_a_stream_and_repr(ctx, rng):
    s = drv.Stream()
    x = rng.standard_normal(N).astype(np.float32)
    a = gpuarray.to_gpu_async(x, stream=s)
    b = a.mul_add(2.0, a, 1.0, stream=s)
    s.synchronize()
    np.testing.assert_allclose(b.get(), 3 * x, rtol=1e-6)
    pool = ctx.array_pool
    assert pool is not None and "MemPool" in repr(pool)


@pytest.mark.gpu
def test_array_pool_is_none_after_detach_and_its_wrapper_refuses(ctx, rng):
    dev = ctx.get_device()
    own = dev.make_context()
    try:
        assert own.array_pool is None  # nothing allocated yet
        a = gpuarray.to_gpu(rng.standard_normal(N).astype(np.float32))
        pool = own.array_pool
        assert pool is not None and pool.reserved_mem_current >= N * 4
        del a
    finally:
        drv.Context.pop()
        own.detach()
    assert own.array_pool is None
    with pytest.raises(drv.LogicError, match="detached"):
        pool.reserved_mem_current
    with pytest.raises(drv.LogicError, match="detached"):
        pool.trim_to(0)
    with pytest.raises(drv.LogicError, match="detached"):
        pool.release_threshold = 0
    assert pool.handle != 0  # the plain fields still read


@pytest.mark.gpu
@pytest.mark.serial
def test_memory_the_pool_keeps_never_makes_mem_alloc_fail(ctx):
    free, _ = drv.mem_get_info()
    chunk = 1 << 30
    n = max(1, int(free * 0.4) // chunk)
    arrays = [gpuarray.empty(chunk // 4, np.float32) for _ in range(n)]
    for a in arrays:
        a.fill(1.0)
    del arrays, a
    ctx.synchronize()
    pool = ctx.array_pool
    held = pool.reserved_mem_current
    assert held >= n * chunk
    free2, _ = drv.mem_get_info()
    assert free2 < free - n * chunk + (256 << 20)  # the pool really holds it
    want = free2 + held // 2  # more than is free: fits only once the pool gives back
    big = drv.mem_alloc(want)
    drv.memset_d8(big, 3, 4096)
    big.free()
    assert pool.reserved_mem_current < held
    # and GPUArrays still work afterwards
    x = np.arange(N, dtype=np.float32)
    np.testing.assert_array_equal((gpuarray.to_gpu(x) + 1).get(), x + 1)


@pytest.mark.gpu
@pytest.mark.serial
def test_array_allocation_trims_its_pool_when_out_of_memory(ctx):
    free, _ = drv.mem_get_info()
    chunk = 1 << 30
    n = max(1, int(free * 0.4) // chunk)
    arrays = [gpuarray.empty(chunk // 4, np.float32) for _ in range(n)]
    del arrays
    ctx.synchronize()
    held = ctx.array_pool.reserved_mem_current
    # one array larger than what is free now, but smaller than free + held
    free2, _ = drv.mem_get_info()
    nbytes = (free2 + held // 2) & ~((1 << 21) - 1)
    big = gpuarray.empty(nbytes // 4, np.float32)
    big.fill(2.0)
    assert float(big[:4].get().sum()) == 8.0
    del big
    with pytest.raises(drv.MemoryError, match="cuMemAlloc"):
        gpuarray.empty((free + held) // 2 + (8 << 30), np.float32)


@pytest.mark.gpu
def test_detach_frees_the_kernel_caches_arrays_before_the_pool_goes():
    # A GPUArray in a context's kernel cache (rand()'s generator state lives
    # there) was freed into the array pool after the pool was destroyed: the
    # driver then crashed (SIGFPE, SIGSEGV) or hung in a later allocation.  Here
    # a wrapper per round, as a test fixture makes them, while another keeps the
    # primary context alive.
    r = run_python(
        "import numpy as np\n"
        "from barecuda import driver as drv, gpuarray, curandom\n"
        "dev = drv.Device(0)\n"
        "base = dev.retain_primary_context()\n"
        "x = np.random.default_rng(3).standard_normal(1000).astype(np.float32)\n"
        "for i in range(300):\n"
        "    ctx = dev.retain_primary_context()\n"
        "    ctx.push()\n"
        "    a = gpuarray.to_gpu(x)\n"
        "    assert np.array_equal((a + 1).get(), x + 1), i\n"
        "    if i % 2:\n"
        "        ctx.kernel_cache['state'] = gpuarray.empty(1 << 20, np.float32)\n"
        "    else:\n"
        "        u = curandom.rand(4096).get()\n"
        "        assert 0 <= u.min() and u.max() < 1 and u.std() > 0.2, i\n"
        "    assert ctx.array_pool is not None\n"
        "    del a\n"
        "    drv.Context.pop()\n"
        "    ctx.detach()\n"
        "    assert ctx.array_pool is None\n"
        "print('ok')\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok" and r.stderr == ""


@pytest.mark.gpu
@pytest.mark.serial  # reads the device's free memory
def test_memory_kept_past_detach_is_given_back_while_the_context_lives_on():
    # Arrays kept past detach() of one wrapper, while another retain keeps the
    # primary context alive, were never freed: 2 GiB a round ran an 80 GB device
    # out of memory within 40 rounds.  Now the detached wrapper keeps its retain
    # and pool until its last array goes, and the memory comes back; while a
    # small array of every round lives on, the large ones' memory must come back
    # too (the waiting pools keep nothing freed into them; each keeps the 32 MiB
    # chunk its small array lives in, on an H100 with driver 580).
    r = run_python(
        "import numpy as np\n"
        "from barecuda import driver as drv, gpuarray\n"
        "dev = drv.Device(0)\n"
        "base = dev.retain_primary_context()\n"
        "base.push()\n"
        "free0, total = drv.mem_get_info()\n"
        "n = (2 << 30) // 4\n"
        "rounds = int(1.5 * total) // (2 << 30) + 1\n"
        "x = np.random.default_rng(5).standard_normal(1000).astype(np.float32)\n"
        "smalls = []\n"
        "for i in range(rounds):\n"
        "    ctx = dev.retain_primary_context()\n"
        "    ctx.push()\n"
        "    kept = gpuarray.empty(n, np.float32)\n"
        "    kept.fill(float(i))\n"
        "    small = gpuarray.to_gpu(x) * 2\n"
        "    assert kept[n - 3:].get().tolist() == [float(i)] * 3, i\n"
        "    assert np.array_equal(small.get(), x * 2), i\n"
        "    drv.Context.pop()\n"
        "    ctx.detach()\n"
        "    assert ctx.released and ctx.array_pool is None\n"
        "    for obj in (kept, small):\n"
        "        try:\n"
        "            int(obj.gpudata)\n"
        "        except drv.LogicError as e:\n"
        "            assert 'detached' in str(e), e\n"
        "        else:\n"
        "            raise AssertionError('an allocation of a detached context was used')\n"
        "    smalls.append(small)\n"
        "    del kept, small, ctx, obj\n"
        "base.synchronize()\n"
        "free1, _ = drv.mem_get_info()\n"
        "assert free1 > free0 - rounds * (64 << 20), (rounds, free0, free1)\n"
        "del smalls\n"
        "base.synchronize()\n"
        "free2, _ = drv.mem_get_info()\n"
        "assert free2 > free0 - (256 << 20), (rounds, free0, free2)\n"
        "print('ok', rounds, free0 - free1, free0 - free2)\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok") and r.stderr == ""


@pytest.mark.gpu
def test_detach_with_arrays_alive_does_not_crash():
    r = run_python(
        "import gc\n"
        "import numpy as np\n"
        "from barecuda import driver as drv, gpuarray\n"
        "drv.init()\n"
        "for kind in ('owned', 'primary'):\n"
        "    dev = drv.Device(0)\n"
        "    ctx = dev.make_context() if kind == 'owned' else dev.retain_primary_context()\n"
        "    if kind == 'primary':\n"
        "        ctx.push()\n"
        "    x = np.random.default_rng(1).standard_normal(1 << 22).astype(np.float32)\n"
        "    a = gpuarray.to_gpu(x)\n"
        "    b = a * 3\n"
        "    small = gpuarray.to_gpu(x[:100]) + 1\n"
        "    assert np.allclose(b.get(), x * 3)\n"
        "    pool = ctx.array_pool\n"
        "    assert pool is not None\n"
        "    drv.Context.pop()\n"
        "    ctx.detach()\n"
        "    assert ctx.array_pool is None\n"
        "    try:\n"
        "        pool.trim_to(0)\n"
        "    except drv.LogicError:\n"
        "        pass\n"
        "    else:\n"
        "        raise AssertionError('trim_to on a detached pool')\n"
        "    del a, b, small, pool\n"
        "    gc.collect()\n"
        "    del ctx\n"
        "    gc.collect()\n"
        "x = np.arange(1 << 22, dtype=np.float32)\n"
        "a = gpuarray.to_gpu(x)\n"
        "keep = a + 1\n"  # alive at exit: the context goes with the interpreter
        "print('ok')\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok" and r.stderr == ""
