# SPDX-License-Identifier: MIT
"""public(): the public module a class or function of a private module belongs to.

A private module of a floor defines what a public face (``barecuda.gpuarray``,
``barecuda.elementwise`` ...) shows: its ``__module__`` names the face, so reprs,
pickles (a class is pickled by module and name) and the API reference read as
before the code moved (NumPy's ``set_module`` does the same).  Naming the face is
a string, not an import: the private module never imports the face above it.
"""

from __future__ import annotations

from typing import TypeVar

_T = TypeVar("_T")


def public(module: str):  # type: ignore[no-untyped-def]
    """Decorator: set the object's ``__module__`` to `module` (a public module's name)."""
    def mark(obj: _T) -> _T:
        obj.__module__ = module  # type: ignore[attr-defined]
        return obj
    return mark
