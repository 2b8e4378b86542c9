# SPDX-License-Identifier: MIT
"""The argument memo of src/argpack.c: a launch that passes the same objects as
the last one packs nothing, and nothing a program can do between two launches
makes the memo hand a kernel stale bytes.

On the CPU the memo's bytes are compared with the plain packing over random
sequences of kept and new arguments, mutable arguments (struct views, size-1
arrays) are checked never to be kept, and its references are counted.  On the
GPU a kernel echoes its parameters back, across freed, collected and re-made
allocations, released contexts, nested launches and threads."""

from __future__ import annotations

import gc
import struct
import sys
import threading
import weakref

import numpy as np
import pytest

from barecuda import _driver
from barecuda import driver as drv

LAYOUT = [(0, 8), (8, 4), (12, 2), (16, 8), (24, 4), (28, 1), (32, 16)]  # q i h d f B D
CALL_TYPES = (np.int64, np.int32, np.int16, np.float64, np.float32, np.uint8, np.complex128)


def _fn(params=LAYOUT):
    return _driver._test_function("k", params=params)


def _value(rng, tp):
    if np.issubdtype(tp, np.complexfloating):
        return tp(complex(rng.standard_normal(), rng.standard_normal()))
    if np.issubdtype(tp, np.floating):
        return tp(rng.standard_normal())
    info = np.iinfo(tp)
    return tp(rng.integers(info.min, info.max, endpoint=True))


def test_call_memo_matches_plain_packing_over_random_sequences(rng):
    f = _fn()
    args = [_value(rng, tp) for tp in CALL_TYPES]
    for step in range(300):
        for i, tp in enumerate(CALL_TYPES):
            if rng.random() < 0.3:
                args[i] = _value(rng, tp)
        got = _driver._pack_memo(f, False, *args)
        assert got == _driver._pack_args(f, *args), step
        assert _driver._memo_slots(f) == (True,) * len(CALL_TYPES)


def test_prepared_memo_matches_plain_packing_over_random_sequences(rng):
    fmt = "qihdfBP"
    f = _fn(None).prepare(fmt)
    makers = [lambda: int(rng.integers(-(2**62), 2**62)), lambda: np.int32(rng.integers(-9, 9)),
              lambda: int(rng.integers(-(2**15), 2**15)), lambda: float(rng.standard_normal()),
              lambda: np.float32(rng.standard_normal()), lambda: int(rng.integers(0, 256)),
              lambda: int(rng.integers(0, 2**63))]
    args = [m() for m in makers]
    for step in range(300):
        for i, make in enumerate(makers):
            if rng.random() < 0.3:
                args[i] = make()
        got = _driver._pack_memo(f, True, *args)
        assert got == _driver._pack_prepared(f, *args) == struct.pack("@" + fmt, *args), step


def test_same_value_in_a_new_object_and_a_new_value_in_a_kept_slot():
    f = _fn([(0, 4), (4, 4)])
    a, b = np.int32(7), np.float32(2.5)
    assert _driver._pack_memo(f, False, a, b) == struct.pack("@if", 7, 2.5)
    assert _driver._pack_memo(f, False, np.int32(7), b) == struct.pack("@if", 7, 2.5)
    assert _driver._pack_memo(f, False, np.int32(-1), b) == struct.pack("@if", -1, 2.5)
    assert _driver._pack_memo(f, False, a, np.float32(-3.0)) == struct.pack("@if", 7, -3.0)


def test_a_memo_that_keeps_missing_rests_and_wakes_up(rng):
    """Launches alternating between two sets of objects miss every slot: the
    memo rests (the plain packing serves them) and is used again later."""
    f = _fn()
    sets = [[_value(rng, tp) for tp in CALL_TYPES] for _ in range(2)]
    for step in range(600):
        args = sets[step % 2]
        assert _driver._pack_memo(f, False, *args) == _driver._pack_args(f, *args), step
    for step in range(300):
        assert _driver._pack_memo(f, False, *sets[0]) == _driver._pack_args(f, *sets[0])
    assert _driver._memo_slots(f) == (True,) * len(CALL_TYPES)
    assert _driver._pack_memo(f, False, *sets[1]) == _driver._pack_args(f, *sets[1])


