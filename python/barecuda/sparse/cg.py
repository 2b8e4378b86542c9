# SPDX-License-Identifier: MIT
"""Preconditioned conjugate gradients on the GPU, as ``pycuda.sparse.cg``.

    x_gpu, iterations, residual_checks = solve_pkt_with_cg(spmv, b_gpu, precon, tol=1e-6)

The iteration is the textbook one (Shewchuk, "An Introduction to the Conjugate
Gradient Method Without the Agonizing Pain", B3).  Every scalar (alpha, beta, the
inner products) stays on the GPU: the vector updates read them from device memory,
so the host only queues kernels.  Every ``min(n, 50)`` iterations the residual is
recomputed as b - A x, and its preconditioned norm r.M.r comes back through an
AsyncInnerProduct; the solve stops when one of those is below tol**2 times the first
one (so `tol` bounds the relative preconditioned residual norm).
"""

from __future__ import annotations

from typing import TYPE_CHECKING


import numpy as np

from barecuda import gpuarray
from barecuda.elementwise import ElementwiseKernel
from barecuda.sparse.inner import AsyncInnerProduct
from barecuda.sparse.operator import IdentityPreconditioner
from barecuda.tools import dtype_to_ctype

if TYPE_CHECKING:
    from typing import Any

    import numpy.typing as npt

    from barecuda._driver import Stream
    from barecuda.gpuarray import GPUArray

__all__ = ["ConvergenceError", "CGStateContainer", "solve_pkt_with_cg"]


class ConvergenceError(RuntimeError):
    """The solver did not reach the tolerance within its iteration limit."""


_kernels = {}


def _kernel(key, args, operation, name):
    k = _kernels.get(key)
    if k is None:
        k = _kernels[key] = ElementwiseKernel(args, operation, name)
    return k


def _ratio(num, den):
    return f"({den} == 0 ? ({num}) * 0 : ({num}) / ({den}))"


def _step_kernel(dt, with_residual):
    """x += alpha d (and r -= alpha q), alpha = delta / dq read from the GPU."""
    t = dtype_to_ctype(dt)
    args = f"{t} *x, {t} *d, {t} *delta, {t} *dq"
    op = f"const {t} alpha = {_ratio('delta[0]', 'dq[0]')}; x[i] += alpha * d[i]"
    if with_residual:
        args += f", {t} *r, {t} *q"
        op += "; r[i] -= alpha * q[i]"
    return _kernel(("cg_step", dt, with_residual), args, op, "bc_cg_step")


def _direction_kernel(dt):
    """d = s + beta d, beta = delta_new / delta_old read from the GPU."""
    t = dtype_to_ctype(dt)
    return _kernel(("cg_dir", dt), f"{t} *d, {t} *s, {t} *delta_new, {t} *delta_old",
                   f"const {t} beta = {_ratio('delta_new[0]', 'delta_old[0]')}; "
                   f"d[i] = s[i] + beta * d[i]", "bc_cg_direction")


def _lc2_kernel(dt, a_is_gpu, b_is_gpu):
    t = dtype_to_ctype(dt)
    a_decl, a_use = (f"{t} *a", "a[0]") if a_is_gpu else (f"{t} a", "a")
    b_decl, b_use = (f"{t} *b", "b[0]") if b_is_gpu else (f"{t} b", "b")
    return _kernel(("cg_lc2", dt, a_is_gpu, b_is_gpu),
                   f"{t} *z, {t} *x, {t} *y, {a_decl}, {b_decl}",
                   f"z[i] = {a_use} * x[i] + {b_use} * y[i]", "bc_cg_lc2")


def _div_kernel(xdt, ydt, zdt):
    tx, ty, tz = dtype_to_ctype(xdt), dtype_to_ctype(ydt), dtype_to_ctype(zdt)
    return _kernel(("cg_div", xdt, ydt, zdt), f"{tz} *z, {tx} *x, {ty} *y",
                   f"z[i] = y[i] == 0 ? ({tz})0 : ({tz})x[i] / ({tz})y[i]", "bc_cg_div")


def _is_gpu(v):
    return isinstance(v, gpuarray.GPUArray)


