# SPDX-License-Identifier: MIT
"""Helpers in PyCUDA's ``pycuda.tools`` style."""

# A face on the tools floor: PyCUDA's tools names, defined on the floors below
# (contexts, pools and device data in barecuda._core, dtypes and C declarations in
# barecuda._kernels.cdecl), plus the timeline tool (barecuda.trace).  The library
# itself imports those floors, never this module.

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING

from barecuda._core.contexts import (  # noqa: F401
    _check_context,
    _enter_test_context,
    _memo_contexts,
    _memoized,
    _requested_device,
    _test_context_done,
    clear_context_caches as clear_context_caches,
    context_dependent_memoize as context_dependent_memoize,
    get_default_device as get_default_device,
    host_pool as host_pool,
    init_cuda_context_fixture as init_cuda_context_fixture,
    make_default_context as make_default_context,
    mark_cuda_test as mark_cuda_test,
)
from barecuda._array.pycuda_helpers import _exact_div, _int_ceiling, _int_floor  # noqa: F401
from barecuda._core.devicedata import DeviceData, OccupancyRecord  # noqa: F401
from barecuda._core.pools import (  # noqa: F401  (PyCUDA's tools names)
    DebugMemoryPool,
    DeviceMemoryPool,
    PageLockedAllocator,
    PageLockedMemoryPool,
    PooledHostAllocation,
    bitlog2,
)
from barecuda._kernels.cdecl import (  # noqa: F401
    _CTYPE_TO_DTYPE,
    _DTYPE_TO_CTYPE,
    _FP_TEX_CTYPES,
    _QUALIFIERS,
    _fill_registry,
    _normalize_ctype,
    _split_top_level,
    Argument as Argument,
    ScalarArg as ScalarArg,
    VectorArg as VectorArg,
    base_dtype_to_ctype as base_dtype_to_ctype,
    dtype_to_ctype as dtype_to_ctype,
    get_arg_type as get_arg_type,
    get_or_register_dtype as get_or_register_dtype,
    parse_c_arg as parse_c_arg,
    parse_c_args as parse_c_args,
    register_dtype as register_dtype,
)
from barecuda.trace import (  # the timeline tool, re-exported
    Trace as Trace,
    TraceEvent as TraceEvent,
    TraceSummary as TraceSummary,
    nvtx_available as nvtx_available,
    nvtx_mark as nvtx_mark,
    nvtx_name_thread as nvtx_name_thread,
    nvtx_pop as nvtx_pop,
    nvtx_push as nvtx_push,
    nvtx_range as nvtx_range,
    nvtx_range_end as nvtx_range_end,
    nvtx_range_start as nvtx_range_start,
    trace as trace,
    trace_dir as trace_dir,
)

if _TYPE_CHECKING:
    from typing import Any

    from barecuda._core.contexts import _MemoizedFunction


def __getattr__(name: str) -> list[_MemoizedFunction[..., Any]]:
    if name == "context_dependent_memoized_functions":
        # PyCUDA's list of the memoized functions; here a snapshot of the live ones
        return list(_memoized)
    raise AttributeError(f"module 'barecuda.tools' has no attribute {name!r}")
