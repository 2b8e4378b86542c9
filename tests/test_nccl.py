# SPDX-License-Identifier: MIT
"""barecuda.nccl: the header, the library search, argument checking (CPU, with fake
buffers and a fake communicator), and on the GPU 1-rank collectives against NumPy,
streams, groups, errors, two spawned ranks on one GPU and (skipped) two GPUs."""

import multiprocessing
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from barecuda import _driver, nccl
from barecuda import driver as drv

ROOT = pathlib.Path(__file__).resolve().parent.parent
API = ROOT / "include" / "barecuda" / "nccl_api.h"


def _nccl_header_dir():
    cands = [os.environ.get("CUDA_HOME"), "/usr/local/cuda"]
    found = [os.path.join(c, "include") for c in cands if c]
    found += [os.path.join(p, "nvidia", "nccl", "include") for p in sys.path if p]
    found += ["/usr/include", "/usr/local/include"]
    for d in found:
        if os.path.isfile(os.path.join(d, "nccl.h")):
            return d
    return None


def _cc():
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def _cuda_include():
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and os.path.isfile(os.path.join(root, "include", "cuda_runtime.h")):
            return os.path.join(root, "include")
    return None


# ------------------------------------------------------------------ header

@pytest.mark.skipif(not API.is_file(), reason="needs the source tree")
@pytest.mark.skipif(_nccl_header_dir() is None or _cc() is None or _cuda_include() is None,
                    reason="needs a C compiler, nccl.h and the CUDA runtime headers")
