# SPDX-License-Identifier: MIT
"""Benchmark section: copies between two GPUs and NCCL's all-reduce.

- ``memcpy_peer`` of 256 MiB from GPU 0 to GPU 1, with peer access off and then on,
  in GB/s; ratio = the C loop's time (``_driver._bench_peer_copy``: bare
  cuMemcpyPeer calls, GIL released, same run) / barecuda's, so 1.0 is the floor.
- torch's ``Tensor.copy_`` between ``cuda:0`` and ``cuda:1`` (torch turns peer
  access on by itself), ratio = torch's time / ours (more is better for us).
- NCCL all-reduce of 256 MiB float32 through ``barecuda.nccl``: algorithm bandwidth
  (bytes / time) and bus bandwidth (algbw * 2 (n - 1) / n, NCCL's tests' figure),
  over every visible GPU from one process (``Communicator.init_all``), and on one
  rank against ``torch.distributed`` (NCCL backend, world size 1) when torch imports.
- NCCL all-reduce of 256 MiB float32 in N spawned processes, one per GPU (N = every
  visible GPU, at least 2), through barecuda (``Communicator(nranks, uid, rank)``)
  and through ``torch.distributed`` (NCCL backend), same size and loops, timed by
  rank 0 (``bench._nccl_procs``): bus bandwidth of each, ratio = barecuda's / torch's
  (more is better; target >= 0.95).  Each side runs in its own processes, time-boxed.

With one GPU the peer rows carry no value and a note saying why; NCCL rows use a
1-rank communicator (its bus bandwidth is 0 by definition: no bytes cross a bus).
Medians of rounds, ours and the reference alternating (bench.interleaved_times).
"""

import numpy as np

from barecuda.bench import interleaved_times

MIB256 = 256 << 20
ITER = 10
ROUNDS = 5
MP_WARMUP = 5         # all-reduces each rank runs before the timed loops
MP_TIMEOUT = 180.0    # seconds for one side's N processes, start to answer


def _row(name, value, unit, ratio=None, vs=None, note=None):
    return {"name": name, "value": value, "unit": unit, "ratio": ratio, "vs": vs, "note": note}


def _gbs(nbytes, seconds):
    return nbytes / seconds / 1e9 if seconds else None


def _peer_rows(drv):
    n = drv.Device.count()
    names = [f"peer copy 256 MiB GPU 0 -> GPU 1, memcpy_peer, peer access {s}"
             for s in ("off", "on")] + ["torch copy_ 256 MiB cuda:0 -> cuda:1"]
    if n < 2:
        note = f"skipped: needs two GPUs, found {n}"
        return [_row(name, None, "GB/s", note=note) for name in names]
    dev0, dev1 = drv.Device(0), drv.Device(1)
    ctx0, ctx1 = dev0.retain_primary_context(), dev1.retain_primary_context()
    rows = []
    ctx0.push()
    a0 = drv.mem_alloc(MIB256)
    drv.Context.pop()
    ctx1.push()
    a1 = drv.mem_alloc(MIB256)
    drv.Context.pop()

    def ours():
        drv.memcpy_peer(a1, a0, MIB256, dest_context=ctx1, src_context=ctx0)

    def sync():
        ctx0.push()
        drv.Context.synchronize()
        drv.Context.pop()
        ctx1.push()
        drv.Context.synchronize()
        drv.Context.pop()

    can = dev1.can_access_peer(dev0) and dev0.can_access_peer(dev1)
    for state in ("off", "on"):
        if state == "on":
            if not can:
                rows.append(_row(names[1], None, "GB/s",
                                 note="skipped: the two GPUs cannot access each other"))
                continue
            for here, there in ((ctx0, ctx1), (ctx1, ctx0)):
                here.push()
                try:
                    drv.Context.enable_peer_access(there)
                except drv.LogicError:
                    pass                         # already enabled (by torch, for one)
                drv.Context.pop()
        t_ours, t_c = _paired(ours, sync, ctx1, ctx0, drv)
        rows.append(_row(names[0 if state == "off" else 1], _gbs(MIB256, t_ours), "GB/s",
                         t_c / t_ours, "C loop (cuMemcpyPeer)"))
    rows.append(_torch_copy(names[2], ours, sync))
    a0.free()
    a1.free()
    ctx0.detach()
    ctx1.detach()
    return rows


