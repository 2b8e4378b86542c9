# SPDX-License-Identifier: MIT
"""PyCUDA's reduction getters (``pycuda.reduction.get_*``, shown by barecuda.reduction).

PyCUDA's reduction getters (pycuda.reduction.get_*).  get_reduction_module and
get_reduction_kernel_and_types give PyCUDA's kernel layout
    name(out_type *out, <arguments>, unsigned int seq_count, size_t n)
rendered from templates/reduction.cu (its stage-1 kernel, emitted under `name`):
every block of the launch writes one partial, out[blockIdx.x], and together the
blocks cover all n elements (grid-stride), whatever grid the caller picks, so
PyCUDA's two-pass callers work unchanged; seq_count is accepted and not needed.
The other getters return ReductionKernel objects, memoized per context.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from barecuda._core.contexts import context_dependent_memoize
from barecuda._core.names import public
from barecuda._kernels.cache import source_module
from barecuda._kernels.cdecl import VectorArg, dtype_to_ctype, get_or_register_dtype, parse_c_args
from barecuda._kernels.reduction import BLOCK, ReductionKernel, _unroll, _vector_hooks
from barecuda._kernels.templates import headers_for, render

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt

    from barecuda._driver import Function
    from barecuda.compiler import SourceModule

def _getter_module(source, options=None, keep=False):
    """Compile and load a getter's source (tests replace this to compile offline)."""
    return source_module(source, options, keep)


def _ctype_dtype(ctype):
    try:
        return get_or_register_dtype(ctype)
    except TypeError:
        return None     # a user's struct: no dtype-specific headers needed


@public("barecuda.reduction")
def get_reduction_module(out_type: str, block_size: int, neutral: Any, reduce_expr: str,
                         map_expr: str | None, arguments: str | Sequence[Any] | None,
                         name: str = "reduce_kernel", keep: bool = False,
                         options: Sequence[str] | None = None,
                         preamble: str = "") -> SourceModule:
    """get_reduction_module(out_type, block_size, neutral, reduce_expr, map_expr, arguments, name="reduce_kernel", keep=False, options=None, preamble="")

    PyCUDA's module builder: a SourceModule with the kernel ``name(out_type *out,
    <arguments>, unsigned int seq_count, size_t n)``, launched with `block_size`
    threads per block (a multiple of 32, at most 1024); each block writes its
    partial reduction of ``map_expr`` (``READ_AND_MAP(i)``) to ``out[blockIdx.x]``.
    `out_type` and `arguments` are C text, as in PyCUDA.
    """
    if not isinstance(block_size, int) or block_size % 32 or not 32 <= block_size <= 1024:
        raise ValueError(f"block_size must be a multiple of 32 from 32 to 1024, "
                         f"got {block_size!r}")
    for what, v in (("out_type", out_type), ("reduce_expr", reduce_expr),
                    ("map_expr", map_expr)):
        if not isinstance(v, str) or not v.strip():
            raise ValueError(f"{what} must be a non-empty string of C")
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"kernel name must be a C identifier, not {name!r}")
    args = parse_c_args(arguments or "")
    if not any(isinstance(a, VectorArg) for a in args):
        raise ValueError("get_reduction_module needs at least one array (pointer) argument")
    for a in args:
        if a.name in ("i", "out_t", "index_t") or a.name.startswith("bc_"):
            raise ValueError(f"argument name '{a.name}' is reserved by the reduction kernel")
    dtypes = [a.dtype for a in args]
    dt_out = _ctype_dtype(out_type)
    if dt_out is not None:
        dtypes.append(dt_out)
        unroll = _unroll(dt_out)
    else:
        unroll = 4
    inner = "bc_rm_" + name
    params = ", ".join([a.declarator() for a in args]
                       + ["unsigned int seq_count", "long long bc_n"])
    src = render("reduction.cu", headers=headers_for(dtypes),
                 preamble=f"{preamble}\n#define READ_AND_MAP(i) ({map_expr})\n"
                          f"#define {inner}_stage1 {name}",
                 name=inner, out_t=out_type, neutral=str(neutral), reduce_expr=reduce_expr,
                 map_expr="READ_AND_MAP(i)", params=params, unpack="",
                 index_t="long long", block=block_size, unroll=unroll, onepass=0,
                 **_vector_hooks((1, [], ""), block_size))
    return _getter_module(src, options, keep)


