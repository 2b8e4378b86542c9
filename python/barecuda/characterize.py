# SPDX-License-Identifier: MIT
"""Facts about the device and the C types barecuda's kernels see, as ``pycuda.characterize``."""

import numpy as np

from barecuda import driver as _drv
from barecuda._array.pycuda_helpers import has_double_support  # noqa: F401  (gpuarray has it too)
from barecuda.tools import context_dependent_memoize  # noqa: F401  (as PyCUDA's module has it)
from barecuda.tools import get_or_register_dtype

__all__ = ["has_double_support", "has_stack", "platform_bits", "sizeof"]


def has_stack():
    """Whether device code has a call stack (compute capability 2.0 and later)."""
    return _drv.Context.get_device().compute_capability() >= (2, 0)


def platform_bits():
    """Pointer width of device code, in bits."""
    return 64


def sizeof(type_name, preamble=""):
    """sizeof(type_name) in device code: from the known C types, else measured on the
    device with a one-thread kernel (which needs a current context)."""
    if not preamble:
        try:
            return get_or_register_dtype(type_name).itemsize
        except TypeError:
            pass
    from barecuda import gpuarray
    from barecuda.elementwise import source_module
    mod = source_module(f"#include <barecuda_complex.cuh>\n{preamble}\n"
                        f"extern \"C\" __global__ void bc_sizeof(unsigned long long *out) "
                        f"{{ out[0] = sizeof({type_name}); }}")
    out = gpuarray.zeros(1, np.uint64)
    mod.get_function("bc_sizeof")(out.gpudata, block=(1, 1, 1), grid=(1, 1))
    return int(out.get()[0])