def _paired(ours, sync, dst, src, drv):
    """Median seconds per copy: ours (Python loop), the C loop, rounds alternating."""
    from barecuda import _driver
    t_py, t_c = [], []
    ours()
    sync()
    for _ in range(ROUNDS):
        t_c.append(_driver._bench_peer_copy(dst, src, MIB256, ITER))
        t_py.append(interleaved_times([ours], [sync], iterations=ITER, rounds=1, warmup=0)[0])
    return float(np.median(t_py)), float(np.median(t_c))


def _torch_copy(name, ours, sync):
    try:
        import torch
    except Exception:  # noqa: BLE001 - torch missing or broken
        return _row(name, None, "GB/s", note="torch not importable")
    if torch.cuda.device_count() < 2:
        return _row(name, None, "GB/s", note="torch sees fewer than two GPUs")
    src = torch.empty(MIB256, dtype=torch.uint8, device="cuda:0")
    dst = torch.empty(MIB256, dtype=torch.uint8, device="cuda:1")

    def theirs():
        dst.copy_(src)

    def tsync():
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)

    t_ours, t_torch = interleaved_times([ours, theirs], [sync, tsync], iterations=ITER,
                                        rounds=ROUNDS, warmup=1)
    return _row(name, _gbs(MIB256, t_torch), "GB/s", t_torch / t_ours,
                "barecuda memcpy_peer", "ratio = torch time / barecuda time")


def _nccl_rows(drv):
    from barecuda import gpuarray, nccl
    if not nccl.available():
        return [_row("NCCL all-reduce 256 MiB", None, "GB/s",
                     note="skipped: libnccl not found")]
    rows = []
    n = drv.Device.count()
    count = MIB256 // 4
    comms = nccl.Communicator.init_all(n)
    bufs = []
    for c in comms:
        c.context.push()
        bufs.append((gpuarray.to_gpu(np.ones(count, np.float32)),
                     gpuarray.empty(count, np.float32), drv.Stream()))
        drv.Context.pop()

    def ours():
        with nccl.group():
            for c, (s, r, st) in zip(comms, bufs):
                c.all_reduce(s, r, stream=st)

    def sync():
        for _, _, st in bufs:
            st.synchronize()

    t = interleaved_times([ours], [sync], iterations=ITER, rounds=ROUNDS, warmup=2)[0]
    algbw = _gbs(MIB256, t)
    rows.append(_row(f"NCCL all-reduce 256 MiB float32, {n} GPU(s), algbw", algbw, "GB/s",
                     note=f"NCCL {'.'.join(map(str, nccl.version()))}"))
    rows.append(_row(f"NCCL all-reduce 256 MiB float32, {n} GPU(s), busbw",
                     algbw * 2 * (n - 1) / n, "GB/s",
                     note="1 rank: no bus traffic" if n == 1 else "algbw * 2 (n - 1) / n"))
    try:
        rows.append(_torch_allreduce(comms[0], bufs[0]))
    except Exception as exc:  # noqa: BLE001 - torch.distributed refused: say so, keep ours
        rows.append(_row("NCCL all-reduce 256 MiB float32, 1 rank, vs torch.distributed", None,
                         "GB/s", note=f"torch.distributed failed: {exc!r}"[:200]))
    for c in comms:
        c.destroy()
    return rows