def test_nccl_api_matches_nccl_h(tmp_path):
    import re
    text = API.read_text()
    names = re.findall(r"X\((ncclS?\w+), (\d+)\)", text)
    assert ("ncclSuccess", "0") in names and ("ncclFloat32", "7") in names
    checks = "".join(f'_Static_assert({n} == {v}, "{n}");\n' for n, v in names)
    src = tmp_path / "check.c"
    src.write_text("#include <nccl.h>\n#include \"barecuda/nccl_api.h\"\n" + checks +
                   '_Static_assert(sizeof(ncclUniqueId) == BC_NCCL_UNIQUE_ID_BYTES, "id");\n')
    proc = subprocess.run([_cc(), "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                           "-I", _nccl_header_dir(), "-I", _cuda_include(),
                           "-I", str(ROOT / "include"), str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(not API.is_file() or _cc() is None, reason="needs the source tree and cc")
def test_nccl_api_stands_alone(tmp_path):
    src = tmp_path / "alone.c"
    src.write_text('#include "barecuda/nccl_api.h"\n'
                   "ncclResult_t (*p)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,"
                   " ncclComm_t, cudaStream_t) = ncclAllReduce;\n"
                   '_Static_assert(ncclBfloat16 == 9 && ncclAvg == 4, "values");\n')
    proc = subprocess.run([_cc(), "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                           "-I", str(ROOT / "include"), str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# ----------------------------------------------------------------- library

def _run(code, **env):
    e = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=e, timeout=120, cwd="/")


def test_bad_override_is_reported_and_available_is_false():
    code = ("from barecuda import nccl, driver\n"
            "print(nccl.available())\n"
            "try:\n    nccl.version()\nexcept driver.Error as e:\n    print('ERR', e)\n"
            "print(nccl.library_path())\n")
    r = _run(code, BARECUDA_LIBNCCL="/nonexistent/libnccl.so.2")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "False"
    assert "BARECUDA_LIBNCCL=/nonexistent/libnccl.so.2 could not be loaded as NCCL" in lines[1]
    assert lines[2] == "None"


def test_import_needs_no_nccl():
    r = _run("import barecuda.nccl, barecuda.mpi; print('ok')",
             BARECUDA_LIBNCCL="/nonexistent/libnccl.so.2")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


needs_nccl = pytest.mark.skipif(not nccl.available(), reason="libnccl.so.2 not found")


@needs_nccl
def test_version_and_path():
    major, minor, patch = nccl.version()
    assert major == 2 and minor >= 10 and patch >= 0
    path = nccl.library_path()
    assert path and os.path.basename(path).startswith("libnccl.so")


@needs_nccl
def test_unique_ids_are_128_distinct_picklable_bytes():
    import pickle
    a, b = nccl.get_unique_id(), nccl.get_unique_id()
    assert isinstance(a, bytes) and len(a) == nccl.UNIQUE_ID_BYTES == 128
    assert a != b
    assert pickle.loads(pickle.dumps(a)) == a


# ------------------------------------------------ argument checks (no GPU)

class FakeCai:
    """A device array seen only through __cuda_array_interface__."""

    def __init__(self, shape, dtype, ptr=0x10000, strides=None):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": np.dtype(dtype).str,
                                         "data": (ptr, False), "version": 3,
                                         "strides": strides}


class FakeComm:
    def __init__(self, size=4, rank=1):
        self.size, self.rank, self.device, self.closed = size, rank, 0, False
        self.calls = []

    def _op(self, *args):
        self.calls.append(args)


def comm(size=4):
    fake = FakeComm(size)
    return nccl.Communicator._wrap(fake), fake


def test_communicator_arguments_checked_before_nccl():
    uid = bytes(128)
    with pytest.raises(ValueError, match="nranks must be >= 1, got 0"):
        nccl.Communicator(0, uid, 0)
    with pytest.raises(ValueError, match=r"rank 2 is not in range\(2\)"):
        nccl.Communicator(2, uid, 2)
    with pytest.raises(ValueError, match="unique_id must be 128 bytes, got 5"):
        nccl.Communicator(2, b"12345", 0)
    with pytest.raises(TypeError, match="unique_id must be the bytes of get_unique_id"):
        nccl.Communicator(2, "text", 0)
    with pytest.raises(TypeError, match="rank must be an int"):
        nccl.Communicator(2, uid, 1.0)
    with pytest.raises(TypeError, match="nranks must be an int"):
        nccl.Communicator(True, uid, 0)


def test_c_layer_checks_its_own_arguments():
    with pytest.raises(ValueError, match="unique id is 128 bytes, got 3"):
        _driver._nccl_comm_init_rank(1, b"abc", 0)
    with pytest.raises(ValueError, match=r"rank 5 is not in range\(2\)"):
        _driver._nccl_comm_init_rank(2, bytes(128), 5)
    with pytest.raises(TypeError):
        _driver._nccl_comm_init_all([1, 2])
    with pytest.raises(TypeError):
        _driver._NcclComm()


def test_all_reduce_infers_count_and_dtype():
    c, fake = comm()
    c.all_reduce(FakeCai((8,), np.float32, 0x1000), FakeCai((8,), np.float32, 0x2000), op="max")
    kind, send, recv, count, dtype, op, root, stream, keep = fake.calls[-1]
    assert (kind, send, recv, count, dtype, op, root, stream) == (0, 0x1000, 0x2000, 8, 7, 2, 0,
                                                                  None)
    c.all_reduce(FakeCai((2, 3), np.int64, 0x1000))            # in place
    assert fake.calls[-1][1:5] == (0x1000, 0x1000, 6, 4)


@pytest.mark.parametrize("dtype,code", [(np.int8, 0), (np.uint8, 1), (np.int32, 2),
                                        (np.uint32, 3), (np.int64, 4), (np.uint64, 5),
                                        (np.float16, 6), (np.float32, 7), (np.float64, 8)])
def test_dtype_map(dtype, code):
    c, fake = comm()
    c.all_reduce(FakeCai((4,), dtype))
    assert fake.calls[-1][4] == code


def test_complex_sums_as_pairs_of_reals_and_other_ops_refuse():
    c, fake = comm()
    c.all_reduce(FakeCai((5,), np.complex64), op="avg")
    assert fake.calls[-1][3:5] == (10, 7)
    c.all_reduce(FakeCai((5,), np.complex128))
    assert fake.calls[-1][3:5] == (10, 8)
    with pytest.raises(TypeError, match="NCCL cannot reduce complex64 with 'max'"):
        c.all_reduce(FakeCai((5,), np.complex64), op="max")
    with pytest.raises(TypeError, match="NCCL cannot reduce bool"):
        c.all_reduce(FakeCai((5,), np.bool_))
    with pytest.raises(TypeError, match="cannot reduce int16"):
        c.reduce(FakeCai((5,), np.int16))


def test_data_movement_moves_any_dtype_as_bytes():
    c, fake = comm()
    c.broadcast(FakeCai((5,), np.int16), root=3)
    assert fake.calls[-1][0] == 1 and fake.calls[-1][3:7] == (10, 1, 0, 3)
    c.send(FakeCai((3,), np.complex128), peer=2)
    assert fake.calls[-1][0] == 5 and fake.calls[-1][3:7] == (48, 1, 0, 2)


def test_size_mismatch_says_the_numbers():
    c, _ = comm()
    with pytest.raises(ValueError, match=r"recv holds 28 bytes but 32 are needed \(8 x float32\)"):
        c.all_reduce(FakeCai((8,), np.float32), FakeCai((7,), np.float32))
    with pytest.raises(ValueError, match="recv holds 64 bytes but 128 are needed"):
        c.all_gather(FakeCai((8,), np.float32), FakeCai((16,), np.float32))
    with pytest.raises(ValueError, match="send holds 24 bytes, not a multiple of 16"):
        c.reduce_scatter(FakeCai((6,), np.float32), FakeCai((1,), np.float32))
    with pytest.raises(ValueError, match="send holds 32 bytes but 40 are needed"):
        c.all_reduce(FakeCai((8,), np.float32), count=10)


def test_all_gather_and_reduce_scatter_counts():
    c, fake = comm(size=4)
    c.all_gather(FakeCai((3,), np.float64), FakeCai((12,), np.float64))
    assert fake.calls[-1][0] == 3 and fake.calls[-1][3] == 3
    c.reduce_scatter(FakeCai((12,), np.int32), FakeCai((3,), np.int32), op="min")
    assert fake.calls[-1][0] == 4 and fake.calls[-1][3:6] == (3, 2, 3)


def test_dtype_errors():
    c, _ = comm()
    with pytest.raises(TypeError, match="send holds float32 but recv holds float64"):
        c.all_reduce(FakeCai((4,), np.float32), FakeCai((4,), np.float64))
    with pytest.raises(TypeError, match="dtype int32 was given but send holds float32"):
        c.all_reduce(FakeCai((4,), np.float32), dtype=np.int32)
    with pytest.raises(TypeError, match="dtype is needed for untyped buffers"):
        c.all_reduce(0x1000, 0x2000, count=4)
    with pytest.raises(ValueError, match="count is needed"):
        c.all_reduce(0x1000, 0x2000, dtype=np.float32)


def test_raw_pointers_with_count_and_dtype():
    c, fake = comm()
    c.all_reduce(0x1000, 0x2000, count=16, dtype="float16", op="PROD")
    assert fake.calls[-1][1:6] == (0x1000, 0x2000, 16, 6, 1)


def test_bad_arguments():
    c, _ = comm(size=2)
    x = FakeCai((4,), np.float32)
    with pytest.raises(ValueError, match="op must be one of"):
        c.all_reduce(x, op="xor")
    with pytest.raises(ValueError, match="root 2 is not a rank of this communicator"):
        c.broadcast(x, root=2)
    with pytest.raises(TypeError, match="peer must be an int"):
        c.send(x, peer="1")
    with pytest.raises(TypeError, match="send must be device memory"):
        c.all_reduce(np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="must be device memory"):
        c.all_reduce(None)
    with pytest.raises(ValueError, match="negative"):
        c.all_reduce(-5, count=1, dtype=np.float32)
    with pytest.raises(ValueError, match="count must be >= 0"):
        c.all_reduce(x, count=-1)
    with pytest.raises(TypeError, match="count must be an int"):
        c.all_reduce(x, count=2.0)
    with pytest.raises(ValueError, match="not contiguous"):
        c.all_reduce(FakeCai((4, 4), np.float32, strides=(4, 16)))


def test_closed_communicator_is_a_logic_error():
    c, fake = comm()
    fake.closed = True
    with pytest.raises(drv.LogicError, match="this Communicator was destroyed"):
        c.all_reduce(FakeCai((4,), np.float32))
    assert not fake.calls


def test_group_ends_even_when_the_body_raises(monkeypatch):
    log = []
    monkeypatch.setattr(_driver, "_nccl_group_start", lambda: log.append("start"))
    monkeypatch.setattr(_driver, "_nccl_group_end", lambda: log.append("end"))
    with nccl.group():
        log.append("body")
    with pytest.raises(KeyError):
        with nccl.group():
            raise KeyError("x")
    assert log == ["start", "body", "end", "start", "end"]


# ---------------------------------------------------------------- GPU tests

gpu = pytest.mark.gpu


@pytest.fixture
def comm1(ctx):
    if not nccl.available():
        pytest.skip("libnccl.so.2 not found")
    c = nccl.Communicator(1, nccl.get_unique_id(), 0)
    yield c
    c.destroy()


def _random(rng, n, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return rng.integers(0, 100, n).astype(dtype)
    if dtype.kind == "c":
        return (rng.random(n) + 1j * rng.random(n)).astype(dtype)
    return rng.random(n).astype(dtype)


_REAL_TYPES = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64,
               np.float16, np.float32, np.float64]


# complex arrays reduce with sum and avg only (as pairs of reals), so they are paired with those
@gpu
@pytest.mark.parametrize("dtype, op", [(t, op) for t in _REAL_TYPES
                                       for op in ("sum", "prod", "max", "min", "avg")]
                         + [(np.complex64, "sum"), (np.complex64, "avg")])
def test_all_reduce_one_rank(comm1, rng, dtype, op):
    from barecuda import gpuarray
    host = _random(rng, 1000, dtype)
    a = gpuarray.to_gpu(host)
    b = gpuarray.zeros_like(a)
    comm1.all_reduce(a, b, op=op)
    np.testing.assert_array_equal(b.get(), host)        # one rank: op over {x} is x
    assert comm1.rank == 0 and comm1.size == 1 and comm1.device == 0


@gpu
def test_collectives_one_rank(comm1, rng):
    from barecuda import gpuarray
    host = rng.random(513).astype(np.float32)
    a = gpuarray.to_gpu(host)
    out = gpuarray.zeros_like(a)
    comm1.broadcast(a, out, root=0)
    np.testing.assert_array_equal(out.get(), host)
    out.fill(0)
    comm1.reduce(a, out, op="sum", root=0)
    np.testing.assert_array_equal(out.get(), host)
    out.fill(0)
    comm1.all_gather(a, out)
    np.testing.assert_array_equal(out.get(), host)
    out.fill(0)
    comm1.reduce_scatter(a, out)
    np.testing.assert_array_equal(out.get(), host)
    alloc = drv.mem_alloc(a.nbytes)
    comm1.all_reduce(a, alloc)                          # DeviceAllocation as recv
    back = np.empty_like(host)
    drv.memcpy_dtoh(back, alloc)
    np.testing.assert_array_equal(back, host)


@gpu
def test_stream_group_and_send_recv(comm1, rng):
    from barecuda import gpuarray
    host = rng.integers(-1000, 1000, 4096).astype(np.int32)
    a = gpuarray.to_gpu(host)
    b = gpuarray.zeros_like(a)
    c = gpuarray.zeros_like(a)
    s = drv.Stream()
    with nccl.group():
        comm1.all_reduce(a, b, stream=s)
        comm1.send(a, peer=0, stream=s)
        comm1.recv(c, peer=0, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(b.get(), host)
    np.testing.assert_array_equal(c.get(), host)


@gpu
def test_cuda_array_interface_buffers(comm1, rng):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    host = rng.random(100).astype(np.float32)
    t = torch.from_numpy(host).cuda()
    out = torch.zeros_like(t)
    torch.cuda.synchronize()
    comm1.all_reduce(t, out)
    drv.Context.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), host)


@gpu
def test_errors_on_the_gpu(comm1):
    from barecuda import gpuarray
    a = gpuarray.zeros(10, np.float32)
    with pytest.raises(ValueError, match="recv holds 36 bytes but 40 are needed"):
        comm1.all_reduce(a, gpuarray.zeros(9, np.float32))
    with pytest.raises(TypeError, match="send holds float32 but recv holds int32"):
        comm1.all_reduce(a, gpuarray.zeros(10, np.int32))
    with pytest.raises(ValueError, match="not contiguous"):
        comm1.all_reduce(gpuarray.zeros((4, 4), np.float32)[:, ::2])
    assert comm1.async_error() == 0
    comm1.destroy()
    comm1.destroy()                                    # idempotent
    assert comm1.closed and "closed" in repr(comm1)
    with pytest.raises(drv.LogicError, match="destroyed"):
        comm1.all_reduce(a)
    with pytest.raises(drv.LogicError, match="destroyed"):
        comm1._comm._op(0, a.ptr, a.ptr, 10, 7, 0, 0, None, None)
    with pytest.raises(drv.LogicError, match="destroyed"):
        comm1.async_error()


@gpu
def test_abort_and_context_manager(ctx):
    if not nccl.available():
        pytest.skip("libnccl.so.2 not found")
    with nccl.Communicator(1, nccl.get_unique_id(), 0) as c:
        assert c.context is not None
    assert c.closed
    c2 = nccl.Communicator(1, nccl.get_unique_id(), 0)
    c2.abort()
    with pytest.raises(drv.LogicError, match="aborted"):
        c2._comm.async_error()


@gpu
def test_init_all_one_device(ctx, rng):
    if not nccl.available():
        pytest.skip("libnccl.so.2 not found")
    from barecuda import gpuarray
    comms = nccl.Communicator.init_all([0])
    assert [(c.rank, c.size, c.device) for c in comms] == [(0, 1, 0)]
    host = rng.random(64)
    a = gpuarray.to_gpu(host)
    with nccl.group():
        comms[0].all_reduce(a, op="sum")
    np.testing.assert_array_equal(a.get(), host)
    with pytest.raises(ValueError, match="device listed twice"):
        nccl.Communicator.init_all([0, 0])
    comms[0].destroy()


NULL_POINTER_CHILD = r"""
import numpy as np
import barecuda.autoinit
from barecuda import nccl, gpuarray, driver
c = nccl.Communicator(1, nccl.get_unique_id(), 0)
a = gpuarray.zeros(16, np.float32)
try:
    c.all_reduce(a, 0, count=16)
    driver.Context.synchronize()
    print("NO-ERROR")
except driver.Error as e:
    print("ERROR", type(e).__name__, e.name, e.routine, "|", e)
"""


@gpu
def test_nccl_error_becomes_a_barecuda_exception():
    if not nccl.available():
        pytest.skip("libnccl.so.2 not found")
    r = subprocess.run([sys.executable, "-c", NULL_POINTER_CHILD], capture_output=True,
                       text=True, timeout=120, cwd="/")
    assert r.returncode == 0, r.stdout + r.stderr
    # NCCL refuses the NULL buffer (ncclInvalidArgument -> LogicError) or, where it lets
    # it through to CUDA, the fault surfaces as an Error: never a crash or silence.
    assert r.stdout.startswith("ERROR "), r.stdout + r.stderr
    if "ncclAllReduce" in r.stdout:
        assert "LogicError ncclInvalidArgument" in r.stdout or "RuntimeError" in r.stdout


def _rank_main(nranks, rank, uid, q, device):
    import numpy as np

    import barecuda.driver as d
    from barecuda import gpuarray, nccl
    d.init()
    ctx = d.Device(device).retain_primary_context()
    ctx.push()
    try:
        comm = nccl.Communicator(nranks, uid, rank)
    except d.Error as exc:
        q.put((rank, "init-failed", str(exc)))
        return
    host = np.random.default_rng(rank).random(1000).astype(np.float32)
    a = gpuarray.to_gpu(host)
    out = gpuarray.zeros_like(a)
    comm.all_reduce(a, out, op="sum")
    gathered = gpuarray.zeros(1000 * nranks, np.float32)
    comm.all_gather(a, gathered)
    d.Context.synchronize()
    q.put((rank, "ok", (out.get(), gathered.get())))
    comm.destroy()
    d.Context.pop()


def _spawn_ranks(nranks, devices):
    mp = multiprocessing.get_context("spawn")
    q = mp.Queue()
    uid = nccl.get_unique_id()
    procs = [mp.Process(target=_rank_main, args=(nranks, r, uid, q, devices[r]))
             for r in range(nranks)]
    for p in procs:
        p.start()
    results = {}
    try:
        for _ in range(nranks):
            rank, status, payload = q.get(timeout=120)
            results[rank] = (status, payload)
            if status != "ok":
                break
    finally:
        for p in procs:
            p.join(5 if len(results) < nranks else 60)
            if p.is_alive():
                p.terminate()
                p.join(10)
    return results


def _check_ranks(results, nranks):
    expect = sum(np.random.default_rng(r).random(1000).astype(np.float32) for r in range(nranks))
    gathered = np.concatenate([np.random.default_rng(r).random(1000).astype(np.float32)
                               for r in range(nranks)])
    for r in range(nranks):
        status, (out, got) = results[r]
        np.testing.assert_allclose(out, expect, rtol=1e-6)
        np.testing.assert_array_equal(got, gathered)


@gpu
def test_two_spawned_ranks_on_one_gpu():
    if not nccl.available():
        pytest.skip("libnccl.so.2 not found")
    results = _spawn_ranks(2, [0, 0])
    failed = [p for s, p in results.values() if s != "ok"]
    if failed:
        msg = failed[0]
        if "Duplicate GPU" in msg or "ncclInvalidUsage" in msg:
            pytest.skip(f"this NCCL refuses two ranks on one GPU: {msg[:200]}")
        pytest.fail(f"a rank failed: {msg}")
    assert len(results) == 2, f"a rank did not answer: {results}"
    _check_ranks(results, 2)


def _two_gpus():
    try:
        drv.init()
        return drv.Device.count() >= 2
    except drv.Error:
        return False


@gpu
def test_two_processes_two_gpus():
    if not _two_gpus():
        pytest.skip("needs two GPUs")
    if not nccl.available():
        pytest.skip("libnccl.so.2 not found")
    results = _spawn_ranks(2, [0, 1])
    assert all(s == "ok" for s, _ in results.values()), results
    _check_ranks(results, 2)


@gpu
def test_init_all_two_gpus(rng):
    if not _two_gpus():
        pytest.skip("needs two GPUs")
    if not nccl.available():
        pytest.skip("libnccl.so.2 not found")
    from barecuda import gpuarray
    comms = nccl.Communicator.init_all(2)
    hosts = [rng.random(10000) for _ in comms]
    arrays = []
    for c, h in zip(comms, hosts):
        c.context.push()
        arrays.append((gpuarray.to_gpu(h), gpuarray.empty(10000 * 2, np.float64)))
        drv.Context.pop()
    with nccl.group():
        for c, (a, _) in zip(comms, arrays):
            c.all_reduce(a, op="max")
    with nccl.group():
        for c, (a, g) in zip(comms, arrays):
            c.all_gather(a, g)
    for c, (a, g) in zip(comms, arrays):
        c.context.push()
        np.testing.assert_array_equal(a.get(), np.maximum(*hosts))
        np.testing.assert_array_equal(g.get(), np.concatenate([np.maximum(*hosts)] * 2))
        drv.Context.pop()
        c.destroy()


# ------------------------------------------------------------------ a rank that dies

def _dying_rank_main(rank, uid, q, device, timeout, how="wait"):
    """Two ranks all-reduce once; then rank 1's process exits, and rank 0 queues a
    second all-reduce and waits for it with Communicator.wait()."""
    import os
    import time

    import numpy as np

    import barecuda.driver as d
    from barecuda import gpuarray, nccl
    d.init()
    ctx = d.Device(device).retain_primary_context()
    ctx.push()
    comm = nccl.Communicator(2, uid, rank)
    keep = gpuarray.to_gpu(np.arange(1000, dtype=np.float64))     # a reference buffer
    a = gpuarray.to_gpu(np.full(1 << 22, rank + 1, np.float32))
    s = d.Stream()
    comm.all_reduce(a, op="sum", stream=s)
    comm.wait(s, timeout=60)
    q.put((rank, "first", float(a.get()[0])))
    if rank == 1:
        # dies before its half of the second all-reduce: a half already launched
        # would still run to its end (the driver finishes queued work when a
        # process exits), and the survivor's would then complete normally
        q.close()
        q.join_thread()                             # "first" reaches the parent
        os._exit(5)
    comm.all_reduce(a, op="sum", stream=s)          # waits for a peer that is gone
    t0 = time.monotonic()
    try:
        if how == "wait_async":      # the same, awaited in an event loop
            import asyncio
            asyncio.run(comm.wait_async(s, timeout=timeout))
        else:
            comm.wait(s, timeout=timeout)
        outcome = ("no error", "")
    except TimeoutError as exc:
        outcome = ("TimeoutError", str(exc))
    except d.RuntimeError as exc:
        outcome = ("RuntimeError", str(exc))
    waited = time.monotonic() - t0
    # the context lives on: the reference buffer, a kernel, a new communicator
    intact = bool(np.array_equal(keep.get(), np.arange(1000.0)))
    doubled = bool(np.array_equal((keep * 2).get(), 2 * np.arange(1000.0)))
    solo = nccl.Communicator(1, nccl.get_unique_id(), 0)
    c = gpuarray.to_gpu(np.arange(8, dtype=np.float32))
    solo.all_reduce(c, op="max", stream=s)
    solo.wait(s, timeout=30)
    q.put((rank, "after", (outcome, waited, comm.closed, intact, doubled, c.get().tolist())))
    solo.destroy()
    d.Context.pop()


@gpu
@pytest.mark.timeout(400)
@pytest.mark.parametrize("how", ["wait", "wait_async"])
def test_a_dead_rank_is_noticed_not_waited_on(how):
    """Communicator.wait() (and wait_async(), awaited) in the survivor of a rank
    that died raises within its timeout, aborts the communicator, and leaves the
    context usable."""
    if not _two_gpus():
        pytest.skip("needs two GPUs (NCCL refuses two ranks on one GPU)")
    if not nccl.available():
        pytest.skip("libnccl.so.2 not found")
    mp = multiprocessing.get_context("spawn")
    q = mp.Queue()
    uid = nccl.get_unique_id()
    timeout = 10.0
    procs = [mp.Process(target=_dying_rank_main, args=(r, uid, q, r, timeout, how))
             for r in range(2)]
    for p in procs:
        p.start()
    got = {}
    try:
        while ("after" not in got) and len(got) < 3:
            rank, stage, payload = q.get(timeout=120)
            got[stage if stage == "after" else f"{stage}{rank}"] = payload
    finally:
        for p in procs:
            p.join(60)
            if p.is_alive():
                p.terminate()
                p.join(10)
    assert got.get("first0") == got.get("first1") == 3.0, got
    outcome, waited, closed, intact, doubled, solo = got["after"]
    print(f"survivor: {outcome[0]} after {waited:.2f} s: {outcome[1]}")
    assert outcome[0] in ("TimeoutError", "RuntimeError"), outcome
    assert "rank 0 of 2" in outcome[1] and "aborted" in outcome[1], outcome
    assert f"{how}()" in outcome[1], outcome
    assert waited < timeout + 12, waited
    assert closed and intact and doubled, got["after"]
    assert solo == list(range(8))
    assert procs[1].exitcode == 5 and procs[0].exitcode == 0


def test_wait_checks_its_arguments():
    c, _ = comm()
    with pytest.raises(TypeError, match="timeout must be a number of seconds, not str"):
        c.wait(timeout="10")
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="timeout must be a positive, finite"):
            c.wait(timeout=bad)
    with pytest.raises(ValueError, match="poll must be a positive"):
        c.wait(poll=0)


