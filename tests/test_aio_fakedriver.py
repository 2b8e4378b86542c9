# SPDX-License-Identifier: MIT
"""`await stream` and `await event` on the CPU, through the stand-in driver
(tests/fakecuda.c), whose stream callbacks wait until a test fires them, in the
order it chooses and with the status it chooses, from a thread of their own as the
driver's callback thread would: completion order, errors, cancellation, a stream
closed or a context detached while awaited, a loop closed with awaits pending,
1,000 awaits over 16 streams, uvloop where installed, and that nothing of Python
runs on the callback thread.  Each case runs in a fresh process (the stand-in is
loaded through BARECUDA_LIBCUDA)."""

import textwrap

import pytest

from test_launch_fakedriver import build_fake_driver, c_compiler, run_with, toolkit_include

pytestmark = pytest.mark.skipif(toolkit_include() is None or c_compiler() is None,
                                reason="needs a C compiler and a CUDA toolkit's cuda.h")


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    return build_fake_driver(tmp_path_factory.mktemp("fakecuda_aio"))


PRELUDE = """
import asyncio, ctypes, faulthandler, gc, os, random
faulthandler.enable()
from barecuda import driver as drv, _driver
drv.init()
ctx = drv.Device(0).retain_primary_context()
ctx.push()
fake = ctypes.CDLL(os.environ["BARECUDA_LIBCUDA"])
# PyDLL keeps the GIL held through the call: a callback that wanted the GIL
# would then never finish, and fire_holding_gil would never return
fake_gil = ctypes.PyDLL(os.environ["BARECUDA_LIBCUDA"])
for lib in (fake, fake_gil):
    lib.fake_fire_callbacks.argtypes = [ctypes.c_ulonglong, ctypes.c_int, ctypes.c_int]

def fire(stream=None, status=0, n=0):
    return fake.fake_fire_callbacks(0 if stream is None else stream.handle, status, n)

fake.fake_query_answer.argtypes = [ctypes.c_ulonglong, ctypes.c_int]

def gpu_says(stream, rc):
    # what cuStreamQuery and cuEventQuery answer for `stream` (a Stream or a handle)
    # and its events from now on, callbacks queued or not; None: back to "busy while
    # callbacks are queued"
    handle = stream if isinstance(stream, int) else stream.handle
    assert fake.fake_query_answer(handle, -1 if rc is None else rc) == 0

def fire_holding_gil(stream=None, status=0, n=0):
    return fake_gil.fake_fire_callbacks(0 if stream is None else stream.handle, status, n)

def pending():
    return fake.fake_pending_callbacks()

def later(fn, *args):
    asyncio.get_running_loop().call_later(0.005, fn, *args)

def stats():
    return _driver._Waker._stats()

def expect(exc_type, text, fn, *args):
    # fn(*args) raises exc_type with `text` in its message
    try:
        fn(*args)
    except exc_type as exc:
        assert text in str(exc), exc
    else:
        raise AssertionError(f"{fn!r}{args!r} raised no {exc_type.__name__}")

async def expect_await(exc_type, text, aw):
    try:
        await asyncio.wait_for(aw, 5)
    except exc_type as exc:
        assert text in str(exc), exc
    else:
        raise AssertionError(f"awaiting {aw!r} raised no {exc_type.__name__}")

def _aio_spinning():
    # whether the running loop's _poll is queued (futures awaited other than
    # directly, in their window)
    from barecuda._core import aio
    return aio._waker_for_running_loop()._spinning

def finish():
    # what is left in C once everything was collected: (Wakers, watches)
    gc.collect()
    print("stats", stats(), "pending", pending())
"""


