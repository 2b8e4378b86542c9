# SPDX-License-Identifier: MIT
"""The host pool (src/hostpool.c): memory of the large arrays GPUArray.get()
makes, kept for the next one and page-locked from its second use."""

import gc
import os
import pickle
import threading
import warnings

import numpy as np
import pytest

from barecuda import _driver
from barecuda import driver as drv
from barecuda import gpuarray

MiB = 1 << 20
HUGE = 2 * MiB
BIG = 24 * MiB          # above _HOST_POOL_MIN


def addr(a):
    return a.__array_interface__["data"][0]


def delta(before, after, *keys):
    return tuple(after[k] - before[k] for k in keys)


@pytest.fixture
def pool():
    """The pool emptied of free buffers, with a budget of 256 MiB, restored after."""
    gc.collect()
    budget = _driver._host_pool()["budget"] >> 20
    _driver._host_pool(0)
    _driver._host_pool(256)
    yield
    gc.collect()
    _driver._host_pool(0)
    _driver._host_pool(budget)


def test_tools_host_pool(pool):
    from barecuda import tools
    assert tools.host_pool() == _driver._host_pool()
    assert tools.host_pool(budget_mib=5)["budget"] == 5 * MiB
    with pytest.raises(TypeError):
        tools.host_pool(budget_mib=1.5)


def test_min_is_8_mib():
    assert _driver._HOST_POOL_MIN == 8 * MiB


def test_small_arrays_are_plain_numpy(pool):
    before = _driver._host_pool()
    a = _driver._host_empty((3, 5), np.int16, "F")
    assert a.shape == (3, 5) and a.dtype == np.int16 and a.flags.f_contiguous
    assert a.flags.owndata and a.base is None
    a[:] = 7
    del a
    assert _driver._host_pool() == before


@pytest.mark.parametrize("order", ["C", "F"])
def test_large_array_owns_pool_memory(pool, rng, order):
    shape = (BIG // 8 // 1000, 1000)
    a = _driver._host_empty(shape, np.float64, order)
    info = _driver._host_pool()
    assert a.shape == shape and a.dtype == np.float64
    assert a.flags.c_contiguous if order == "C" else a.flags.f_contiguous
    assert a.flags.owndata and a.base is None and a.flags.writeable
    assert addr(a) % HUGE == 0
    assert info["in_use"] == 1 and info["free_bytes"] == 0
    ref = rng.standard_normal(shape)
    a[:] = ref
    np.testing.assert_array_equal(a, ref)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(a)), ref)
    p = addr(a)
    del a
    info = _driver._host_pool()
    assert info["in_use"] == 0 and info["free_bytes"] == BIG
    # the next array of that size takes the same memory, without a new mapping
    b = _driver._host_empty(shape, np.float64, order)
    after = _driver._host_pool()
    assert addr(b) == p
    assert delta(info, after, "hits", "misses") == (1, 0)


def test_sizes_match_closely(pool):
    a = _driver._host_empty(64 * MiB, np.uint8)
    p = addr(a)
    del a
    # much smaller: not given the 64 MiB buffer
    small = _driver._host_empty(16 * MiB, np.uint8)
    assert addr(small) != p
    # a little smaller: given it
    close = _driver._host_empty(60 * MiB + 5, np.uint8)
    assert addr(close) == p
    # larger: never
    del small, close
    bigger = _driver._host_empty(64 * MiB + 1, np.uint8)
    assert addr(bigger) != p


