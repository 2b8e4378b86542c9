# SPDX-License-Identifier: MIT
"""Linear operators and preconditioners for the sparse solvers, as
``pycuda.sparse.operator``.

An operator is a callable taking a GPUArray and returning a GPUArray, with
``dtype`` and ``shape`` properties; PacketedSpMV is one, and so are the
preconditioners here, which the conjugate-gradient solver applies to residuals.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from typing import Any

    import numpy.typing as npt

    from barecuda._driver import Stream
    from barecuda.gpuarray import GPUArray

__all__ = ["OperatorBase", "IdentityOperator", "IdentityPreconditioner",
           "DiagonalPreconditioner"]


class OperatorBase:
    """The interface of an operator: ``dtype``, ``shape`` and ``op(vector)``."""

    @property
    def dtype(self) -> np.dtype[Any]:
        """The dtype of the vectors the operator maps."""
        raise NotImplementedError

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, columns) of the operator."""
        raise NotImplementedError

    def __call__(self, operand: GPUArray) -> GPUArray:
        """The operator applied to the GPUArray `operand`."""
        raise NotImplementedError


class IdentityOperator(OperatorBase):
    """IdentityOperator(dtype, n): the n x n identity; returns its operand itself."""

    def __init__(self, dtype: npt.DTypeLike, n: int) -> None:
        self.my_dtype = np.dtype(dtype)
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"IdentityOperator: n must be a non-negative int, not {n!r}")
        self.n = int(n)

    @property
    def dtype(self) -> np.dtype[Any]:
        """The dtype given at construction."""
        return self.my_dtype

    @property
    def shape(self) -> tuple[int, int]:
        """(n, n)."""
        return self.n, self.n

    def __call__(self, operand: GPUArray) -> GPUArray:
        """`operand`, unchanged (the same object)."""
        return operand


class IdentityPreconditioner(IdentityOperator):
    """IdentityPreconditioner(dtype, n): no preconditioning (what the solver uses
    when given precon=None); an IdentityOperator under the solver's name for it."""


class DiagonalPreconditioner(OperatorBase):
    """DiagonalPreconditioner(diagonal): multiplies by the GPUArray `diagonal`
    elementwise; for Jacobi preconditioning pass 1 / diag(A) (in the ordering of
    the vectors it will see: ``spmv.permute(...)`` for a PacketedSpMV)."""

    def __init__(self, diagonal: Any) -> None:
        from barecuda.gpuarray import GPUArray
        if not isinstance(diagonal, GPUArray):
            raise TypeError(f"DiagonalPreconditioner: diagonal must be a GPUArray, "
                            f"not {type(diagonal).__name__}")
        if diagonal.ndim != 1:
            raise ValueError(f"DiagonalPreconditioner: diagonal must be one-dimensional, "
                             f"got shape {diagonal.shape}")
        self.diagonal = diagonal

    @property
    def dtype(self) -> np.dtype[Any]:
        """The diagonal's dtype."""
        return self.diagonal.dtype

    @property
    def shape(self) -> tuple[int, int]:
        """(n, n) for a diagonal of n entries."""
        n = self.diagonal.shape[0]
        return n, n

    def __call__(self, operand: GPUArray) -> GPUArray:
        """A new GPUArray: diagonal * operand, elementwise."""
        if getattr(operand, "shape", None) != self.diagonal.shape:
            raise ValueError(f"DiagonalPreconditioner: operand of shape "
                             f"{getattr(operand, 'shape', None)} does not match the "
                             f"diagonal's {self.diagonal.shape}")
        return self.diagonal * operand