def run_case(lib, code):
    r = run_with(lib, PRELUDE + textwrap.dedent(code))
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_stream_and_event_awaits_complete_when_their_callback_comes(fake_driver):
    out = run_case(fake_driver, """
    drv.set_await_spin(0)                          # no event queries: callbacks only
    s = drv.Stream()
    async def main():
        fut = s.done()
        assert isinstance(fut, asyncio.Future) and not fut.done()
        assert pending() == 1
        await asyncio.sleep(0.01)
        assert not fut.done()                      # nothing fired: still waiting
        later(fire, s)
        assert await fut is None
        later(fire, s)
        assert await s is None                     # `await stream` is the same
        e = drv.Event().record(s)
        later(fire)
        assert await e is e                        # an event's result is the event
        later(fire)
        assert await e.done() is e
    asyncio.run(main())
    finish()
    """)
    assert "stats (0, 0) pending 0" in out, out


@pytest.mark.parametrize("spin", [0.0, 10.0])
def test_awaits_wake_in_completion_order_1000_over_16_streams(fake_driver, spin):
    """spin 0: every await is woken by its callback, in the order they fire.  spin
    10 s: every awaiting task asks its own await on each pass of the loop, so the
    batches done since the last pass wake together in the next: what completed
    before a pass of the loop wakes before what completed after it."""
    out = run_case(fake_driver, f"""
    drv.set_await_spin({spin} / 10)
    streams = [drv.Stream() for _ in range(16)]
    rng = random.Random(5)
    passes = {{}}                                  # await -> the loop pass it completed in
    async def main():
        woke = []
        async def one(i, s):
            await s.done()
            woke.append(i)
        order = []
        tasks = []
        for k in range(1000):
            s = streams[k % 16]
            tasks.append(asyncio.ensure_future(one(k, s)))
        await asyncio.sleep(0)                     # every task is now awaiting
        assert pending() == 1000, pending()
        # complete them stream by stream in a random interleaving, a few at a time,
        # letting the loop run between batches
        queues = {{i: list(range(i, 1000, 16)) for i in range(16)}}
        loop_pass = 0
        while queues:
            i = rng.choice(sorted(queues))
            n = min(len(queues[i]), rng.randint(1, 5))
            fired = fire(streams[i], 0, n)
            assert fired == n
            order += queues[i][:n]
            passes.update(dict.fromkeys(queues[i][:n], loop_pass))
            del queues[i][:n]
            if not queues[i]:
                del queues[i]
            if rng.random() < 0.5:
                await asyncio.sleep(0.001)
                loop_pass += 1
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        if {spin} == 0:
            assert woke == order, "woken out of completion order"
        else:                                      # (the awaits done between two passes
            seen = [passes[k] for k in woke]       # wake in one pass, in any order)
            assert seen == sorted(seen), "woken before what completed a loop pass earlier"
        print("woke", len(woke), "spinning", _aio_spinning())
    asyncio.run(main())
    finish()
    """)
    assert "woke 1000 spinning False" in out and "stats (0, 0) pending 0" in out, out


def test_each_await_has_a_callback_of_its_own(fake_driver):
    """Each await has a callback of its own, an event's on a side stream that waits
    for the event: the one that comes first wakes its await first, whatever the
    order the awaits were made in."""
    out = run_case(fake_driver, """
    drv.set_await_spin(0)
    s = drv.Stream()
    async def main():
        e1, e2 = drv.Event().record(s), drv.Event().record(s)
        woke = []
        async def wait(aw, name):
            await aw
            woke.append(name)
        tasks = [asyncio.ensure_future(wait(aw, name))
                 for aw, name in ((e1, "e1"), (e2, "e2"), (s, "s"))]
        await asyncio.sleep(0)
        assert pending() == 3
        for order in (2, 1, 0):
            assert fake.fake_fire_nth(order, 0) == 1
            await asyncio.sleep(0.01)
        await asyncio.gather(*tasks)
        print("woke", woke)
    asyncio.run(main())
    finish()
    """)
    assert "woke ['s', 'e2', 'e1']" in out and "stats (0, 0) pending 0" in out, out


