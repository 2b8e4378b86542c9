# SPDX-License-Identifier: MIT
"""The peer section's multi-process NCCL rows (barecuda vs torch.distributed, one
process per GPU): row names, units and notes without GPUs, the busbw arithmetic,
the spawned children (importable by name, errors and silence reported, never a
hang).  The figures themselves need two GPUs."""

import importlib
import os
import pickle
import sys
import time

import pytest

from barecuda.bench import _nccl_procs as procs
from barecuda.bench import peer

OURS_2 = "NCCL all-reduce 256 MiB float32, 2 processes (one per GPU), busbw"
TORCH_2 = "torch.distributed NCCL all-reduce 256 MiB float32, 2 processes (one per GPU), busbw"


# ------------------------------------------------------------ fake children (spawn targets)

def _silent(rank, nranks, results, barrier):
    time.sleep(60)                                   # never answers


def _answers(rank, nranks, results, barrier, value):
    ok = os.environ.get("NCCL_NVLS_ENABLE") == "0"
    barrier.wait()
    results.put((rank, value if ok else -1.0, None))


def _fails_on_rank_1(rank, nranks, results, barrier):
    if rank == 1:
        procs._report(results, barrier, rank, lambda: 1 / 0)
    else:
        procs._report(results, barrier, rank, lambda: barrier.wait() or 1.0)


def _exits(rank, nranks, results, barrier):
    os._exit(3)


# ------------------------------------------------------------ rows without GPUs

@pytest.mark.parametrize("n", [0, 1])
def test_rows_with_fewer_than_two_gpus(n):
    rows = peer._multiproc_rows(n, runner=pytest.fail)      # no processes started
    assert [r["name"] for r in rows] == [OURS_2, TORCH_2]
    for r in rows:
        assert r["value"] is None and r["ratio"] is None and r["unit"] == "GB/s"
        assert r["note"] == f"skipped: needs two GPUs, found {n}"
    assert peer.multiproc_names(8)[0] == OURS_2.replace("2 processes", "8 processes")


def _fake_runner(times):
    calls = []

    def runner(target, n, args, timeout, with_ids=False):
        calls.append((target, n, args, with_ids))
        return times[target.__name__]
    return runner, calls


def test_rows_from_the_children_times(monkeypatch):
    monkeypatch.setattr("barecuda.nccl.available", lambda: True)
    monkeypatch.setattr(peer, "_torch_missing", lambda: None)
    runner, calls = _fake_runner({"barecuda_rank": (0.010, None), "torch_rank": (0.0105, None)})
    ours, theirs = peer._multiproc_rows(2, runner=runner)
    assert (ours["name"], theirs["name"]) == (OURS_2, TORCH_2)
    assert ours["value"] == pytest.approx(peer.MIB256 / 0.010 / 1e9)       # 2 ranks: busbw = algbw
    assert theirs["value"] == pytest.approx(peer.MIB256 / 0.0105 / 1e9)
    assert ours["ratio"] == pytest.approx(1.05)
    assert ours["vs"].startswith("torch.distributed ") and ours["vs"].endswith(" GB/s")
    assert "target >= 0.95" in ours["note"] and "more is better" in ours["note"]
    assert theirs["ratio"] is None
    # same message size and loops on both sides, the unique id queue only for barecuda
    (t1, n1, a1, ids1), (t2, n2, a2, ids2) = calls
    assert (t1, t2) == (procs.barecuda_rank, procs.torch_rank) and n1 == n2 == 2
    assert a1 == (peer.MIB256, peer.MP_WARMUP, peer.ITER, peer.ROUNDS) == a2[1:]
    assert a2[0].startswith("/") and ids1 and not ids2


