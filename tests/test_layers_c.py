# SPDX-License-Identifier: MIT
"""tools/check_layers.py, the check that the C units call one way, down the floors
of src/layers.txt (DESIGN.md 1-2): on scratch C files compiled here (named like
real units, so the real table places them), a planted upward call and a planted
cycle fail and a clean downward set passes; with BARECUDA_BUILD_DIR naming a
meson build dir of barecuda, the real objects pass.  CPU only; needs gcc and nm."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / "tools" / "check_layers.py"
TABLE = ROOT / "src" / "layers.txt"

GCC = shutil.which("gcc")
NM = shutil.which("nm")
needs_tools = pytest.mark.skipif(GCC is None or NM is None,
                                reason="needs gcc and nm (binutils) to build and read objects")


def build(tmp_path, units):
    """Compile {unit: C source} as meson lays them out: <dir>/_driver.x.so.p/src_<unit>.c.o."""
    objdir = tmp_path / "_driver.cpython-test.so.p"
    srcdir = tmp_path / "src"
    objdir.mkdir(exist_ok=True)
    srcdir.mkdir(exist_ok=True)
    for unit, code in units.items():
        src = srcdir / f"{unit}.c"
        src.write_text(code)
        subprocess.run([GCC, "-c", "-O1", "-fPIC", "-fvisibility=hidden", "-Wall", str(src),
                        "-o", str(objdir / f"src_{unit}.c.o")], check=True)
    return tmp_path


def check(*args):
    return subprocess.run([sys.executable, str(CHECK), *map(str, args)],
                          capture_output=True, text=True, timeout=600)


# Units of the real table: loader (base) < context < memory < function < argpack.
LOADER = "int bc_loader_fn(int x) { return x + 1; }\n"
CONTEXT_CLEAN = (
    "int bc_loader_fn(int);\n"
    "typedef void (*hook)(void);\n"
    "static hook hooks[4]; static int nhooks;\n"
    "void bc_context_on(hook fn) { hooks[nhooks++] = fn; }\n"   # upper floors register here
    "int bc_context_detach(int x) { for (int i = 0; i < nhooks; i++) hooks[i]();\n"
    "                               return bc_loader_fn(x); }\n")
ARGPACK_CLEAN = (
    "void bc_context_on(void (*fn)(void));\n"
    "int bc_context_detach(int);\n"
    "int bc_args_memo_epoch;\n"
    "static void invalidate(void) { bc_args_memo_epoch++; }\n"
    "void bc_argpack_setup(void) { bc_context_on(invalidate); }\n"
    "int bc_args_pack(int x) { return bc_context_detach(x); }\n")


@needs_tools
def test_clean_downward_set_passes(tmp_path):
    build(tmp_path, {"loader": LOADER, "context": CONTEXT_CLEAN, "argpack": ARGPACK_CLEAN})
    r = check(tmp_path, "--src", "none", "--show")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "3 units call one way" in r.stdout
    # the hook is registered from above: argpack -> context, and nothing back
    assert "argpack -> context: bc_context_detach, bc_context_on" in r.stdout
    assert "context -> loader: bc_loader_fn" in r.stdout
    assert "context -> argpack" not in r.stdout


@needs_tools
def test_upward_call_fails(tmp_path):
    context = ("int bc_loader_fn(int);\n"
               "void bc_args_memo_invalidate(void);\n"
               "int bc_context_detach(int x) { bc_args_memo_invalidate(); return bc_loader_fn(x); }\n")
    argpack = ("int bc_loader_fn(int);\n"
               "int bc_args_memo_epoch;\n"
               "void bc_args_memo_invalidate(void) { bc_args_memo_epoch += bc_loader_fn(0); }\n")
    build(tmp_path, {"loader": LOADER, "context": context, "argpack": argpack})
    r = check(tmp_path, "--src", "none")
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("upward call: context (floor context) calls argpack (floor machinery): "
            "bc_args_memo_invalidate") in r.stderr
    assert "cycle" not in r.stderr


@needs_tools
def test_upward_read_of_data_through_an_inline_fails(tmp_path):
    # what a header's inline function leaves in the unit that inlined it: a U of
    # the upper unit's variable
    context = ("extern int bc_args_memo_epoch;\n"
               "static inline void invalidate(void) { bc_args_memo_epoch++; }\n"
               "void bc_context_release(void) { invalidate(); }\n")
    argpack = "int bc_args_memo_epoch;\n"
    build(tmp_path, {"context": context, "argpack": argpack})
    r = check(tmp_path, "--src", "none")
    assert r.returncode == 1
    assert "calls argpack (floor machinery): bc_args_memo_epoch" in r.stderr


@needs_tools
def test_cycle_on_one_floor_fails(tmp_path):
    cumodule = ("int bc_function_new(int);\n"
                "int bc_module_usable(int m) { return m != 0; }\n"
                "int bc_module_get_function(int m) { return bc_function_new(m); }\n")
    function = ("int bc_module_usable(int);\n"
                "int bc_function_new(int m) { return bc_module_usable(m); }\n")
    build(tmp_path, {"cumodule": cumodule, "function": function})
    r = check(tmp_path, "--src", "none")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "call cycle between cumodule, function" in r.stderr
    assert "cumodule -> function (bc_function_new)" in r.stderr
    assert "function -> cumodule (bc_module_usable)" in r.stderr


@needs_tools
def test_longer_cycle_fails(tmp_path):
    # hostmem -> staging -> hostpool -> hostmem: each step on or down a floor but
    # one (hostmem below hostpool), and all three in one circle
    hostmem = "int bc_host_is_known(int);\nint bc_array_spec_parse(int p) { return bc_host_is_known(p); }\n"
    staging = "int bc_hostpool_release(int);\nint bc_host_is_known(int p) { return bc_hostpool_release(p); }\n"
    hostpool = "int bc_array_spec_parse(int);\nint bc_hostpool_release(int p) { return bc_array_spec_parse(p); }\n"
    build(tmp_path, {"hostmem": hostmem, "staging": staging, "hostpool": hostpool})
    r = check(tmp_path, "--src", "none")
    assert r.returncode == 1
    assert "call cycle between hostmem, hostpool, staging" in r.stderr
    assert "upward call: hostmem (floor memory) calls staging" in r.stderr


@needs_tools
def test_unit_missing_from_table_fails(tmp_path):
    build(tmp_path, {"loader": LOADER, "mystery": "int bc_loader_fn(int);\nint f(void) { return bc_loader_fn(1); }\n"})
    r = check(tmp_path, "--src", "none")
    assert r.returncode == 1
    assert "unit mystery" in r.stderr and "is not in the layer table" in r.stderr


@needs_tools
def test_table_against_sources(tmp_path):
    build(tmp_path, {"low": "int lo(void) { return 1; }\n",
                     "high": "int lo(void);\nint hi(void) { return lo(); }\n",
                     "extra": "int ex(void) { return 2; }\n"})
    table = tmp_path / "src" / "layers.txt"
    table.write_text("# lowest first\nbottom: low gone\ntop: high extra\n")
    r = check(tmp_path, "--table", table)           # --src: the table's folder
    assert r.returncode == 1
    assert "lists gone, which has no" in r.stderr
    (tmp_path / "src" / "orphan.c").write_text("int orphan;\n")
    table.write_text("bottom: low\ntop: high extra\n")
    r = check(tmp_path, "--table", table)
    assert r.returncode == 1
    assert "src/orphan.c is not in the layer table" in r.stderr
    (tmp_path / "src" / "orphan.c").unlink()
    r = check(tmp_path, "--table", table)
    assert r.returncode == 0, r.stderr
    # the same units with the floors swapped: high's call to low goes up
    table.write_text("bottom: high extra\ntop: low\n")
    r = check(tmp_path, "--table", table)
    assert r.returncode == 1
    assert "upward call: high (floor bottom) calls low (floor top): lo" in r.stderr


def test_real_table_lists_every_unit():
    units = {p.stem for p in (ROOT / "src").glob("*.c")}
    listed = set()
    for line in TABLE.read_text().splitlines():
        line = line.split("#", 1)[0]
        if ":" in line:
            listed.update(line.split(":", 1)[1].split())
    assert units == listed


def test_c_files_stay_small():
    # DESIGN.md 2: one concept a file, small enough to hold in one's head
    long = {p.name: n for p in sorted((ROOT / "src").glob("*.c"))
            if (n := len(p.read_text().splitlines())) > 1500}
    assert not long, f"C files over 1,500 lines (split them by concept): {long}"


@pytest.mark.skipif(NM is None, reason="needs nm (binutils) to read the objects")
@pytest.mark.skipif(not os.environ.get("BARECUDA_BUILD_DIR"),
                    reason="set BARECUDA_BUILD_DIR to a meson build dir of barecuda to check its objects")
def test_real_build():
    r = check(os.environ["BARECUDA_BUILD_DIR"], "--show")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "units call one way" in r.stdout
