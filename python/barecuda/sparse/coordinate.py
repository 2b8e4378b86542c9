# SPDX-License-Identifier: MIT
"""Sparse matrix-vector products from coordinate (row, column, value) triples, as
``pycuda.sparse.coordinate``.

    spmv = CoordinateSpMV(scipy_matrix, numpy.float32)
    y_gpu = spmv(x_gpu)            # y = A x;  spmv(x_gpu, y_gpu) adds A x to y

The entries are sorted by row and uploaded once; each call runs one kernel
(templates/sparse.cu, ``bc_spmv_coo``) in which every warp sums runs of equal rows
among 32 consecutive entries and adds each run's total to y atomically.  Any
matrix shape works (y has shape[0] elements, x shape[1]).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from barecuda import gpuarray
from barecuda.compiler import SourceModule  # noqa: F401 (PyCUDA's sparse.coordinate has it)
from barecuda.sparse import _kernels
from barecuda.sparse._matrix import as_coo, value_dtype

if TYPE_CHECKING:
    from typing import Any

    import numpy.typing as npt

    from barecuda._driver import Stream
    from barecuda.gpuarray import GPUArray

__all__ = ["CoordinateSpMV"]


class CoordinateSpMV:
    """CoordinateSpMV(mat, dtype): A (a SciPy sparse matrix, a dense 2-D NumPy
    array or a COOMatrix) in device memory as sorted coordinate triples.

    `dtype` is float32 or float64; A's values are converted to it.  Attributes as
    PyCUDA: ``shape``, ``dtype``, ``index_dtype`` (int32), ``nnz``, ``block_size``,
    ``row_gpu``, ``col_gpu``, ``data_gpu``.  Needs a current context (or uses the
    default one).
    """

    def __init__(self, mat: Any, dtype: npt.DTypeLike) -> None:
        who = "CoordinateSpMV"
        self.dtype = value_dtype(dtype, who)
        self.index_dtype = np.dtype(np.int32)
        coo = as_coo(mat, self.dtype, who)
        self.shape = coo.shape
        order = np.lexsort((coo.col, coo.row))
        self.nnz = coo.nnz
        self.block_size = _kernels.COO_BLOCK
        # Never upload an empty array: the kernel is not launched then anyway.
        pad = 0 if self.nnz else 1
        self.row_gpu = gpuarray.to_gpu(np.concatenate([coo.row[order], np.zeros(pad, np.int32)]))
        self.col_gpu = gpuarray.to_gpu(np.concatenate([coo.col[order], np.zeros(pad, np.int32)]))
        self.data_gpu = gpuarray.to_gpu(
            np.concatenate([coo.data[order], np.zeros(pad, self.dtype)]))

    def get_kernel(self) -> Any:
        """The prepared ``bc_spmv_coo`` Function of this dtype in the current context."""
        return _kernels.functions(self.dtype)[1]

    def __call__(self, x: GPUArray, y: GPUArray | None = None,
                 stream: Stream | None = None) -> GPUArray:
        """__call__(x, y=None, stream=None): y + A x, in y (a new zero-filled
        GPUArray when y is None), which is returned.

        x and y are contiguous GPUArrays of the matrix's dtype with shape[1] and
        shape[0] elements; TypeError/ValueError otherwise.  y must not overlap x.
        """
        who = "CoordinateSpMV"
        _kernels.check_vector(x, "x", self.dtype, self.shape[1], who)
        if y is None:
            y = gpuarray.zeros(self.shape[0], dtype=self.dtype, allocator=x.allocator,
                               stream=stream)
        else:
            _kernels.check_vector(y, "y", self.dtype, self.shape[0], who)
            if y.size and x.size and y.ptr == x.ptr:
                raise ValueError(f"{who}: y must not be the same memory as x")
        self.launch(x, y, stream)
        return y

    def launch(self, x: GPUArray, y: GPUArray | None, stream: Stream | None = None) -> None:
        """Add A x to y with unchecked arguments (the caller's duty; internal path)."""
        if self.nnz == 0:
            return
        fn = self.get_kernel()
        fn.prepared_async_call((_kernels.coo_grid(self.nnz), 1, 1),
                               (self.block_size, 1, 1), stream, self.nnz,
                               self.row_gpu.ptr, self.col_gpu.ptr, self.data_gpu.ptr,
                               x.ptr, y.ptr)