def test_struct_views_and_size1_arrays_are_never_kept():
    rec = np.zeros(2, dtype=[("x", np.int32), ("y", np.float32)])
    view = rec[0]                       # a numpy.void over rec's memory
    one = np.array([5], dtype=np.int64)
    f = _fn([(0, 8), (8, 8)])
    assert _driver._pack_memo(f, False, view, one) == struct.pack("@ifq", 0, 0.0, 5)
    assert _driver._memo_slots(f) == (False, False)
    rec[0] = (3, 1.5)
    one[0] = -9
    assert _driver._pack_memo(f, False, view, one) == struct.pack("@ifq", 3, 1.5, -9)


def test_memo_keeps_value_references_and_gives_them_back():
    f = _fn([(0, 4)])
    x, y = np.float32(1.25), np.float32(-4.5)
    base_x, base_y = sys.getrefcount(x), sys.getrefcount(y)
    _driver._pack_memo(f, False, x)
    assert sys.getrefcount(x) == base_x + 1
    _driver._pack_memo(f, False, y)
    assert (sys.getrefcount(x), sys.getrefcount(y)) == (base_x, base_y + 1)
    del f
    gc.collect()
    assert sys.getrefcount(y) == base_y


def test_a_failed_packing_leaves_the_memo_consistent():
    f = _fn([(0, 4), (4, 4), (8, 4)])
    a, b, c = np.int32(1), np.int32(2), np.int32(3)
    assert _driver._pack_memo(f, False, a, b, c) == struct.pack("@iii", 1, 2, 3)
    with pytest.raises(TypeError, match=r"parameter #1 \(0-based\) is a Python int"):
        _driver._pack_memo(f, False, np.int32(10), 5, np.int32(30))
    with pytest.raises(TypeError, match=r"parameter #2 \(0-based\) of kernel 'k' is 4 bytes"):
        _driver._pack_memo(f, False, a, b, np.float64(1.0))
    assert _driver._pack_memo(f, False, a, b, c) == struct.pack("@iii", 1, 2, 3)
    assert _driver._pack_memo(f, False, np.int32(10), b, c) == struct.pack("@iii", 10, 2, 3)
    with pytest.raises(TypeError, match="takes 3 arguments, got 2"):
        _driver._pack_memo(f, False, a, b)


def test_prepared_errors_and_range_checks_survive_the_memo():
    f = _fn(None).prepare("iP")
    assert _driver._pack_memo(f, True, 1, 2) == struct.pack("@iP", 1, 2)
    with pytest.raises(OverflowError, match="parameter #0"):
        _driver._pack_memo(f, True, 2**31, 2)
    with pytest.raises(TypeError, match="parameter #1"):
        _driver._pack_memo(f, True, 1, 2.5)
    with pytest.raises(TypeError, match=r"takes 2 arguments \(iP\), got 3"):
        _driver._pack_memo(f, True, 1, 2, 3)
    assert _driver._pack_memo(f, True, 1, 2) == struct.pack("@iP", 1, 2)
    big = 2**64 - 1
    assert _driver._pack_memo(f, True, -5, big) == struct.pack("@iP", -5, big)


def test_prepare_again_starts_the_prepared_memo_over():
    f = _fn(None).prepare("i")
    assert _driver._memo_slots(f, prepared=True) == ()
    assert _driver._pack_memo(f, True, 5) == struct.pack("@i", 5)
    assert _driver._memo_slots(f, prepared=True) == (True,)
    f.prepare("q")
    assert _driver._memo_slots(f, prepared=True) == ()
    assert _driver._pack_memo(f, True, 5) == struct.pack("@q", 5)


def test_memo_helpers_reject_bad_input():
    with pytest.raises(TypeError, match=r"_pack_memo\(function, prepared, \*args\)"):
        _driver._pack_memo("k", False)
    with pytest.raises(TypeError):
        _driver._memo_slots(object())
    with pytest.raises(drv.LogicError, match="prepare"):
        _driver._pack_memo(_fn(), True, np.int32(1))


# ------------------------------------------------------------------ on the GPU

ECHO = r"""
extern "C" __global__ void echo(unsigned long long *out, const float *p, int n, float x,
                                double y, short s)
{
    out[0] = (unsigned long long)p;
    out[1] = (unsigned long long)(long long)n;
    out[2] = __float_as_uint(x);
    out[3] = (unsigned long long)__double_as_longlong(y);
    out[4] = (unsigned long long)(long long)s;
}
"""


