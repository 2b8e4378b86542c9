# SPDX-License-Identifier: MIT
"""Host-side matrix input for barecuda.sparse: whatever the user passes (a SciPy
sparse matrix or array, a dense 2-D NumPy array, or a COOMatrix) becomes
plain NumPy CSR or COO arrays of one value dtype.  SciPy is never imported here: a
SciPy matrix is recognised by its ``tocsr``/``tocoo`` methods."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from typing import Any

    import numpy.typing as npt

    from barecuda._driver import Stream
    from barecuda.gpuarray import GPUArray

VALUE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
INDEX_LIMIT = 2**31 - 1      # rows, columns and entries are indexed with int32 on the GPU


def value_dtype(dtype: npt.DTypeLike, who: str) -> np.dtype[Any]:
    """np.dtype(dtype) when it is float32 or float64, else TypeError."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{who}: {dtype!r} is not a dtype") from None
    if dt not in VALUE_DTYPES:
        raise TypeError(f"{who}: sparse matrices hold float32 or float64 values, not {dt}")
    return dt


def _cast_values(values, dtype, who):
    values = np.asarray(values)
    if values.dtype.kind not in "biuf":
        if values.dtype.kind == "c":
            raise TypeError(f"{who}: the matrix is complex ({values.dtype}); only real "
                            f"float32/float64 matrices are supported")
        raise TypeError(f"{who}: the matrix holds {values.dtype} values, not numbers")
    return np.ascontiguousarray(values, dtype=dtype)


class COOMatrix:
    """COOMatrix(row, col, data, shape): a host matrix as coordinate triples.

    ``row``, ``col`` (integer arrays) and ``data`` (values) have one entry per
    stored element, A[row[k], col[k]] += data[k] (repeated positions add up).
    The SpMV classes accept it where they accept a SciPy matrix, so SciPy is not
    needed; indices are checked against `shape` when a matrix is built from it.
    """

    __slots__ = ("row", "col", "data", "shape")
    row: npt.NDArray[Any]
    col: npt.NDArray[Any]
    data: npt.NDArray[Any]
    shape: tuple[int, int]

    def __init__(self, row: npt.ArrayLike, col: npt.ArrayLike, data: npt.NDArray[Any],
                 shape: tuple[int, int]) -> None:
        self.row, self.col = np.asarray(row), np.asarray(col)
        self.data, self.shape = data, shape

    @property
    def nnz(self) -> int:
        """The number of stored entries."""
        return int(self.data.size)


def _check_shape(shape, who):
    if len(shape) != 2:
        raise ValueError(f"{who}: a matrix needs two dimensions, got shape {tuple(shape)}")
    h, w = (int(s) for s in shape)
    if h > INDEX_LIMIT or w > INDEX_LIMIT:
        raise ValueError(f"{who}: shape {(h, w)} is too large for 32-bit indices")
    return h, w


def _check_nnz(nnz, who):
    if nnz > INDEX_LIMIT:
        raise ValueError(f"{who}: {nnz} stored entries are too many for 32-bit indices")


def _dense(mat, who):
    if isinstance(mat, (str, bytes)) or mat is None:
        raise TypeError(f"{who}: expected a SciPy sparse matrix or a 2-D NumPy array, "
                        f"not {type(mat).__name__}")
    try:
        arr = np.asarray(mat)
    except Exception:
        raise TypeError(f"{who}: expected a SciPy sparse matrix or a 2-D NumPy array, "
                        f"not {type(mat).__name__}") from None
    if arr.dtype == object:
        raise TypeError(f"{who}: expected a SciPy sparse matrix or a 2-D NumPy array, "
                        f"not {type(mat).__name__}")
    if arr.ndim != 2:
        raise ValueError(f"{who}: a matrix needs two dimensions, got shape {arr.shape}")
    return arr


