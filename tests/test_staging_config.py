# SPDX-License-Identifier: MIT
"""The settings of staged copies (_staging_config: threads, buffers, chunk size,
populating helpers, non-temporal host copies) and copies under every combination of
them."""

import platform

import numpy as np
import pytest

from barecuda import _driver

MiB = 1 << 20
KEYS = {"workers", "chunk_mib", "depth", "prefault", "nt"}
X86 = platform.machine().lower() in ("x86_64", "amd64")


@pytest.fixture
def restore_config():
    old = _driver._staging_config()
    yield old
    _driver._staging_config(**old)


def test_config_reads_and_sets(restore_config):
    cur = _driver._staging_config()
    assert set(cur) == KEYS and all(type(v) is int for v in cur.values())
    new = _driver._staging_config(workers=3, chunk_mib=5, depth=4, prefault=0, nt=0)
    assert new == {"workers": 3, "chunk_mib": 5, "depth": 4, "prefault": 0, "nt": 0}
    assert _driver._staging_config() == new
    assert _driver._staging_config(depth=3)["depth"] == 3          # the others kept
    assert _driver._staging_config()["workers"] == 3
    # non-temporal stores exist on x86-64 only; elsewhere asking for them leaves 0
    assert _driver._staging_config(nt=1)["nt"] == (1 if X86 else 0)
    assert _driver._staging_config(nt=0)["nt"] == 0


@pytest.mark.parametrize("kw,msg", [
    ({"workers": 0}, "workers"), ({"workers": 17}, "workers"), ({"depth": 1}, "depth"),
    ({"depth": 5}, "depth"), ({"chunk_mib": 0}, "chunk_mib"), ({"chunk_mib": 65}, "chunk_mib"),
    ({"prefault": -1}, "prefault"), ({"prefault": 2**70}, "prefault"),
    ({"nt": 2}, "nt"), ({"nt": -1}, "nt"),
])
def test_config_rejects_out_of_range(restore_config, kw, msg):
    before = _driver._staging_config()
    with pytest.raises((ValueError, OverflowError), match=msg):
        _driver._staging_config(**kw)
    assert _driver._staging_config() == before


def test_config_rejects_wrong_types(restore_config):
    with pytest.raises(TypeError):
        _driver._staging_config(workers="4")
    with pytest.raises(TypeError):
        _driver._staging_config(workers=2.5)
    with pytest.raises(TypeError):
        _driver._staging_config(nt="yes")
    with pytest.raises(TypeError):
        _driver._staging_config(nonsense=1)


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", [
    {"workers": 1, "chunk_mib": 1, "depth": 2, "prefault": 0, "nt": 1},
    {"workers": 3, "chunk_mib": 1, "depth": 3, "prefault": 2, "nt": 0},
    {"workers": 8, "chunk_mib": 8, "depth": 4, "prefault": 8, "nt": 1},
    {"workers": 16, "chunk_mib": 2, "depth": 2, "prefault": 16, "nt": 0},
    {"workers": 16, "chunk_mib": 2, "depth": 2, "prefault": 0, "nt": 1},
])
@pytest.mark.parametrize("n", [MiB, 3 * MiB + 17, 40 * MiB + 123, 130 * MiB + 4097])
def test_round_trips_under_every_setting(ctx, rng, restore_config, cfg, n):
    from barecuda import driver as drv
    from barecuda import gpuarray
    _driver._staging_config(**cfg)
    host = rng.integers(0, 256, n, dtype=np.uint8)
    dev = drv.mem_alloc(n)
    _driver._htod_staged(dev, host)
    plain = np.empty(n, np.uint8)
    drv.memcpy_dtoh(plain, dev)
    np.testing.assert_array_equal(plain, host)
    # from an address off every alignment, with a length no multiple of 16 or 64
    _driver._htod_staged(dev, host[5:])
    drv.memcpy_dtoh(plain[:n - 5], dev)
    np.testing.assert_array_equal(plain[:n - 5], host[5:])
    _driver._htod_staged(dev, host)
    # into a new array (its pages populated by the helpers), at an odd offset of a
    # larger new buffer, and into memory touched before
    np.testing.assert_array_equal(gpuarray.to_gpu(host).get(), host)
    big = np.empty(n + 4096 + 3, np.uint8)
    _driver._dtoh_staged(big[3:n + 3], dev)
    np.testing.assert_array_equal(big[3:n + 3], host)
    touched = np.ones(n, np.uint8)
    _driver._dtoh_staged(touched, dev)
    np.testing.assert_array_equal(touched, host)


@pytest.mark.gpu
def test_streamed_get_into_new_arrays(ctx, rng, restore_config):
    from barecuda import driver as drv
    from barecuda import gpuarray
    s = drv.Stream()
    x = rng.standard_normal(2**24 + 3).astype(np.float32)
    g = gpuarray.to_gpu(x, stream=s)
    for pf in (0, 4):
        _driver._staging_config(prefault=pf)
        for _ in range(3):
            np.testing.assert_array_equal(g.get(stream=s), x)
            np.testing.assert_array_equal(g.get(), x)


@pytest.mark.gpu
def test_kept_threads_serve_copies_from_many_threads(ctx, rng, restore_config):
    """Copies from several Python threads at once: one holds the staging buffers
    and the kept worker threads, the others go to the driver directly; every
    byte arrives, whichever way each copy went."""
    import threading
    from barecuda import driver as drv
    _driver._staging_config(workers=6)
    n = 24 * MiB + 5
    hosts = [rng.integers(0, 256, n, dtype=np.uint8) for _ in range(4)]
    devs = [drv.mem_alloc(n) for _ in hosts]
    errors = []

    def work(i):
        try:
            ctx.push()  # the test's context, current on this thread too
            try:
                for _ in range(3):
                    _driver._htod_staged(devs[i], hosts[i])
                    back = np.empty(n, np.uint8)
                    _driver._dtoh_staged(back, devs[i])
                    np.testing.assert_array_equal(back, hosts[i])
            finally:
                drv.Context.pop()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(hosts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
