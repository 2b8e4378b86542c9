# SPDX-License-Identifier: MIT
"""Conway's Game of Life on a torus: a stencil with double buffering.

Teaches: a 2D stencil (every cell reads its 8 neighbours), wrap-around indexing
at the edges, and "ping-pong" buffers: a generation reads one array and writes
the other, then the two swap roles, because a cell must not see neighbours that
were already updated.  The GPU runs a few generations; NumPy (with
``numpy.roll``) runs the same ones, and the boards must be identical.

Run: python examples/game_of_life.py [generations]
Exit status 0 when the GPU board equals the NumPy board after every generation.
"""

import sys
from typing import Any

import numpy as np
import numpy.typing as npt

import barecuda.autoinit  # noqa: F401
import barecuda.driver as cuda
from barecuda.compiler import SourceModule

KERNEL = r"""
__global__ void life_step(unsigned char *next, const unsigned char *cur, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    int alive = 0;
    for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
            if (dx == 0 && dy == 0) continue;
            int xx = (x + dx + w) % w, yy = (y + dy + h) % h;   /* wrap around */
            alive += cur[yy * w + xx];
        }
    unsigned char me = cur[y * w + x];
    /* Survive with 2 or 3 neighbours, be born with exactly 3. */
    next[y * w + x] = (alive == 3 || (me && alive == 2)) ? 1 : 0;
}
"""


def numpy_step(board: npt.NDArray[Any]) -> npt.NDArray[Any]:
    alive = sum(np.roll(np.roll(board, dy, 0), dx, 1)
                for dy in (-1, 0, 1) for dx in (-1, 0, 1) if (dx, dy) != (0, 0))
    nxt: npt.NDArray[Any] = ((alive == 3) | ((board == 1) & (alive == 2))).astype(np.uint8)
    return nxt


def main(argv: list[str]) -> int:
    generations = int(argv[1]) if len(argv) > 1 else 50
    h, w = 300, 500
    board = (np.random.default_rng(9).random((h, w)) < 0.3).astype(np.uint8)
    board[10:13, 10:13] = [[0, 1, 0], [0, 0, 1], [1, 1, 1]]      # a glider, for fun

    step = SourceModule(KERNEL).get_function("life_step")
    step.prepare("PPii")
    bufs = [cuda.mem_alloc(board.nbytes), cuda.mem_alloc(board.nbytes)]
    cuda.memcpy_htod(bufs[0], board)
    block = (32, 8, 1)
    grid = ((w + 31) // 32, (h + 7) // 8)

    ref = board.copy()
    got = np.empty_like(board)
    for g in range(1, generations + 1):
        step.prepared_call(grid, block, bufs[1], bufs[0], w, h)
        bufs.reverse()                      # the new board is now bufs[0]
        ref = numpy_step(ref)
        cuda.memcpy_dtoh(got, bufs[0])
        if not np.array_equal(got, ref):
            y, x = np.argwhere(got != ref)[0]
            print(f"MISMATCH in generation {g} at (row {y}, col {x}): GPU {got[y, x]}, "
                  f"NumPy {ref[y, x]}", file=sys.stderr)
            return 1
    for b in bufs:
        b.free()
    print(f"{int(board.sum())} live cells at the start, {int(got.sum())} after {generations} generations")
    print(f"OK: {generations} generations on a {w}x{h} torus match NumPy")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
