# SPDX-License-Identifier: MIT
"""The caches a Context owns: recycled small blocks behind GPUArray's temporaries
(src/blockcache.c) and the compiled kernels of the array layer (Context.kernel_cache).
"""

import gc
import os
import weakref

import numpy as np
import pytest

from barecuda import _driver
from barecuda import driver as drv
from barecuda import gpuarray
from barecuda.elementwise import ElementwiseKernel, context_cache

pytestmark = pytest.mark.gpu


def _fresh_cache():
    _driver._block_cache_clear()
    assert _driver._block_cache_info() == (0, 0)


# ------------------------------------------------------------------ blocks

def test_a_freed_block_is_reused_by_the_next_allocation_of_its_class(ctx):
    _fresh_cache()
    a = _driver._array_alloc(4000)
    assert a.size == 4000 and a.is_async
    p = int(a)
    del a
    assert _driver._block_cache_info() == (1, 4096)
    b = _driver._array_alloc(4001)          # same 512-byte class
    assert int(b) == p
    assert _driver._block_cache_info() == (0, 0)
    c = _driver._array_alloc(6000)          # another class: a new block
    assert int(c) != p
    del b, c
    assert _driver._block_cache_info() == (2, 4096 + 6144)
    _fresh_cache()


def test_streams_large_blocks_and_explicit_frees_bypass_the_cache(ctx):
    _fresh_cache()
    s = drv.Stream()
    a = _driver._array_alloc(4000, s)
    del a
    big = _driver._array_alloc((1 << 20) + 1)
    del big
    c = _driver._array_alloc(4000)
    c.free()
    del c
    assert _driver._block_cache_info() == (0, 0)
    s.synchronize()


def test_the_cache_is_bounded(ctx):
    _fresh_cache()
    blocks = [_driver._array_alloc(1 << 20) for _ in range(100)]
    del blocks
    n, nbytes = _driver._block_cache_info()
    assert n == 64 and nbytes == 64 << 20
    _fresh_cache()


# Serial: an allocation of more than the device has takes the pool tens of seconds to
# give up (three tries, with a trim between; 20 s, then 10 s of trim in teardown, on an
# H200), the device most likely full meanwhile: beside it, 14 test processes on one GPU
# saw cuDevicePrimaryCtxRetain fail with CUDA_ERROR_OUT_OF_MEMORY in four other tests.
@pytest.mark.serial
def test_out_of_memory_empties_the_cache_then_raises(ctx):
    _fresh_cache()
    keep = [_driver._array_alloc(512 * (i + 1)) for i in range(8)]
    del keep
    assert _driver._block_cache_info()[0] == 8
    free, total = drv.mem_get_info()
    with pytest.raises(drv.MemoryError, match="cuMemAlloc(FromPool)?Async"):
        _driver._array_alloc(total + (1 << 30))
    assert _driver._block_cache_info() == (0, 0)


def test_bad_arguments(ctx):
    with pytest.raises(ValueError, match="positive"):
        _driver._array_alloc(0)
    with pytest.raises((ValueError, OverflowError)):
        _driver._array_alloc(-5)
    with pytest.raises(TypeError):
        _driver._array_alloc("4000")
    with pytest.raises(TypeError):
        _driver._array_alloc(16, "not a stream")
    with pytest.raises(TypeError, match="1 or 2 arguments"):
        _driver._array_alloc(16, None, None)
    s = drv.Stream()
    s.close()
    with pytest.raises(drv.LogicError):
        _driver._array_alloc(16, s)


def test_recycled_blocks_give_right_answers(ctx, rng):
    """Temporaries of many sizes come and go; every result is checked against NumPy."""
    _fresh_cache()
    for _ in range(300):
        n = int(rng.integers(1, 5000))
        x, y, z = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
        gx, gy, gz = gpuarray.to_gpu(x), gpuarray.to_gpu(y), gpuarray.to_gpu(z)
        got = ((gx + gy) * gz - gx / (abs(gy) + 1)).get()
        np.testing.assert_allclose(got, (x + y) * z - x / (np.abs(y) + 1), rtol=1e-5, atol=1e-5)
        s = (gx * gy).sum().get()
        assert abs(s - np.dot(x.astype(np.float64), y)) <= 1e-3 * (1 + abs(s))