def test_a_failed_stream_raises_its_driver_error_in_every_awaiting_task(fake_driver):
    out = run_case(fake_driver, """
    s = drv.Stream()
    async def main():
        e = drv.Event().record(s)
        tasks = [asyncio.ensure_future(s.done()) for _ in range(3)]
        tasks.append(asyncio.ensure_future(e.done()))
        await asyncio.sleep(0)
        later(fire, None, 700)                     # CUDA_ERROR_ILLEGAL_ADDRESS
        res = await asyncio.gather(*tasks, return_exceptions=True)
        for r in res:
            assert isinstance(r, drv.LaunchError), repr(r)
            assert "stream callback" in str(r) and "unusable" in str(r), str(r)
        print("raised", len(res))
    asyncio.run(main())
    """)
    assert "raised 4" in out, out


def test_cancelling_an_await_leaves_the_work_and_the_late_callback_is_harmless(fake_driver):
    out = run_case(fake_driver, """
    s = drv.Stream()
    async def main():
        with_timeout = s.done()
        await expect_await(TimeoutError, "", asyncio.wait_for(with_timeout, 0.01))
        assert with_timeout.cancelled()
        t = asyncio.ensure_future(s.done())
        await asyncio.sleep(0)
        t.cancel()
        try:
            await t
        except asyncio.CancelledError:
            pass
        assert pending() == 2                      # the GPU work was not touched
        assert stats()[1] == 2
        fire(s)                                    # the work ends later
        await asyncio.sleep(0.01)                  # the drain sees cancelled futures
        assert stats()[1] == 0
        later(fire, s)
        assert await s is None                     # and the stream still serves
    asyncio.run(main())
    finish()
    """)
    assert "stats (0, 0) pending 0" in out, out


def test_a_stream_closed_while_awaited_raises_logic_error_in_the_task(fake_driver):
    out = run_case(fake_driver, """
    async def main():
        s = drv.Stream()
        t = asyncio.ensure_future(s.done())
        await asyncio.sleep(0)
        s.close()
        await expect_await(drv.LogicError, "Stream was closed while its work was awaited", t)
        fire()                                     # the callback still comes: harmless
        await asyncio.sleep(0.01)
        expect(drv.LogicError, "this Stream was closed", s.done)
    asyncio.run(main())
    finish()
    """)
    assert "stats (0, 0) pending 0" in out, out


def test_a_context_detached_while_awaited_raises_logic_error_in_the_task(fake_driver):
    out = run_case(fake_driver, """
    async def main():
        own = drv.Device(0).retain_primary_context()
        own.push()
        s = drv.Stream()
        t = asyncio.ensure_future(s.done())
        t_null = asyncio.ensure_future(drv.Stream.done(s))
        await asyncio.sleep(0)
        del s
        own.detach()
        for task in (t, t_null):
            await expect_await(drv.LogicError, "Context was detached or destroyed", task)
        fire()
        await asyncio.sleep(0.01)
    asyncio.run(main())
    finish()
    """)
    assert "stats (0, 0) pending 0" in out, out


def test_a_loop_closed_with_awaits_pending_leaks_nothing(fake_driver):
    out = run_case(fake_driver, """
    import warnings
    warnings.simplefilter("ignore")                # "Task was destroyed but it is pending"
    fds = len(os.listdir("/proc/self/fd"))
    s = drv.Stream()
    for _ in range(5):
        loop = asyncio.new_event_loop()
        async def waiting():
            await drv.Stream.done(s)
        loop.run_until_complete(asyncio.sleep(0))
        tasks = [loop.create_task(waiting()) for _ in range(10)]
        loop.run_until_complete(asyncio.sleep(0.001))
        loop.close()
        del loop, tasks
    gc.collect()
    assert stats()[0] == 5, stats()                # fds closed, watches still pending
    assert len(os.listdir("/proc/self/fd")) == fds, "an fd was left open"
    fire()                                         # the GPU work ends after the loops
    for _ in range(3):
        gc.collect()
        sum(range(1000))                           # let the pending calls run
    print("stats", stats(), "pending", pending())
    """)
    assert "stats (0, 0) pending 0" in out, out


