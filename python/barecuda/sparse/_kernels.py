# SPDX-License-Identifier: MIT
"""The compiled sparse kernels (templates/sparse.cu) of the current context, one
module per value dtype, kept in the context's kernel cache; and the argument checks
the SpMV objects share."""

import numpy as np

from barecuda.elementwise import cache_store, context_cache, device_blocks, render, source_module
from barecuda.tools import dtype_to_ctype

COO_BLOCK = 256
COO_BLOCKS_PER_SM = 8


def source(dtype):
    """The CUDA source of the sparse kernels for values of `dtype`."""
    return render("sparse.cu", value_t=dtype_to_ctype(np.dtype(dtype)))


def functions(dtype, cache=None):
    """(bc_spmv_pkt, bc_spmv_coo) prepared for the current context."""
    if cache is None:
        cache = context_cache()
    key = ("sparse", np.dtype(dtype).str)
    ent = cache.get(key)
    if ent is None:
        mod = source_module(source(dtype))
        pkt = mod.get_function("bc_spmv_pkt")
        pkt.prepare("PPPPPPPi")
        coo = mod.get_function("bc_spmv_coo")
        coo.prepare("iPPPPP")
        ent = cache_store(cache, key, (pkt, coo, mod))
    return ent[0], ent[1]


def coo_grid(nnz, cache=None):
    """Blocks of COO_BLOCK threads for nnz coordinate entries (32 per warp-step)."""
    sm = device_blocks(cache)[0]
    want = -(-nnz // COO_BLOCK)
    return max(1, min(want, sm * COO_BLOCKS_PER_SM))


def check_vector(v, name, dtype, n, who):
    """`v` must be a contiguous 1-D-sized GPUArray of `dtype` with n elements."""
    from barecuda.gpuarray import GPUArray
    if not isinstance(v, GPUArray):
        raise TypeError(f"{who}: {name} must be a GPUArray, not {type(v).__name__}")
    if v.dtype != dtype:
        raise TypeError(f"{who}: {name} has dtype {v.dtype}, the matrix holds {dtype}")
    if v.size != n:
        raise ValueError(f"{who}: {name} has {v.size} elements (shape {v.shape}), "
                         f"the matrix needs {n}")
    if not v.flags.forc:
        raise ValueError(f"{who}: {name} is not contiguous; pass a contiguous copy")
    return v
