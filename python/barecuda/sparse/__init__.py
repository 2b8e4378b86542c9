# SPDX-License-Identifier: MIT
"""Sparse matrices on the GPU, as ``pycuda.sparse``: packeted and coordinate
sparse matrix-vector products, operators and preconditioners, and a conjugate
gradient solver.

    from barecuda.sparse.packeted import PacketedSpMV
    from barecuda.sparse.operator import DiagonalPreconditioner
    from barecuda.sparse.cg import solve_pkt_with_cg

    spmv = PacketedSpMV(a_csr, is_symmetric=True, dtype=numpy.float64)
    precon = DiagonalPreconditioner(spmv.permute(gpuarray.to_gpu(1 / a_csr.diagonal())))
    x_gpu, iterations, checks = solve_pkt_with_cg(spmv, gpuarray.to_gpu(b), precon, tol=1e-8)

The submodules keep PyCUDA's names (``packeted``, ``coordinate``, ``operator``,
``cg``, ``inner``, ``pkt_build``) plus ``partition`` (how rows become packets).
Matrices may be SciPy sparse matrices (SciPy is not needed otherwise), dense 2-D
NumPy arrays, or COOMatrix triples; values are float32 or float64.  Unlike PyCUDA's,
importing this package gives no DeprecationWarning.
"""

from barecuda.sparse._matrix import COOMatrix
from barecuda.sparse.cg import CGStateContainer, ConvergenceError, solve_pkt_with_cg
from barecuda.sparse.coordinate import CoordinateSpMV
from barecuda.sparse.inner import AsyncInnerProduct
from barecuda.sparse.operator import (DiagonalPreconditioner, IdentityOperator,
                                      IdentityPreconditioner, OperatorBase)
from barecuda.sparse.packeted import PacketedSpMV
from barecuda.sparse.partition import (bfs_ordering, bfs_partition, contiguous_partition,
                                       have_pymetis, local_entry_count, metis_partition,
                                       partition_rows, split_oversized, symmetric_graph)
from barecuda.sparse.pkt_build import PacketLayout, build_packets

__all__ = ["PacketedSpMV", "CoordinateSpMV", "COOMatrix", "OperatorBase", "IdentityOperator",
           "IdentityPreconditioner", "DiagonalPreconditioner", "CGStateContainer",
           "ConvergenceError", "solve_pkt_with_cg", "AsyncInnerProduct", "PacketLayout",
           "build_packets", "partition_rows", "contiguous_partition", "bfs_ordering",
           "bfs_partition", "metis_partition", "split_oversized", "symmetric_graph",
           "local_entry_count", "have_pymetis"]
