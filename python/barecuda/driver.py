# SPDX-License-Identifier: MIT
"""The CUDA Driver API: devices, contexts, memory, copies, modules, streams, events.

Everything here is implemented in C by ``barecuda._driver``; this module re-exports
it under PyCUDA's names and adds the header enums as ``enum.IntEnum`` classes
(``device_attribute``, ``ctx_flags``, ``limit`` ...), built on first use.
"""

from __future__ import annotations

import abc as _abc
import enum as _enum
import typing as _typing

from barecuda import _driver
from barecuda._driver import *  # noqa: F401,F403  (the public C API)
from barecuda._driver import (  # noqa: F401  (named for linters and readers)
    CompileError,
    Context,
    Device,
    Error,
    LaunchError,
    LogicError,
    MemoryError,
    RuntimeError,
    init,
    get_driver_version,
)

# The C functions are this face's own, as the C types are (their type names say
# barecuda.driver): their __module__ names it, for reprs, pickles and the API reference
# (barecuda.trace re-exports the NVTX calls and lists them on its page too).
for _name, _obj in vars(_driver).items():
    if type(_obj) is type(len) and not _name.startswith("_") and globals().get(_name) is _obj:
        _obj.__module__ = __name__
del _name, _obj


class _CompileErrorMessage:
    """CompileError.msg where the raiser set none: the exception's message."""

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        return str(obj.args[0]) if obj.args else ""


# PyCUDA's CompileError(msg, command_line, stdout=None, stderr=None) attributes on every
# CompileError, whoever raised it; NVRTC's set them on the instance (_compile/errors.py).
CompileError.msg = _CompileErrorMessage()  # type: ignore[attr-defined]
CompileError.command_line = None  # type: ignore[attr-defined]
CompileError.stdout = None  # type: ignore[attr-defined]
CompileError.stderr = None  # type: ignore[attr-defined]

if _typing.TYPE_CHECKING:
    from typing import Any

    import numpy.typing as _npt

    from barecuda._driver import DeviceAllocation, Stream, _DevicePointer

# The header enums (device_attribute, ctx_flags, ...): classes of this module,
# made on first use by barecuda._core.enums (which _driver asks for them too).
from barecuda._core.enums import (  # noqa: E402
    _ALIASES,
    _NamedIntEnum,
    _NamedIntFlag,
    _enum_for_driver,
    _enum_names,
    _made,
    _make_enum,
    enum_names as enum_names,
)
from barecuda._core import enums as _enums  # noqa: E402
# `await stream`, `await event`, Stream.done(), Event.done(): registers their awaiter
from barecuda._core import aio as _aio  # noqa: E402,F401


def __getattr__(name: str) -> Any:
    cls = _enums.get(name)   # AttributeError for a name that is no enum
    globals()[name] = cls
    return cls


