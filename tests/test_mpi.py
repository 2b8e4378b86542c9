# SPDX-License-Identifier: MIT
"""barecuda.mpi: CUDA-aware detection and the device/host paths of the helpers (CPU,
with a fake MPI and a fake communicator), the CUDA array interface mpi4py reads,
and on the GPU the helpers with mpi4py's COMM_WORLD and `mpirun -n 2` of the example."""

import itertools
import os
import pathlib
import shutil
import subprocess
import sys
import types

import numpy as np
import pytest

from barecuda import driver as drv
from barecuda import mpi

ROOT = pathlib.Path(__file__).resolve().parent.parent


class FakeMPI(types.SimpleNamespace):
    SUM = "SUM"
    MAX = "MAX"
    IN_PLACE = "IN_PLACE"


class FakeComm:
    def __init__(self, rank=0):
        self.rank = rank
        self.calls = []

    def Get_rank(self):
        return self.rank

    def Allreduce(self, send, recv, op):
        self.calls.append(("Allreduce", send, recv, op))
        if isinstance(recv, np.ndarray):
            if isinstance(send, np.ndarray):
                recv[...] = send * 2                  # "two ranks" of equal data
            else:
                recv *= 2

    def Bcast(self, buf, root):
        self.calls.append(("Bcast", buf, root))
        if isinstance(buf, np.ndarray) and self.rank != root:
            buf[...] = 7

    def Send(self, buf, dest, tag):
        self.calls.append(("Send", buf, dest, tag))

    def Recv(self, buf, source, tag):
        self.calls.append(("Recv", buf, source, tag))
        if isinstance(buf, np.ndarray):
            buf[...] = 5


_fake_ptrs = itertools.count()


class FakeArray:
    """Looks like a contiguous GPUArray to the helpers (no GPU)."""

    def __init__(self, host):
        self.host = host
        self.gpudata = 0
        self.ptr = 0x1000 + next(_fake_ptrs) * 16    # unique: id() % n could collide
        self.dtype, self.nbytes, self.strides = host.dtype, host.nbytes, host.strides
        self.flags = types.SimpleNamespace(forc=True)


