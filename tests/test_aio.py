# SPDX-License-Identifier: MIT
"""`await stream`, `await event`, `await a.aget(stream)` on a GPU: results against
NumPy, completion order over 16 streams and 1,000 awaits, two contexts, a faulting
kernel, cancellation, a stream closed and a context detached while awaited, a loop
closed with awaits pending, graph capture, the CPU spent while awaiting, uvloop.
(The same semantics on the CPU, through the stand-in driver: test_aio_fakedriver.py.)"""

import asyncio
import gc
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from barecuda import _driver, gpuarray
from barecuda import driver as drv

pytestmark = pytest.mark.gpu

SRC = r"""
__device__ unsigned long long now()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
/* out = 2 in + 1, after thread 0 spun for ns nanoseconds (one block) */
extern "C" __global__ void slow_affine(float *out, const float *in, int n,
                                       unsigned long long ns)
{
    if (threadIdx.x == 0) {
        unsigned long long t0 = now();
        while (now() - t0 < ns) { }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        out[i] = 2.0f * in[i] + 1.0f;
}
extern "C" __global__ void poke(int *p) { p[threadIdx.x] = 1; }
"""


@pytest.fixture
def mod(ctx):
    from barecuda.compiler import SourceModule
    return SourceModule(SRC, no_extern_c=True)


@pytest.fixture(params=[0.0, 2e-3, 1.0], ids=["callback-only", "spin-2ms", "spin-1s"])
def await_spin(request):
    """Each await's spin window (drv.set_await_spin): 0, every wake-up comes from the
    driver's callback; the default 2 ms, the short waits are found by the loop's
    event queries and the long ones by the callback; 1 s, nearly all by the queries."""
    previous = drv.set_await_spin(request.param)
    yield request.param
    drv.set_await_spin(previous)


def launch(mod, out, inp, ns, stream):
    mod.get_function("slow_affine")(out, inp, np.int32(inp.size), np.uint64(ns),
                                    block=(256, 1, 1), grid=(1, 1), stream=stream)


def test_await_a_kernel_an_event_and_copies_back(mod, rng):
    x = rng.standard_normal(10_000).astype(np.float32)
    s = drv.Stream()

    async def main():
        a = gpuarray.to_gpu(x)
        out = gpuarray.empty_like(a)
        launch(mod, out, a, 2_000_000, s)               # 2 ms
        fut = s.done()
        assert not fut.done()
        assert await fut is None
        np.testing.assert_allclose(out.get(), 2 * x + 1, rtol=1e-6)

        launch(mod, out, a, 1_000_000, s)
        e = drv.Event().record(s)
        assert await e is e and e.query()
        assert s.is_done()          # an event's callback goes on a side stream, not on s

        launch(mod, out, a, 1_000_000, s)
        host = await out.aget(stream=s)                 # a new page-locked array
        np.testing.assert_allclose(host, 2 * x + 1, rtol=1e-6)
        assert host.dtype == np.float32 and host.shape == x.shape

        into = drv.pagelocked_empty(x.shape, x.dtype)
        launch(mod, out, a, 1_000_000, s)
        got = await out.aget(stream=s, ary=into)
        assert got is into
        np.testing.assert_allclose(into, 2 * x + 1, rtol=1e-6)

        plain = drv.pagelocked_zeros(x.shape, x.dtype)
        drv.memcpy_dtoh_async(plain, a.gpudata, s)
        await s
        np.testing.assert_array_equal(plain, x)

        with pytest.raises(TypeError, match="ary has dtype float64"):
            out.aget(stream=s, ary=np.zeros(x.shape, np.float64))
        with pytest.raises(ValueError, match="ary has size 3"):
            out.aget(stream=s, ary=np.zeros(3, np.float32))
    asyncio.run(main())


