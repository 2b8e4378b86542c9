# SPDX-License-Identifier: MIT
"""NCCL: all-reduce, broadcast, gather and point-to-point transfers between GPUs.

A thin layer over NVIDIA's NCCL library (``libnccl.so.2``), which is found at run
time like NVRTC: ``$BARECUDA_LIBNCCL``, a libnccl already loaded (by torch or
CuPy), NVIDIA's ``nvidia-nccl-cu13``/``-cu12`` wheels, the CUDA toolkit and the
system loader.  Nothing NCCL is needed to build or import barecuda.

Two ways to make communicators:

* one process per GPU: rank 0 calls :func:`get_unique_id` and sends the bytes to
  the others (mpi4py's ``comm.bcast``, a multiprocessing queue, a file); each
  process makes its GPU's context current and calls
  ``Communicator(nranks, unique_id, rank)``, which waits until all ranks joined;
* one process driving several GPUs: ``Communicator.init_all(devices)`` returns one
  communicator per device; issue their operations inside ``with nccl.group():``.

Buffers are GPUArrays (dtype and count are taken from them), DeviceAllocations,
objects exposing ``__cuda_array_interface__`` (CuPy, torch, Numba) and int device
pointers (then `count` and `dtype` are needed).  Operations are asynchronous on
`stream` (a barecuda Stream; None: the legacy default stream) and keep the
buffers alive until a Stream is next synchronized.  Sizes and dtypes are checked
before NCCL is called; NCCL's failures raise ``driver.LogicError`` (invalid
argument or usage) or ``driver.RuntimeError`` with NCCL's message.

Data types: int8, uint8, int32, uint32, int64, uint64, float16, float32, float64
and (from ml_dtypes, when installed) bfloat16.  Complex arrays reduce with "sum"
and "avg" (as pairs of reals); broadcast, all_gather and send/recv move any dtype
as bytes.  Ops: "sum", "prod", "max", "min", "avg".
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from barecuda import _driver

if TYPE_CHECKING:
    from barecuda._driver import Stream

__all__ = ["Communicator", "available", "get_unique_id", "group", "library_path", "version",
           "UNIQUE_ID_BYTES", "OPS"]

UNIQUE_ID_BYTES = 128

# NCCL's enum values (include/barecuda/nccl_api.h).
_TYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5,
          "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9}
OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}

#: ncclResult_t values, for wait()'s messages
_RESULTS = {1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError",
            4: "ncclInvalidArgument", 5: "ncclInvalidUsage", 6: "ncclRemoteError: a peer "
            "failed or its process exited", 7: "ncclInProgress"}
_IN_PROGRESS = 7


def _drain(event: Any, deadline: float) -> bool:
    """Whether `event` completes before `deadline` (time.monotonic())."""
    while not event.query():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.001)
    return True


def _wait_error(fn: str, trouble: tuple[type[Exception], str], rank: int, size: int,
                drained: bool) -> Exception:
    """The exception wait() and wait_async() raise once they aborted the communicator."""
    cls, why = trouble
    return cls(f"{fn}: rank {rank} of {size}: {why}; the communicator was aborted"
               + ("" if drained else ", but its stream still had not drained 10 s later"))


_ALL_REDUCE, _BROADCAST, _REDUCE, _ALL_GATHER, _REDUCE_SCATTER, _SEND, _RECV = range(7)


def available() -> bool:
    """True when a usable libnccl can be loaded (loading it if needed); never raises."""
    try:
        _driver._nccl_version()
    except _driver.Error:
        return False
    return True


def version() -> tuple[int, int, int]:
    """(major, minor, patch) of the NCCL library in use; driver.Error saying where it
    was looked for when there is none."""
    code = _driver._nccl_version()
    if code < 10000:                       # NCCL before 2.9 counted 1000 per major
        return code // 1000, code % 1000 // 100, code % 100
    return code // 10000, code % 10000 // 100, code % 100


def library_path() -> str | None:
    """The path of the libnccl loaded, or None when none was loaded (loads nothing)."""
    return _driver._nccl_info()[0]


def get_unique_id() -> bytes:
    """A new NCCL unique id: 128 bytes naming one communicator to be made.  Call it on
    one rank and send the bytes (picklable) to every other rank."""
    return _driver._nccl_get_unique_id()


@contextlib.contextmanager
def group() -> Iterator[None]:
    """``with nccl.group():`` fuses the operations issued inside (ncclGroupStart /
    ncclGroupEnd): needed to drive several communicators from one thread (init_all)
    and to pair send/recv without deadlock.  The end runs with the GIL released."""
    _driver._nccl_group_start()
    try:
        yield
    except BaseException:
        with contextlib.suppress(_driver.Error):
            _driver._nccl_group_end()
        raise
    _driver._nccl_group_end()


# ------------------------------------------------------------------ buffers

class _Buffer(NamedTuple):
    ptr: int
    nbytes: int | None        # None: unknown (an int pointer)
    dtype: np.dtype[Any] | None  # None: untyped (raw memory)
    obj: Any


def _alloc_types() -> tuple[type, ...]:
    return tuple(t for t in (getattr(_driver, n, None) for n in
                             ("DeviceAllocation", "IPCMemoryHandle", "ManagedAllocation",
                              "PooledDeviceAllocation")) if isinstance(t, type))


def _contiguous(shape: tuple[int, ...], strides: tuple[int, ...] | None, itemsize: int) -> bool:
    if strides is None:
        return True
    expect = itemsize
    for dim, stride in zip(reversed(shape), reversed(strides)):
        if dim > 1 and stride != expect:
            return False
        expect *= dim
    return True


def _buffer(obj: Any, what: str) -> _Buffer:
    """Pointer, size and dtype of one buffer argument; TypeError/ValueError naming `what`."""
    if isinstance(obj, (bool, float)) or obj is None:
        raise TypeError(f"{what} must be device memory (a GPUArray, DeviceAllocation, an "
                        f"object with __cuda_array_interface__ or an int pointer), not "
                        f"{type(obj).__name__}")
    if isinstance(obj, int):
        if obj < 0:
            raise ValueError(f"{what}: device pointer {obj} is negative")
        return _Buffer(obj, None, None, obj)
    if isinstance(obj, _alloc_types()):
        alloc: Any = obj
        return _Buffer(int(alloc), int(alloc.size), None, obj)
    if hasattr(obj, "gpudata") and hasattr(obj, "dtype"):
        if not obj.flags.forc:
            raise ValueError(f"{what} is not contiguous (strides {obj.strides}); pass a "
                             f"contiguous copy (.copy())")
        return _Buffer(int(obj.ptr), int(obj.nbytes), np.dtype(obj.dtype), obj)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if isinstance(cai, dict):
        try:
            shape = tuple(int(n) for n in cai["shape"])
            dtype = np.dtype(cai["typestr"])
            ptr = int(cai["data"][0])
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise TypeError(f"{what}: unusable __cuda_array_interface__ ({exc})") from None
        strides = cai.get("strides")
        steps = None if strides is None else tuple(int(x) for x in strides)
        if not _contiguous(shape, steps, dtype.itemsize):
            raise ValueError(f"{what} is not contiguous (strides {steps})")
        return _Buffer(ptr, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, dtype, obj)
    raise TypeError(f"{what} must be device memory (a GPUArray, DeviceAllocation, an object "
                    f"with __cuda_array_interface__ or an int pointer), not {type(obj).__name__}")


def _nccl_type(dtype: np.dtype[Any]) -> int | None:
    """NCCL's data type for a NumPy dtype (bfloat16 by its ml_dtypes name), or None."""
    if dtype.byteorder == ">" or dtype.fields is not None:
        return None
    return _TYPES.get(dtype.name)


