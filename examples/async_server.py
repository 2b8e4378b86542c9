# SPDX-License-Identifier: MIT
"""An asyncio TCP server whose requests run on the GPU, several at a time.

Teaches: ``await stream`` suspends one request until the GPU has finished the
work queued on its stream, while the event loop goes on serving the others; no
thread sits in ``synchronize()`` (for the first 2 ms the loop asks the await's event
on each of its passes, then the driver's stream callback wakes it).  Each request takes a stream from a pool (an asyncio.Queue), with
its own page-locked host buffer and device buffer, so requests on different
streams overlap on the GPU: one is copied in while another's kernel runs.
A request is a float32 array after its byte count (4 bytes, little-endian); the
answer, framed alike, is its square root by far more Newton steps than needed: a
stand-in for a few hundred microseconds of real work.  ``wait="executor"`` waits
the old way, in a thread (``run_in_executor(None, stream.synchronize)``); the
benchmark section ``aio`` compares the two with ``serve`` and ``request``.

Run: python examples/async_server.py [n_streams]   (exit status 0 when every answer
from the concurrent clients matches NumPy; requests per second are printed).
"""

import asyncio
import sys
import time

import numpy as np
import numpy.typing as npt

import barecuda.driver as cuda
from barecuda.compiler import SourceModule

MAX_FLOATS = 1 << 16      # the largest request: 64 Ki floats (256 KiB)
STEPS = 1000              # Newton steps per element: about the cost of real work
GRID, BLOCK = (32, 1), (256, 1, 1)   # a small grid: see the kernel's comment
Floats = npt.NDArray[np.float32]
KERNEL = r"""
/* x <- sqrt(x) for x >= 1 by `steps` Newton steps v <- (v + x/v) / 2 from v = x.
   A small grid of 32 blocks that stride over the array: one kernel leaves most of
   the GPU free, so the kernels of several streams run side by side. */
__global__ void newton_sqrt(float *x, int n, int steps)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        float a = x[i], v = a;
        for (int k = 0; k < steps; ++k)
            v = 0.5f * (v + a / v);
        x[i] = v;
    }
}
"""


async def serve(n_streams: int = 4, wait: str = "await", steps: int = STEPS,
                host: str = "127.0.0.1", port: int = 0) -> asyncio.Server:
    """Start the server (port 0: any free port) and return the asyncio.Server;
    `wait` is "await" (await the stream) or "executor" (synchronize in a thread)."""
    kernel = SourceModule(KERNEL).get_function("newton_sqrt").prepare("Pii")
    # The idle lanes: a stream with its page-locked host buffer and its device buffer.
    pool: asyncio.Queue[tuple[cuda.Stream, Floats, cuda.DeviceAllocation]] = asyncio.Queue()
    for _ in range(n_streams):
        pool.put_nowait((cuda.Stream(), cuda.pagelocked_empty(MAX_FLOATS, np.float32),
                         cuda.mem_alloc(MAX_FLOATS * 4)))

    async def compute(data: bytes) -> bytes:
        lane = await pool.get()               # wait for a free stream
        stream, pinned, dev = lane
        try:
            n = len(data) // 4
            pinned[:n] = np.frombuffer(data, np.float32)   # into page-locked memory...
            cuda.memcpy_htod_async(dev, pinned[:n], stream)  # ...so the copy is asynchronous
            kernel.prepared_async_call(GRID, BLOCK, stream, dev, n, steps)
            cuda.memcpy_dtoh_async(pinned[:n], dev, stream)
            if wait == "await":
                await stream                  # the loop serves other requests meanwhile
            else:
                await asyncio.get_running_loop().run_in_executor(None, stream.synchronize)
            return pinned[:n].tobytes()       # copied out before the lane is reused
        finally:
            pool.put_nowait(lane)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:                       # one connection may send many requests
                size = int.from_bytes(await reader.readexactly(4), "little")
                if size % 4 or size > MAX_FLOATS * 4:
                    break                     # not a request we accept: hang up
                answer = await compute(await reader.readexactly(size))
                writer.write(len(answer).to_bytes(4, "little") + answer)
                await writer.drain()
        except asyncio.IncompleteReadError:  # the client hung up
            pass
        finally:
            writer.close()

    return await asyncio.start_server(handle, host, port)


async def request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, x: Floats) -> Floats:
    """One round trip on an open connection: send float32 array `x`, return the answer."""
    writer.write(x.nbytes.to_bytes(4, "little") + x.tobytes())
    size = int.from_bytes(await reader.readexactly(4), "little")
    return np.frombuffer(await reader.readexactly(size), np.float32)


async def client(host: str, port: int, payloads: list[Floats]) -> list[Floats]:
    """Connect, send each array of `payloads` in turn, return the answers."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        return [await request(reader, writer, x) for x in payloads]
    finally:
        writer.close()
        await writer.wait_closed()


async def demo(n_streams: int, n_clients: int = 16, per_client: int = 16) -> int:
    server = await serve(n_streams)
    host, port = server.sockets[0].getsockname()[:2]
    rng = np.random.default_rng(7)
    payloads = [rng.uniform(1, 100, MAX_FLOATS).astype(np.float32) for _ in range(n_clients)]
    t0 = time.perf_counter()
    answers = await asyncio.gather(*(client(host, port, [x] * per_client) for x in payloads))
    elapsed = time.perf_counter() - t0
    server.close()
    await server.wait_closed()
    for x, got in zip(payloads, answers):
        for y in got:
            assert np.allclose(y, np.sqrt(x), rtol=1e-5), "MISMATCH: an answer differs from NumPy"
    total = n_clients * per_client
    print(f"{total} requests from {n_clients} clients on {n_streams} streams in {elapsed * 1e3:.0f} ms:"
          f" {total / elapsed:.0f} requests/s (not checked: it depends on the machine)")
    return total


def main(argv: list[str]) -> int:
    import barecuda.autoinit  # noqa: F401  (a context current on this thread)
    n_streams = int(argv[1]) if len(argv) > 1 else 4
    total = asyncio.run(demo(n_streams))
    print(f"OK: {total} requests on {n_streams} streams answered as NumPy computes them")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
