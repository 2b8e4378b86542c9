# SPDX-License-Identifier: MIT
"""Elementwise kernels generated from C expressions, as ``pycuda.elementwise``.

    lin = ElementwiseKernel("float a, float *x, float *y, float *z",
                            "z[i] = a * x[i] + y[i]", "axpy")
    lin(2.0, x_gpu, y_gpu, z_gpu)

The source is rendered from ``templates/elementwise.cu``: one grid-stride loop over
``n`` elements (the size of the first array argument), indexed with 32-bit ints when
the size allows and 64-bit otherwise, the grid sized from the device (a few blocks per
multiprocessor).  Compiled kernels are cached per context (and on disk by
``SourceModule``).  Array arguments must be contiguous GPUArrays of the declared dtype.
"""

# The face of the kernel-templates floor (barecuda._kernels): PyCUDA's names, and the
# shared machinery the other kernel templates and the tools above reach through it.

from __future__ import annotations

from typing import Any

import numpy as np

from barecuda import driver as _drv  # noqa: F401
from barecuda._core.contexts import context_dependent_memoize  # noqa: F401
from barecuda._kernels.cache import (  # noqa: F401
    BLOCK,
    BLOCKS_PER_SM,
    HotEntry,
    _current_context,
    cache_store,
    context_cache,
    device_blocks,
    grid_for,
    source_module,
)
from barecuda._kernels.cdecl import ScalarArg, VectorArg, dtype_to_ctype, parse_c_args  # noqa: F401
from barecuda._kernels.elementwise import (  # noqa: F401
    _BLOCK3,
    _SMALL_N,
    WIDE_BYTES,
    ElementwiseKernel,
    _loop,
)
from barecuda._kernels.elementwise_getters import (  # noqa: F401
    _ARITH_OPS,
    _COMPARE_OPS,
    _INT_OPS,
    _LOGICAL_OPS,
    _TEXREF_PREAMBLE,
    _arange,
    _as_args,
    _axpbyz,
    _axpbz,
    _binary_func,
    _binary_op,
    _cast,
    _check_func,
    _check_operator,
    _copy,
    _ct,
    _dt,
    _fill_k,
    _func_kernel_name,
    _getter_module,
    _idx_dt,
    _int_value,
    _kernel,
    _linear_combination,
    _logical_not,
    _minmax2,
    _op_expr,
    _operand_type,
    _part,
    _part_kernel,
    _pow,
    _put,
    _pycuda_source,
    _rdivide,
    _real_of,
    _reverse,
    _scalar_op,
    _select,
    _struct_chars,
    _take,
    _take_put,
    _texref_decls,
    _unary_func,
    _vec,
    _vec_count,
    get_elwise_module,
    get_elwise_range_module,
    get_elwise_kernel_and_types,
    get_elwise_kernel,
    PointerTextureRef,
    get_take_kernel,
    get_take_put_kernel,
    get_put_kernel,
    get_copy_kernel,
    get_linear_combination_kernel,
    get_axpbyz_kernel,
    get_axpbz_kernel,
    get_binary_op_kernel,
    get_rdivide_elwise_kernel,
    get_binary_func_kernel,
    get_binary_func_scalar_kernel,
    get_binary_minmax_kernel,
    get_fill_kernel,
    get_reverse_kernel,
    get_real_kernel,
    get_imag_kernel,
    get_conj_kernel,
    get_arange_kernel,
    get_pow_array_kernel,
    get_fmod_kernel,
    get_modf_kernel,
    get_frexp_kernel,
    get_ldexp_kernel,
    get_unary_func_kernel,
    get_if_positive_kernel,
    get_where_kernel,
    get_scalar_op_kernel,
    get_logical_not_kernel,
)
from barecuda._kernels.signature import (  # noqa: F401
    _STRUCT_CHAR,
    _array_pointer,
    _Foreign,
    _is_array_like,
    _Signature,
    scalar_transport,
)
from barecuda._kernels.templates import _TEMPLATE_DIR, _templates, headers_for, render, template  # noqa: F401

__all__ = ["ElementwiseKernel", "get_elwise_module", "get_elwise_kernel"]
__all__ += [
    "get_elwise_range_module", "get_elwise_kernel_and_types", "PointerTextureRef",
    "get_take_kernel", "get_take_put_kernel", "get_put_kernel", "get_copy_kernel",
    "get_linear_combination_kernel", "get_axpbyz_kernel", "get_axpbz_kernel",
    "get_binary_op_kernel", "get_rdivide_elwise_kernel", "get_binary_func_kernel",
    "get_binary_func_scalar_kernel", "get_binary_minmax_kernel", "get_fill_kernel",
    "get_reverse_kernel", "get_real_kernel", "get_imag_kernel", "get_conj_kernel",
    "get_arange_kernel", "get_pow_array_kernel", "get_fmod_kernel", "get_modf_kernel",
    "get_frexp_kernel", "get_ldexp_kernel", "get_unary_func_kernel",
    "get_if_positive_kernel", "get_where_kernel", "get_scalar_op_kernel",
    "get_logical_not_kernel"]


def _get_real_dtype(dtype: Any) -> Any:
    """The real dtype of complex `dtype` (complex64 -> float32, complex128 -> float64);
    AssertionError for a dtype that is not complex, as in PyCUDA."""
    dtype = np.dtype(dtype)
    assert dtype.kind == "c", f"{dtype} is not complex"
    return np.dtype(dtype.char.lower())

