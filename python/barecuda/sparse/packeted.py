# SPDX-License-Identifier: MIT
"""Packeted sparse matrix-vector products, as ``pycuda.sparse.packeted``.

    spmv = PacketedSpMV(csr_matrix, is_symmetric=False, dtype=numpy.float32)
    x_perm = spmv.permute(x_gpu)          # into the packet ordering of the rows
    y_perm = spmv(x_perm)                 # A x in that ordering
    y_gpu = spmv.unpermute(y_perm)        # back to the original ordering

The rows are partitioned into packets (barecuda.sparse.partition: METIS through
pymetis when importable, else a breadth-first or contiguous partition of our own)
and renumbered so every packet is a run of consecutive rows.  One block per packet
keeps that run of x and y in shared memory and handles the entries coupling rows of
the packet (templates/sparse.cu, ``bc_spmv_pkt``); the remaining entries go through a
CoordinateSpMV.  Only square matrices are supported; vectors passed to the object
are in the permuted ordering, as PyCUDA's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from barecuda import driver as _drv
from barecuda import gpuarray
from barecuda.compiler import SourceModule  # noqa: F401 (PyCUDA's sparse.packeted has it)
from barecuda.sparse import _kernels
from barecuda.sparse._matrix import COOMatrix, as_csr, value_dtype
from barecuda.sparse.coordinate import CoordinateSpMV
from barecuda.sparse.partition import partition_rows
from barecuda.sparse.pkt_build import MAX_PACKET_ROWS, build_packets

if TYPE_CHECKING:
    from typing import Any

    import numpy.typing as npt

    from barecuda._driver import Stream
    from barecuda.gpuarray import GPUArray

__all__ = ["PacketedSpMV"]

DEFAULT_THREADS_PER_PACKET = 256
_SHARED_RESERVE = 128            # bytes of shared memory left to the compiler


def _positive_int(v, name):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"PacketedSpMV: {name} must be an int, not {type(v).__name__}")
    if v < 1:
        raise ValueError(f"PacketedSpMV: {name} must be at least 1, got {v}")
    return int(v)


class PacketedSpMV:
    """PacketedSpMV(mat, is_symmetric, dtype, *, rows_per_packet=None,
    threads_per_packet=None, partitioner="auto")

    The square matrix `mat` (a SciPy sparse matrix, a dense 2-D NumPy array, or
    a COOMatrix) in device memory, split into packets of rows.  `is_symmetric`
    says the sparsity pattern is symmetric already (the partitioner then skips
    symmetrizing it); `dtype` is float32 or float64.

    Keyword-only extras (barecuda's): `rows_per_packet` caps the rows of a packet
    (default: as many as two vectors' worth fit in 48 KiB of shared memory, at most
    65536); `threads_per_packet` is the block size (default 256, at most the
    device's limit); `partitioner` is "auto", "metis", "bfs", "contiguous" or a
    callable (see barecuda.sparse.partition).

    Attributes as PyCUDA's: ``shape``, ``dtype``, ``index_dtype``,
    ``packed_index_dtype``, ``threads_per_packet``, ``rows_per_packet``,
    ``block_count`` (packets), ``packet_base_rows``, ``new2old_fetch_indices``,
    ``old2new_fetch_indices``, ``thread_starts``, ``thread_ends``,
    ``index_array``, ``data_array`` (GPUArrays) and ``remaining_coo_gpu``
    (a CoordinateSpMV); plus ``layout`` (the host-side PacketLayout).
    """

    def __init__(self, mat: Any, is_symmetric: bool, dtype: npt.DTypeLike, *,
                 rows_per_packet: Any = None, threads_per_packet: Any = None,
                 partitioner: Any = "auto") -> None:
        who = "PacketedSpMV"
        self.dtype = value_dtype(dtype, who)
        self.index_dtype = np.dtype(np.int32)
        self.packed_index_dtype = np.dtype(np.uint32)
        shape, indptr, indices, data = as_csr(mat, self.dtype, who)
        h, w = shape
        if h != w:
            raise ValueError(f"{who}: only square matrices are supported, got shape {shape}")
        if h == 0:
            raise ValueError(f"{who}: the matrix has no rows")
        self.shape = shape

        dev = _drv.Context.get_device()
        max_threads = dev.max_threads_per_block
        if threads_per_packet is None:
            threads_per_packet = min(DEFAULT_THREADS_PER_PACKET, max_threads)
        threads_per_packet = _positive_int(threads_per_packet, "threads_per_packet")
        if threads_per_packet > max_threads:
            raise ValueError(f"{who}: threads_per_packet={threads_per_packet} exceeds the "
                             f"device's {max_threads} threads per block")
        shared = min(dev.max_shared_memory_per_block, 48 * 1024) - _SHARED_RESERVE
        fit = min(shared // (2 * self.dtype.itemsize), MAX_PACKET_ROWS)
        if rows_per_packet is None:
            rows_per_packet = fit
        rows_per_packet = _positive_int(rows_per_packet, "rows_per_packet")
        if rows_per_packet > fit:
            raise ValueError(f"{who}: rows_per_packet={rows_per_packet} does not fit; at most "
                             f"{fit} rows of {self.dtype} fit in shared memory")
        self.threads_per_packet = threads_per_packet

        labels = partition_rows(indptr, indices, h, rows_per_packet, bool(is_symmetric),
                                partitioner)
        lay = self.layout = build_packets(indptr, indices, data, labels, threads_per_packet,
                                          rows_per_packet)
        self.rows_per_packet = lay.max_packet_rows
        self.block_count = lay.packet_count
        self.packet_base_rows = gpuarray.to_gpu(lay.packet_base_rows)
        self.new2old_fetch_indices = gpuarray.to_gpu(lay.new2old)
        self.old2new_fetch_indices = gpuarray.to_gpu(lay.old2new)
        self.thread_starts = gpuarray.to_gpu(lay.thread_starts)
        self.thread_ends = gpuarray.to_gpu(lay.thread_ends)
        pad = 0 if lay.index_array.size else 1
        self.index_array = gpuarray.to_gpu(
            np.concatenate([lay.index_array, np.zeros(pad, np.uint32)]))
        self.data_array = gpuarray.to_gpu(
            np.concatenate([lay.data_array, np.zeros(pad, self.dtype)]))
        self.remaining_coo_gpu = CoordinateSpMV(lay.remaining, self.dtype)

    @property
    def nnz(self) -> int:
        """Stored entries of the matrix (local and remaining)."""
        return self.layout.local_nnz + self.layout.remaining.nnz

    def get_kernel(self) -> Any:
        """The prepared ``bc_spmv_pkt`` Function of this dtype in the current context."""
        return _kernels.functions(self.dtype)[0]

    def _check(self, v, name):
        return _kernels.check_vector(v, name, self.dtype, self.shape[0], "PacketedSpMV")

    def permute(self, x: GPUArray) -> GPUArray:
        """The GPUArray x (original row order) reordered into the packet ordering."""
        self._check(x, "x")
        return gpuarray.take(x, self.new2old_fetch_indices, mode="clip")   # built here: in range

    def unpermute(self, x: GPUArray) -> GPUArray:
        """The GPUArray x (packet ordering) reordered back into the original order."""
        self._check(x, "x")
        return gpuarray.take(x, self.old2new_fetch_indices, mode="clip")

    def __call__(self, x: GPUArray, y: GPUArray | None = None,
                 stream: Stream | None = None) -> GPUArray:
        """__call__(x, y=None, stream=None): y + A x in the packet ordering, in y (a
        new zero-filled GPUArray when y is None), which is returned.

        x and y are contiguous GPUArrays of the matrix's dtype and size, both in
        the permuted ordering (see permute()); TypeError/ValueError otherwise, also
        when y is the memory of x.
        """
        self._check(x, "x")
        if y is None:
            y = gpuarray.zeros(self.shape[0], dtype=self.dtype, allocator=x.allocator,
                               stream=stream)
        else:
            self._check(y, "y")
            if y.ptr == x.ptr:
                raise ValueError("PacketedSpMV: y must not be the same memory as x")
        fn = self.get_kernel()
        fn.prepared_async_call(
            (self.block_count, 1, 1), (self.threads_per_packet, 1, 1), stream,
            self.packet_base_rows.ptr, self.thread_starts.ptr, self.thread_ends.ptr,
            self.index_array.ptr, self.data_array.ptr, x.ptr, y.ptr, self.rows_per_packet,
            shared_size=2 * self.rows_per_packet * self.dtype.itemsize)
        self.remaining_coo_gpu.launch(x, y, stream)
        return y

    # PyCUDA's intermediate steps, for code that calls them -----------------------------

    def find_simple_index_stuff(self, packet_nr_to_dofs: Any) -> Any:
        """(new2old, old2new, packet_base_rows) int32 arrays for packets given as
        lists of rows (PyCUDA's helper; rows take the packets' order)."""
        new2old = np.concatenate([np.asarray(p, dtype=np.int64) for p in packet_nr_to_dofs]) \
            if len(packet_nr_to_dofs) else np.zeros(0, np.int64)
        old2new = np.empty(new2old.size, dtype=np.int64)
        old2new[new2old] = np.arange(new2old.size)
        base = np.zeros(len(packet_nr_to_dofs) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in packet_nr_to_dofs], out=base[1:])
        return new2old.astype(np.int32), old2new.astype(np.int32), base.astype(np.int32)

    def find_local_row_costs_and_remaining_coo(self, csr_mat: Any, dof_to_packet_nr: Any,
                                               old2new_fetch_indices: Any) -> Any:
        """(local entries per row, COO of the other entries in permuted indices)
        for a CSR matrix (anything with indptr, indices, data) (PyCUDA's helper)."""
        labels = np.asarray(dof_to_packet_nr)
        o2n = np.asarray(old2new_fetch_indices)
        indptr = np.asarray(csr_mat.indptr)
        indices = np.asarray(csr_mat.indices)
        rows = np.repeat(np.arange(labels.size), np.diff(indptr))
        local = labels[rows] == labels[indices]
        costs = np.bincount(rows[local], minlength=labels.size)
        far = ~local
        rem = COOMatrix(o2n[rows[far]].astype(np.int32), o2n[indices[far]].astype(np.int32),
                  np.asarray(csr_mat.data, dtype=self.dtype)[far], self.shape)
        return costs, rem