def test_rows_when_a_side_fails(monkeypatch):
    monkeypatch.setattr("barecuda.nccl.available", lambda: True)
    monkeypatch.setattr(peer, "_torch_missing", lambda: None)
    runner, _ = _fake_runner({"barecuda_rank": (None, "timeout: rank(s) [1] did not answer"),
                              "torch_rank": (0.01, None)})
    ours, theirs = peer._multiproc_rows(4, runner=runner)
    assert ours["value"] is None and ours["ratio"] is None and "timeout" in ours["note"]
    assert theirs["value"] == pytest.approx(peer.MIB256 / 0.01 / 1e9 * 1.5)

    def boom(*a, **k):
        raise OSError("no more processes")
    ours, theirs = peer._multiproc_rows(2, runner=boom)
    assert ours["value"] is None and "could not start" in ours["note"]
    assert "no more processes" in theirs["note"]


def test_torch_not_importable(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert peer._torch_missing() == "torch not importable"
    monkeypatch.setattr("barecuda.nccl.available", lambda: False)
    ours, theirs = peer._multiproc_rows(2, runner=pytest.fail)
    assert ours["value"] is None and ours["note"] == "skipped: libnccl not found"
    assert theirs["value"] is None and theirs["note"] == "torch not importable"


def test_busbw():
    nbytes = 256 << 20
    assert procs.busbw(nbytes, 0.01, 2) == pytest.approx(nbytes / 0.01 / 1e9)
    assert procs.busbw(nbytes, 0.01, 8) == pytest.approx(nbytes / 0.01 / 1e9 * 1.75)
    assert procs.busbw(nbytes, 0.01, 1) == 0.0
    assert procs.busbw(10**9, 1.0, 4) == pytest.approx(1.5)


# ------------------------------------------------------------ spawned children

def test_children_are_importable_by_name():
    for fn in (procs.barecuda_rank, procs.torch_rank):
        mod = importlib.import_module(fn.__module__)
        assert getattr(mod, fn.__qualname__) is fn and fn.__doc__
        assert pickle.loads(pickle.dumps(fn)) is fn            # what spawn does
    assert procs.CHILD_ENV == {"NCCL_NVLS_ENABLE": "0"}


def test_run_ranks_returns_rank_0s_time_with_nvls_off(monkeypatch):
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")
    assert procs.run_ranks(_answers, 2, (0.25,), timeout=60) == (0.25, None)
    assert os.environ["NCCL_NVLS_ENABLE"] == "1"                  # the parent's is restored


def test_a_silent_child_is_a_timeout_note():
    t0 = time.monotonic()
    seconds, note = procs.run_ranks(_silent, 2, timeout=4)
    assert seconds is None
    assert note == "timeout: rank(s) [0, 1] did not answer within 4 s"
    assert time.monotonic() - t0 < 30                              # terminated, not joined


def test_a_failing_or_exiting_child_is_a_note():
    seconds, note = procs.run_ranks(_fails_on_rank_1, 2, timeout=60)
    assert seconds is None and note == "rank 1: ZeroDivisionError: division by zero"
    seconds, note = procs.run_ranks(_exits, 2, timeout=60)
    assert seconds is None and "without answering" in note and "code 3" in note


def test_barecuda_child_without_a_driver_reports_the_error(monkeypatch):
    monkeypatch.setenv("BARECUDA_LIBCUDA", "/nonexistent/libcuda.so.1")
    seconds, note = procs.run_ranks(procs.barecuda_rank, 2, (1 << 10, 1, 1, 1), timeout=90,
                                    with_ids=True)
    assert seconds is None and note.startswith("rank ") and "Error" in note


# ------------------------------------------------------------ two GPUs

@pytest.mark.gpu
def test_multiprocess_rows_on_two_gpus():
    from barecuda import driver as drv
    drv.init()
    n = drv.Device.count()
    if n < 2:
        pytest.skip(f"needs two GPUs, found {n}")
    from barecuda import nccl
    if not nccl.available():
        pytest.skip("libnccl not found")
    ours, theirs = peer._multiproc_rows(n)
    assert ours["name"] == peer.multiproc_names(n)[0]
    assert ours["value"] and ours["value"] > 0, ours["note"]
    if peer._torch_missing() is None:
        assert theirs["value"] and theirs["value"] > 0, theirs["note"]
        assert ours["ratio"] == pytest.approx(ours["value"] / theirs["value"])
