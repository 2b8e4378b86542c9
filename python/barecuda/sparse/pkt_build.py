# SPDX-License-Identifier: MIT
"""Building the packet layout of a square CSR matrix (CPU only, NumPy, no loops
over entries).

Given a packet number for every row (see barecuda.sparse.partition), the rows are
renumbered so each packet is a run of consecutive rows ("permuted" order, what the
GPU works in).  Entries whose row and column share a packet are "local": they are
dealt to the packet's threads a whole row at a time (rows by decreasing entry
count, snaking over the threads 0..T-1, T-1..0, ... to even out the work) and stored
interleaved, entry j of thread t of packet p at ``packet_start[p] + j*T + t``, with
the row and column relative to the packet packed as ``(row << 16) | col``.  The
other entries stay as coordinate triples (in permuted indices, sorted by row) for
the coordinate kernel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from barecuda.sparse._matrix import COOMatrix, INDEX_LIMIT
from barecuda.sparse.partition import split_oversized

if TYPE_CHECKING:
    from typing import Any

    import numpy.typing as npt

    from barecuda._driver import Stream
    from barecuda.gpuarray import GPUArray

__all__ = ["PacketLayout", "build_packets"]

MAX_PACKET_ROWS = 1 << 16      # rows and columns inside a packet are 16-bit


class PacketLayout:
    """The host arrays of a packeted matrix (what ``build_packets`` returns).

    Attributes: ``shape``, ``dtype``, ``threads_per_packet``, ``packet_count``,
    ``max_packet_rows`` (rows of the largest packet), ``packet_base_rows``
    (packet_count + 1 int32: first permuted row of each packet, then n),
    ``new2old`` / ``old2new`` (int32 permutations: permuted row -> original row
    and back), ``thread_starts`` / ``thread_ends`` (int32, one per thread of every
    packet), ``index_array`` (uint32 packed local row/column), ``data_array``
    (values), ``local_nnz`` and ``remaining`` (a COO of the other entries, permuted).
    """

    local_nnz: int   # set by build_packets, as are the others (for type checkers)

    def spmv(self, x_perm: Any, y_perm: Any = None) -> npt.NDArray[Any]:
        """y_perm + A_perm @ x_perm computed from the layout on the host, walking
        the arrays as the GPU kernels do (a reference for tests)."""
        n = self.shape[0]
        x = np.asarray(x_perm, dtype=self.dtype)
        if x.shape != (n,):
            raise ValueError(f"x must have shape ({n},), got {x.shape}")
        y = np.zeros(n, self.dtype) if y_perm is None else np.array(y_perm, dtype=self.dtype)
        T = self.threads_per_packet
        for p in range(self.packet_count):
            base = self.packet_base_rows[p]
            for t in range(T):
                g = p * T + t
                pos = np.arange(self.thread_starts[g], self.thread_ends[g], T)
                rc = self.index_array[pos].astype(np.int64)
                np.add.at(y, base + (rc >> 16), self.data_array[pos] * x[base + (rc & 0xFFFF)])
        rem = self.remaining
        np.add.at(y, rem.row, rem.data * x[rem.col])
        return y


def build_packets(indptr: npt.NDArray[Any], indices: npt.NDArray[Any], data: npt.NDArray[Any],
                  labels: npt.NDArray[Any], threads_per_packet: Any,
                  max_packet_rows: Any = None) -> PacketLayout:
    """The PacketLayout of the n x n CSR matrix (indptr, indices, data) whose row i
    goes to packet labels[i] (labels are made compact, and a label with more than
    max_packet_rows rows is cut; at most 65536 rows per packet)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    data = np.asarray(data)
    n = indptr.size - 1
    T = int(threads_per_packet)
    if T < 1:
        raise ValueError(f"threads_per_packet must be at least 1, got {threads_per_packet}")
    if max_packet_rows is None:
        max_packet_rows = MAX_PACKET_ROWS
    if not 1 <= max_packet_rows <= MAX_PACKET_ROWS:
        raise ValueError(f"packets hold 1 to {MAX_PACKET_ROWS} rows, not {max_packet_rows}")
    labels = split_oversized(np.asarray(labels), max_packet_rows).astype(np.int64)
    if labels.size != n:
        raise ValueError(f"one packet label per row is needed ({n}), got {labels.size}")

    lay = PacketLayout()
    lay.shape = (n, n)
    lay.dtype = data.dtype
    lay.threads_per_packet = T
    P = int(labels.max()) + 1 if n else 0
    counts = np.bincount(labels, minlength=P)
    lay.packet_count = P
    lay.max_packet_rows = int(counts.max()) if P else 0
    base = np.zeros(P + 1, dtype=np.int64)
    np.cumsum(counts, out=base[1:])
    new2old = np.argsort(labels, kind="stable")
    old2new = np.empty(n, dtype=np.int64)
    old2new[new2old] = np.arange(n)
    lay.packet_base_rows = base.astype(np.int32)
    lay.new2old = new2old.astype(np.int32)
    lay.old2new = old2new.astype(np.int32)

    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    local = labels[rows] == labels[indices]
    far = ~local
    rr, rc, rv = old2new[rows[far]], old2new[indices[far]], data[far]
    order = np.lexsort((rc, rr))
    lay.remaining = COOMatrix(rr[order].astype(np.int32), rc[order].astype(np.int32),
                        np.ascontiguousarray(rv[order]), (n, n))

    lr, lc, lv = rows[local], indices[local], data[local]
    lay.local_nnz = int(lr.size)
    pk = labels[lr]
    rel_r = old2new[lr] - base[pk]
    rel_c = old2new[lc] - base[pk]

    # Deal the rows of every packet to its threads: by decreasing local cost, snaking.
    cost = np.bincount(lr, minlength=n)
    by_cost = np.lexsort((old2new, -cost, labels))
    k = np.arange(n) - base[labels[by_cost]]
    lap, off = k // T, k % T
    thread = np.empty(n, dtype=np.int64)
    thread[by_cost] = np.where(lap % 2 == 0, off, T - 1 - off)
    turn = np.empty(n, dtype=np.int64)
    turn[by_cost] = lap

    g = pk * T + thread[lr]                       # global thread of every local entry
    eorder = np.lexsort((rel_c, turn[lr], g))
    g = g[eorder]
    per_thread = np.bincount(g, minlength=P * T)
    first = np.cumsum(per_thread) - per_thread
    j = np.arange(g.size) - first[g]
    depth = per_thread.reshape(P, T).max(axis=1) if P else np.zeros(0, np.int64)
    pkt_start = np.zeros(P + 1, dtype=np.int64)
    np.cumsum(depth * T, out=pkt_start[1:])
    total = int(pkt_start[-1])
    if total > INDEX_LIMIT:
        raise ValueError(f"the packet layout needs {total} slots, too many for 32-bit indices")
    pos = pkt_start[g // T] + j * T + g % T
    index_array = np.zeros(total, dtype=np.uint32)
    index_array[pos] = ((rel_r[eorder] << 16) | rel_c[eorder]).astype(np.uint32)
    data_array = np.zeros(total, dtype=data.dtype)
    data_array[pos] = lv[eorder]
    starts = (pkt_start[:P, None] + np.arange(T)[None, :]).ravel()
    lay.thread_starts = starts.astype(np.int32)
    lay.thread_ends = (starts + per_thread * T).astype(np.int32)
    lay.index_array = index_array
    lay.data_array = data_array
    return lay