def test_16_streams_wake_in_completion_order():
    """16 kernels launched in one order, meant to finish in the reverse one (3 ms
    apart), each stream awaited: the awaits wake in the order the kernels finished,
    as timing events recorded after them tell (processes sharing the GPU may stretch
    and reorder the kernels).  In a process of its own with
    CUDA_DEVICE_MAX_CONNECTIONS=32: with the default 8 hardware queues, 16 streams
    share them, and a stream's completion can wait behind another stream's kernel."""
    out = run_alone(f"""
    import asyncio
    import numpy as np
    from barecuda import driver as drv, gpuarray
    from barecuda.compiler import SourceModule
    drv.init()
    ctx = drv.Device(0).retain_primary_context(); ctx.push()
    mod = SourceModule({SRC!r}, no_extern_c=True)
    f = mod.get_function("slow_affine")
    streams = [drv.Stream() for _ in range(16)]
    x = np.random.default_rng(3).standard_normal(256).astype(np.float32)
    a = gpuarray.to_gpu(x)
    outs = [gpuarray.empty_like(a) for _ in streams]

    async def main():
        woke = []

        async def wait(i):
            await streams[i]
            woke.append(i)
        start = drv.Event().record(streams[0])
        for st in streams[1:]:
            st.wait_for_event(start)
        ends = []
        for i, st in enumerate(streams):
            f(outs[i], a, np.int32(256), np.uint64(3_000_000 * (16 - i) + 2_000_000),
              block=(256, 1, 1), grid=(1, 1), stream=st)
            ends.append(drv.Event().record(st))
        await asyncio.gather(*(wait(i) for i in range(16)))
        finished = [start.time_till(e) for e in ends]
        print("woke", woke)
        print("by_time", sorted(range(16), key=finished.__getitem__))
        print("finished", [round(t, 3) for t in finished])
        for o in outs:
            np.testing.assert_allclose(o.get(), 2 * x + 1, rtol=1e-6)
    asyncio.run(main())
    """, env={"CUDA_DEVICE_MAX_CONNECTIONS": "32"})
    lines = dict(line.split(" ", 1) for line in out.strip().splitlines())
    woke, finished = eval(lines["woke"]), eval(lines["finished"])
    assert sorted(woke) == list(range(16)), out
    for j in range(15):          # completion order (ties within 50 us aside)
        assert finished[woke[j]] <= finished[woke[j + 1]] + 0.05, out


def test_1000_awaits_lose_no_wake_up(mod, rng, await_spin):
    streams = [drv.Stream() for _ in range(16)]
    x = rng.standard_normal(256).astype(np.float32)
    a = gpuarray.to_gpu(x)
    outs = [gpuarray.empty_like(a) for _ in streams]

    async def main():
        # 1,000 awaits in a loop over 16 streams and events; every wake-up comes,
        # and none before its work is done
        early = 0
        for k in range(1000):
            s = streams[k % 16]
            launch(mod, outs[k % 16], a, 2_000 * (k % 7), s)
            # the work before the await, as an event sees it (the stream itself
            # may still hold barecuda's callback for a moment after the await)
            work = drv.Event().record(s)
            if k % 3 == 0:
                await asyncio.wait_for(work.done(), 10)
            elif k % 3 == 1:
                await asyncio.wait_for(s.done(), 10)
            else:
                await s
            early += not work.query()
        assert early == 0
        for o in outs:
            np.testing.assert_allclose(o.get(), 2 * x + 1, rtol=1e-6)

        # and 1,000 pending at once
        tasks = []
        for k in range(1000):
            s = streams[k % 16]
            if k % 16 == 0:
                launch(mod, outs[k % 16], a, 50_000, s)
            tasks.append(asyncio.ensure_future(s.done() if k % 2 else
                                               drv.Event().record(s).done()))
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
    asyncio.run(main())
    gc.collect()
    assert _driver._Waker._stats() == (0, 0)


