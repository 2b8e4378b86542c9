# SPDX-License-Identifier: MIT
"""Run a PyCUDA program or library unmodified: ``import pycuda.X`` gives ``barecuda.X``.

Nothing here is active unless asked for, in one of three ways:

* the command, for a script or a module, the way ``coverage run`` takes them::

      python -m barecuda.as_pycuda script.py ARGS...
      python -m barecuda.as_pycuda -m pytest test/ ...

  It also sets ``BARECUDA_AS_PYCUDA=1`` for the processes the program starts
  (pytest-xdist workers, multiprocessing), so that they see the same modules;
* the environment variable ``BARECUDA_AS_PYCUDA=1``, honoured when any Python
  interpreter of this environment starts (a one-line ``barecuda-as-pycuda.pth`` in
  site-packages that reads the variable and imports nothing unless it is set);
* the function ``install()``, for code (``uninstall()`` takes the alias back).

Under the alias ``import pycuda.driver as drv`` binds the very module object
``barecuda.driver`` (``sys.modules["pycuda.driver"] is barecuda.driver``), for every
module barecuda has (``driver``, ``compiler``, ``gpuarray``, ``elementwise``,
``reduction``, ``scan``, ``cumath``, ``curandom``, ``tools``, ``characterize``,
``autoinit``, ``autoprimaryctx``, ``debug``, ``sparse`` ...).  The package ``pycuda``
itself carries PyCUDA's ``VERSION``, ``VERSION_STATUS`` and ``VERSION_TEXT`` (the PyCUDA
release whose API barecuda follows) and ``__barecuda__`` (barecuda's version), which a
program can read to tell which binding it runs on.  A module PyCUDA has and barecuda
has not (``pycuda.gl``, ``pycuda.compyte``) raises ModuleNotFoundError naming it.

When a real PyCUDA is installed as well, the alias still wins (it sits first on
``sys.meta_path``), and says so once on standard error; ``install()`` refuses when the
real PyCUDA is already imported, since two bindings must not share one process.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types
from typing import Any, Sequence

__all__ = ["install", "uninstall", "installed", "PYCUDA_VERSION", "ENV"]

#: The PyCUDA release whose API barecuda follows (``pycuda.VERSION`` under the alias).
PYCUDA_VERSION = (2026, 1)
#: The environment variable that turns the alias on at interpreter start.
ENV = "BARECUDA_AS_PYCUDA"


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``pycuda`` and ``pycuda.*`` and loads them as barecuda's modules."""

    def find_spec(self, fullname: str, path: Any = None,
                  target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "pycuda" and not fullname.startswith("pycuda."):
            return None
        if fullname == "pycuda":
            return importlib.machinery.ModuleSpec("pycuda", self, is_package=True)
        real = "barecuda" + fullname[len("pycuda"):]
        try:
            spec = importlib.util.find_spec(real)
        except ModuleNotFoundError:
            spec = None
        if spec is None:
            raise ModuleNotFoundError(
                f"No module named {fullname!r}: barecuda, which answers for pycuda here "
                f"(barecuda.as_pycuda), has no {real!r}", name=fullname)
        return importlib.machinery.ModuleSpec(
            fullname, self, is_package=spec.submodule_search_locations is not None)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        if spec.name == "pycuda":
            return _package()
        # The same object as barecuda's module: importlib keeps the attributes it
        # already has (__name__, __spec__, __file__), so it stays barecuda.X.
        return importlib.import_module("barecuda" + spec.name[len("pycuda"):])

    def exec_module(self, module: types.ModuleType) -> None:
        pass  # barecuda's module ran when it was imported


def _package() -> types.ModuleType:
    import barecuda

    pkg = types.ModuleType("pycuda", "PyCUDA's names, answered by barecuda "
                           "(barecuda.as_pycuda).")
    pkg.VERSION = PYCUDA_VERSION  # type: ignore[attr-defined]
    pkg.VERSION_STATUS = ""  # type: ignore[attr-defined]
    pkg.VERSION_TEXT = ".".join(map(str, PYCUDA_VERSION))  # type: ignore[attr-defined]
    pkg.__barecuda__ = barecuda.__version__  # type: ignore[attr-defined]
    pkg.__path__ = []  # a package: its submodules come through the finder
    return pkg


_finder: _Alias | None = None
_told = False


def _real_pycuda() -> str | None:
    """Where an installed PyCUDA lives (its package folder), or None.  Imports nothing."""
    for entry in sys.path:
        init = os.path.join(entry or ".", "pycuda", "__init__.py")
        if os.path.isfile(init) and os.path.isfile(
                os.path.join(entry or ".", "pycuda", "driver.py")):
            return os.path.dirname(init)
    return None


def installed() -> bool:
    """Whether the alias is on in this process."""
    return _finder is not None and _finder in sys.meta_path


def install(quiet: bool = False) -> None:
    """Make ``import pycuda`` and ``import pycuda.X`` give barecuda's modules.

    Idempotent.  Raises RuntimeError if a real PyCUDA is already imported in this
    process.  When a real PyCUDA is installed but not imported, says once on standard
    error that barecuda answers for it (unless `quiet`)."""
    global _finder, _told
    if installed():
        return
    already = sys.modules.get("pycuda")
    if already is not None and not hasattr(already, "__barecuda__"):
        raise RuntimeError(
            f"barecuda.as_pycuda.install(): PyCUDA is already imported in this process "
            f"(from {getattr(already, '__file__', None) or 'an unknown place'}); install the "
            f"alias before anything imports pycuda, e.g. with python -m barecuda.as_pycuda "
            f"or {ENV}=1")
    real = _real_pycuda()
    if real is not None and not quiet and not _told:
        _told = True
        import barecuda

        print(f"barecuda.as_pycuda: 'import pycuda' runs barecuda {barecuda.__version__}; "
              f"the PyCUDA installed at {real} is not used", file=sys.stderr)
    _finder = _Alias()
    sys.meta_path.insert(0, _finder)


def uninstall() -> None:
    """Take the alias back: later imports of pycuda find whatever else is installed.

    The ``pycuda`` entries of ``sys.modules`` that the alias made are removed (the
    barecuda modules themselves stay imported)."""
    global _finder
    if _finder is not None:
        while _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
        _finder = None
    for name in [n for n in sys.modules if n == "pycuda" or n.startswith("pycuda.")]:
        mod = sys.modules[name]
        if name == "pycuda" and hasattr(mod, "__barecuda__") or \
                getattr(mod, "__name__", "").startswith("barecuda"):
            del sys.modules[name]


def _startup() -> None:
    """Called by barecuda-as-pycuda.pth when BARECUDA_AS_PYCUDA is set and not 0."""
    if os.environ.get(ENV, "") not in ("", "0"):
        install()


_USAGE = """\
usage: python -m barecuda.as_pycuda script.py [args ...]
       python -m barecuda.as_pycuda -m module [args ...]

Runs a program written for PyCUDA with barecuda answering its `import pycuda`
(and sets BARECUDA_AS_PYCUDA=1 for the processes it starts)."""


def main(argv: Sequence[str] | None = None) -> int:
    import runpy

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_USAGE, file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    os.environ[ENV] = "1"
    install()
    if args[0] == "-m":
        if len(args) < 2:
            print(_USAGE, file=sys.stderr)
            return 2
        sys.argv = args[1:]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        if not os.path.exists(args[0]):
            print(f"python -m barecuda.as_pycuda: can't open file {args[0]!r}",
                  file=sys.stderr)
            return 2
        sys.argv = args
        sys.path[0] = os.path.dirname(os.path.abspath(args[0]))
        runpy.run_path(args[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    # Run as a script this file is __main__; the alias's state lives in the imported
    # module (the one barecuda-as-pycuda.pth may already have installed).
    from barecuda.as_pycuda import main as _main

    sys.exit(_main())
