# SPDX-License-Identifier: MIT
"""barecuda.gpuarray for the modules that gpuarray itself imports (shapes, logic,
gathers, interop, arithmetic, creation, reductions): they reach GPUArray through gpuarray_module(), fetched on first
use, so that importing gpuarray never needs them to import it back."""

from __future__ import annotations

from types import ModuleType

_gpuarray: ModuleType | None = None


def gpuarray_module() -> ModuleType:

    """The barecuda.gpuarray module (imported on the first call, then kept)."""
    global _gpuarray
    if _gpuarray is None:
        from barecuda import gpuarray
        _gpuarray = gpuarray
    return _gpuarray