def test_nothing_of_python_runs_on_the_callback_thread(fake_driver):
    """The callbacks fire while this thread holds the GIL and waits for them: a
    callback that took the GIL would hang here (the case's timeout)."""
    out = run_case(fake_driver, """
    s = drv.Stream()
    async def main():
        futs = [s.done() for _ in range(50)]
        assert fire_holding_gil(s) == 50
        done = await asyncio.wait_for(asyncio.gather(*futs), 5)
        print("done", len(done))
    asyncio.run(main())
    """)
    assert "done 50" in out, out


def test_bad_input_and_no_running_loop(fake_driver):
    out = run_case(fake_driver, """
    s = drv.Stream()
    for call in (s.done, drv.Event().record(s).done, lambda: s.__await__()):
        expect(RuntimeError, "no running event loop", call)
    w = _driver._Waker()
    expect(TypeError, "stream must be a Stream", w.watch, "stream", 1)
    expect(TypeError, "token must be an int, not str", w.watch, s, "1")
    expect(OverflowError, "", w.watch, s, -1)
    expect(OverflowError, "", w.watch, s, 1 << 70)
    expect(TypeError, "takes no arguments", _driver._Waker, 1)
    assert w.pending == 0 and not w.closed
    w.close(); w.close()
    assert w.closed
    for call in (w.fileno, w.drain, lambda: w.watch(s, 1)):
        expect(drv.LogicError, "this Waker was closed", call)
    s.close()
    async def main():                              # with a loop running
        expect(drv.LogicError, "this Stream was closed", s.__await__)
    asyncio.run(main())
    finish()
    """)
    assert "stats (0, 0) pending 0" in out, out


def test_uvloop(fake_driver):
    pytest.importorskip("uvloop")
    out = run_case(fake_driver, """
    import uvloop
    s = drv.Stream()
    async def main():
        for k in range(100):
            fut = s.done() if k % 2 else drv.Event().record(s).done()
            later(fire)
            await asyncio.wait_for(fut, 5)
        print("uvloop ok", type(asyncio.get_running_loop()).__module__)
    uvloop.run(main())
    finish()
    """)
    assert "uvloop ok uvloop" in out and "stats (0, 0) pending 0" in out, out


def test_an_await_in_its_spin_window_wakes_before_the_late_callback(fake_driver):
    """The GPU is done (its events say so) but the driver's callback thread has not
    run the callback: an await in its spin window wakes anyway, a stream await and
    an event await alike; the callback, when it comes, only lets go of what the
    watches kept."""
    out = run_case(fake_driver, """
    assert drv.set_await_spin(1.0) == 2e-3          # the default, then 1 s
    s = drv.Stream()
    async def main():
        futs = [s.done(), drv.Event().record(s).done()]
        assert not _aio_spinning()                  # nothing awaits them yet
        both = asyncio.gather(*futs)                # the loop's _poll asks about them
        await asyncio.sleep(0.005)
        assert not any(f.done() for f in futs) and _aio_spinning()
        gpu_says(s, 0)
        res = await asyncio.wait_for(both, 5)
        assert res[0] is None and isinstance(res[1], drv.Event), res
        assert pending() == 2 and stats()[1] == 2   # the callbacks have not come
        assert not _aio_spinning()                  # nothing left to ask about
        gpu_says(s, None)
        f2 = drv.Event().record(s).done()
        fire()                                      # the late callbacks: harmless
        await asyncio.wait_for(f2, 5)
        await asyncio.sleep(0.01)                   # the loop drains the callbacks
        assert stats()[1] == 0
    asyncio.run(main())
    finish()
    """)
    assert "stats (0, 0) pending 0" in out, out


