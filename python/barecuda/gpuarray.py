# SPDX-License-Identifier: MIT
"""GPUArray: a NumPy-like array in device memory, as ``pycuda.gpuarray``.

    a = gpuarray.to_gpu(np.arange(10, dtype=np.float32))
    b = (2 * a + 1).get()

Memory comes from the stream-ordered pool (``driver.mem_alloc_async``) unless an
``allocator`` (a callable taking a byte count, e.g. ``tools.DeviceMemoryPool().allocate``)
is given.  Arithmetic follows NumPy's type promotion (NumPy 2 rules: Python scalars are
weak).  Operations on non-contiguous views (slices with steps, transposes, ``real``/
``imag`` of complex arrays) work on contiguous copies made by a strided copy kernel;
results are contiguous.  Kernels are generated per (operation, dtypes) and cached per
context.
"""

# The face of the arrays floor (barecuda._array): PyCUDA's names, and every name this
# module had before the floor was split into it (programs and tests reach some of
# the private ones).

from __future__ import annotations

import builtins as _builtins  # noqa: F401
import operator  # noqa: F401
from typing import TYPE_CHECKING, Any, Literal  # noqa: F401

import numpy as np  # noqa: F401

from barecuda import _driver as _cdrv  # noqa: F401
from barecuda import driver as _drv  # noqa: F401
from barecuda._array import interop as _interop  # noqa: F401
from barecuda._array import kept as _kept  # noqa: F401
from barecuda._array import reduce as _reduce_module
from barecuda._array.arith import (_BINOPS, _COMPARE, _ELEMENTWISE, _UNARY, _binary,  # noqa: F401
                                   _binary_kernel, _compute_dtype, _if_positive_kernel,
                                   _result_dtype, _to_out, _unary, _unary_kernel, if_positive,
                                   maximum, minimum)
from barecuda._array.array import (GPUArray, _empty_as, _new_array, _new_scalar,  # noqa: F401
                                   conj, imag, real)
from barecuda._array.core import (_assign, _cast_kernel, _ct, _dtod, _dtoh_staged,  # noqa: F401
                                  _fill, _fill_kernel, _htod, _htod_staged, _kernel, _kernels,
                                  _reverse_kernel, _scalar_flat, _strided_copy,
                                  _strided_copy_kernel)
from barecuda._array.create import (_arange_kernel, _like, _shape_dtype_alloc,  # noqa: F401
                                    arange, empty, empty_like, full, is_gpuarray, ones,
                                    ones_like, to_gpu, to_gpu_async, zeros, zeros_like)
from barecuda._array.gather import (multi_put, multi_take, multi_take_put,  # noqa: F401
                                    subset_dot, subset_max, subset_min, subset_sum, take)
from barecuda._array.interop import _device_view, asarray, from_dlpack  # noqa: F401
from barecuda._array.layout import (_SUPPORTED, ArrayFlags, _alloc, _array_alloc,  # noqa: F401
                                    _c_strides, _check_dtype, _f_strides, _layout,
                                    _norm_shape, _prod, _timer_start, _timer_stop)
from barecuda._array.logic import (all, any, logical_and, logical_not,  # noqa: F401
                                   logical_or, where)
from barecuda._array.pycuda_helpers import (_array_like_helper,  # noqa: F401
                                            _ArrayFlags, _c_contiguous_strides,
                                            _compact_strides, _f_contiguous_strides,
                                            _get_broadcasted_binary_op_result,
                                            _get_common_dtype, _get_common_dtype_base,
                                            _memcpy_discontig, _splay_backend,
                                            has_double_support)
from barecuda._array.reduce import (_dot_kernel, _minmax_kernel, _reduction,  # noqa: F401
                                    _reductions, _sum_dtype, _sum_kernel, dot, max, mean, min,
                                    sum, vdot)
from barecuda._array.shape import concatenate, reshape, splay, stack, transpose  # noqa: F401
from barecuda._kernels.cdecl import dtype_to_ctype  # noqa: F401
from barecuda._kernels.elementwise import ElementwiseKernel  # noqa: F401
from barecuda._kernels.vec import vec  # noqa: F401

__all__ = ["GPUArray", "to_gpu", "to_gpu_async", "empty", "zeros", "ones", "full",
           "empty_like", "zeros_like", "ones_like", "arange", "if_positive", "maximum",
           "minimum", "take", "concatenate", "dot", "vdot", "sum", "max", "min", "subset_dot",
           "subset_max", "subset_min", "mean", "is_gpuarray", "ArrayFlags",
           "asarray", "from_dlpack", "vec", "stack", "transpose", "reshape", "any", "all",
           "logical_and", "logical_or", "logical_not", "where", "subset_sum", "multi_take",
           "multi_put", "multi_take_put", "splay", "real", "imag", "conj"]


def __getattr__(name: str) -> Any:
    if name == "_SUMS":   # the C fast path of sum(), made again when reductions are tuned
        return _reduce_module._SUMS
    raise AttributeError(f"module 'barecuda.gpuarray' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "_SUMS"])
