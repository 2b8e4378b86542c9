# SPDX-License-Identifier: MIT
"""Prefix scans with any associative operator, as ``pycuda.scan``.

    cumsum = InclusiveScanKernel(np.int32, "a+b")
    cumsum(x_gpu)                 # in place, as PyCUDA; or cumsum(x_gpu, out_gpu)

`scan_expr` combines `a` (the earlier part) and `b` (the later part); the order of
the elements is kept, so it need not be commutative.  ExclusiveScanKernel needs
`neutral`, the identity of scan_expr, which becomes the first output.  Rendered from
``templates/scan.cu``: tiles scanned in shared memory, tile totals scanned
recursively, then added to the following tiles.
"""

# The face of the scans (barecuda._kernels.scan).

from __future__ import annotations

from barecuda._kernels.scan import (  # noqa: F401
    BLOCK,
    ITEMS,
    TILE,
    ExclusiveScanKernel,
    InclusiveScanKernel,
    _alloc,
    _ScanKernelBase,
    cache_store,
    context_cache,
    dtype_to_ctype,
    headers_for,
    render,
    source_module,
)
from barecuda.compiler import SourceModule  # noqa: F401 (PyCUDA's scan has it)

__all__ = ["InclusiveScanKernel", "ExclusiveScanKernel"]