class CGStateContainer:
    """CGStateContainer(operator, precon=None, pagelocked_allocator=None): the state
    of one conjugate-gradient solve of operator(x) = rhs.

    `operator` maps GPUArrays (a PacketedSpMV, or any OperatorBase), `precon` is the
    preconditioner (default: identity).  Call reset(rhs, x) and then run(), or
    one_iteration() yourself.  Attributes: ``x``, ``residual``, ``d`` (search
    direction), ``delta`` (0-d GPUArray r.M.r), ``rhs``.
    """

    def __init__(self, operator: Any, precon: Any = None,
                 pagelocked_allocator: Any = None) -> None:
        if precon is None:
            precon = IdentityPreconditioner(operator.dtype, operator.shape[0])
        if tuple(precon.shape) != tuple(operator.shape):
            raise ValueError(f"CG: the preconditioner's shape {tuple(precon.shape)} differs "
                             f"from the operator's {tuple(operator.shape)}")
        if np.dtype(precon.dtype) != np.dtype(operator.dtype):
            raise TypeError(f"CG: the preconditioner's dtype {precon.dtype} differs from "
                            f"the operator's {operator.dtype}")
        self.operator = operator
        self.precon = precon
        self.pagelocked_allocator = pagelocked_allocator
        self.dtype = np.dtype(operator.dtype)

    # small helpers (PyCUDA's names) ------------------------------------------------

    def lc2(self, a: Any, x: GPUArray, b: Any, y: GPUArray | None,
            out: Any = None) -> GPUArray:
        """a*x + b*y into out (new when None); a and b are numbers or 0-d GPUArrays
        of x's dtype; x, y, out GPUArrays of one dtype and shape."""
        if x.dtype != y.dtype or (out is not None and out.dtype != x.dtype):
            raise TypeError("lc2(): x, y and out must have one dtype")
        if x.shape != y.shape or (out is not None and out.shape != x.shape):
            raise ValueError("lc2(): x, y and out must have one shape")
        for name, s in (("a", a), ("b", b)):
            if _is_gpu(s) and (s.dtype != x.dtype or s.size != 1):
                raise ValueError(f"lc2(): {name} must be a one-element GPUArray of {x.dtype}")
        if out is None:
            out = gpuarray.empty(x.shape, dtype=x.dtype, allocator=x.allocator)
        k = _lc2_kernel(x.dtype, _is_gpu(a), _is_gpu(b))
        k(out, x, y, a, b)
        return out

    def guarded_div(self, a: Any, b: Any) -> GPUArray:
        """a / b elementwise, 0 where b is 0 (GPUArrays of one shape)."""
        if a.shape != b.shape:
            raise ValueError(f"guarded_div(): shapes differ ({a.shape}, {b.shape})")
        res = np.result_type(a.dtype, b.dtype)
        out = gpuarray.empty(a.shape, dtype=res, allocator=a.allocator)
        _div_kernel(a.dtype, b.dtype, res)(out, a, b)
        return out

    def _apply(self, fn, v, what):
        out = fn(v)
        if not _is_gpu(out) or out.dtype != self.dtype or out.size != v.size:
            raise TypeError(f"CG: the {what} returned {type(out).__name__} "
                            f"{getattr(out, 'dtype', '')} {getattr(out, 'shape', '')}; "
                            f"expected a GPUArray of {self.dtype} with {v.size} elements")
        return out

    def _true_residual(self):
        ax = self._apply(self.operator, self.x, "operator")
        return self.lc2(1, self.rhs, -1, ax)

    # the iteration ----------------------------------------------------------------

    def reset(self, rhs: Any, x: GPUArray | None = None) -> None:
        """Start from the initial guess `x` (zeros when None) for right-hand side
        `rhs` (GPUArrays of the operator's dtype and size)."""
        n = self.operator.shape[0]
        for name, v in (("rhs", rhs), ("x", x)):
            if v is None:
                continue
            if not _is_gpu(v):
                raise TypeError(f"CG: {name} must be a GPUArray, not {type(v).__name__}")
            if v.dtype != self.dtype:
                raise TypeError(f"CG: {name} has dtype {v.dtype}, the operator {self.dtype}")
            if v.size != n:
                raise ValueError(f"CG: {name} has {v.size} elements, the operator needs {n}")
        self.rhs = rhs
        self.x = gpuarray.zeros(n, dtype=self.dtype, allocator=rhs.allocator) \
            if x is None else x
        self.residual = self._true_residual()
        d = self._apply(self.precon, self.residual, "preconditioner")
        self.d = d.copy() if d is self.residual else d
        first = AsyncInnerProduct(self.residual, d, self.pagelocked_allocator)
        self.real_delta_queue = [first]
        self.delta = first.gpu_result

    def one_iteration(self, compute_real_residual: Any = False) -> None:
        """One CG step; with compute_real_residual the residual is recomputed as
        rhs - operator(x) and its r.M.r is queued for the convergence test."""
        q = self._apply(self.operator, self.d, "operator")
        dq = gpuarray.dot(self.d, q)
        if compute_real_residual:
            _step_kernel(self.dtype, False)(self.x, self.d, self.delta, dq)
            self.residual = self._true_residual()
        else:
            _step_kernel(self.dtype, True)(self.x, self.d, self.delta, dq, self.residual, q)
        s = self._apply(self.precon, self.residual, "preconditioner")
        if compute_real_residual:
            ip = AsyncInnerProduct(self.residual, s, self.pagelocked_allocator)
            self.real_delta_queue.append(ip)
            delta = ip.gpu_result
        else:
            delta = gpuarray.dot(self.residual, s)
        _direction_kernel(self.dtype)(self.d, s, delta, self.delta)
        self.delta = delta

    def _converged(self, tol, wait=False):
        """True once a queued residual norm is small enough (polls; waits if asked)."""
        queue = self.real_delta_queue
        while queue:
            if self._delta_0 is None:
                first = queue[0].wait() if wait else queue[0].get_host_result()
                if first is None:
                    return False
                self._delta_0 = abs(float(first))
                queue.pop(0)
                if self._delta_0 == 0:
                    return True
                continue
            value = queue[0].wait() if wait else queue[0].get_host_result()
            if value is None:
                return False
            queue.pop(0)
            if abs(float(value)) < tol * tol * self._delta_0:
                return True
        return False

    def run(self, max_iterations: int | None = None, tol: float = 1e-7,
            debug_callback: Any = None) -> GPUArray:
        """Iterate until converged (returns x) or `max_iterations` (default
        max(61, 10 n)) have run (raises ConvergenceError).  `debug_callback(what,
        iteration, x, residual, d, delta)` is called after every iteration (what is
        "it" or "it+residual") and at the end ("end")."""
        n = self.operator.shape[0]
        if max_iterations is None:
            max_iterations = max(61, 10 * n)
        if not tol > 0:
            raise ValueError(f"CG: tol must be positive, got {tol}")
        resid_every = max(1, min(n, 50))
        self._delta_0 = None
        if self._converged(tol):
            return self._finish(debug_callback, 0)
        for it in range(max_iterations):
            real = it % resid_every == 0
            self.one_iteration(compute_real_residual=real)
            if debug_callback is not None:
                debug_callback("it+residual" if real else "it", it, self.x, self.residual,
                               self.d, self.delta)
            if self._converged(tol):
                return self._finish(debug_callback, it)
        if self._converged(tol, wait=True):
            return self._finish(debug_callback, max_iterations - 1)
        raise ConvergenceError(f"CG did not converge to tol={tol} in {max_iterations} "
                               f"iterations")

    def _finish(self, debug_callback, it):
        if debug_callback is not None:
            debug_callback("end", it, self.x, self.residual, self.d, self.delta)
        return self.x