def get_version() -> tuple[int, int, int]:
    """(major, minor, 0): the CUDA version of the headers barecuda was built with."""
    v = _driver.CUDA_VERSION
    return (v // 1000, v % 1000 // 10, 0)


# "name as name": re-exported for type checkers too (mypy --strict, no implicit re-export).
from barecuda._core.cuda_arrays import (  # noqa: E402
    dtype_to_array_format as dtype_to_array_format,
    gpuarray_to_array as gpuarray_to_array,
    make_multichannel_2d_array as make_multichannel_2d_array,
    matrix_to_array as matrix_to_array,
    np_to_array as np_to_array,
)


# {{{ argument handlers: In / Out / InOut (copy a host array around one launch)

class ArgumentHandler:
    """Base of In, Out and InOut: a host NumPy array passed to a kernel through a
    temporary device copy.  Function.__call__ (and launch_ex) recognise any object
    with get_device_alloc() (its memory is what the kernel gets) and call its
    pre_call(stream) and post_call(stream) where it has them; a subclass may
    define get_device_alloc() alone, without calling this __init__."""

    def __init__(self, ary: _npt.NDArray[Any]) -> None:  # PyCUDA's parameter name
        import numpy

        array = ary
        if not isinstance(array, numpy.ndarray):
            raise TypeError(f"{type(self).__name__}() needs a numpy.ndarray, not "
                            f"{type(array).__name__}")
        if not (array.flags.c_contiguous or array.flags.f_contiguous):
            raise ValueError(f"{type(self).__name__}(): the array must be contiguous")
        if array.dtype.hasobject:
            raise TypeError(f"{type(self).__name__}(): arrays of Python objects cannot go "
                            "to the GPU")
        self.array = array
        self.dev_alloc: DeviceAllocation | None = None

    def get_device_alloc(self) -> DeviceAllocation:
        """The DeviceAllocation holding the device copy of the array (allocated on first use).

        The size is ``max(array.nbytes, 1)``; the launch passes its address to the kernel.
        Raises driver.MemoryError when the device memory is exhausted.
        """
        if self.dev_alloc is None:
            self.dev_alloc = _driver.mem_alloc(max(self.array.nbytes, 1))
        return self.dev_alloc

    def pre_call(self, stream: Stream | None) -> None:
        """pre_call(stream): called by the launch before the kernel starts.

        `stream` is the launch's Stream, or None for the default stream.  The base
        class does nothing; In and InOut copy the host array to the device here.
        The base class has no post_call: the launch calls post_call(stream) only on
        handlers that define it (Out and InOut), after the kernel has finished when
        `stream` is None, and keeps the memory of get_device_alloc() alive until a
        given `stream` is done.
        """
        pass


def _to_device(handler, stream):
    if handler.array.nbytes == 0:
        return
    if stream is None:
        _driver.memcpy_htod(handler.get_device_alloc(), handler.array)
    else:
        _driver.memcpy_htod_async(handler.get_device_alloc(), handler.array, stream)


def _from_device(handler, stream):
    if handler.array.nbytes == 0:
        return
    if stream is None:
        _driver.memcpy_dtoh(handler.array, handler.get_device_alloc())
    else:
        _driver.memcpy_dtoh_async(handler.array, handler.get_device_alloc(), stream)


class In(ArgumentHandler):
    """Copy the array to the device before the launch."""

    def pre_call(self, stream: Stream | None) -> None:
        """pre_call(stream): copy the host array to the device copy before the launch.

        Queued on `stream` when given (page-locked host memory makes it truly async),
        synchronous with stream None (memcpy_htod: pageable arrays of 1 MiB or more go
        through the staging buffers, at to_gpu's rate).  Nothing is copied for an empty
        array.
        """
        _to_device(self, stream)


class Out(ArgumentHandler):
    """Copy the device data back into the array after the launch."""

    def __init__(self, ary: _npt.NDArray[Any]) -> None:  # PyCUDA's parameter name
        super().__init__(ary)
        if not ary.flags.writeable:
            raise ValueError("Out(): the array must be writeable")

    def post_call(self, stream: Stream | None) -> None:
        """post_call(stream): copy the device data back into the host array after the launch.

        Queued on `stream` when given (read the array only after synchronizing it), else
        synchronous (memcpy_dtoh, staged for pageable arrays of 1 MiB or more); the device
        copy is kept alive until the stream is done.
        """
        _from_device(self, stream)


class InOut(In, Out):
    """Copy the array to the device before the launch and back after it."""

    def post_call(self, stream: Stream | None) -> None:
        """post_call(stream): copy the device data back into the host array (as Out.post_call)."""
        Out.post_call(self, stream)

# }}}


class PointerHolderBase:
    """Base for objects that hold device memory allocated elsewhere (PyCUDA's name).

    A subclass defines ``get_pointer()`` returning the device address as an int; its
    instances are then accepted wherever a device pointer is (kernel arguments,
    copies, memset, ``GPUArray(gpudata=...)``) through ``__int__``/``__index__``.
    """

    def get_pointer(self) -> int:
        """The device address held (an int); subclasses must define it."""
        raise NotImplementedError(f"{type(self).__name__} must define get_pointer()")

    def as_buffer(self, size: int, offset: int = 0) -> memoryview:
        """A writable memoryview of `size` bytes at get_pointer() + `offset`, for the CPU.

        Only memory the CPU can read directly (managed or page-locked host memory)
        can be viewed: device-only memory, or an address CUDA does not know, raises
        LogicError; ValueError when the span runs past the allocation.  The view keeps
        this object alive, not the memory it points to.
        """
        return _driver._host_buffer(self, self.get_pointer(), size, offset)

    def __int__(self) -> int:
        return int(self.get_pointer())

    __index__ = __int__


# {{{ PyCUDA's remaining driver-level names

from barecuda._core.pools import (  # noqa: E402,F401  (PyCUDA's driver exposes the pools too)
    DeviceMemoryPool,
    PageLockedAllocator,
    PageLockedMemoryPool,
    PooledHostAllocation,
    bitlog2,
)

CUDA_DEBUGGING = False


def set_await_spin(seconds: float) -> float:
    """Set for how long, in seconds, each ``await stream`` or ``await event`` is also
    asked about from its event loop (an event query on each iteration of the loop,
    which does not sleep meanwhile); returns the previous value.  From 0 to 1;
    2e-3 by default.  Within that window an await wakes as fast as a spinning
    ``synchronize()``; after it, the driver's stream callback wakes the loop through
    an fd (about 0.2 ms on an H200).  0: only the callback, no CPU spent at all.
    Process-wide; it applies to the awaits made after the call."""
    return _aio.set_spin(seconds)


def set_debugging(flag: bool = True) -> None:
    """Set the module flag CUDA_DEBUGGING (PyCUDA's name).  When true,
    compiler.SourceModule asks for device debug information, as in PyCUDA."""
    global CUDA_DEBUGGING
    CUDA_DEBUGGING = bool(flag)


def have_gl_ext() -> bool:
    """False: barecuda has no OpenGL interoperability (PyCUDA's pycuda.gl)."""
    return False


def mem_alloc_like(ary: Any) -> DeviceAllocation:
    """Device memory of ``ary.nbytes`` bytes (uninitialised) for an array-like `ary`."""
    try:
        nbytes = ary.nbytes
    except AttributeError:
        raise TypeError(f"mem_alloc_like() needs an array (an object with .nbytes), not "
                        f"{type(ary).__name__}") from None
    return _driver.mem_alloc(nbytes)


def to_device(bf_obj: Any) -> DeviceAllocation:
    """Copy any contiguous buffer (a NumPy array, bytes, ...) to new device memory and
    return the DeviceAllocation (of the buffer's size in bytes; 1 byte for an empty
    buffer, since the driver has no empty allocations).  Copied with memcpy_htod, so a
    pageable buffer of 1 MiB or more is staged (see memcpy_htod)."""
    import numpy

    if isinstance(bf_obj, numpy.ndarray) and bf_obj.dtype.hasobject:
        raise TypeError("to_device(): arrays of Python objects cannot go to the GPU")
    try:
        view = memoryview(bf_obj)
    except TypeError:
        raise TypeError(f"to_device() needs an object with the buffer protocol (a NumPy "
                        f"array, bytes, ...), not {type(bf_obj).__name__}") from None
    with view:
        if not view.contiguous:
            view = memoryview(view.tobytes())
        result = _driver.mem_alloc(max(view.nbytes, 1))
        if view.nbytes:
            _driver.memcpy_htod(result, view)
    return result


def from_device(devptr: _DevicePointer, shape: int | tuple[int, ...], dtype: _npt.DTypeLike,
                order: str = "C") -> _npt.NDArray[Any]:
    """A new NumPy array of `shape`, `dtype` and `order` filled from device memory
    `devptr` (anything a copy takes as device memory), with memcpy_dtoh (staged for
    pageable arrays of 1 MiB or more)."""
    import numpy

    result = _driver._host_empty(shape, dtype, order)   # large ones from the host pool
    if result.nbytes:
        _driver.memcpy_dtoh(result, devptr)
    return result


def from_device_like(devptr: _DevicePointer, other_ary: _npt.NDArray[Any]) -> _npt.NDArray[Any]:
    """A new NumPy array shaped and typed like `other_ary`, filled from `devptr`."""
    import numpy

    result = numpy.empty_like(other_ary)
    if result.nbytes:
        _driver.memcpy_dtoh(result, devptr)
    return result


def aligned_zeros_like(array: _npt.NDArray[Any], alignment: int = 4096) -> _npt.NDArray[Any]:
    """aligned_zeros with the shape, dtype and order (C or F) of `array`."""
    result = _driver.aligned_empty_like(array, alignment=alignment)
    result.fill(0)
    return result


# PyCUDA's names of the host-array copies (memcpy_htoa / memcpy_atoh here)
py_memcpy_htoa = _driver.memcpy_htoa
py_memcpy_atoh = _driver.memcpy_atoh

# PyCUDA names the host allocation classes by kind; barecuda has one class for both.
PagelockedHostAllocation = _driver.HostAllocation
AlignedHostAllocation = _driver.HostAllocation


class HostPointer(metaclass=_abc.ABCMeta):
    """Host memory the driver knows of (PyCUDA's base class of HostAllocation and
    RegisteredHostMemory): ``isinstance(ary.base, HostPointer)`` holds for arrays
    from pagelocked_*, aligned_* and register_host_memory.  Each has
    ``get_device_pointer()``."""

    def get_device_pointer(self) -> int:
        """The device address of this host memory (cuMemHostGetDevicePointer);
        HostAllocation and RegisteredHostMemory implement it."""
        raise NotImplementedError(f"{type(self).__name__}.get_device_pointer()")


# PyCUDA's name for the base of managed allocations (the .base of managed_empty's
# arrays): barecuda's is ManagedAllocation itself.
ManagedAllocationOrStub = _driver.ManagedAllocation


HostPointer.register(_driver.HostAllocation)
HostPointer.register(_driver.RegisteredHostMemory)


def initialize_profiler(config_file: str, output_file: str, output_mode: int) -> None:
    """Not available: cuProfilerInitialize was removed from the CUDA driver in CUDA 12.

    Always raises driver.RuntimeError.  Use start_profiler()/stop_profiler() under a
    profiler such as Nsight Systems (``nsys --capture-range=cudaProfilerApi``).
    """
    raise RuntimeError("initialize_profiler(): cuProfilerInitialize was removed in CUDA 12; "
                       "run under Nsight Systems and use start_profiler()/stop_profiler()")


class profiler_output_mode(_enum.IntEnum):
    """Output formats of PyCUDA's initialize_profiler (CUoutput_mode)."""

    KEY_VALUE_PAIR = 0
    CSV = 1


# texture-reference constants of cuda.h (texture references themselves are gone
# since CUDA 12: use TextureObject)
TRSA_OVERRIDE_FORMAT = 0x01
TRSF_READ_AS_INTEGER = 0x01
TRSF_NORMALIZED_COORDINATES = 0x02
TR_DEFAULT = -1

# }}}

