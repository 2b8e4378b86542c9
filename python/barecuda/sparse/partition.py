# SPDX-License-Identifier: MIT
"""Splitting the rows of a square sparse matrix into packets (CPU only).

A packet is a set of rows small enough for one GPU block to keep their part of x
and y in shared memory.  Entries A[i, j] with i and j in one packet are served from
shared memory; the others go through the slower coordinate kernel, so a good
partition puts rows that are coupled into the same packet.

``partition_rows`` gives every row its packet number.  Methods:

``"metis"``
    METIS graph partitioning through pymetis (PyCUDA's choice), when importable.
``"bfs"``
    A breadth-first ordering of the matrix graph (Cuthill-McKee style: each
    component starts at a row of least degree), cut into runs of consecutive rows.
``"contiguous"``
    Consecutive blocks of rows in their given order (best for banded matrices).
``"auto"`` (default)
    METIS when pymetis is importable, else the better of "contiguous" and "bfs"
    (the one keeping more entries inside their packets).

A callable ``f(indptr, indices, n, max_rows)`` returning one integer label per row
may be given instead; labels need not be compact, and any label holding more than
`max_rows` rows is cut into several packets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from typing import Any

    import numpy.typing as npt

    from barecuda._driver import Stream
    from barecuda.gpuarray import GPUArray

__all__ = ["partition_rows", "contiguous_partition", "bfs_ordering", "bfs_partition",
           "metis_partition", "symmetric_graph", "split_oversized", "local_entry_count",
           "have_pymetis"]


def have_pymetis() -> bool:
    """True when pymetis can be imported (then "auto" partitions with METIS)."""
    try:
        import pymetis  # noqa: F401
    except ImportError:
        return False
    return True


def _check_max_rows(max_rows):
    if isinstance(max_rows, bool) or not isinstance(max_rows, (int, np.integer)):
        raise TypeError(f"max_rows must be an int, not {type(max_rows).__name__}")
    if max_rows < 1:
        raise ValueError(f"max_rows must be at least 1, got {max_rows}")
    return int(max_rows)


def _check_graph(indptr, indices, n):
    indptr = np.asarray(indptr)
    indices = np.asarray(indices)
    if indptr.ndim != 1 or indptr.size != n + 1:
        raise ValueError(f"indptr must have n + 1 = {n + 1} entries, got shape {indptr.shape}")
    if indptr.dtype.kind not in "iu" or (indices.size and indices.dtype.kind not in "iu"):
        raise TypeError("indptr and indices must be integer arrays")
    if indptr[0] != 0 or np.any(np.diff(indptr) < 0) or indptr[-1] != indices.size:
        raise ValueError("indptr must rise from 0 to len(indices)")
    if indices.size and (indices.min() < 0 or indices.max() >= n):
        raise ValueError(f"a column index lies outside 0..{n - 1}")
    return indptr.astype(np.int64), indices.astype(np.int64)


def contiguous_partition(n: int, max_rows: int) -> npt.NDArray[Any]:
    """Packet numbers of n rows cut into consecutive blocks of `max_rows` rows."""
    max_rows = _check_max_rows(max_rows)
    return (np.arange(n, dtype=np.int64) // max_rows).astype(np.int32)


def symmetric_graph(indptr: npt.NDArray[Any], indices: npt.NDArray[Any], n: int,
                    is_symmetric: bool = False) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """(indptr, indices) of the undirected graph of a square CSR pattern: i and j are
    joined when A[i, j] or A[j, i] is stored; no self loops, no repeated edges.
    With is_symmetric=True the pattern is trusted to be symmetric already."""
    indptr, indices = _check_graph(indptr, indices, n)
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    cols = indices
    if not is_symmetric:
        rows, cols = np.concatenate([rows, cols]), np.concatenate([cols, rows])
    keep = rows != cols
    key = np.unique(rows[keep] * n + cols[keep])
    rows, cols = key // n, key % n
    out_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=out_ptr[1:])
    return out_ptr, cols


def bfs_ordering(indptr: npt.NDArray[Any], indices: npt.NDArray[Any],
                 n: int) -> npt.NDArray[Any]:
    """A permutation of range(n) (new position -> row) visiting the graph of the
    given (symmetric) pattern breadth first; every connected component starts at
    its unvisited row of least degree."""
    indptr, indices = _check_graph(indptr, indices, n)
    ptr = indptr.tolist()
    adj = indices.tolist()
    seen = bytearray(n)
    order = []
    append = order.append
    for start in np.argsort(np.diff(indptr), kind="stable").tolist():
        if seen[start]:
            continue
        seen[start] = 1
        head = len(order)
        append(start)
        while head < len(order):
            v = order[head]
            head += 1
            for w in adj[ptr[v]:ptr[v + 1]]:
                if not seen[w]:
                    seen[w] = 1
                    append(w)
    return np.array(order, dtype=np.int64)


def bfs_partition(indptr: npt.NDArray[Any], indices: npt.NDArray[Any], n: int, max_rows: int,
                  is_symmetric: bool = False) -> npt.NDArray[Any]:
    """Packet numbers from a breadth-first ordering cut into runs of `max_rows` rows."""
    max_rows = _check_max_rows(max_rows)
    gptr, gidx = symmetric_graph(indptr, indices, n, is_symmetric)
    order = bfs_ordering(gptr, gidx, n)
    labels = np.empty(n, dtype=np.int32)
    labels[order] = np.arange(n, dtype=np.int64) // max_rows
    return labels


def metis_partition(indptr: npt.NDArray[Any], indices: npt.NDArray[Any], n: int, max_rows: int,
                    is_symmetric: bool = False) -> npt.NDArray[Any]:
    """Packet numbers from METIS (pymetis.part_graph) into ceil(n / max_rows) parts,
    with parts that come out larger than `max_rows` cut further.  ImportError
    without pymetis."""
    max_rows = _check_max_rows(max_rows)
    import pymetis
    parts = -(-n // max_rows)
    if parts <= 1:
        return np.zeros(n, dtype=np.int32)
    gptr, gidx = symmetric_graph(indptr, indices, n, is_symmetric)
    _cuts, labels = pymetis.part_graph(int(parts), xadj=gptr, adjncy=gidx)
    return split_oversized(np.asarray(labels), max_rows)


def split_oversized(labels: npt.NDArray[Any], max_rows: int) -> npt.NDArray[Any]:
    """Compact packet numbers 0..P-1 from any integer labels (one per row), cutting
    every label that holds more than `max_rows` rows into consecutive pieces."""
    max_rows = _check_max_rows(max_rows)
    labels = np.asarray(labels)
    if labels.ndim != 1:
        raise ValueError(f"labels must be one-dimensional, got shape {labels.shape}")
    if labels.size and labels.dtype.kind not in "iu":
        raise TypeError(f"labels must be integers, not {labels.dtype}")
    n = labels.size
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    _, compact = np.unique(labels, return_inverse=True)
    compact = compact.ravel().astype(np.int64)
    order = np.argsort(compact, kind="stable")
    counts = np.bincount(compact)
    first = np.cumsum(counts) - counts
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - first[compact[order]]
    pieces = -(-counts // max_rows)                 # packets each label becomes
    piece_base = np.cumsum(pieces) - pieces
    return (piece_base[compact] + rank // max_rows).astype(np.int32)


def local_entry_count(indptr: npt.NDArray[Any], indices: npt.NDArray[Any],
                      labels: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """How many stored entries A[i, j] have i and j in one packet."""
    indptr = np.asarray(indptr)
    labels = np.asarray(labels)
    rows = np.repeat(np.arange(labels.size), np.diff(indptr))
    return int(np.count_nonzero(labels[rows] == labels[np.asarray(indices)]))


def partition_rows(indptr: npt.NDArray[Any], indices: npt.NDArray[Any], n: int, max_rows: int,
                   is_symmetric: bool = False, method: str = "auto") -> npt.NDArray[Any]:
    """Packet number (int32, compact 0..P-1) of every row of an n x n CSR pattern,
    no packet holding more than `max_rows` rows.  `method` is "auto", "metis",
    "bfs", "contiguous" or a callable (see the module's documentation)."""
    max_rows = _check_max_rows(max_rows)
    indptr, indices = _check_graph(indptr, indices, n)
    if callable(method):
        labels = np.asarray(method(indptr, indices, n, max_rows))
        if labels.shape != (n,):
            raise ValueError(f"the partitioner returned shape {labels.shape}, "
                             f"expected one label per row ({n},)")
        return split_oversized(labels, max_rows)
    if method == "auto":
        if have_pymetis():
            method = "metis"
        else:
            cont = contiguous_partition(n, max_rows)
            nnz = indices.size
            cont_local = local_entry_count(indptr, indices, cont)
            if n <= max_rows or cont_local >= 0.9 * nnz:
                return cont
            bfs = bfs_partition(indptr, indices, n, max_rows, is_symmetric)
            return bfs if local_entry_count(indptr, indices, bfs) > cont_local else cont
    if method == "metis":
        return metis_partition(indptr, indices, n, max_rows, is_symmetric)
    if method == "bfs":
        return bfs_partition(indptr, indices, n, max_rows, is_symmetric)
    if method == "contiguous":
        return contiguous_partition(n, max_rows)
    raise ValueError(f"unknown partition method {method!r}: use 'auto', 'metis', 'bfs', "
                     f"'contiguous' or a callable")