@public("barecuda.reduction")
def get_reduction_kernel_and_types(stage: int, out_type: str, block_size: int, neutral: Any,
                                   reduce_expr: str, map_expr: str | None = None,
                                   arguments: str | Sequence[Any] | None = None,
                                   name: str = "reduce_kernel", keep: bool = False,
                                   options: Sequence[str] | None = None,
                                   preamble: str = "") -> tuple[Function, str]:
    """get_reduction_kernel_and_types(stage, out_type, block_size, neutral, reduce_expr, map_expr=None, arguments=None, name="reduce_kernel", keep=False, options=None, preamble="")

    PyCUDA's (prepared Function, argument struct characters) of one stage: stage 1
    maps ``in[i]`` by default; stage 2 prepends ``const out_type
    *pycuda_reduction_inp`` (the partials) and maps it.  The Function is prepared
    ``"P" + chars + "IN"``: launch with ``(out, *args, seq_count, n)``.
    """
    if stage == 1:
        if map_expr is None:
            map_expr = "in[i]"
    elif stage == 2:
        if map_expr is None:
            map_expr = "pycuda_reduction_inp[i]"
        inp = f"const {out_type} *pycuda_reduction_inp"
        arguments = f"{inp}, {arguments}" if arguments else inp
    else:
        raise ValueError(f"stage must be 1 or 2, not {stage!r}")
    if not arguments:
        raise ValueError("stage 1 needs arguments (a C declaration list)")
    mod = get_reduction_module(out_type, block_size, neutral, reduce_expr, map_expr,
                               arguments, name, keep, options, preamble)
    func = mod.get_function(name)
    arg_types = [a.struct_char for a in parse_c_args(arguments)]
    func.prepare("P" + "".join(arg_types) + "IN")
    return func, arg_types


def _rdt(d, what):
    if d is None:
        raise TypeError(f"{what} may not be None")
    dt = np.dtype(d)
    dtype_to_ctype(dt)
    return dt


@public("barecuda.reduction")
def get_sum_kernel(dtype_out: npt.DTypeLike, dtype_in: npt.DTypeLike) -> ReductionKernel:
    """get_sum_kernel(dtype_out, dtype_in) -> ReductionKernel: the sum of one array
    (dtype_out None: dtype_in)."""
    din = _rdt(dtype_in, "dtype_in")
    return _sum_k(din if dtype_out is None else _rdt(dtype_out, "dtype_out"), din)


@context_dependent_memoize
def _sum_k(dout, din):
    return ReductionKernel(dout, "0", "a+b", arguments=f"const {dtype_to_ctype(din)} *in")


@public("barecuda.reduction")
def get_any_kernel(dtype_out: npt.DTypeLike, dtype_in: npt.DTypeLike) -> ReductionKernel:
    """get_any_kernel(dtype_out, dtype_in) -> ReductionKernel: 1 if any element is
    nonzero, else 0 (dtype_out None: dtype_in)."""
    din = _rdt(dtype_in, "dtype_in")
    return _truth_k(din if dtype_out is None else _rdt(dtype_out, "dtype_out"), din, "any")


@public("barecuda.reduction")
def get_all_kernel(dtype_out: npt.DTypeLike, dtype_in: npt.DTypeLike) -> ReductionKernel:
    """get_all_kernel(dtype_out, dtype_in) -> ReductionKernel: 1 if every element is
    nonzero, else 0 (dtype_out None: dtype_in)."""
    din = _rdt(dtype_in, "dtype_in")
    return _truth_k(din if dtype_out is None else _rdt(dtype_out, "dtype_out"), din, "all")


@context_dependent_memoize
def _truth_k(dout, din, which):
    neutral, op = ("0", "||") if which == "any" else ("1", "&&")
    truth = "barecuda::bc_cast<bool>"
    return ReductionKernel(dout, neutral, f"({truth}(a) {op} {truth}(b))",
                           map_expr=f"{truth}(in[i])",
                           arguments=f"const {dtype_to_ctype(din)} *in")


@public("barecuda.reduction")
def get_subset_sum_kernel(dtype_out: npt.DTypeLike, dtype_subset: npt.DTypeLike,
                          dtype_in: npt.DTypeLike) -> ReductionKernel:
    """get_subset_sum_kernel(dtype_out, dtype_subset, dtype_in) -> ReductionKernel:
    ``sum(in[lookup_tbl[i]])``, called as ``k(lookup_tbl, in)``."""
    din = _rdt(dtype_in, "dtype_in")
    return _subset_sum_k(din if dtype_out is None else _rdt(dtype_out, "dtype_out"),
                         _index_dt(dtype_subset), din)


def _index_dt(d):
    dt = _rdt(d, "dtype_subset")
    if dt.kind not in "iu":
        raise TypeError(f"the subset (lookup table) dtype must be an integer dtype, not {dt}")
    return dt


@context_dependent_memoize
def _subset_sum_k(dout, dsub, din):
    return ReductionKernel(dout, "0", "a+b", map_expr="in[lookup_tbl[i]]",
                           arguments=f"const {dtype_to_ctype(dsub)} *lookup_tbl, "
                                     f"const {dtype_to_ctype(din)} *in")


@public("barecuda.reduction")
def get_dot_kernel(dtype_out: npt.DTypeLike, dtype_a: npt.DTypeLike,
                   dtype_b: npt.DTypeLike) -> ReductionKernel:
    """get_dot_kernel(dtype_out, dtype_a, dtype_b) -> ReductionKernel: ``sum(a[i]*b[i])``
    in dtype_out, called as ``k(a, b)``."""
    return _dot_k(_rdt(dtype_out, "dtype_out"), _rdt(dtype_a, "dtype_a"),
                  _rdt(dtype_b, "dtype_b"))


def _dot_map(dout, a, b):
    cast = f"barecuda::bc_cast<{dtype_to_ctype(dout)} >"
    return f"{cast}({a}) * {cast}({b})"


