# SPDX-License-Identifier: MIT
"""Leaks: 100,000 iterations of each create/release cycle leave device memory,
host RSS and the number of Python objects flat.  Serial: they read device-wide
free memory, so .ci/gpu runs them alone."""

import gc
import resource

import numpy as np
import pytest

from barecuda import driver as drv
from barecuda import gpuarray
from barecuda.compiler import SourceModule

pytestmark = [pytest.mark.gpu, pytest.mark.serial]
N = 100_000


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def measure(cycle, n=N):
    for _ in range(1000):  # warm caches and pools
        cycle()
    drv.Context.synchronize()
    gc.collect()
    free0, rss0, objs0 = drv.mem_get_info()[0], rss_bytes(), len(gc.get_objects())
    for _ in range(n):
        cycle()
    drv.Context.synchronize()
    gc.collect()
    free1, rss1, objs1 = drv.mem_get_info()[0], rss_bytes(), len(gc.get_objects())
    return free0 - free1, rss1 - rss0, objs1 - objs0


def check(name, cycle, n=N):
    dev, rss, objs = measure(cycle, n)
    print(f"{name}: {n} cycles, device {dev / 2**20:+.1f} MiB, RSS {rss / 2**20:+.1f} MiB, "
          f"objects {objs:+d}")
    assert abs(dev) <= 8 << 20, f"{name}: device memory moved by {dev} bytes"
    assert rss <= 32 << 20, f"{name}: RSS grew by {rss} bytes"
    assert abs(objs) <= 100, f"{name}: {objs} more Python objects"


@pytest.fixture(autouse=True)
def primary(ctx):
    yield


def test_alloc_free():
    check("mem_alloc/free", lambda: drv.mem_alloc(4096).free())
    check("mem_alloc_async/free", lambda: drv.mem_alloc_async(4096))


def test_pinned_alloc_free():
    check("pagelocked_empty", lambda: drv.pagelocked_empty(1024, np.float32))


def test_stream_event_create_destroy():
    check("Stream", drv.Stream)
    check("Event", lambda: drv.Event().record())


def test_module_load_unload():
    image = SourceModule("__global__ void k(float *a) { a[0] = 1.0f; }", cache_dir=False).cubin
    check("module load/unload", lambda: drv.module_from_buffer(image).get_function("k"))


def test_gpuarray_ops():
    a = gpuarray.to_gpu(np.arange(1000, dtype=np.float32))
    b = gpuarray.to_gpu(np.ones(1000, dtype=np.float32))

    def ops():
        c = a + b
        c *= 2
        return gpuarray.sum(c)

    check("GPUArray a + b, *=, sum", ops)
    assert float(gpuarray.sum((a + b) * 2).get()) == float(np.sum((np.arange(1000) + 1) * 2))
