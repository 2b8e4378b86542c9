# SPDX-License-Identifier: MIT
"""Solve a sparse symmetric positive definite system with conjugate gradients.

Teaches: handing a sparse matrix to the GPU without SciPy (coordinate triples in a
``COOMatrix``), the packeted sparse matrix-vector product (rows are split into
packets that each fit one block's shared memory; vectors live in the packet
ordering, hence ``permute``/``unpermute``), and ``solve_pkt_with_cg`` with a Jacobi
(diagonal) preconditioner.  The matrix is the 5-point Laplacian of an m x m grid
plus a random positive diagonal, with its rows numbered in random order so the
partitioner has to find the grid's locality again.

Run: python examples/sparse_cg.py [m]
Exit status 0 when the GPU's product and solution agree with NumPy's.
"""

import sys
from typing import Any

import numpy as np
import numpy.typing as npt

import barecuda.autoinit  # noqa: F401
from barecuda import gpuarray
from barecuda.sparse import COOMatrix, DiagonalPreconditioner, PacketedSpMV, solve_pkt_with_cg


def grid_matrix(m: int, rng: np.random.Generator) -> COOMatrix:
    """COO triples of a shuffled 2-D Laplacian plus a random diagonal (SPD)."""
    n = m * m
    label = rng.permutation(n).reshape(m, m)     # grid point -> row number
    rows, cols, vals = [label.ravel()], [label.ravel()], [4.0 + rng.random(n)]
    for a, b in ((label[1:, :], label[:-1, :]), (label[:, 1:], label[:, :-1])):
        for i, j in ((a, b), (b, a)):
            rows.append(i.ravel())
            cols.append(j.ravel())
            vals.append(np.full(i.size, -1.0))
    return COOMatrix(np.concatenate(rows), np.concatenate(cols), np.concatenate(vals), (n, n))


def host_product(a: COOMatrix, x: npt.NDArray[Any]) -> npt.NDArray[Any]:
    y = np.zeros(a.shape[0])
    np.add.at(y, a.row, a.data * x[a.col])
    return y


def main(argv: list[str]) -> int:
    m = int(argv[1]) if len(argv) > 1 else 200
    rng = np.random.default_rng(7)
    a = grid_matrix(m, rng)
    n = a.shape[0]
    ok = True

    spmv = PacketedSpMV(a, True, np.float64)       # True: the pattern is symmetric
    local = spmv.layout.local_nnz / a.nnz
    print(f"{n} rows, {a.nnz} entries in {spmv.block_count} packets; "
          f"{100 * local:.1f}% of the entries stay inside their packet")

    # One product, checked against NumPy.
    x = rng.standard_normal(n)
    y = spmv.unpermute(spmv(spmv.permute(gpuarray.to_gpu(x)))).get()
    err = np.abs(y - host_product(a, x)).max()
    if err > 1e-10:
        print(f"MISMATCH: A @ x differs from NumPy by {err:g}", file=sys.stderr)
        ok = False

    # Jacobi preconditioner: 1 / diag(A), in the packet ordering of the rows.
    diag = np.zeros(n)
    on_diag = a.row == a.col
    np.add.at(diag, a.row[on_diag], a.data[on_diag])
    precon = DiagonalPreconditioner(spmv.permute(gpuarray.to_gpu(1 / diag)))

    b = rng.standard_normal(n)
    x_gpu, iterations, checks = solve_pkt_with_cg(spmv, gpuarray.to_gpu(b), precon, tol=1e-9)
    sol = x_gpu.get()
    rel = np.linalg.norm(host_product(a, sol) - b) / np.linalg.norm(b)
    print(f"CG: {iterations} iterations ({checks} residual checks), "
          f"relative residual {rel:.2e}")
    if not rel < 1e-7:
        print(f"MISMATCH: the residual {rel:g} is above 1e-7", file=sys.stderr)
        ok = False
    if ok:
        print(f"OK: solved a {n} x {n} sparse SPD system with preconditioned CG")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