def test_after_its_spin_window_an_await_waits_for_its_callback(fake_driver):
    out = run_case(fake_driver, """
    drv.set_await_spin(0.005)
    s = drv.Stream()
    async def main():
        fut = s.done()
        fut.add_done_callback(lambda f: None)       # awaited other than directly
        assert _aio_spinning()
        await asyncio.sleep(0.02)                   # the window is over
        assert not _aio_spinning() and not fut.done()
        gpu_says(s, 0)                              # no longer asked: still waiting
        await asyncio.sleep(0.01)
        assert not fut.done()
        gpu_says(s, None)
        later(fire, s)
        assert await asyncio.wait_for(fut, 5) is None
    asyncio.run(main())
    finish()
    """)
    assert "stats (0, 0) pending 0" in out, out


def test_a_mark_that_reports_an_error_leaves_the_error_to_the_callback(fake_driver):
    """An event query that fails (a device fault) answers nothing: the callback,
    given the error, raises it in every awaiting task."""
    out = run_case(fake_driver, """
    drv.set_await_spin(1.0)
    s = drv.Stream()
    async def main():
        tasks = [asyncio.ensure_future(s.done()) for _ in range(3)]
        for t in tasks:
            t.add_done_callback(lambda f: None)     # the loop's _poll asks about them
        assert _aio_spinning()
        await asyncio.sleep(0.002)
        gpu_says(s, 700)                            # CUDA_ERROR_ILLEGAL_ADDRESS
        await asyncio.sleep(0.005)
        assert not any(t.done() for t in tasks) and not _aio_spinning()
        later(fire, s, 700)
        res = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(r, drv.LaunchError) for r in res), res
        print("raised", len(res))
    asyncio.run(main())
    gpu_says(s, None)
    finish()
    """)
    assert "raised 3" in out and "stats (0, 0) pending 0" in out, out


def test_a_raw_handle_and_the_default_stream_are_asked_about_through_their_mark(
        fake_driver):
    """The mark is recorded when the await is made, so what is asked later is our
    own event, never the stream: a raw handle (whose stream nothing here keeps
    alive) and the legacy default stream spin like a Stream."""
    out = run_case(fake_driver, """
    drv.set_await_spin(1.0)
    s = drv.Stream()
    async def main():
        from barecuda._core import aio             # what aget(stream=None) and others use
        futs = [aio.done(s.handle), aio.done(None)]
        both = asyncio.gather(*futs)
        assert _aio_spinning()
        await asyncio.sleep(0.005)
        assert not any(f.done() for f in futs)
        gpu_says(s, 0)
        gpu_says(0, 0)
        await asyncio.wait_for(both, 5)
        gpu_says(s, None)
        gpu_says(0, None)
        fire()
    asyncio.run(main())
    finish()
    """)
    assert "stats (0, 0) pending 0" in out, out


def test_set_await_spin_refuses_bad_values(fake_driver):
    out = run_case(fake_driver, """
    for bad in (-1e-3, 1.5, float("nan"), float("inf")):
        expect(ValueError, "spin window must be from 0 to 1 s", drv.set_await_spin, bad)
    expect(TypeError, "", drv.set_await_spin, "2ms")
    expect(TypeError, "", drv.set_await_spin, None)
    assert drv.set_await_spin(0) == 2e-3 and drv.set_await_spin(1) == 0.0
    s = drv.Stream()
    w = _driver._Waker()
    for bad in (-1.0, float("nan"), 1e9):
        expect(ValueError, "spin must be a number of seconds", w.watch, s, 1, None, bad)
    expect(TypeError, "", w.watch, s, 1, None, "x")
    assert w.poll() == ([], 0) and w.pending == 0
    loop = asyncio.new_event_loop()
    fut = loop.create_future()
    args = [fut, drv.Event(), None, 0.0, 1, loop]
    it = w.awaiting(*args)                           # the window is over: hands over to
    assert next(it) is fut                           # the future's own iterator (a task
    fut.set_result(7)                                # then waits for its done-callback)
    expect(StopIteration, "7", it.send, None)
    fut = loop.create_future()
    args[0] = fut
    expect(TypeError, "awaiting() takes 6 arguments (5 given)", w.awaiting, *args[:5])
    expect(TypeError, "awaiting(): mark must be an Event, not barecuda.driver.Stream",
           w.awaiting, *args[:1], s, *args[2:])
    expect(TypeError, "", w.awaiting, *args[:3], "soon", *args[4:])
    expect(TypeError, "", w.awaiting, *args[:4], "token", *args[5:])
    expect(AttributeError, "", w.awaiting, *args[:5], object())   # a loop with no time()
    busy = drv.Event().record(s)
    w.watch(s, 99)                                   # a callback after it: busy until fired
    it = w.awaiting(fut, busy, "r", loop.time() + 1.0, 1, loop)
    assert next(it) is None and not fut.done()       # busy: a bare yield
    expect(ValueError, "boom", it.throw, ValueError("boom"))   # thrown in while asking:
    assert fut.cancelled()                           # the future is cancelled, it goes up
    expect(TypeError, "exceptions must derive from BaseException", it.throw, 3)
    fire(s)
    assert [t for t, _ in w.drain()] == [99]
    loop.close()
    w.close()
    expect(drv.LogicError, "this Waker was closed", w.awaiting, *args)
    expect(drv.LogicError, "this Waker was closed", w.poll)
    finish()
    """)
    assert "stats (0, 0) pending 0" in out, out