def _op_code(op: str) -> int:
    if not isinstance(op, str) or op.lower() not in OPS:
        raise ValueError(f"op must be one of {sorted(OPS)}, not {op!r}")
    return OPS[op.lower()]


class _Plan(NamedTuple):
    send: _Buffer
    recv: _Buffer
    elems: int        # the count NCCL is given, in elements of `dtype`
    dtype: int        # NCCL type


def _plan(send: _Buffer, recv: _Buffer, count: int | None, dtype: Any, *, send_factor: int = 1,
          recv_factor: int = 1, reduce: str | None = None, fn: str = "") -> _Plan:
    """Check the buffers against each other and the count; the NCCL (count, type).

    The operation reads ``count * send_factor`` elements from `send` and writes
    ``count * recv_factor`` into `recv`.  `reduce` is the op name for reductions
    (None for data movement, where any dtype moves as bytes)."""
    if dtype is not None:
        dt = np.dtype(dtype)
        for buf, name in ((send, "send"), (recv, "recv")):
            if buf.dtype is not None and buf.dtype != dt:
                raise TypeError(f"{fn}: dtype {dt} was given but {name} holds {buf.dtype}")
    else:
        if send.dtype is not None and recv.dtype is not None and send.dtype != recv.dtype:
            raise TypeError(f"{fn}: send holds {send.dtype} but recv holds {recv.dtype}")
        found = send.dtype if send.dtype is not None else recv.dtype
        if found is None:
            raise TypeError(f"{fn}: dtype is needed for untyped buffers (DeviceAllocations, "
                            f"int pointers)")
        dt = found
    if count is None:
        for buf, factor, name in ((send, send_factor, "send"), (recv, recv_factor, "recv")):
            if buf.nbytes is None:
                continue
            per = dt.itemsize * factor
            if buf.nbytes % per:
                raise ValueError(f"{fn}: {name} holds {buf.nbytes} bytes, not a multiple of "
                                 f"{per} ({factor} x {dt} element{'s' if factor > 1 else ''})")
            count = buf.nbytes // per
            break
        else:
            raise ValueError(f"{fn}: count is needed when no buffer says its size")
        exact = True
    else:
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)):
            raise TypeError(f"{fn}: count must be an int, not {type(count).__name__}")
        count = int(count)
        if count < 0:
            raise ValueError(f"{fn}: count must be >= 0, got {count}")
        exact = False
    for buf, factor, name in ((send, send_factor, "send"), (recv, recv_factor, "recv")):
        if buf.nbytes is None:
            continue
        need = count * factor * dt.itemsize
        if buf.nbytes < need or (exact and buf.nbytes != need):
            raise ValueError(f"{fn}: {name} holds {buf.nbytes} bytes but {need} are needed "
                             f"({count * factor} x {dt}); send and recv sizes do not match")
    code = _nccl_type(dt)
    if code is None:
        if reduce is None:                      # data movement: move the bytes
            return _Plan(send, recv, count * dt.itemsize, _TYPES["uint8"])
        if dt.kind == "c" and reduce in ("sum", "avg") and dt.byteorder != ">":
            real = _nccl_type(np.dtype(f"f{dt.itemsize // 2}"))
            if real is not None:
                return _Plan(send, recv, count * 2, real)
        raise TypeError(f"{fn}: NCCL cannot reduce {dt} with {reduce!r}; supported: "
                        f"{', '.join(_TYPES)} (complex with 'sum' or 'avg')")
    return _Plan(send, recv, count, code)