def test_resize_keeps_contents(pool, rng):
    ref = rng.integers(0, 1 << 30, BIG // 4, dtype=np.int32)
    a = _driver._host_empty(ref.shape, np.int32)
    a[:] = ref
    a.resize(ref.size + 3 * MiB, refcheck=False)           # grows past its buffer
    np.testing.assert_array_equal(a[:ref.size], ref)
    assert (a[ref.size:] == 0).all()                        # NumPy zeroes what it adds
    a.resize(ref.size // 2, refcheck=False)                 # to under half: moves
    np.testing.assert_array_equal(a, ref[:ref.size // 2])
    a.resize(ref.size // 2 - 100, refcheck=False)           # a little: stays
    np.testing.assert_array_equal(a, ref[:ref.size // 2 - 100])
    a.resize(1000, refcheck=False)                          # under the pool's minimum
    np.testing.assert_array_equal(a, ref[:1000])
    a.resize(BIG, refcheck=False)                           # malloc's memory: realloc
    np.testing.assert_array_equal(a[:1000], ref[:1000])


def test_budget_evicts_oldest_free_first(pool):
    arrays = [_driver._host_empty(32 * MiB, np.uint8) for _ in range(4)]
    ptrs = [addr(x) for x in arrays]
    before = _driver._host_pool()
    for i in range(len(arrays)):                        # freed in this order
        arrays[i] = None
    info = _driver._host_pool(96)                       # room for three of them
    assert info["free_bytes"] == 96 * MiB and info["budget"] == 96 * MiB
    assert delta(before, info, "evictions") == (1,)
    took = [_driver._host_empty(32 * MiB, np.uint8) for _ in range(4)]
    # the last freed first; ptrs[0] is gone, so the fourth is a new mapping
    assert [addr(x) for x in took[:3]] == ptrs[:0:-1]
    assert _driver._host_pool()["misses"] == info["misses"] + 1


def test_budget_zero_turns_it_off_and_keeps_arrays_in_use(pool, rng):
    ref = rng.random(BIG // 4, dtype=np.float32)
    a = _driver._host_empty(ref.shape, np.float32)
    a[:] = ref
    info = _driver._host_pool(0)
    assert info["buffers"] == 1 and info["in_use"] == 1     # in use: kept
    np.testing.assert_array_equal(a, ref)
    before = _driver._host_pool()
    b = _driver._host_empty(ref.shape, np.float32)           # the pool is off
    assert b.flags.owndata and _driver._host_pool()["misses"] == before["misses"]
    del a, b
    assert _driver._host_pool()["buffers"] == 0               # past the budget: gone


def test_bad_input():
    with pytest.raises(ValueError, match="negative dimension"):
        _driver._host_empty((-1, 4))
    with pytest.raises(ValueError, match="too large"):
        _driver._host_empty((1 << 62, 8), np.float64)
    with pytest.raises(TypeError, match="Python objects"):
        _driver._host_empty(10, object)
    with pytest.raises(TypeError):
        _driver._host_empty(10, "not a dtype")
    with pytest.raises(ValueError, match="order must be"):
        _driver._host_empty(10, np.float32, "X")
    with pytest.raises(TypeError):
        _driver._host_empty("ten")
    with pytest.raises(MemoryError):
        _driver._host_empty(1 << 60, np.uint8)            # no such mapping
    with pytest.raises(TypeError):
        _driver._host_pool("many")
    with pytest.raises((ValueError, OverflowError)):
        _driver._host_pool(-1)
    with pytest.raises(TypeError):
        _driver._host_pool(1, 2)


def test_threads(pool):
    errors = []

    def work(seed):
        r = np.random.default_rng(seed)
        try:
            for _ in range(6):
                n = int(r.integers(8 * MiB, 20 * MiB))
                a = _driver._host_empty(n, np.uint8)
                a[::4096] = seed
                if not (a[::4096] == seed).all():
                    errors.append(seed)
                del a
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
    ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []
    info = _driver._host_pool()
    assert info["in_use"] == 0 and info["free_bytes"] <= info["budget"]


def test_forked_child_uses_and_frees_pool_memory(pool, rng):
    """A child made by fork() frees the arrays it inherited back into its own copy
    of the pool and makes new ones, while the parent's stay untouched."""
    ref = rng.integers(0, 1 << 16, BIG // 4, dtype=np.int32)
    kept = _driver._host_empty(ref.shape, np.int32)
    kept[:] = ref
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)   # fork with threads around
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            inherited = kept.copy()
            ok = (inherited == ref).all()
            kept[:] = 0                                       # the child's copy of the pages
            before = _driver._host_pool()
            fresh = [_driver._host_empty(BIG, np.uint8) for _ in range(3)]
            for f in fresh:
                f[::4096] = 5
            del fresh, f
            info = _driver._host_pool()
            code = 0 if ok and info["free_bytes"] >= before["free_bytes"] + 3 * BIG else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    np.testing.assert_array_equal(kept, ref)


# ---------------------------------------------------------------- on the GPU

@pytest.mark.gpu
def test_get_into_new_arrays_reuses_and_registers(ctx, pool, rng):
    g = gpuarray.empty(BIG // 4, np.float32)
    before = _driver._host_pool()
    seen = []
    for _ in range(5):
        ref = rng.random(g.size, dtype=np.float32)
        g.set(ref)
        out = g.get()
        np.testing.assert_array_equal(out, ref)
        assert out.flags.owndata and out.base is None
        seen.append((addr(out), _driver._host_known(addr(out))))
        # the program keeps the last result while making the next
        last = out  # noqa: F841
    info = _driver._host_pool()
    small = gpuarray.to_gpu(ref[:_driver._HOST_POOL_MIN // 4 - 1])   # under the minimum
    np.testing.assert_array_equal(small.get(), ref[:small.size])
    assert _driver._host_pool() == info                    # plain NumPy memory
    # two buffers alternate; each is page-locked from its second use on
    assert len({p for p, _ in seen}) == 2
    assert [k for _, k in seen] == [False, False, True, True, True]
    assert delta(before, info, "misses", "hits", "registrations") == (2, 3, 2)
    assert info["registered_bytes"] == 2 * BIG


@pytest.mark.gpu
def test_async_gets_stay_pageable(ctx, pool, rng):
    """An async get() into a new array keeps NumPy's pageable memory: page-locked
    pool memory would let the copy finish after the call where a program that
    forgot to synchronize read complete data before."""
    ref = rng.random(BIG // 4, dtype=np.float32)
    g = gpuarray.to_gpu(ref)
    s = drv.Stream()
    before = _driver._host_pool()
    for _ in range(3):
        out = g.get_async(s)
        s.synchronize()
        np.testing.assert_array_equal(out, ref)
        assert not _driver._host_known(addr(out))
        out = g.get(async_=True)
        drv.Context.synchronize()
        np.testing.assert_array_equal(out, ref)
    after = _driver._host_pool()
    assert delta(before, after, "hits", "misses") == (0, 0)


@pytest.mark.gpu
def test_get_orders_and_from_device(ctx, pool, rng):
    a = rng.standard_normal((3000, 1100))                    # 25 MiB of float64
    for host in (a, np.asfortranarray(a)):
        g = gpuarray.to_gpu(host)
        for _ in range(3):
            out = g.get()
            np.testing.assert_array_equal(out, host)
            assert out.flags.c_contiguous == host.flags.c_contiguous
        order = "C" if host.flags.c_contiguous else "F"
        back = drv.from_device(g.gpudata, a.shape, a.dtype, order)
        np.testing.assert_array_equal(back, a)
        assert back.flags.c_contiguous == (order == "C")
    np.testing.assert_array_equal(gpuarray.to_gpu(a)[::2].get(), a[::2])


@pytest.mark.gpu
def test_registration_renewed_after_its_context_ends(pool, rng):
    ref = rng.integers(0, 255, BIG, dtype=np.uint8)
    own = drv.Device(0).make_context()
    try:
        g = gpuarray.to_gpu(ref)
        g.get()
        kept = g.get()                                       # second use: registered
        assert _driver._host_known(addr(kept))
        p = addr(kept)
        del g
    finally:
        drv.Context.pop()
        own.detach()
    del kept                                                 # back in the pool
    prim = drv.Device(0).retain_primary_context()
    prim.push()
    try:
        g = gpuarray.to_gpu(ref[::-1].copy())
        out = g.get()
        assert addr(out) == p and _driver._host_known(p)     # registered again
        np.testing.assert_array_equal(out, ref[::-1])
    finally:
        drv.Context.pop()
        prim.detach()


@pytest.mark.gpu
def test_register_host_memory_takes_over_from_the_pool(ctx, pool, rng):
    ref = rng.random(BIG // 4, dtype=np.float32)
    g = gpuarray.to_gpu(ref)
    g.get()
    out = g.get()                                            # page-locked by the pool
    p = addr(out)
    assert _driver._host_known(p)
    held = _driver._host_pool()["registered_bytes"]
    mine = drv.register_host_memory(out[1000:])              # overlaps the pool's
    assert _driver._host_pool()["registered_bytes"] == held - BIG
    assert not _driver._host_known(p) and _driver._host_known(addr(mine))
    g.set(ref[::-1].copy())
    g.get(out)
    np.testing.assert_array_equal(mine, ref[::-1][1000:])
    mine.base.unregister()
    del mine, out
    again = g.get()                                          # the pool locks it again
    assert addr(again) == p and _driver._host_known(p)
    np.testing.assert_array_equal(again, ref[::-1])
    theirs = drv.register_host_memory(again)
    with pytest.raises(drv.Error, match="cuMemHostRegister"):  # registered by the program:
        drv.register_host_memory(again)                      # not the pool's to give up
    theirs.base.unregister()


@pytest.mark.gpu
def test_kept_arrays_leave_pool_memory_alone(ctx, pool, rng):
    from barecuda._array import kept as _kept
    g = gpuarray.to_gpu(rng.random(40 * MiB // 4, dtype=np.float32))
    g.get()
    out = g.get()                                            # registered by the pool
    before = _kept.info()
    for _ in range(4):
        g.get(out)                                           # copies into a kept array
    after = _kept.info()
    assert after["refused"] == before["refused"]
    assert after["registered"] == before["registered"]
    np.testing.assert_array_equal(out, g.get())