def _expect(p, n, x, y, s):
    return np.array([int(p), np.int64(n).view(np.uint64), np.float32(x).view(np.uint32),
                     np.float64(y).view(np.uint64), np.int64(s).view(np.uint64)], dtype=np.uint64)


@pytest.fixture
def echo(ctx):
    from barecuda.compiler import SourceModule
    f = SourceModule(ECHO, no_extern_c=True).get_function("echo")
    out = drv.mem_alloc(5 * 8)
    yield f, out
    out.free()


def _read(out):
    host = np.zeros(5, np.uint64)
    drv.memcpy_dtoh(host, out)
    return host


def _launch(f, out, args, prepared):
    if prepared:
        f.prepared_call((1, 1), (1, 1, 1), out, *args)
    else:
        f(out, *args, block=(1, 1, 1), grid=(1, 1))


@pytest.mark.gpu
@pytest.mark.parametrize("prepared", [False, True])
def test_echo_over_random_sequences_of_kept_and_new_arguments(echo, rng, prepared):
    f, out = echo
    if prepared:
        f.prepare("PPifdh")
    bufs = [drv.mem_alloc(64) for _ in range(3)]

    def fresh(i):
        if i == 0:
            return bufs[int(rng.integers(3))]
        value = (np.int32(rng.integers(-2**31, 2**31)), np.float32(rng.standard_normal()),
                 np.float64(rng.standard_normal()), np.int16(rng.integers(-2**15, 2**15)))[i - 1]
        return value.item() if prepared and rng.random() < 0.5 else value

    args = [fresh(i) for i in range(5)]
    for step in range(60):
        for i in range(5):
            if rng.random() < 0.3:
                args[i] = fresh(i)
        _launch(f, out, args, prepared)
        np.testing.assert_array_equal(_read(out), _expect(*args), err_msg=f"step {step}")
    assert _driver._memo_slots(f, prepared=prepared) == (True,) * 6


@pytest.mark.gpu
@pytest.mark.parametrize("prepared", [False, True])
def test_a_freed_kept_allocation_is_refused_not_launched(echo, prepared):
    f, out = echo
    if prepared:
        f.prepare("PPifdh")
    a = drv.mem_alloc(64)
    args = [a, np.int32(1), np.float32(2.0), np.float64(3.0), np.int16(4)]
    _launch(f, out, args, prepared)
    _launch(f, out, args, prepared)
    a.free()
    with pytest.raises(drv.LogicError, match="freed"):
        _launch(f, out, args, prepared)
    b = drv.mem_alloc(64)
    args[0] = b
    _launch(f, out, args, prepared)
    np.testing.assert_array_equal(_read(out), _expect(*args))


@pytest.mark.gpu
@pytest.mark.parametrize("prepared", [False, True])
def test_a_new_allocation_at_a_dead_ones_address_is_packed_afresh(echo, prepared):
    """The case the memo's epoch is for: a kept DeviceAllocation dies and a new
    one, with another pointer, is made at the same address."""
    f, out = echo
    if prepared:
        f.prepare("PPifdh")
    rest = [np.int32(1), np.float32(2.0), np.float64(3.0), np.int16(4)]
    same_object_other_pointer = 0
    for step in range(20):
        a = drv.mem_alloc(256)
        _launch(f, out, [a] + rest, prepared)
        old_id, old_ptr = id(a), int(a)
        del a
        b = drv.mem_alloc((2 << 20) + 256 * step)   # another size class: another pointer
        same_object_other_pointer += id(b) == old_id and int(b) != old_ptr
        _launch(f, out, [b] + rest, prepared)
        np.testing.assert_array_equal(_read(out), _expect(b, *rest), err_msg=f"step {step}")
        del b
    assert same_object_other_pointer > 0, "no new allocation took a dead one's address"


@pytest.mark.gpu
def test_the_memo_does_not_keep_device_memory_alive(echo):
    f, out = echo
    a = drv.mem_alloc(1 << 20)
    dead = weakref.ref(a)
    f(out, a, np.int32(1), np.float32(2.0), np.float64(3.0), np.int16(4), block=(1, 1, 1))
    assert _driver._memo_slots(f) == (True,) * 6
    del a
    assert dead() is None
    assert _driver._memo_slots(f) == (False,) * 6


