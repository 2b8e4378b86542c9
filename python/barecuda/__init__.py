# SPDX-License-Identifier: MIT
"""barecuda: a thin, fast binding of the CUDA Driver API and NVRTC, written in C.

It speaks PyCUDA's vocabulary (``barecuda.driver``, ``barecuda.compiler``,
``barecuda.gpuarray`` ...), so a PyCUDA program runs after changing its imports.
Importing barecuda needs no GPU and no driver: the driver is loaded by the first
call that needs it.
"""

__version__ = "0.1.0"

# The public modules, in the order the API reference lists them (docs/reference and
# tests/test_docs.py walk these), and the dunder methods that are part of their
# public face (the rest are object machinery).
PUBLIC_MODULES = ("barecuda.driver", "barecuda.compiler", "barecuda.gpuarray",
                  "barecuda.elementwise", "barecuda.reduction", "barecuda.scan",
                  "barecuda.cumath", "barecuda.curandom", "barecuda.tools",
                  "barecuda.characterize", "barecuda.sparse", "barecuda.nccl",
                  "barecuda.mpi", "barecuda.jupyter")
PUBLIC_DUNDERS = frozenset({"__call__", "__enter__", "__exit__", "__cuda_array_interface__",
                            "__dlpack__", "__dlpack_device__", "__cuda_stream__"})


def load_ipython_extension(ipython):
    """``%load_ext barecuda`` in IPython or Jupyter: the ``%%cuda`` cell magic and
    rich displays (see barecuda.jupyter, imported only now, with IPython)."""
    from barecuda.jupyter import load_ipython_extension as load
    load(ipython)


def unload_ipython_extension(ipython):
    """``%unload_ext barecuda``: remove the displays load_ipython_extension added."""
    from barecuda.jupyter import unload_ipython_extension as unload
    unload(ipython)