@pytest.fixture
def fake_gpu(monkeypatch):
    """Route the helpers' device side to FakeArrays' host copies."""
    arrays = {}

    def reg(host):
        a = FakeArray(host.copy())
        arrays[a.ptr] = a
        return a

    monkeypatch.setattr(mpi, "_settle", lambda: None)
    monkeypatch.setattr(mpi, "_staging", lambda nbytes, dt: np.empty(nbytes // dt.itemsize, dt))
    monkeypatch.setattr(mpi, "_to_host", lambda ptr, h: h.__setitem__(..., arrays[ptr].host))
    monkeypatch.setattr(mpi, "_to_device", lambda ptr, h: arrays[ptr].host.__setitem__(..., h))
    monkeypatch.setattr(mpi, "_mpi", lambda: FakeMPI)
    monkeypatch.delenv("BARECUDA_MPI_CUDA_AWARE", raising=False)
    return reg


# ---------------------------------------------------------------- detection

def test_env_override_wins(monkeypatch):
    fake = FakeMPI(Query_cuda_support=lambda: False)
    monkeypatch.setenv("BARECUDA_MPI_CUDA_AWARE", "1")
    assert mpi.cuda_aware(fake) is True
    monkeypatch.setenv("BARECUDA_MPI_CUDA_AWARE", "0")
    assert mpi.cuda_aware(FakeMPI(Query_cuda_support=lambda: True)) is False
    monkeypatch.setenv("BARECUDA_MPI_CUDA_AWARE", "yes")
    with pytest.raises(ValueError, match="must be 0 or 1"):
        mpi.cuda_aware(fake)


def test_query_cuda_support_then_library(monkeypatch):
    monkeypatch.delenv("BARECUDA_MPI_CUDA_AWARE", raising=False)
    assert mpi.cuda_aware(FakeMPI(Query_cuda_support=lambda: True)) is True
    assert mpi.cuda_aware(FakeMPI(Query_cuda_support=lambda: 0)) is False

    def broken():
        raise NotImplementedError

    monkeypatch.setattr(mpi, "_library_query", lambda: True)
    assert mpi.cuda_aware(FakeMPI(Query_cuda_support=broken)) is True
    assert mpi.cuda_aware(FakeMPI()) is True
    monkeypatch.setattr(mpi, "_library_query", lambda: None)
    assert mpi.cuda_aware(FakeMPI()) is False


def test_library_query_without_mpi_in_the_process():
    r = subprocess.run([sys.executable, "-c",
                        "from barecuda import mpi; print(mpi._library_query())"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "None", r.stderr


def test_without_mpi4py_detection_says_false(monkeypatch):
    monkeypatch.delenv("BARECUDA_MPI_CUDA_AWARE", raising=False)

    def missing():
        raise ImportError("no mpi4py")

    monkeypatch.setattr(mpi, "_mpi", missing)
    assert mpi.cuda_aware() is False


# ------------------------------------------------------------------ helpers

def test_allreduce_device_path_hands_the_arrays_to_mpi(fake_gpu):
    a = fake_gpu(np.arange(4, dtype=np.float32))
    comm = FakeComm()
    assert mpi.allreduce(comm, a, cuda_aware=True) == "device"
    assert comm.calls == [("Allreduce", "IN_PLACE", a, "SUM")]
    b = fake_gpu(np.zeros(4, np.float32))
    assert mpi.allreduce(comm, a, b, op=FakeMPI.MAX, cuda_aware=True) == mpi.DEVICE
    assert comm.calls[-1] == ("Allreduce", a, b, "MAX")


def test_allreduce_host_path_stages(fake_gpu):
    host = np.arange(6, dtype=np.int64)
    a = fake_gpu(host)
    b = fake_gpu(np.zeros(6, np.int64))
    comm = FakeComm()
    assert mpi.allreduce(comm, a, b, cuda_aware=False) == "host"
    np.testing.assert_array_equal(b.host, host * 2)
    np.testing.assert_array_equal(a.host, host)
    assert mpi.allreduce(comm, a) == "host"             # detection: no CUDA-aware MPI
    np.testing.assert_array_equal(a.host, host * 2)


def test_allreduce_checks_sizes(fake_gpu):
    a = fake_gpu(np.zeros(4, np.float32))
    b = fake_gpu(np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="send is 16 bytes of float32 but recv is 20 bytes"):
        mpi.allreduce(FakeComm(), a, b)
    with pytest.raises(TypeError, match="must be a GPUArray or a DeviceAllocation"):
        mpi.allreduce(FakeComm(), np.zeros(4))


def test_bcast_send_recv_host_paths(fake_gpu):
    a = fake_gpu(np.zeros(3, np.int32))
    assert mpi.bcast(FakeComm(rank=1), a, root=0, cuda_aware=False) == "host"
    np.testing.assert_array_equal(a.host, [7, 7, 7])
    assert mpi.recv(FakeComm(), a, source=1, cuda_aware=False) == "host"
    np.testing.assert_array_equal(a.host, [5, 5, 5])
    comm = FakeComm()
    assert mpi.send(comm, a, dest=1, tag=3, cuda_aware=False) == "host"
    sent = comm.calls[-1]
    assert sent[0] == "Send" and sent[2:] == (1, 3)
    np.testing.assert_array_equal(sent[1], [5, 5, 5])
    comm = FakeComm()
    assert mpi.send(comm, a, dest=1, cuda_aware=True) == "device"
    assert comm.calls[-1] == ("Send", a, 1, 0)


# --------------------------------------------------------------------- GPU

gpu = pytest.mark.gpu


@gpu
def test_device_allocation_and_gpuarray_export_cai(ctx):
    from barecuda import gpuarray
    a = drv.mem_alloc(100)
    cai = a.__cuda_array_interface__
    assert cai["shape"] == (100,) and cai["typestr"] == "|u1"
    assert cai["data"] == (int(a), False) and cai["version"] == 3
    g = gpuarray.zeros((3, 4), np.float32)
    assert g.__cuda_array_interface__["shape"] == (3, 4)
    assert g.__cuda_array_interface__["typestr"] == "<f4"
    a.free()
    with pytest.raises(drv.LogicError, match="freed"):
        a.__cuda_array_interface__


def _mpi4py_world():
    try:
        from mpi4py import MPI
    except Exception as exc:  # noqa: BLE001 - ImportError or no MPI runtime
        pytest.skip(f"mpi4py is not usable: {exc}")
    return MPI


@gpu
def test_helpers_with_one_rank_world(ctx, rng):
    MPI = _mpi4py_world()
    from barecuda import gpuarray
    comm = MPI.COMM_WORLD
    host = rng.random(1000)
    a = gpuarray.to_gpu(host)
    b = gpuarray.zeros_like(a)
    path = mpi.allreduce(comm, a, b, cuda_aware=False)
    assert path == "host"
    np.testing.assert_allclose(b.get(), host * comm.Get_size())
    if mpi.cuda_aware():
        b.fill(0)
        assert mpi.allreduce(comm, a, b) == "device"
        np.testing.assert_allclose(b.get(), host * comm.Get_size())
    assert mpi.bcast(comm, a, root=0) in ("host", "device")
    np.testing.assert_array_equal(a.get(), host)


def _mpirun():
    return shutil.which("mpirun") or shutil.which("mpiexec")


@gpu
def test_mpirun_two_ranks_example(tmp_path):
    launcher = _mpirun()
    if launcher is None:
        pytest.skip("no mpirun or mpiexec on PATH")
    _mpi4py_world()
    env = dict(os.environ)
    env.pop("PYTHONSAFEPATH", None)
    extra = []
    if "Open MPI" in subprocess.run([launcher, "--version"], capture_output=True, text=True).stdout:
        extra.append("--oversubscribe")
        if os.geteuid() == 0:      # Open MPI refuses root unless told (the GPU machines run as root)
            extra.append("--allow-run-as-root")
    r = subprocess.run([launcher, *extra, "-n", "2", sys.executable,
                        str(ROOT / "examples" / "mpi_allreduce.py")],
                       capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "OK: 2 ranks" in r.stdout, r.stdout + r.stderr