def test_two_contexts(mod, rng, ctx, await_spin):
    from barecuda.compiler import SourceModule
    x = rng.standard_normal(1000).astype(np.float32)
    other = drv.Device(0).make_context()
    try:
        mod2 = SourceModule(SRC, no_extern_c=True)
        a2, s2 = gpuarray.to_gpu(x), drv.Stream()
        o2 = gpuarray.empty_like(a2)
        launch(mod2, o2, a2, 4_000_000, s2)
        drv.Context.pop()                               # back to the primary context
        a1, s1 = gpuarray.to_gpu(x), drv.Stream()
        o1 = gpuarray.empty_like(a1)
        launch(mod, o1, a1, 1_000_000, s1)

        async def main():     # (two contexts take turns on the GPU: no order to expect)
            woke = []

            async def wait(name, aw):
                await aw
                woke.append(name)
            await asyncio.gather(wait("other", s2), wait("primary", drv.Event().record(s1)))
            return woke
        assert sorted(asyncio.run(main())) == ["other", "primary"]
        np.testing.assert_allclose(o1.get(), 2 * x + 1, rtol=1e-6)
        other.push()
        np.testing.assert_allclose(o2.get(), 2 * x + 1, rtol=1e-6)
        drv.Context.pop()
    finally:
        other.detach()


def test_cancelling_leaves_the_gpu_work_alone(mod, rng):
    x = rng.standard_normal(4096).astype(np.float32)
    s = drv.Stream()
    a = gpuarray.to_gpu(x)
    out = gpuarray.zeros_like(a)

    async def main():
        launch(mod, out, a, 200_000_000, s)             # 200 ms
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(out.aget(stream=s), 0.02)
        assert not s.is_done()                          # still running
        task = asyncio.ensure_future(s.done())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await s                                         # the stream still serves
        np.testing.assert_allclose(out.get(), 2 * x + 1, rtol=1e-6)
        await asyncio.sleep(0.01)
    asyncio.run(main())
    gc.collect()
    assert _driver._Waker._stats() == (0, 0)


def test_a_stream_closed_while_awaited_raises_at_once(mod, rng):
    x = rng.standard_normal(256).astype(np.float32)
    a = gpuarray.to_gpu(x)
    out = gpuarray.empty_like(a)

    async def main():
        s = drv.Stream()
        launch(mod, out, a, 300_000_000, s)
        t = asyncio.ensure_future(s.done())
        await asyncio.sleep(0.01)
        t0 = time.perf_counter()
        s.close()
        with pytest.raises(drv.LogicError, match="Stream was closed while its work was awaited"):
            await asyncio.wait_for(t, 5)
        assert time.perf_counter() - t0 < 0.2          # not after the kernel
    asyncio.run(main())
    drv.Context.synchronize()
    np.testing.assert_allclose(out.get(), 2 * x + 1, rtol=1e-6)


def test_capturing_stream_refuses_an_await(mod, rng):
    s = drv.Stream()

    async def main():
        s.begin_capture()
        try:
            with pytest.raises(drv.LogicError, match="capturing a graph"):
                s.done()
        finally:
            s.end_capture()
    asyncio.run(main())


def test_cpu_time_while_awaiting_a_long_kernel(mod, rng):
    """No thread spins, and the loop asks the GPU only in the await's first 2 ms: the
    process spends next to no CPU while a 300 ms kernel is awaited."""
    a = gpuarray.to_gpu(rng.standard_normal(256).astype(np.float32))
    out = gpuarray.empty_like(a)
    s = drv.Stream()

    async def main():
        launch(mod, out, a, 300_000_000, s)
        c0, t0 = time.process_time(), time.perf_counter()
        await s
        return time.process_time() - c0, time.perf_counter() - t0
    cpu, wall = asyncio.run(main())
    assert wall > 0.25, wall
    assert cpu < 0.05 * wall, f"{cpu:.4f} s of CPU over {wall:.3f} s"