@context_dependent_memoize
def _dot_k(dout, da, db):
    # named x, y: a and b are reduce_expr's operands in ReductionKernel
    return ReductionKernel(dout, "0", "a+b", map_expr=_dot_map(dout, "x[i]", "y[i]"),
                           arguments=f"const {dtype_to_ctype(da)} *x, "
                                     f"const {dtype_to_ctype(db)} *y")


@public("barecuda.reduction")
def get_subset_dot_kernel(dtype_out: npt.DTypeLike, dtype_subset: npt.DTypeLike,
                          dtype_a: npt.DTypeLike = None,
                          dtype_b: npt.DTypeLike = None) -> ReductionKernel:
    """get_subset_dot_kernel(dtype_out, dtype_subset, dtype_a=None, dtype_b=None) -> ReductionKernel

    ``sum(a[t]*b[t] for t in lookup_tbl)``, called as ``k(lookup_tbl, a, b)``.
    Missing dtypes default as PyCUDA's: dtype_out to dtype_a, dtype_b to dtype_a
    (or dtype_out), dtype_a to dtype_out.
    """
    if dtype_out is None:
        dtype_out = dtype_a
    if dtype_b is None:
        dtype_b = dtype_out if dtype_a is None else dtype_a
    if dtype_a is None:
        dtype_a = dtype_out
    return _subset_dot_k(_rdt(dtype_out, "dtype_out"), _index_dt(dtype_subset),
                         _rdt(dtype_a, "dtype_a"), _rdt(dtype_b, "dtype_b"))


@context_dependent_memoize
def _subset_dot_k(dout, dsub, da, db):
    return ReductionKernel(dout, "0", "a+b",
                           map_expr=_dot_map(dout, "x[lookup_tbl[i]]", "y[lookup_tbl[i]]"),
                           arguments=f"const {dtype_to_ctype(dsub)} *lookup_tbl, "
                                     f"const {dtype_to_ctype(da)} *x, "
                                     f"const {dtype_to_ctype(db)} *y")


@public("barecuda.reduction")
def get_minmax_neutral(what: str, dtype: npt.DTypeLike) -> str:
    """get_minmax_neutral(what, dtype) -> str: the C neutral element of a "min" or
    "max" reduction: ``MY_INFINITY`` / ``-MY_INFINITY`` (which the min/max kernels'
    preamble defines) for inexact dtypes, the integer extreme otherwise."""
    dtype = np.dtype(dtype)
    if what not in ("min", "max"):
        raise ValueError(f"what must be 'min' or 'max', not {what!r}")
    if issubclass(dtype.type, np.inexact):
        return "MY_INFINITY" if what == "min" else "-MY_INFINITY"
    if dtype.kind not in "iub":
        raise TypeError(f"no min/max neutral for dtype {dtype}")
    info = np.iinfo(np.uint8 if dtype.kind == "b" else dtype)
    v = info.max if what == "min" else info.min
    if v == -2**63:
        return "(-9223372036854775807LL - 1)"
    return f"{v}{'ULL' if v >= 2**63 else ''}"


def _minmax_expr(what, dtype):
    if dtype == np.float64:
        return f"f{what}(a,b)"
    if dtype == np.float32:
        return f"f{what}f(a,b)"
    if dtype.kind in "iu":
        return f"{what}(a,b)"
    raise TypeError(f"min/max reductions support float32, float64 and integer dtypes, "
                    f"not {dtype}")


@public("barecuda.reduction")
def get_minmax_kernel(what: str, dtype: npt.DTypeLike) -> ReductionKernel:
    """get_minmax_kernel(what, dtype) -> ReductionKernel: the minimum or maximum
    (`what` "min"/"max") of a float32, float64 or integer array; floats skip NaNs
    (fmin/fmax)."""
    dt = _rdt(dtype, "dtype")
    get_minmax_neutral(what, dt)
    _minmax_expr(what, dt)
    return _minmax_k(what, dt, None)


@public("barecuda.reduction")
def get_subset_minmax_kernel(what: str, dtype: npt.DTypeLike,
                             dtype_subset: npt.DTypeLike) -> ReductionKernel:
    """get_subset_minmax_kernel(what, dtype, dtype_subset) -> ReductionKernel: as
    get_minmax_kernel over ``in[lookup_tbl[i]]``, called as ``k(lookup_tbl, in)``."""
    dt = _rdt(dtype, "dtype")
    get_minmax_neutral(what, dt)
    _minmax_expr(what, dt)
    return _minmax_k(what, dt, _index_dt(dtype_subset))


@context_dependent_memoize
def _minmax_k(what, dt, dsub):
    args = f"const {dtype_to_ctype(dt)} *in"
    map_expr = "in[i]"
    if dsub is not None:
        args = f"const {dtype_to_ctype(dsub)} *lookup_tbl, " + args
        map_expr = "in[lookup_tbl[i]]"
    return ReductionKernel(dt, neutral=get_minmax_neutral(what, dt),
                           reduce_expr=_minmax_expr(what, dt), map_expr=map_expr,
                           arguments=args, preamble="#define MY_INFINITY (1./0)")
