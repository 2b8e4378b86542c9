# SPDX-License-Identifier: MIT
"""The array type of the floor above, as the kernel templates see it.

The kernel templates (elementwise, reduction, scan) work on what an array exposes:
``ptr``/``gpudata``, ``dtype``, ``size``, ``shape``, ``strides`` and ``flags``.
Where they must name the type (an ``isinstance`` check, a result to hand back,
another library's array to view) they use what the arrays floor registered here
when it was imported (barecuda._array.array calls register()): they never import
that floor.  Until something registers, no object is an array of this kind
(``array_type`` is a class without instances) and the factories say why they
cannot make one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    #: what the kernel templates take and hand back, for type checkers: the
    #: registered array type (GPUArray), which they know only at run time
    GPUArray = Any


class _NoArrayType:
    """Stands for the array type until the arrays floor registers GPUArray (no
    object is an instance of it)."""


def _no_scalar(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("a reduction's result is a GPUArray, and none can be made before "
                       "barecuda.gpuarray is imported (it registers GPUArray here)")


def _no_view(obj: Any) -> Any:
    raise TypeError(f"{type(obj).__name__} is another library's array: the kernel templates "
                    "view such arrays as GPUArrays, so import barecuda.gpuarray first")


#: the array class (GPUArray once barecuda.gpuarray is imported)
array_type: type = _NoArrayType
#: new_scalar(dtype, allocator, stream): a new 0-d array (reduction results)
new_scalar: Callable[..., Any] = _no_scalar
#: device_view(obj): a zero-copy array viewing another library's device array
#: (CUDA array interface, DLPack), or None when obj is none
device_view: Callable[[Any], Any] = _no_view
#: called with no arguments when the reductions' launch variants change (_tuning):
#: the floors above forget what they cached of the old ones
_tuning_callbacks: list[Callable[[], None]] = []


def register(cls: type, *, scalar: Callable[..., Any], view: Callable[[Any], Any]) -> None:
    """Make `cls` the array type of the kernel templates, with its factories."""
    global array_type, new_scalar, device_view
    array_type, new_scalar, device_view = cls, scalar, view


def on_tuning(callback: Callable[[], None]) -> None:
    """Call `callback` whenever the reductions' launch variants change."""
    _tuning_callbacks.append(callback)


def tuning_changed() -> None:
    """The reductions' launch variants changed: call what on_tuning() registered."""
    for callback in _tuning_callbacks:
        callback()
