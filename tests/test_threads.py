# SPDX-License-Identifier: MIT
"""Threads: many threads launching, copying, compiling and synchronizing at once,
objects released on other threads, and blocking calls that release the GIL."""

import gc
import threading
import time
import weakref

import numpy as np
import pytest

from barecuda import driver as drv
from barecuda.compiler import SourceModule

pytestmark = pytest.mark.gpu

KERNELS = """
__global__ void scale(float *a, float s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] *= s;
}
__global__ void spin(long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
"""


def run_threads(n, target):
    errors, results = [], [None] * n

    def wrap(k):
        try:
            results[k] = target(k)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=wrap, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if errors:
        raise errors[0]
    return results


def test_eight_threads_on_the_primary_context(ctx):
    def work(k):
        ctx.push()  # each thread makes the shared primary context current
        try:
            rng = np.random.default_rng(k)
            # each thread compiles its own variant, so compiles run concurrently
            mod = SourceModule(KERNELS + f"\n// variant {k}\n", cache_dir=False)
            f = mod.get_function("scale")
            s = drv.Stream()
            for _ in range(20):
                data = rng.standard_normal(4096).astype(np.float32)
                dev = drv.mem_alloc(data.nbytes)
                drv.memcpy_htod_async(dev, data, s)
                f(dev, np.float32(k + 1), np.int32(data.size), block=(256, 1, 1), grid=(16, 1),
                  stream=s)
                out = drv.pagelocked_empty_like(data)
                drv.memcpy_dtoh_async(out, dev, s)
                s.synchronize()
                np.testing.assert_allclose(out, data * (k + 1), rtol=1e-6)
            return True
        finally:
            drv.Context.pop()

    assert run_threads(8, work) == [True] * 8


def test_threads_with_their_own_contexts(ctx):
    def work(k):
        own = drv.Device(0).make_context()
        try:
            mod = SourceModule(KERNELS, cache_dir=False)
            f = mod.get_function("scale")
            data = np.full(1000, k, np.float32)
            dev = drv.mem_alloc(data.nbytes)
            drv.memcpy_htod(dev, data)
            f(dev, np.float32(2), np.int32(1000), block=(256, 1, 1), grid=(4, 1))
            out = np.empty_like(data)
            drv.memcpy_dtoh(out, dev)
            assert drv.Context.get_current() is own
            np.testing.assert_array_equal(out, 2 * data)
            return dev  # released later on another thread
        finally:
            drv.Context.pop()
            # not detached here: the allocation still needs the context

    allocs = run_threads(8, work)
    contexts = {a.context for a in allocs}
    assert len(contexts) == 8
    del allocs  # the allocations (and then their contexts) are released on this thread
    for c in contexts:
        c.detach()


def test_objects_freed_on_another_thread(ctx):
    made = {}

    def make(k):
        ctx.push()
        try:
            made[k] = (drv.mem_alloc(1 << 16), drv.Stream(), drv.Event(),
                       drv.pagelocked_empty(1024, np.float32))
        finally:
            drv.Context.pop()

    run_threads(4, make)
    refs = [weakref.ref(objs[0]) for objs in made.values()]
    made.clear()  # released here, on the main thread, each with its context entered
    gc.collect()
    assert all(r() is None for r in refs)
    drv.mem_alloc(1 << 16).free()


@pytest.mark.serial  # timing: run alone, not beside other test processes
def test_synchronize_releases_the_gil(ctx):
    mod = SourceModule(KERNELS, cache_dir=False)
    spin = mod.get_function("spin")
    rate = drv.Device(0).clock_rate * 1000  # kHz -> cycles per second
    cycles = np.int64(rate * 0.3)  # ~0.3 s of GPU time per stream
    streams = [drv.Stream(), drv.Stream()]
    for s in streams:  # warm up
        spin(np.int64(1000), block=(1, 1, 1), stream=s)
        s.synchronize()

    def one(k):
        ctx.push()
        try:
            t = time.perf_counter()
            spin(cycles, block=(1, 1, 1), stream=streams[k])
            streams[k].synchronize()
            return time.perf_counter() - t
        finally:
            drv.Context.pop()

    single = one(0)
    t0 = time.perf_counter()
    run_threads(2, one)
    both = time.perf_counter() - t0
    # the kernels run concurrently on two streams; if synchronize held the GIL the
    # second thread could not even launch until the first returned (~2x single)
    assert both < 1.5 * single, (both, single)
