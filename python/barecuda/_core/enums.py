# SPDX-License-Identifier: MIT
"""The enums of the CUDA headers as ``enum.IntEnum``/``IntFlag`` classes
(``device_attribute``, ``ctx_flags``, ``limit`` ...), built on first use.

barecuda.driver shows them (module ``barecuda.driver``, so their members pickle by
that name); barecuda._driver asks for them through the factory registered here,
for the enum-valued results it hands out (Device.get_attributes() keys,
Context.get_cache_config(), ...): the C floor never imports a Python module.
"""

from __future__ import annotations

import enum as _enum
from typing import Any

from barecuda import _driver
from barecuda._core.names import public

#: the module that shows the enums (their __module__, for reprs and pickles)
HOME = "barecuda.driver"

# PyCUDA's spelling for enums whose header name reads differently.
_ALIASES = {
    "compute_mode": "computemode",
    "memory_type": "memorytype",
    "shared_config": "sharedconfig",
    "resource_type": "resourcetype",
    "mem_advice": "mem_advise",
}

# PyCUDA's member names where the generated ones differ: (PyCUDA's name, ours).  In
# _FIRST the PyCUDA name leads (it is the name str() gives; ours stays an alias);
# in _LAST it is added as an alias of ours.
_MEMBERS_FIRST = {
    "ipc_mem_flags": (("LAZY_ENABLE_PEER_ACCESS", "ACCESS"),),
    "jit_fallback": (("PREFER_PTX", "PTX"), ("PREFER_BINARY", "BINARY")),
}
_MEMBERS_LAST = {
    "array3d_flags": (("ARRAY3D_LAYERED", "LAYERED"), ("ARRAY3D_2DARRAY", "2DARRAY")),
}


def _with_pycuda_names(name, members):
    values = dict(members)
    first = [(p, values[o]) for p, o in _MEMBERS_FIRST.get(name, ()) if o in values]
    last = [(p, values[o]) for p, o in _MEMBERS_LAST.get(name, ()) if o in values]
    return tuple(first) + tuple(members) + tuple(last)


_tables = None
_made: dict[str, type] = {}


def _enum_names():
    global _tables
    if _tables is None:
        _tables = _driver._enum_tables()
    return _tables


class _NamedIntEnum(_enum.IntEnum):
    """IntEnum whose str() is the member's name, as PyCUDA's (Boost.Python) enums:
    ``str(device_attribute.WARP_SIZE) == "WARP_SIZE"``.  Everything else is int's:
    ==, hashing, arithmetic, ``"%d" % m`` and ``f"{m:d}"`` give the number."""

    def __str__(self) -> str:
        return self._name_

    # int's: "" gives str() (the name), "d", "03d", "x"... the number.  Enum's own
    # __format__ on CPython 3.10 formats str() whenever __str__ is overridden, so
    # f"{m:d}" raised ValueError there.
    def __format__(self, spec: str) -> str:
        return int.__format__(self, spec)


class _NamedIntFlag(_enum.IntFlag):
    """IntFlag whose str() is the member's name ("PORTABLE"), or the names of a
    combination joined by "|" ("PORTABLE|DEVICEMAP"); the number for a value with
    no name (0 when no member is 0, or bits the headers do not name)."""

    def __str__(self) -> str:
        name = self._name_
        if name is None:    # a combination on CPython 3.10, which names only members
            value = int(self)
            bits = sorted((m for m in type(self) if m._value_ and m._value_ & value == m._value_
                           and m._value_ & (m._value_ - 1) == 0), key=lambda m: m._value_)
            if bits and sum(m._value_ for m in bits) == value:
                name = "|".join(m._name_ for m in bits)
        return name if name else str(int(self))

    def __format__(self, spec: str) -> str:     # as _NamedIntEnum's
        return int.__format__(self, spec)


_NamedIntEnum.__module__ = _NamedIntFlag.__module__ = HOME


def _make_enum(name):
    cls = _made.get(name)
    if cls is None:
        members = _with_pycuda_names(name, _enum_names()[_ALIASES.get(name, name)])
        base = _NamedIntFlag if name.endswith("_flags") else _NamedIntEnum
        cls = base(name, members, module=HOME)
        cls.__qualname__ = name
        kind = "IntFlag" if base is _NamedIntFlag else "IntEnum"
        cls.__doc__ = (f"{name}: the values of this enum of the CUDA headers cuda.h, "
                       f"as an {kind} (members named without their CU_ prefix; "
                       f"str() is the member's name, as in PyCUDA).")
        _made[name] = cls
    return cls


def is_enum(name: str) -> bool:
    """Whether `name` is an enum of the headers (or a PyCUDA alias of one)."""
    return name in _ALIASES or name in _enum_names()


def get(name: str) -> Any:
    """The enum class `name` (AttributeError, as barecuda.driver's, when there is none)."""
    if is_enum(name):
        return _make_enum(name)
    raise AttributeError(f"module {HOME!r} has no attribute {name!r}")


@public(HOME)
def enum_names() -> list[str]:
    """Names of every enum of the CUDA headers available here (plus PyCUDA aliases)."""
    return sorted(set(_enum_names()) | set(_ALIASES))


def _enum_for_driver(name: str) -> type:
    # _driver's factory: the classes of the enum-valued results it hands out.
    cls: type = get(name)
    return cls


_driver._set_enum_factory(_enum_for_driver)