def _check_csr(indptr: Any, indices: Any, nnz: int, shape: tuple[int, int],
               who: str) -> tuple[Any, Any]:
    """A CSR's row pointers and column indices, checked on the host before any kernel
    follows them (SciPy builds a csr_matrix from arrays without checking their
    values): int64 row pointers from 0 to nnz, never decreasing; int32 columns
    inside the shape."""
    indptr = np.asarray(indptr)
    indices = np.asarray(indices)
    for name, arr in (("indptr", indptr), ("indices", indices)):
        if arr.size and arr.dtype.kind not in "iu":
            raise TypeError(f"{who}: the matrix's {name} must be integers, not {arr.dtype}")
    if indptr.shape != (shape[0] + 1,):
        raise ValueError(f"{who}: indptr has {indptr.size} entries, a matrix of {shape[0]} "
                         f"rows needs {shape[0] + 1}")
    if indptr[0] != 0 or indptr[-1] != nnz or indices.size != nnz:
        raise ValueError(f"{who}: indptr must run from 0 to the {nnz} stored entries "
                         f"(it runs from {indptr[0]} to {indptr[-1]}, with {indices.size} "
                         f"column indices)")
    if shape[0] and np.any(np.diff(indptr) < 0):
        row = int(np.argmax(np.diff(indptr) < 0))
        raise ValueError(f"{who}: indptr decreases at row {row}")
    if indices.size and (indices.min() < 0 or indices.max() >= shape[1]):
        bad = int(np.argmax((indices < 0) | (indices >= shape[1])))
        raise ValueError(f"{who}: column index {indices[bad]} (entry {bad}) lies outside "
                         f"the shape {shape}")
    return indptr.astype(np.int64), indices.astype(np.int32)


def as_csr(mat: Any, dtype: npt.DTypeLike, who: str) -> Any:
    """(shape, indptr int64, indices int32, data of dtype) of `mat`."""
    if hasattr(mat, "tocsr") and hasattr(mat, "shape"):
        m = mat.tocsr()
        shape = _check_shape(m.shape, who)
        _check_nnz(m.nnz, who)
        data = _cast_values(m.data, dtype, who)
        indptr, indices = _check_csr(m.indptr, m.indices, data.size, shape, who)
        return shape, indptr, indices, data
    if isinstance(mat, COOMatrix):
        coo = as_coo(mat, dtype, who)
        order = np.lexsort((coo.col, coo.row))
        counts = np.bincount(coo.row, minlength=coo.shape[0])
        indptr = np.zeros(coo.shape[0] + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return coo.shape, indptr, coo.col[order], coo.data[order]
    arr = _dense(mat, who)
    shape = _check_shape(arr.shape, who)
    data = _cast_values(arr, dtype, who)
    rows, cols = np.nonzero(data)
    _check_nnz(rows.size, who)
    indptr = np.zeros(shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=shape[0]), out=indptr[1:])
    return shape, indptr, cols.astype(np.int32), data[rows, cols]


def as_coo(mat: Any, dtype: npt.DTypeLike, who: str) -> Any:
    """A COO of `mat` with int32 indices (checked against the shape) and dtype values."""
    if isinstance(mat, COOMatrix):
        shape = _check_shape(mat.shape, who)
        row = np.asarray(mat.row)
        col = np.asarray(mat.col)
        data = _cast_values(mat.data, dtype, who).ravel()
        if row.shape != data.shape or col.shape != data.shape:
            raise ValueError(f"{who}: row, col and data must have one length each "
                             f"({row.size}, {col.size}, {data.size})")
        for name, idx, bound in (("row", row, shape[0]), ("col", col, shape[1])):
            if idx.size and idx.dtype.kind not in "iu":
                raise TypeError(f"{who}: {name} indices must be integers, not {idx.dtype}")
            if idx.size and (idx.min() < 0 or idx.max() >= bound):
                raise ValueError(f"{who}: a {name} index lies outside the shape {shape}")
        _check_nnz(data.size, who)
        return COOMatrix(row.astype(np.int32), col.astype(np.int32), data, shape)
    if hasattr(mat, "tocoo") and hasattr(mat, "shape"):
        m = mat.tocoo()
        shape = _check_shape(m.shape, who)
        _check_nnz(m.nnz, who)
        return as_coo(COOMatrix(m.row, m.col, m.data, shape), dtype, who)
    shape, indptr, indices, data = as_csr(mat, dtype, who)
    rows = np.repeat(np.arange(shape[0], dtype=np.int32), np.diff(indptr))
    return COOMatrix(rows, indices, data, shape)