def test_wait_async_checks_its_arguments():
    import asyncio
    c, _ = comm()

    async def main():
        with pytest.raises(TypeError, match=r"wait_async\(\): timeout must be a number"):
            await c.wait_async(timeout="10")
        for bad in (0, -1, float("inf"), float("nan")):
            with pytest.raises(ValueError, match="timeout must be a positive, finite"):
                await c.wait_async(timeout=bad)
        with pytest.raises(ValueError, match="poll must be a positive"):
            await c.wait_async(poll=0)
    asyncio.run(main())


@gpu
def test_wait_async_awaits_a_collective(comm1, rng):
    """An all-reduce on a stream, awaited with wait_async: the result is right and
    the communicator stays usable."""
    import asyncio

    from barecuda import gpuarray
    x = rng.standard_normal(1 << 20).astype(np.float32)
    a = gpuarray.to_gpu(x)
    s = drv.Stream()

    async def main():
        comm1.all_reduce(a, op="max", stream=s)
        await comm1.wait_async(s, timeout=30)
        comm1.all_reduce(a, op="sum", stream=s)
        await asyncio.wait_for(comm1.wait_async(s, timeout=30, poll=0.001), 30)
    asyncio.run(main())
    assert not comm1.closed
    np.testing.assert_array_equal(a.get(), x)          # one rank: max and sum are x
