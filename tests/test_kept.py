# SPDX-License-Identifier: MIT
"""Large host arrays a program keeps copying are registered in place
(barecuda._array.kept): the policy with a recording stand-in for the three driver
calls (any machine), then the real thing on a GPU."""

import gc

import numpy as np
import pytest

from barecuda import _driver
from barecuda._array import kept as _kept

MiB = 1 << 20
BIG = 40 * MiB


class FakeDriver:
    """Records _host_register/_host_unregister; _host_known answers from them."""
    Error = _driver.Error

    def __init__(self, refuse=False):
        self.registered = {}
        self.calls = []
        self.refuse = refuse

    def _host_register(self, start, length):
        self.calls.append(("register", start, length))
        if self.refuse:
            return False
        self.registered[start] = length
        return True

    def _host_unregister(self, start):
        self.calls.append(("unregister", start))
        return self.registered.pop(start, None) is not None

    def _host_known(self, start):
        return start in self.registered


@pytest.fixture
def kept_state():
    """A clean policy state (after 3 copies, 1 GiB budget), restored after."""
    old = _kept.info()
    _kept.configure(after=0)            # ends every registration made before
    _kept._seen.clear()
    _kept.configure(after=3, budget=1 << 30)
    yield
    _kept.configure(after=0)
    _kept._seen.clear()
    _kept.configure(after=old["after"], budget=old["budget"])


@pytest.fixture
def fake(kept_state, monkeypatch):
    d = FakeDriver()
    monkeypatch.setattr(_kept, "_driver", d)
    return d


def big(n=BIG, fill=1):
    a = np.empty(n, np.uint8)
    a[:] = fill
    return a


def test_registers_at_the_third_copy_of_the_owner(fake):
    a = big()
    _kept.note_copy(a)
    _kept.note_copy(a[MiB:])              # a view counts for the array that owns the memory
    assert fake.calls == []
    _kept.note_copy(a)
    ((what, start, length),) = fake.calls
    addr = a.__array_interface__["data"][0]
    assert what == "register" and start == addr & ~4095 and start % 4096 == 0
    assert length % 4096 == 0 and start + length >= addr + a.nbytes
    assert _kept.info()["arrays"] == 1 and _kept.info()["bytes"] == length
    for _ in range(5):                    # registered: no more driver calls
        _kept.note_copy(a)
    assert len(fake.calls) == 1


def test_collection_ends_the_registration(fake):
    a = big()
    for _ in range(3):
        _kept.note_copy(a)
    start = fake.calls[0][1]
    del a
    gc.collect()
    assert fake.calls[-1] == ("unregister", start)
    assert _kept.info()["arrays"] == 0 and _kept.info()["bytes"] == 0


def test_a_new_array_at_the_same_address_counts_from_zero(fake):
    # the pattern `set(np.random.rand(n))` in a loop: a fresh array each time,
    # often at the address of the last one; none of them is kept
    for _ in range(6):
        a = big()
        _kept.note_copy(a)
        _kept.note_copy(a)
        del a
    assert fake.calls == []


def test_small_arrays_and_foreign_memory_are_left_alone(fake):
    _kept.configure(after=1)
    _kept.note_copy(np.ones(_kept.MIN_BYTES - 1, np.uint8))
    buf = bytearray(BIG)
    _kept.note_copy(np.frombuffer(buf, np.uint8))          # memory of a bytearray
    owner = big(_kept.MIN_BYTES - 4096)
    _kept.note_copy(owner)                                  # an owner below the threshold
    assert fake.calls == [] and _kept._seen == {}


def test_budget_evicts_the_least_recently_copied(fake):
    _kept.configure(after=1, budget=100 * MiB)
    a, b, c = big(), big(), big()
    for x in (a, b):
        _kept.note_copy(x)
    _kept.note_copy(a)                    # a copied last: b is the oldest now
    _kept.note_copy(c)
    starts = {name: x.__array_interface__["data"][0] & ~4095 for name, x in
              (("a", a), ("b", b), ("c", c))}
    assert ("unregister", starts["b"]) in fake.calls
    assert set(fake.registered) == {starts["a"], starts["c"]}
    assert _kept.info()["evicted"] == 1
    _kept.note_copy(big(200 * MiB))       # larger than the whole budget: never registered
    assert set(fake.registered) == {starts["a"], starts["c"]}
    _kept.configure(budget=50 * MiB)      # a smaller budget ends registrations now
    assert set(fake.registered) == {starts["c"]}
    _kept.configure(after=0)              # off: every registration ends
    assert fake.registered == {}


