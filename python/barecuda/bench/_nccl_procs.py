# SPDX-License-Identifier: MIT
"""Multi-process NCCL all-reduce for the peer section: one spawned process per GPU.

Not a section (no ``run``): ``peer.py`` uses it for the row pair that compares
barecuda's NCCL with ``torch.distributed`` (NCCL backend), each measured in N
processes.  The child functions are top-level so that multiprocessing's spawn
start method can pickle them by name.

Every child is called as ``target(rank, nranks, results, barrier, *args)``; it
makes GPU ``rank`` its device (by index, never through CUDA_VISIBLE_DEVICES),
runs ``warmup`` all-reduces of ``nbytes`` float32 in place, then ``rounds``
timed loops of ``iters`` all-reduces, each loop after ``barrier.wait()`` and
ended by a synchronize, timed by wall clock.  Each child puts ``(rank, seconds,
error)`` on `results`: rank 0 the median seconds per all-reduce, the others
None; `error` is a one-line message or None.  :func:`run_ranks` starts the
children, waits for their answers within a time limit and never hangs.
"""

from __future__ import annotations

import os
import queue
import statistics
import time
from typing import Any, Callable

# NVLink multicast (NVLS) stays off in the children: the lent multi-GPU machines need it.
CHILD_ENV = {"NCCL_NVLS_ENABLE": "0"}


def busbw(nbytes: int, seconds: float, nranks: int) -> float:
    """NCCL's bus bandwidth of an all-reduce in GB/s: algbw (nbytes / seconds) times
    2 (n - 1) / n, the bytes each rank sends and receives over its link."""
    return nbytes / seconds / 1e9 * 2 * (nranks - 1) / nranks


def _timed(step: Callable[[], object], sync: Callable[[], object], barrier: Any,
           warmup: int, iters: int, rounds: int) -> float:
    """Median seconds per step over `rounds` loops of `iters`, each after a barrier."""
    for _ in range(warmup):
        step()
    sync()
    times = []
    for _ in range(rounds):
        barrier.wait()
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        sync()
        times.append((time.perf_counter() - t0) / iters)
    return statistics.median(times)


def _report(results: Any, barrier: Any, rank: int, fn: Callable[[], float]) -> None:
    try:
        seconds = fn()
    except BaseException as exc:  # noqa: BLE001 - any failure goes back to the parent
        results.put((rank, None, f"{type(exc).__name__}: {exc}".splitlines()[0][:300]))
        barrier.abort()                  # the other ranks stop waiting for this one
        return
    results.put((rank, seconds if rank == 0 else None, None))


def barecuda_rank(rank: int, nranks: int, results: Any, barrier: Any, ids: Any, nbytes: int,
                  warmup: int, iters: int, rounds: int) -> None:
    """One rank of barecuda's all-reduce: rank 0 makes the NCCL unique id and puts
    nranks - 1 copies on the queue `ids`; the others take one."""
    def work() -> float:
        import numpy as np

        from barecuda import driver as drv
        from barecuda import gpuarray, nccl

        drv.init()
        ctx = drv.Device(rank).retain_primary_context()
        ctx.push()
        try:
            if rank == 0:
                uid = nccl.get_unique_id()
                for _ in range(nranks - 1):
                    ids.put(uid)
            else:
                uid = ids.get(timeout=120)
            x = gpuarray.to_gpu(np.ones(nbytes // 4, np.float32))
            stream = drv.Stream()
            with nccl.Communicator(nranks, uid, rank) as comm:
                return _timed(lambda: comm.all_reduce(x, None, stream=stream),
                              stream.synchronize, barrier, warmup, iters, rounds)
        finally:
            drv.Context.pop()
            ctx.detach()

    _report(results, barrier, rank, work)


def torch_rank(rank: int, nranks: int, results: Any, barrier: Any, init_file: str, nbytes: int,
               warmup: int, iters: int, rounds: int) -> None:
    """One rank of torch.distributed's all-reduce (NCCL backend), joined through the
    file `init_file`."""
    def work() -> float:
        import torch
        import torch.distributed as dist

        device = torch.device(f"cuda:{rank}")
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", init_method=f"file://{init_file}", world_size=nranks,
                                rank=rank, device_id=device)
        try:
            x = torch.ones(nbytes // 4, dtype=torch.float32, device=device)
            return _timed(lambda: dist.all_reduce(x), torch.cuda.synchronize, barrier,
                          warmup, iters, rounds)
        finally:
            dist.destroy_process_group()

    _report(results, barrier, rank, work)


def run_ranks(target: Callable[..., None], nranks: int, args: tuple[Any, ...] = (),
              timeout: float = 180.0, with_ids: bool = False) -> tuple[float | None, str | None]:
    """Run ``target(rank, nranks, results, barrier, [ids,] *args)`` in `nranks`
    spawned processes; returns (rank 0's seconds, None) or (None, a note saying
    what failed: a child's error, a child that did not answer within `timeout`
    seconds, a child that exited without answering).  Children still running at
    the end are terminated (then killed)."""
    import multiprocessing

    mp = multiprocessing.get_context("spawn")
    results = mp.Queue()
    barrier = mp.Barrier(nranks)
    extra = (mp.Queue(),) if with_ids else ()
    procs = [mp.Process(target=target, args=(r, nranks, results, barrier, *extra, *args),
                        daemon=True) for r in range(nranks)]
    saved = {k: os.environ.get(k) for k in CHILD_ENV}
    os.environ.update(CHILD_ENV)
    try:
        for p in procs:
            p.start()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    deadline = time.monotonic() + timeout
    answers: dict[int, tuple[float | None, str | None]] = {}

    def primary(error: str | None) -> bool:     # not just the echo of another rank's failure
        return error is not None and not error.startswith("BrokenBarrierError")

    while len(answers) < nranks and not any(primary(e) for _, e in answers.values()):
        try:
            rank, seconds, error = results.get(timeout=min(1.0, max(deadline - time.monotonic(),
                                                                    0.01)))
        except queue.Empty:
            if time.monotonic() >= deadline:
                break
            dead = [r for r, p in enumerate(procs) if r not in answers and p.exitcode is not None]
            if dead:
                # one more look: a child may have answered just before it exited
                try:
                    rank, seconds, error = results.get(timeout=1.0)
                except queue.Empty:
                    answers[dead[0]] = (None, f"exited (code {procs[dead[0]].exitcode}) "
                                              "without answering")
                    continue
            else:
                continue
        answers[rank] = (seconds, error)
        if error is not None:
            # a broken barrier: the rank that broke it should answer soon
            deadline = min(deadline, time.monotonic() + 5.0)
    errors = sorted((not primary(e), r, e) for r, (_, e) in answers.items() if e is not None)
    if errors:
        note: str | None = f"rank {errors[0][1]}: {errors[0][2]}"
    elif len(answers) < nranks:
        missing = sorted(set(range(nranks)) - set(answers))
        note = f"timeout: rank(s) {missing} did not answer within {timeout:g} s"
    else:
        note = None
    for p in procs:
        p.join(max(deadline - time.monotonic(), 0.1) if note is None else 0.1)
    for p in procs:
        if p.is_alive():
            p.terminate()
            p.join(5)
        if p.is_alive():
            p.kill()
            p.join(5)
    results.close()
    for q in extra:
        q.close()
    if note is not None:
        return None, note
    return answers[0][0], None