def test_blocks_are_reused_across_streams_in_order(ctx, rng):
    """A block recycled on the default stream is written only after the kernels of
    its previous owner (queued behind a long kernel) have read it."""
    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    gx = gpuarray.to_gpu(x)
    for _ in range(50):
        t = gx * 2            # temporary from the cache
        u = t + 1             # reads t
        del t                 # back to the cache, in stream order
        w = gx * 0            # may get t's block: must not disturb u
        np.testing.assert_allclose(u.get(), x * 2 + 1, rtol=1e-6)
        np.testing.assert_array_equal(w.get(), np.zeros(n, np.float32))


def test_detach_gives_the_blocks_back():
    dev = drv.Device(0)
    own = dev.make_context()
    try:
        a = _driver._array_alloc(4000)
        del a
        assert _driver._block_cache_info() == (1, 4096)
    finally:
        drv.Context.pop()
        own.detach()
    # a detached context's blocks went with it; the primary context starts clean
    prim = dev.retain_primary_context()
    prim.push()
    try:
        _driver._block_cache_clear()
        assert _driver._block_cache_info() == (0, 0)
    finally:
        drv.Context.pop()
        prim.detach()


# ------------------------------------------------------------------ kernels

_SRC = ("float *x, float *y", "y[i] = x[i] * 3.0f")


def test_kernel_cache_is_the_contexts(ctx):
    cache = ctx.kernel_cache
    assert isinstance(cache, dict) and ctx.kernel_cache is cache
    assert context_cache() is cache
    k = ElementwiseKernel(*_SRC, name="cached_triple")
    x = gpuarray.to_gpu(np.arange(10, dtype=np.float32))
    y = gpuarray.empty_like(x)
    k(x, y)
    assert any(isinstance(key, tuple) and key[0] == k._key for key in cache)
    np.testing.assert_array_equal(y.get(), np.arange(10, dtype=np.float32) * 3)


def test_a_detached_context_drops_its_kernels_and_refuses_the_cache():
    own = drv.Device(0).make_context()
    try:
        k = ElementwiseKernel(*_SRC, name="own_triple")
        x = gpuarray.to_gpu(np.ones(5, np.float32))
        y = gpuarray.empty_like(x)
        k(x, y)
        assert len(own.kernel_cache) > 0
    finally:
        drv.Context.pop()
        own.detach()
    with pytest.raises(drv.LogicError, match="detached"):
        own.kernel_cache


@pytest.mark.skipif(bool(os.environ.get("BARECUDA_SANITIZE")),
                    reason="under compute-sanitizer two DeviceAllocations of the test stay "
                           "referenced (cause not found yet); passes in the normal GPU run")
def test_kernels_do_not_keep_a_context_alive():
    """Kernels compiled in a context that nobody references any more do not keep
    it: the collector frees the context, its modules and its blocks."""
    k = ElementwiseKernel(*_SRC, name="weak_triple")
    own = drv.Device(0).make_context()
    x = gpuarray.to_gpu(np.full(100, 2, np.float32))
    y = gpuarray.empty_like(x)
    k(x, y)
    z = x + y                               # a gpuarray kernel and a cached block too
    np.testing.assert_array_equal(z.get(), np.full(100, 8, np.float32))
    drv.Context.pop()
    ref = weakref.ref(own)
    del own, x, y, z
    gc.collect()
    assert ref() is None, _holders(ref())
    # the kernel object still works in another context
    prim = drv.Device(0).retain_primary_context()
    prim.push()
    try:
        x = gpuarray.to_gpu(np.ones(4, np.float32))
        y = gpuarray.empty_like(x)
        k(x, y)
        np.testing.assert_array_equal(y.get(), np.full(4, 3, np.float32))
    finally:
        drv.Context.pop()
        prim.detach()


def _holders(obj):
    """What still refers to obj (for the failure message)."""
    out = []
    for r in gc.get_referrers(obj):
        if isinstance(r, dict):
            out.append(("dict", [k for k, v in r.items() if v is obj][:3], list(r)[:8]))
        else:
            out.append(type(r).__name__)
    return out


def test_entries_of_dead_kernels_are_swept(ctx):
    cache = ctx.kernel_cache
    x = gpuarray.to_gpu(np.ones(8, np.float32))
    y = gpuarray.empty_like(x)
    before = len(cache)
    for _ in range(150):
        k = ElementwiseKernel(*_SRC, name="swept_triple")
        k(x, y)
        del k
    assert len(cache) < before + 100
    np.testing.assert_array_equal(y.get(), np.full(8, 3, np.float32))