def test_refused_registration_is_counted_and_harmless(kept_state, monkeypatch):
    d = FakeDriver(refuse=True)
    monkeypatch.setattr(_kept, "_driver", d)
    a = big()
    for _ in range(3):
        _kept.note_copy(a)
    assert _kept.info()["refused"] == 1 and _kept.info()["arrays"] == 0


def test_lost_registration_is_made_again(fake):
    a = big()
    for _ in range(3):
        _kept.note_copy(a)
    fake.registered.clear()               # as when the registering context is destroyed
    _kept.note_copy(a)
    assert [c[0] for c in fake.calls] == ["register", "unregister", "register"]
    assert _kept.info()["arrays"] == 1


@pytest.mark.parametrize("kw", [{"after": -1}, {"after": 1.5}, {"budget": -1},
                                {"budget": "1"}])
def test_configure_rejects_bad_values(kept_state, kw):
    before = _kept.info()
    with pytest.raises(ValueError, match=next(iter(kw))):
        _kept.configure(**kw)
    assert _kept.info() == before


@pytest.mark.parametrize("args,exc,msg", [
    ((0, 4096), ValueError, "positive"), ((4096, 0), ValueError, "positive"),
    (("1", 4096), TypeError, "address"), ((4096, -1), ValueError, "nbytes"),
    ((4096,), TypeError, "2 arguments"), ((2**70, 4096), ValueError, "address is too large"),
])
def test_host_register_argument_errors(args, exc, msg):
    with pytest.raises(exc, match=msg):
        _driver._host_register(*args)


def test_host_unregister_and_known_argument_errors():
    with pytest.raises(TypeError, match="1 argument "):
        _driver._host_unregister()
    with pytest.raises(ValueError, match="positive"):
        _driver._host_known(0)


# ------------------------------------------------------------ on the GPU

@pytest.mark.gpu
def test_kept_arrays_copy_correctly_and_are_registered(ctx, rng, kept_state):
    from barecuda import gpuarray
    x = rng.standard_normal(BIG // 4).astype(np.float32)
    addr = x.__array_interface__["data"][0]
    before = _kept.info()
    g = gpuarray.to_gpu(x)                # 1
    g.set(x)                              # 2
    assert not _driver._host_known(addr)
    x *= 3                                # the third copy sees the new values
    g.set(x)                              # 3: registered, then copied by the DMA
    assert _driver._host_known(addr)
    np.testing.assert_array_equal(g.get(), x)
    x[:] = rng.standard_normal(x.size).astype(np.float32)
    g.set(x)
    np.testing.assert_array_equal(g.get(), x)
    # get() into an array the program keeps
    y = np.zeros_like(x)
    for k in range(4):
        (g * np.float32(k)).get(y)
        np.testing.assert_array_equal(y, x * np.float32(k))
    assert _driver._host_known(y.__array_interface__["data"][0])
    with pytest.raises(ValueError, match="resize"):
        y.resize(10)                      # documented: a kept array has a weak reference
    info = _kept.info()
    assert info["arrays"] == 2 and info["registered"] == before["registered"] + 2
    del x
    gc.collect()
    after = _kept.info()
    assert after["arrays"] == 1 and after["unregistered"] == before["unregistered"] + 1
    assert not _driver._host_known(addr)


@pytest.mark.gpu
def test_arrays_of_get_are_not_counted(ctx, rng, kept_state):
    from barecuda import gpuarray
    g = gpuarray.to_gpu(rng.standard_normal(BIG // 4).astype(np.float32))
    before = _kept.info()
    outs = [g.get() for _ in range(4)]
    # (their memory may be page-locked by the host pool, src/hostpool.c, not here)
    assert _kept.info()["registered"] == before["registered"] and _kept._kept == {}
    assert _kept._seen == {}
    outs[0].resize(10, refcheck=False)    # no weak reference on a new result
