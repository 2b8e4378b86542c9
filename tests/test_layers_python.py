# SPDX-License-Identifier: MIT
"""The floors of python/barecuda/ are checked: the project's import-linter contracts
([tool.importlinter] in pyproject.toml, run by .ci/run as `lint-imports`) pass on a
copy of the package's .py files and fail on copies with an upward import or a cycle
planted in them.  No GPU, no build: import-linter reads the files only."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("importlinter", reason="import-linter is not installed "
                    "(pip install '.[test]' installs the pinned version on CPython 3.11 and newer)")

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python" / "barecuda"
CONFIG = ROOT / "pyproject.toml"

if not PACKAGE.is_dir() or not CONFIG.is_file():
    pytest.skip("needs the source tree (python/barecuda/, pyproject.toml)",
                allow_module_level=True)


def lint(tree):
    """Run lint-imports with the project's contracts on the package copy in `tree`
    (the working directory comes first on its sys.path, before an installed barecuda)."""
    # An editable install (meson-python's) puts a finder for barecuda before sys.path;
    # it would send grimp to a virtual package path with no files, and the copy would
    # go unread ("No matches for ignored import ...").  It is dropped here.
    code = "import sys; sys.meta_path[:] = [f for f in sys.meta_path " \
           "if type(f).__name__ != 'MesonpyMetaFinder']; " \
           "from importlinter.cli import lint_imports_command; " \
           "sys.argv[0] = 'lint-imports'; lint_imports_command()"
    r = subprocess.run([sys.executable, "-c", code, "--no-cache", str(CONFIG)], cwd=tree,
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=""))
    return r.returncode, r.stdout + r.stderr


def copy_package(tmp_path):
    """The package's .py files (no build products, no caches) under tmp_path/barecuda."""
    dest = tmp_path / "barecuda"
    for src in PACKAGE.rglob("*.py"):
        if "__pycache__" in src.parts:
            continue
        target = dest / src.relative_to(PACKAGE)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)
    return dest


def plant(pkg, module, line):
    path = pkg / module
    path.write_text(path.read_text() + f"\n{line}  # planted by test_layers_python\n")


def test_the_package_keeps_its_contracts(tmp_path):
    copy_package(tmp_path)
    rc, out = lint(tmp_path)
    assert rc == 0, out
    assert "Contracts: 3 kept, 0 broken." in out


def test_no_python_module_is_longer_than_1000_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 1000}
    assert not long


@pytest.mark.parametrize("module, line, broken", [
    # a kernel template reaching up to the arrays floor for GPUArray
    ("_kernels/cache.py", "from barecuda import gpuarray as _up",
     ["barecuda._kernels is not allowed to import barecuda.gpuarray"]),
    # a floor's machinery importing its own face (driver.py <-> _arrays.py was one)
    ("_core/enums.py", "import barecuda.driver",
     ["barecuda._core is not allowed to import barecuda.driver"]),
    # the library importing a tool built on it
    ("_array/core.py", "from barecuda import trace as _up",
     ["barecuda._array is not allowed to import barecuda.trace",
      "The library never imports the tools built on it BROKEN"]),
])
def test_an_upward_import_breaks_the_floors(tmp_path, module, line, broken):
    pkg = copy_package(tmp_path)
    plant(pkg, module, line)
    rc, out = lint(tmp_path)
    assert rc != 0, out
    assert "Floors: tools > arrays > kernel templates > compilation > driver objects BROKEN" in out
    for text in broken:
        assert text in out, out


def test_a_cycle_inside_a_floor_is_found(tmp_path):
    # GPUArray (_array/array.py) is built on _array/core.py: core importing it back
    # closes a circle that no layer crosses
    pkg = copy_package(tmp_path)
    plant(pkg, "_array/core.py", "from barecuda._array import array as _back")
    rc, out = lint(tmp_path)
    assert rc != 0, out
    assert "No two modules (or subpackages) of one package import each other BROKEN" in out
    assert "No cycles are allowed in barecuda._array." in out
    assert "Floors: tools > arrays > kernel templates > compilation > driver objects KEPT" in out


def test_a_typing_only_import_counts_too(tmp_path):
    # `if TYPE_CHECKING:` imports are in the graph: a lower floor never names a
    # higher one, not even for annotations
    pkg = copy_package(tmp_path)
    plant(pkg, "_kernels/scan.py",
          "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from barecuda.gpuarray import GPUArray")
    rc, out = lint(tmp_path)
    assert rc != 0, out
    assert "barecuda._kernels is not allowed to import barecuda.gpuarray" in out