def test_loop_closed_with_awaits_pending_leaks_nothing(mod, rng):
    import warnings
    a = gpuarray.to_gpu(rng.standard_normal(256).astype(np.float32))
    out = gpuarray.empty_like(a)
    s = drv.Stream()
    gc.collect()
    before = _driver._Waker._stats()
    fds = len(os.listdir("/proc/self/fd"))
    launch(mod, out, a, 200_000_000, s)
    loop = asyncio.new_event_loop()

    async def waiting():
        await out.aget(stream=s)
    tasks = [loop.create_task(waiting()) for _ in range(8)]
    loop.run_until_complete(asyncio.sleep(0.01))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loop.close()
        del loop, tasks
        gc.collect()
    assert len(os.listdir("/proc/self/fd")) == fds
    s.synchronize()
    for _ in range(5):
        time.sleep(0.01)
        gc.collect()
    assert _driver._Waker._stats() == before


def test_uvloop(mod, rng):
    uvloop = pytest.importorskip("uvloop")
    x = rng.standard_normal(1000).astype(np.float32)
    s = drv.Stream()

    async def main():
        assert type(asyncio.get_running_loop()).__module__.startswith("uvloop")
        a = gpuarray.to_gpu(x)
        out = gpuarray.empty_like(a)
        for k in range(200):
            launch(mod, out, a, 10_000 * (k % 5), s)
            host = await (out.aget(stream=s) if k % 2 else drv.Event().record(s).done())
        np.testing.assert_allclose(out.get(), 2 * x + 1, rtol=1e-6)
        return host
    uvloop.run(main())


def run_alone(code, timeout=120, env=None):
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=timeout, env=dict(os.environ, **(env or {})))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


@pytest.mark.parametrize("spin", [0.0, 1.0])
def test_a_faulting_kernel_raises_in_every_awaiting_task(spin):
    """spin 1 s: the loop's event queries meet the fault first and leave it to the
    callback, which brings it to every task."""
    out = run_alone(f"""
    import asyncio
    import numpy as np
    from barecuda import driver as drv, gpuarray
    from barecuda.compiler import SourceModule
    drv.set_await_spin({spin})
    drv.init()
    ctx = drv.Device(0).retain_primary_context(); ctx.push()
    mod = SourceModule({SRC!r}, no_extern_c=True)
    a = gpuarray.to_gpu(np.arange(256, dtype=np.float32))
    out = gpuarray.empty_like(a)
    s, s2 = drv.Stream(), drv.Stream()

    async def main():
        mod.get_function("slow_affine")(out, a, np.int32(256), np.uint64(20_000_000),
                                        block=(256, 1, 1), grid=(1, 1), stream=s)
        mod.get_function("poke")(np.intp(8), block=(32, 1, 1), grid=(1, 1), stream=s)
        awaits = [s.done(), drv.Event().record(s).done(), out.aget(stream=s)]
        res = await asyncio.wait_for(asyncio.gather(*awaits, return_exceptions=True), 30)
        for r in res:
            print(type(r).__name__, str(r)[:120])
    asyncio.run(main())
    """)
    lines = out.strip().splitlines()
    assert len(lines) == 3, out
    for line in lines:
        assert line.startswith("LaunchError") and "ILLEGAL_ADDRESS" in line, out


def test_a_context_detached_while_awaited_raises_logic_error():
    out = run_alone(f"""
    import asyncio, gc
    import numpy as np
    from barecuda import driver as drv, gpuarray, _driver
    from barecuda.compiler import SourceModule
    drv.init()
    ctx = drv.Device(0).make_context()
    mod = SourceModule({SRC!r}, no_extern_c=True)
    a = gpuarray.to_gpu(np.arange(256, dtype=np.float32))
    out = gpuarray.empty_like(a)
    s = drv.Stream()

    async def main():
        mod.get_function("slow_affine")(out, a, np.int32(256), np.uint64(300_000_000),
                                        block=(256, 1, 1), grid=(1, 1), stream=s)
        t = asyncio.ensure_future(s.done())
        await asyncio.sleep(0.01)
        ctx.detach()
        try:
            await asyncio.wait_for(t, 10)
            print("no error")
        except drv.LogicError as exc:
            print("LogicError", exc)
    asyncio.run(main())
    """)
    assert out.startswith("LogicError") and "Context was detached" in out, out