def test_await_stream_in_its_window_looks_at_its_future_each_pass_and_cancels_cleanly(
        fake_driver):
    """`await stream` in its spin window yields one pass at a time, looking at its
    future (answered by the loop's event queries); cancelling the task then
    cancels the future and leaves the GPU work alone."""
    out = run_case(fake_driver, """
    drv.set_await_spin(1.0)
    s = drv.Stream()
    async def main():
        async def waiter(aw):
            return await aw
        t = asyncio.ensure_future(waiter(s))
        await asyncio.sleep(0.003)
        assert not t.done() and pending() == 1
        gpu_says(s, 0)
        assert await asyncio.wait_for(t, 5) is None
        gpu_says(s, None)
        e = drv.Event().record(s)
        t = asyncio.ensure_future(waiter(e))
        for _ in range(20):
            await asyncio.sleep(0)                 # the task spins meanwhile
        t.cancel()
        await expect_await(asyncio.CancelledError, "", t)
        assert pending() == 2                      # nothing of the GPU work was touched
        fire()
        await asyncio.sleep(0.01)
        assert stats()[1] == 0
    asyncio.run(main())
    finish()
    """)
    assert "stats (0, 0) pending 0" in out, out


def test_a_gathered_await_is_asked_by_the_loop_and_a_direct_one_by_its_task(fake_driver):
    """Only a future awaited other than directly queues the loop's _poll, which
    answers it before its callback; a direct await asks its own mark and takes its
    watch off the _poll's list, so that the _poll ends with the gathered futures."""
    out = run_case(fake_driver, """
    drv.set_await_spin(1.0)
    async def waiter(aw):
        return await aw
    async def main():
        s, s2 = drv.Stream(), drv.Stream()
        t = asyncio.ensure_future(waiter(s))
        await asyncio.sleep(0.005)
        assert not _aio_spinning() and not t.done()
        both = asyncio.gather(s2.done(), drv.Event().record(s2).done())
        assert _aio_spinning()
        await asyncio.sleep(0.005)
        assert not both.done() and not t.done()
        gpu_says(s2, 0)
        res = await asyncio.wait_for(both, 5)
        assert res[0] is None and isinstance(res[1], drv.Event)
        await asyncio.sleep(0.005)
        assert not _aio_spinning() and not t.done()   # the direct await is not polled
        gpu_says(s, 0)
        assert await asyncio.wait_for(t, 5) is None
        assert pending() == 3                      # all answered before their callbacks
        gpu_says(s, None)
        gpu_says(s2, None)
        fire()
        await asyncio.sleep(0.01)
    asyncio.run(main())
    finish()
    """)
    assert "stats (0, 0) pending 0" in out, out