def _torch_allreduce(comm, buf):
    name = "NCCL all-reduce 256 MiB float32, 1 rank, vs torch.distributed"
    try:
        import torch
        import torch.distributed as dist
    except Exception:  # noqa: BLE001 - torch missing or broken
        return _row(name, None, "GB/s", note="torch not importable")
    from barecuda import nccl
    if comm.size != 1:
        c1 = nccl.Communicator(1, nccl.get_unique_id(), 0)
    else:
        c1 = comm
    send, recv, stream = buf
    store = dist.HashStore()
    created = not dist.is_initialized()
    if created:
        dist.init_process_group("nccl", store=store, rank=0, world_size=1,
                                device_id=torch.device("cuda:0"))
    x = torch.ones(MIB256 // 4, dtype=torch.float32, device="cuda:0")

    def ours():
        c1.all_reduce(send, None, stream=stream)   # in place, as torch's all_reduce(x)

    def theirs():
        dist.all_reduce(x)

    t_ours, t_torch = interleaved_times([ours, theirs], [stream.synchronize, torch.cuda.synchronize],
                                        iterations=ITER, rounds=ROUNDS, warmup=2)
    if created:
        dist.destroy_process_group()
    if c1 is not comm:
        c1.destroy()
    return _row(name, _gbs(MIB256, t_ours), "GB/s", t_torch / t_ours,
                f"torch.distributed {_gbs(MIB256, t_torch):.1f} GB/s",
                "algbw, both in place; ratio = torch time / barecuda time")


def multiproc_names(n):
    """The names of the row pair (barecuda, torch.distributed) for `n` GPUs (at least 2)."""
    what = f"all-reduce 256 MiB float32, {max(n, 2)} processes (one per GPU), busbw"
    return f"NCCL {what}", f"torch.distributed NCCL {what}"


def _torch_missing():
    """None when torch imports, else the note for the torch row."""
    try:
        import torch.distributed
    except Exception:  # noqa: BLE001 - torch missing or broken
        return "torch not importable"
    return None if torch.distributed.is_available() else "torch built without distributed"


def _guarded(runner, *args, **kwargs):
    """runner's (seconds, note), or (None, the exception) when starting the children failed."""
    try:
        return runner(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - a failed start is a note, not a failed section
        return None, f"could not start the processes: {exc!r}"[:200]


def _multiproc_rows(n, runner=None, timeout=MP_TIMEOUT):
    """The row pair: barecuda's and torch.distributed's all-reduce busbw, each in `n`
    spawned processes (`runner`: _nccl_procs.run_ranks, replaceable for tests)."""
    import tempfile

    from barecuda.bench import _nccl_procs as procs
    runner = runner or procs.run_ranks
    ours_name, torch_name = multiproc_names(n)
    if n < 2:
        note = f"skipped: needs two GPUs, found {n}"
        return [_row(ours_name, None, "GB/s", note=note), _row(torch_name, None, "GB/s", note=note)]
    loops = (MIB256, MP_WARMUP, ITER, ROUNDS)
    from barecuda import nccl
    if not nccl.available():
        t_ours, ours_note = None, "skipped: libnccl not found"
    else:
        t_ours, ours_note = _guarded(runner, procs.barecuda_rank, n, loops, timeout=timeout,
                                     with_ids=True)
    torch_note = _torch_missing()
    t_torch = None
    if torch_note is None:
        with tempfile.TemporaryDirectory(prefix="barecuda-bench-") as tmp:
            t_torch, torch_note = _guarded(runner, procs.torch_rank, n, (f"{tmp}/init", *loops),
                                           timeout=timeout)
    bw_ours = procs.busbw(MIB256, t_ours, n) if t_ours else None
    bw_torch = procs.busbw(MIB256, t_torch, n) if t_torch else None
    ratio = bw_ours / bw_torch if bw_ours and bw_torch else None
    how = "busbw = algbw * 2 (n - 1) / n, rank 0's wall time"
    if ours_note is None:
        ours_note = f"{how}; ratio = barecuda / torch busbw (more is better; target >= 0.95)"
    return [_row(ours_name, bw_ours, "GB/s", ratio,
                 f"torch.distributed {bw_torch:.1f} GB/s" if bw_torch else None, ours_note),
            _row(torch_name, bw_torch, "GB/s", note=torch_note or f"{how}; same loops as barecuda")]


def run():
    import barecuda.autoprimaryctx  # noqa: F401 - the primary context, shared with torch
    from barecuda import driver as drv
    return _peer_rows(drv) + _nccl_rows(drv) + _multiproc_rows(drv.Device.count())
