# SPDX-License-Identifier: MIT
"""The CUDA Driver API: devices, contexts, memory, copies, modules, streams, events.

Everything here is implemented in C by ``barecuda._driver``; this module re-exports
it under PyCUDA's names and adds the header enums as ``enum.IntEnum`` classes
(``device_attribute``, ``ctx_flags``, ``limit`` ...), built on first use.
"""

import enum as _enum

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

# PyCUDA's spelling for enums whose header name reads differently.
_ALIASES = {
    "compute_mode": "computemode",
    "memory_type": "memorytype",
    "shared_config": "sharedconfig",
    "resource_type": "resourcetype",
    "mem_advice": "mem_advise",
}

_tables = None
_made = {}


def _enum_names():
    global _tables
    if _tables is None:
        _tables = _driver._enum_tables()
    return _tables


def _make_enum(name):
    cls = _made.get(name)
    if cls is None:
        members = _enum_names()[_ALIASES.get(name, name)]
        base = _enum.IntFlag if name.endswith("_flags") else _enum.IntEnum
        cls = base(name, members, module=__name__)
        cls.__qualname__ = name
        _made[name] = cls
    return cls


def enum_names():
    """Names of every enum of the CUDA headers available here (plus PyCUDA aliases)."""
    return sorted(set(_enum_names()) | set(_ALIASES))


def __getattr__(name):
    if name in _ALIASES or name in _enum_names():
        cls = _make_enum(name)
        globals()[name] = cls
        return cls
    raise AttributeError(f"module 'barecuda.driver' has no attribute {name!r}")


def get_version():
    """(major, minor, 0): the CUDA version of the headers barecuda was built with."""
    v = _driver.CUDA_VERSION
    return (v // 1000, v % 1000 // 10, 0)


from barecuda._arrays import dtype_to_array_format, np_to_array, matrix_to_array, gpuarray_to_array, make_multichannel_2d_array  # noqa: E402,F401