# ------------------------------------------------------------- Communicator

class Communicator:
    """One rank of an NCCL communicator (ncclCommInitRank): ``Communicator(nranks,
    unique_id, rank)`` in the current context, all ranks calling with the same
    `unique_id` (from :func:`get_unique_id`); it waits for every rank (GIL released).
    Usable as a context manager (destroy() on exit)."""

    def __init__(self, nranks: int, unique_id: bytes, rank: int) -> None:
        for name, value in (("nranks", nranks), ("rank", rank)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
                raise TypeError(f"Communicator(): {name} must be an int, not "
                                f"{type(value).__name__}")
        if nranks < 1:
            raise ValueError(f"Communicator(): nranks must be >= 1, got {nranks}")
        if not 0 <= rank < nranks:
            raise ValueError(f"Communicator(): rank {rank} is not in range({nranks})")
        try:
            uid = bytes(memoryview(unique_id))
        except TypeError:
            raise TypeError(f"Communicator(): unique_id must be the bytes of get_unique_id(), "
                            f"not {type(unique_id).__name__}") from None
        if len(uid) != UNIQUE_ID_BYTES:
            raise ValueError(f"Communicator(): unique_id must be {UNIQUE_ID_BYTES} bytes, got "
                             f"{len(uid)}")
        self._comm: Any = _driver._nccl_comm_init_rank(int(nranks), uid, int(rank))

    @classmethod
    def _wrap(cls, comm: Any) -> Communicator:
        self = cls.__new__(cls)
        self._comm = comm
        return self

    @classmethod
    def init_all(cls, devices: int | Sequence[Any] | None = None) -> list[Communicator]:
        """One communicator per device for a single process driving them all
        (ncclCommInitAll): `devices` is a count (the first n), a sequence of ordinals or
        Devices, or None (every visible device).  Rank i uses devices[i] through its
        primary context.  Issue their operations inside ``with nccl.group():``."""
        from barecuda import driver as drv

        if isinstance(devices, bool):
            raise TypeError("init_all(): devices must be a count, a sequence or None, not bool")
        if devices is None or isinstance(devices, (int, np.integer)):
            drv.init()
            n = drv.Device.count() if devices is None else int(devices)
            if n < 1:
                raise ValueError(f"init_all(): need at least one device, got {n}")
            ordinals = list(range(n))
        else:
            ordinals = []
            for d in devices:
                if isinstance(d, drv.Device):
                    ordinals.append(int(d.handle))
                elif isinstance(d, (int, np.integer)) and not isinstance(d, bool):
                    ordinals.append(int(d))
                else:
                    raise TypeError(f"init_all(): devices must be ints or Devices, not "
                                    f"{type(d).__name__}")
            if not ordinals:
                raise ValueError("init_all(): no devices given")
        if len(set(ordinals)) != len(ordinals):
            raise ValueError(f"init_all(): device listed twice in {ordinals}")
        contexts = [drv.Device(o).retain_primary_context() for o in ordinals]
        return [cls._wrap(c) for c in _driver._nccl_comm_init_all(contexts)]

    # ------------------------------------------------------------ properties

    @property
    def rank(self) -> int:
        """This member's rank, 0 to size - 1."""
        return int(self._comm.rank)

    @property
    def size(self) -> int:
        """The number of ranks of the communicator."""
        return int(self._comm.size)

    @property
    def device(self) -> int:
        """The CUDA device ordinal this rank runs on."""
        return int(self._comm.device)

    @property
    def context(self) -> Any:
        """The Context the communicator was made in (held alive by it)."""
        return self._comm.context

    @property
    def closed(self) -> bool:
        """Whether destroy() or abort() ran."""
        return bool(self._comm.closed)

    def __repr__(self) -> str:
        state = " (closed)" if self.closed else ""
        return f"<barecuda.nccl.Communicator rank {self.rank} of {self.size} on device " \
               f"{self.device}{state}>"

    def destroy(self) -> None:
        """Free the communicator once its queued work is done (idempotent)."""
        self._comm.destroy()

    def abort(self) -> None:
        """Free the communicator at once, dropping queued work (after a failed peer)."""
        self._comm.abort()

    def async_error(self) -> int:
        """NCCL's background error code (0: none, 7: still in progress)."""
        return int(self._comm.async_error())

    def wait(self, stream: Stream | None = None, timeout: float = 60.0,
             poll: float = 0.001) -> None:
        """Wait for the work queued on `stream` (None: the legacy default stream),
        watching this communicator, so that a dead peer is noticed, not waited on.

        A collective whose peer has died never finishes: NCCL's kernel waits for
        data that will not come.  wait() polls the stream and :meth:`async_error`
        every `poll` seconds (the GIL released between polls).  When NCCL reports an
        error (a peer's process gone, a network failure) or `timeout` seconds pass
        first, the communicator is aborted (NCCL drops its queued operations, so the
        stream drains and the context stays usable) and driver.RuntimeError or
        TimeoutError is raised.  The survivor can go on: its arrays are intact, and
        a new Communicator can be made among the ranks that remain.
        """
        done, deadline = self._wait_start("wait()", stream, timeout, poll)
        while not done.query():
            trouble = self._wait_trouble(deadline, timeout)
            if trouble is not None:
                rank, size = self.rank, self.size
                self.abort()
                drained = _drain(done, deadline=time.monotonic() + 10.0)
                raise _wait_error("wait()", trouble, rank, size, drained)
            time.sleep(float(poll))

    async def wait_async(self, stream: Stream | None = None, timeout: float = 60.0,
                         poll: float = 0.01) -> None:
        """:meth:`wait` for asyncio: ``await comm.wait_async(stream)``.

        The event loop is not blocked: the stream's completion wakes it (an event
        awaited as ``await event`` is), and every `poll` seconds the task looks at
        :meth:`async_error`.  A dead peer or the `timeout` aborts the communicator
        and raises driver.RuntimeError or TimeoutError in the awaiting task, as
        wait() does.  Cancelling the task leaves the collective running.
        """
        import asyncio

        done, deadline = self._wait_start("wait_async()", stream, timeout, poll)
        fut = done.done()
        try:
            while True:
                finished, _ = await asyncio.wait({fut}, timeout=float(poll))
                if finished:
                    fut.result()
                    return
                trouble = self._wait_trouble(deadline, timeout)
                if trouble is not None:
                    break
        finally:
            if not fut.done():
                fut.cancel()
        rank, size = self.rank, self.size
        self.abort()
        try:
            await asyncio.wait_for(done.done(), 10.0)
            drained = True
        except asyncio.TimeoutError:     # TimeoutError itself from Python 3.11
            drained = False
        raise _wait_error("wait_async()", trouble, rank, size, drained)

    def _wait_start(self, fn: str, stream: Stream | None, timeout: float,
                    poll: float) -> tuple[Any, float]:
        """wait()'s checks; (an event recorded on `stream`, the deadline)."""
        import math

        from barecuda import driver as drv

        self._check_open(fn)
        for name, value in (("timeout", timeout), ("poll", poll)):
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer,
                                                                  np.floating)):
                raise TypeError(f"{fn}: {name} must be a number of seconds, not "
                                f"{type(value).__name__}")
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{fn}: {name} must be a positive, finite number of "
                                 f"seconds, not {value}")
        done = drv.Event(drv.event_flags.DISABLE_TIMING).record(stream)
        return done, time.monotonic() + float(timeout)

    def _wait_trouble(self, deadline: float,
                      timeout: float) -> tuple[type[Exception], str] | None:
        """Why waiting must stop, with the exception type to raise (NCCL's error:
        driver.RuntimeError; the timeout: TimeoutError), or None."""
        from barecuda import driver as drv

        err = int(self._comm.async_error())
        if err not in (0, _IN_PROGRESS):
            return drv.RuntimeError, f"NCCL reported error {err} ({_RESULTS.get(err, 'unknown')})"
        if time.monotonic() >= deadline:
            return TimeoutError, f"the stream's work was not done after {timeout} s"
        return None

    def __enter__(self) -> Communicator:
        """The communicator itself."""
        return self

    def __exit__(self, *exc: object) -> None:
        """destroy() on leaving the block."""
        self.destroy()

    # ------------------------------------------------------------ operations

    def _check_open(self, fn: str) -> None:
        if self._comm.closed:
            from barecuda.driver import LogicError
            raise LogicError(f"{fn}: this Communicator was destroyed")

    def _rank_arg(self, value: Any, name: str, fn: str) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"{fn}: {name} must be an int, not {type(value).__name__}")
        if not 0 <= value < self.size:
            raise ValueError(f"{fn}: {name} {value} is not a rank of this communicator "
                             f"(size {self.size})")
        return int(value)

    def _run(self, kind: int, plan: _Plan, op: int, root: int, stream: Stream | None) -> None:
        keep = (plan.send.obj, plan.recv.obj)
        self._comm._op(kind, plan.send.ptr, plan.recv.ptr, plan.elems, plan.dtype, op, root,
                       stream, keep)

    def all_reduce(self, send: Any, recv: Any = None, count: int | None = None,
                   dtype: Any = None, op: str = "sum", stream: Stream | None = None) -> None:
        """recv = op over all ranks of send, elementwise (recv=None: in place in send)."""
        fn = "all_reduce()"
        self._check_open(fn)
        code = _op_code(op)
        s = _buffer(send, "send")
        r = s if recv is None else _buffer(recv, "recv")
        plan = _plan(s, r, count, dtype, reduce=op.lower(), fn=fn)
        self._run(_ALL_REDUCE, plan, code, 0, stream)

    def broadcast(self, send: Any, recv: Any = None, count: int | None = None,
                  dtype: Any = None, root: int = 0, stream: Stream | None = None) -> None:
        """Copy root's `send` into `recv` of every rank (recv=None: in place in send;
        `send` is read on the root only)."""
        fn = "broadcast()"
        self._check_open(fn)
        root = self._rank_arg(root, "root", fn)
        s = _buffer(send, "send")
        r = s if recv is None else _buffer(recv, "recv")
        self._run(_BROADCAST, _plan(s, r, count, dtype, fn=fn), 0, root, stream)

    def reduce(self, send: Any, recv: Any = None, count: int | None = None, dtype: Any = None,
               op: str = "sum", root: int = 0, stream: Stream | None = None) -> None:
        """recv on the root = op over all ranks of send (recv is written on the root only;
        recv=None: in place in send)."""
        fn = "reduce()"
        self._check_open(fn)
        code = _op_code(op)
        root = self._rank_arg(root, "root", fn)
        s = _buffer(send, "send")
        r = s if recv is None else _buffer(recv, "recv")
        plan = _plan(s, r, count, dtype, reduce=op.lower(), fn=fn)
        self._run(_REDUCE, plan, code, root, stream)

    def all_gather(self, send: Any, recv: Any, count: int | None = None, dtype: Any = None,
                   stream: Stream | None = None) -> None:
        """recv = the send buffers of ranks 0..size-1 one after another; `count` is the
        number of elements each rank sends (recv holds size * count)."""
        fn = "all_gather()"
        self._check_open(fn)
        plan = _plan(_buffer(send, "send"), _buffer(recv, "recv"), count, dtype,
                     recv_factor=self.size, fn=fn)
        self._run(_ALL_GATHER, plan, 0, 0, stream)

    def reduce_scatter(self, send: Any, recv: Any, count: int | None = None,
                       dtype: Any = None, op: str = "sum", stream: Stream | None = None) -> None:
        """Reduce send (size * count elements) over all ranks and give rank i block i of
        `count` elements in recv."""
        fn = "reduce_scatter()"
        self._check_open(fn)
        code = _op_code(op)
        plan = _plan(_buffer(send, "send"), _buffer(recv, "recv"), count, dtype,
                     send_factor=self.size, reduce=op.lower(), fn=fn)
        self._run(_REDUCE_SCATTER, plan, code, 0, stream)

    def send(self, buf: Any, peer: int, count: int | None = None, dtype: Any = None,
             stream: Stream | None = None) -> None:
        """Send `buf` to rank `peer`, which must post a matching recv (pair them inside
        ``with nccl.group():`` when a rank both sends and receives)."""
        fn = "send()"
        self._check_open(fn)
        peer = self._rank_arg(peer, "peer", fn)
        b = _buffer(buf, "buf")
        self._run(_SEND, _plan(b, b, count, dtype, fn=fn), 0, peer, stream)

    def recv(self, buf: Any, peer: int, count: int | None = None, dtype: Any = None,
             stream: Stream | None = None) -> None:
        """Receive into `buf` what rank `peer` sends."""
        fn = "recv()"
        self._check_open(fn)
        peer = self._rank_arg(peer, "peer", fn)
        b = _buffer(buf, "buf")
        self._run(_RECV, _plan(b, b, count, dtype, fn=fn), 0, peer, stream)