@pytest.mark.gpu
def test_an_allocation_of_a_released_context_is_refused(echo):
    f, out = echo
    other = drv.Device(0).make_context()
    try:
        b = drv.mem_alloc(64)
    finally:
        drv.Context.pop()
    args = (out, b, np.int32(1), np.float32(2.0), np.float64(3.0), np.int16(4))
    f(*args, block=(1, 1, 1))
    np.testing.assert_array_equal(_read(out), _expect(*args[1:]))
    other.detach()
    with pytest.raises(drv.LogicError):
        f(*args, block=(1, 1, 1))


class _Nested:
    """An argument handler whose pre_call launches the same kernel (the memo is
    in use then) into a second output."""

    def __init__(self, f, buf, out2, args):
        self.f, self.buf, self.out2, self.args = f, buf, out2, args

    def get_device_alloc(self):
        return self.buf

    def pre_call(self, stream):
        self.f(self.out2, *self.args, block=(1, 1, 1))

    def post_call(self, stream):
        pass


@pytest.mark.gpu
def test_a_launch_from_inside_a_launch_packs_on_its_own(echo):
    f, out = echo
    out2, buf, other = drv.mem_alloc(40), drv.mem_alloc(64), drv.mem_alloc(64)
    rest = (np.int32(5), np.float32(6.0), np.float64(7.0), np.int16(8))
    inner = (other, np.int32(-1), np.float32(-2.0), np.float64(-3.0), np.int16(-4))
    for _ in range(3):
        f(out, _Nested(f, buf, out2, inner), *rest, block=(1, 1, 1))
        np.testing.assert_array_equal(_read(out), _expect(buf, *rest))
        np.testing.assert_array_equal(_read(out2), _expect(*inner))
    assert _driver._memo_slots(f)[1] is False    # a handler is never kept