def solve_pkt_with_cg(pkt_spmv: Any, b: Any, precon: Any = None, x: GPUArray | None = None,
                      tol: float = 1e-7, max_iterations: int | None = None, debug: Any = False,
                      pagelocked_allocator: Any = None) -> tuple[GPUArray, int, int]:
    """Solve A x = b with the PacketedSpMV `pkt_spmv` of an SPD matrix A.

    `b` (and the initial guess `x`, zeros when None) are GPUArrays in the original
    row order; `precon` (e.g. a DiagonalPreconditioner) works in the packet ordering.
    Returns (x, iterations, residual recomputations); x in the original order.
    Raises ConvergenceError when `max_iterations` are not enough.  With `debug`
    true, every residual check prints a line.
    """
    b_perm = pkt_spmv.permute(b)
    x_perm = None if x is None else pkt_spmv.permute(x)
    cg = CGStateContainer(pkt_spmv, precon, pagelocked_allocator=pagelocked_allocator)
    cg.reset(b_perm, x_perm)
    counts = {"it": 0, "it+residual": 0}

    def callback(what, it, x, resid, d, delta):
        if what in counts:
            counts[what] += 1
            if debug and what == "it+residual":
                print(f"cg: iteration {it}: residual recomputed")

    result = cg.run(max_iterations, tol, debug_callback=callback)
    return (pkt_spmv.unpermute(result), counts["it"] + counts["it+residual"],
            counts["it+residual"])


