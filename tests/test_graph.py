# SPDX-License-Identifier: MIT
"""CUDA graphs by stream capture: instantiate, replay, release."""

import numpy as np
import pytest

from barecuda import _driver
from barecuda import driver as drv

SRC = r"""
__global__ void add(int *x, int v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += v;
}
__global__ void mul(int *x, int v, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= v;
}
"""


@pytest.fixture
def mod(ctx):
    from barecuda.compiler import SourceModule
    return SourceModule(SRC)


@pytest.mark.gpu
def test_replay_many_times(mod, rng):
    n = 5000
    add, mul = mod.get_function("add"), mod.get_function("mul")
    add.prepare("Pii")
    x0 = rng.integers(-1000, 1000, n).astype(np.int32)
    d = drv.mem_alloc(x0.nbytes)
    drv.memcpy_htod(d, x0)
    s = drv.Stream()
    grid, block = ((n + 255) // 256, 1), (256, 1, 1)
    s.begin_capture()
    add.prepared_async_call(grid, block, s, d, 3, n)
    mul(d, np.int32(-1), np.int32(n), block=block, grid=grid, stream=s)
    add(d, np.int32(1), np.int32(n), block=block, grid=grid, stream=s)
    g = s.end_capture()
    assert g.num_nodes == 3
    ge = g.instantiate()
    assert ge.graph is g
    ge.upload(s)
    expect = x0.astype(np.int64)
    for _ in range(101):
        ge.launch(s)
        expect = -(expect + 3) + 1
    s.synchronize()
    got = np.empty_like(x0)
    drv.memcpy_dtoh(got, d)
    np.testing.assert_array_equal(got, expect.astype(np.int32))
    # nothing ran at capture time: replaying on the default stream works too
    ge.launch()
    drv.Context.synchronize()


@pytest.mark.gpu
def test_close_and_use_after(mod):
    s = drv.Stream()
    buf = drv.mem_alloc(4)  # allocations are not allowed while a stream captures
    s.begin_capture()
    mod.get_function("add")(buf, np.int32(1), np.int32(1), block=(1, 1, 1), stream=s)
    g = s.end_capture()
    ge = g.instantiate()
    ge.close()
    ge.close()
    with pytest.raises(drv.LogicError, match="GraphExec was closed"):
        ge.launch(s)
    g.close()
    g.close()
    with pytest.raises(drv.LogicError, match="Graph was closed"):
        g.instantiate()
    with pytest.raises(drv.LogicError, match="Graph was closed"):
        g.num_nodes


@pytest.mark.gpu
def test_capture_legacy_stream_refused(ctx):
    legacy = drv.Stream.from_handle(0)
    with pytest.raises(drv.LogicError, match="legacy default stream"):
        legacy.begin_capture()


@pytest.mark.gpu
def test_graph_c_floor(mod):
    s = drv.Stream()
    buf = drv.mem_alloc(4)  # allocations are not allowed while a stream captures
    s.begin_capture()
    mod.get_function("add")(buf, np.int32(1), np.int32(1), block=(1, 1, 1), stream=s)
    ge = s.end_capture().instantiate()
    t = _driver._bench_graph_launch(ge, s, 20)
    assert 0 < t < 0.01
    with pytest.raises(ValueError, match="positive"):
        _driver._bench_graph_launch(ge, s, 0)