@pytest.mark.gpu
@pytest.mark.parametrize("prepared", [False, True])
def test_threads_launching_one_kernel_with_the_gil_released(ctx, prepared):
    from barecuda.compiler import SourceModule
    mod = SourceModule(r"""
    extern "C" __global__ void put(unsigned long long *slot, unsigned long long v, int k)
    { slot[k] = v; }""", no_extern_c=True)
    f = mod.get_function("put")
    if prepared:
        f.prepare("PQi")
    nthreads, rounds = 4, 200
    slots = drv.mem_alloc(nthreads * rounds * 8)
    errors = []

    def work(t):
        try:
            ctx.push()
            try:
                for r in range(rounds):
                    v, k = np.uint64(t * 1_000_000 + r), np.int32(t * rounds + r)
                    if prepared:
                        f.prepared_call((1, 1), (1, 1, 1), slots, int(v), int(k))
                    else:
                        f(slots, v, k, block=(1, 1, 1))
            finally:
                drv.Context.pop()
        except Exception as exc:          # reported below, with the thread's number
            errors.append((t, exc))

    before = _driver._launch_release_gil(True)
    try:
        threads = [threading.Thread(target=work, args=(t,)) for t in range(nthreads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        _driver._launch_release_gil(before)
    assert not errors
    host = np.zeros(nthreads * rounds, np.uint64)
    drv.memcpy_dtoh(host, slots)
    want = np.array([t * 1_000_000 + r for t in range(nthreads) for r in range(rounds)], np.uint64)
    np.testing.assert_array_equal(host, want)


@pytest.mark.gpu
def test_gpuarray_arguments_follow_their_data_and_are_not_kept(echo):
    from barecuda import gpuarray
    f, out = echo
    x = gpuarray.to_gpu(np.arange(16, dtype=np.float32))
    rest = (np.int32(1), np.float32(2.0), np.float64(3.0), np.int16(4))
    f(out, x, *rest, block=(1, 1, 1))
    np.testing.assert_array_equal(_read(out), _expect(x.ptr, *rest))
    assert _driver._memo_slots(f)[1] is False
    f(out, x[4:], *rest, block=(1, 1, 1))
    assert _read(out)[0] == x.ptr + 16


# ------------------------------------------------ launch(): the arguments in one tuple

def test_launch_checks_its_own_arguments_first():
    f = _fn([(0, 4), (4, 4)])
    two = (np.int32(1), np.int32(2))
    with pytest.raises(TypeError, match=r"launch\(\) takes grid, block and args, positionally \(2 given\)"):
        f.launch((1, 1), (1, 1, 1))
    with pytest.raises(TypeError, match=r"positionally \(4 given\)"):
        f.launch((1, 1), (1, 1, 1), two, None)
    for bad in (3, {1, 2}, "ab", np.arange(2, dtype=np.int32)):
        with pytest.raises(TypeError, match=r"launch\(\): args must be a tuple or a list, not "):
            f.launch((1, 1), (1, 1, 1), bad)
    with pytest.raises(TypeError, match="unexpected keyword argument 'grid'"):
        f.launch((1, 1), (1, 1, 1), two, grid=(1, 1))
    with pytest.raises(TypeError, match="takes 2 arguments, got 1"):
        f.launch((1, 1), (1, 1, 1), (np.int32(1),))
    with pytest.raises(ValueError, match="block dimensions must be positive"):
        f.launch((1, 1), (0, 1, 1), two)
    with pytest.raises(ValueError, match="shared memory size"):
        f.launch((1, 1), (1, 1, 1), two, shared=-1)
    with pytest.raises(TypeError, match="stream must be a Stream"):
        f.launch((1, 1), (1, 1, 1), two, stream="s")
    with pytest.raises(TypeError, match="Python float"):
        f.launch((1, 1), (1, 1, 1), (1.5, 2))
    # with the arguments right, the Function of no module is refused, not launched
    with pytest.raises(drv.LogicError, match="unloaded"):
        f.launch((1, 1), (1, 1, 1), [np.int32(1), np.int32(2)])


@pytest.mark.gpu
def test_launch_with_a_tuple_matches_call_over_random_sequences(echo, rng):
    f, out = echo
    bufs = [drv.mem_alloc(64) for _ in range(3)]
    makers = [lambda: bufs[int(rng.integers(3))], lambda: np.int32(rng.integers(-2**31, 2**31)),
              lambda: np.float32(rng.standard_normal()), lambda: np.float64(rng.standard_normal()),
              lambda: np.int16(rng.integers(-2**15, 2**15))]
    args = tuple(m() for m in makers)
    for step in range(80):
        if rng.random() < 0.5:      # a new tuple, some of its arguments new; else the same tuple
            args = tuple(m() if rng.random() < 0.3 else a for m, a in zip(makers, args))
        if step % 3 == 0:
            f.launch((1, 1), (1, 1, 1), [out, *args])
        else:
            f.launch((1, 1), (1, 1, 1), (out,) + args if step % 3 == 1 else (out, *args))
        np.testing.assert_array_equal(_read(out), _expect(*args), err_msg=f"step {step}")
        f(out, *args, block=(1, 1, 1), grid=(1, 1))
        np.testing.assert_array_equal(_read(out), _expect(*args), err_msg=f"step {step}, __call__")


@pytest.mark.gpu
def test_launch_with_handlers_a_stream_and_a_tuple_subclass(echo):
    import collections
    f, out = echo
    a = drv.mem_alloc(64)
    host = np.zeros(5, np.uint64)
    args = (drv.Out(host), a, np.int32(-5), np.float32(1.25), np.float64(-2.5), np.int16(7))
    f.launch((1, 1), (1, 1, 1), args)                      # Out copies back after the launch
    np.testing.assert_array_equal(host, _expect(*args[1:]))
    s = drv.Stream()
    f.launch((1, 1, 1), (1, 1, 1), (out,) + args[1:], stream=s, shared=0)
    s.synchronize()
    np.testing.assert_array_equal(_read(out), _expect(*args[1:]))
    Args = collections.namedtuple("Args", "out p n x y s")
    f.launch((1, 1), (1, 1, 1), Args(out, a, np.int32(3), np.float32(0.5), np.float64(9.0), np.int16(-1)))
    np.testing.assert_array_equal(_read(out), _expect(a, 3, 0.5, 9.0, -1))
    a.free()
    with pytest.raises(drv.LogicError, match="freed"):
        f.launch((1, 1), (1, 1, 1), (out,) + args[1:])
