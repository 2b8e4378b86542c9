# SPDX-License-Identifier: MIT
"""barecuda: a thin, fast binding of the CUDA Driver API and NVRTC, written in C.

It speaks PyCUDA's vocabulary (``barecuda.driver``, ``barecuda.compiler``,
``barecuda.gpuarray`` ...), so a PyCUDA program runs after changing its imports.
Importing barecuda needs no GPU and no driver: the driver is loaded by the first
call that needs it.
"""

__version__ = "0.1.0"
