# SPDX-License-Identifier: MIT
"""Reductions generated from C expressions, as ``pycuda.reduction``.

    dot = ReductionKernel(np.float32, neutral="0", reduce_expr="a+b",
                          map_expr="x[i]*y[i]", arguments="float *x, float *y")
    result = dot(x_gpu, y_gpu)          # a 0-d GPUArray; result.get() is a NumPy scalar

`map_expr` (using `i` and the argument names) gives each element's value in
`dtype_out`; `reduce_expr` combines two of them, `a` and `b`, and must be
associative and commutative (elements are combined in no fixed order); `neutral` is
its identity.  Rendered from ``templates/reduction.cu``: one launch of as many blocks
as the device keeps resident, each thread keeping several loads in flight (128-bit
vector loads where map_expr reads its arrays only as ``x[i]`` and they are aligned),
warps combining by shuffles; the block that finishes last combines the per-block
partials, in a fixed order, so results are deterministic.

The last block is found with a ticket counter in device memory that it sets back to
zero itself.  Launches on the legacy default stream (stream=None) run one after
another and share one workspace per context (counter and partials); a launch on any
other stream allocates its own, in stream order, and zeroes its counter with a
4-byte memset, so concurrent launches on different streams never share a counter.
"""

# The face of the reductions (barecuda._kernels.reduction and its getters).

from __future__ import annotations

from typing import TYPE_CHECKING, Any  # noqa: F401

from barecuda._core.contexts import context_dependent_memoize  # noqa: F401
from barecuda._driver import _array_alloc  # noqa: F401
from barecuda._kernels import reduction as _machinery
from barecuda._kernels.cache import (  # noqa: F401
    HotEntry,
    _current_context,
    cache_store,
    context_cache,
    device_blocks,
    source_module,
)
from barecuda._kernels.cdecl import VectorArg, dtype_to_ctype, get_or_register_dtype, parse_c_args  # noqa: F401
from barecuda._kernels.signature import _Signature  # noqa: F401
from barecuda._kernels.templates import headers_for, render  # noqa: F401
from barecuda._kernels.reduction import (  # noqa: F401
    _BLOCK3,
    _ELEM_RE,
    _I_RE,
    _ONE,
    _SMALL_N,
    BLOCK,
    BLOCKS_PER_SM,
    MAX_BLOCKS_PER_SM,
    VEC_BYTES,
    VEC_UNROLL,
    WAVES,
    WS_HEAD,
    ReductionKernel,
    _alloc,
    _env_int,
    _grid,
    _occupancy,
    _subst_i,
    _tuning,
    _unroll,
    _vector_hooks,
    _vector_plan,
    _workspace,
    get_reduction_kernel,
)
from barecuda._kernels.reduction_getters import (  # noqa: F401
    _ctype_dtype,
    _dot_k,
    _dot_map,
    _getter_module,
    _index_dt,
    _minmax_expr,
    _minmax_k,
    _rdt,
    _subset_dot_k,
    _subset_sum_k,
    _sum_k,
    _truth_k,
    get_all_kernel,
    get_any_kernel,
    get_dot_kernel,
    get_minmax_kernel,
    get_minmax_neutral,
    get_reduction_kernel_and_types,
    get_reduction_module,
    get_subset_dot_kernel,
    get_subset_minmax_kernel,
    get_subset_sum_kernel,
    get_sum_kernel,
)

__all__ = ["ReductionKernel", "get_reduction_kernel"]
__all__ += ["get_reduction_module", "get_reduction_kernel_and_types", "get_sum_kernel",
            "get_subset_sum_kernel", "get_dot_kernel", "get_subset_dot_kernel",
            "get_minmax_neutral", "get_minmax_kernel", "get_subset_minmax_kernel",
            "get_any_kernel", "get_all_kernel"]


def __getattr__(name: str) -> Any:
    # the launch variants _tuning() sets live in barecuda._kernels.reduction
    if name in ("_PASSES", "_VEC", "_BLOCKS_PER_SM"):
        return getattr(_machinery, name)
    raise AttributeError(f"module 'barecuda.reduction' has no attribute {name!r}")
