# SPDX-License-Identifier: MIT
"""barecuda.as_pycuda: `import pycuda` answered by barecuda, only when asked (CPU tests;
each case runs in a fresh interpreter, since the alias changes the import system)."""

import os
import site
import subprocess
import sys
import textwrap

import pytest


def python(code, *args, env=None, cwd=None, module_args=None):
    """Run `code` (or `python -m barecuda.as_pycuda ARGS` when module_args is given) in
    a fresh interpreter; returns the CompletedProcess."""
    full_env = {k: v for k, v in os.environ.items() if k != "BARECUDA_AS_PYCUDA"}
    full_env.update(env or {})
    cmd = [sys.executable]
    cmd += ["-m", "barecuda.as_pycuda", *module_args] if module_args is not None \
        else ["-c", textwrap.dedent(code), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=full_env, cwd=cwd,
                          timeout=120)


def _installed_pycuda():
    """Where `import pycuda` finds a real PyCUDA without the alias (its __init__.py), or
    None.  .ci/clients installs one beside barecuda; there `import pycuda` works with the
    alias off, and the alias says once on standard error that it wins."""
    r = python("import importlib.util as u; s = u.find_spec('pycuda'); print(s and s.origin)")
    origin = r.stdout.strip()
    return None if r.returncode or origin in ("", "None") else origin


REAL_PYCUDA = _installed_pycuda()
# The startup hook (barecuda-as-pycuda.pth, meson's install_data) is not installed by an
# editable install (meson-python's loader finds only the package): there the variable
# BARECUDA_AS_PYCUDA does nothing at interpreter start.
HOOK = any(os.path.isfile(os.path.join(d, "barecuda-as-pycuda.pth"))
           for d in [*site.getsitepackages(), site.getusersitepackages()])
needs_hook = pytest.mark.skipif(not HOOK, reason="no barecuda-as-pycuda.pth in site-packages "
                                "(an editable install has none): BARECUDA_AS_PYCUDA=1 is not "
                                "read at interpreter start")
# what the alias writes once when a real PyCUDA is installed too (see install())
REAL_NOTE = "'import pycuda' runs barecuda"


def no_output_but_the_note(stderr):
    """Standard error is empty, or (a real PyCUDA installed) holds only the alias's note."""
    if REAL_PYCUDA is None:
        return stderr == ""
    return stderr == "" or (REAL_NOTE in stderr and "Traceback" not in stderr
                            and "Warning" not in stderr)


def absent_or_real(line):
    """What the scripts below print after `import pycuda` with the alias off."""
    if REAL_PYCUDA is None:
        return line == "absent: No module named 'pycuda'"
    return line == f"real: {REAL_PYCUDA}"


TRY_IMPORT = """
        try:
            import pycuda
        except ModuleNotFoundError as e:
            print("absent:", e)
        else:
            print("barecuda" if hasattr(pycuda, "__barecuda__") else "real:", pycuda.__file__)
"""


def fake_pycuda(tmp_path):
    """A folder holding a package that looks like an installed PyCUDA."""
    pkg = tmp_path / "site" / "pycuda"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("REAL = True\n")
    (pkg / "driver.py").write_text("REAL = True\n")
    return str(tmp_path / "site")


def test_off_unless_asked():
    # Without the alias `import pycuda` is not barecuda's: it fails, or (where a real
    # PyCUDA is installed beside barecuda, as .ci/clients does) gives the real one.
    r = python("""
        import sys, barecuda, barecuda.driver
        """ + TRY_IMPORT + """
        print(any(type(f).__name__ == "_Alias" for f in sys.meta_path))
        print("barecuda.as_pycuda" in sys.modules)
        """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert absent_or_real(lines[0]), lines[0]
    assert lines[1:3] == ["False", "False"]


@pytest.mark.parametrize("how", ["function", pytest.param("env", marks=needs_hook)])
def test_same_module_objects(how):
    setup = "import barecuda.as_pycuda as a; a.install()\n" if how == "function" else ""
    r = python(setup + textwrap.dedent("""
        import barecuda, barecuda.driver, barecuda.gpuarray, barecuda.compiler
        import pycuda, pycuda.driver as drv, pycuda.gpuarray, pycuda.compiler
        from pycuda.compiler import SourceModule
        from pycuda import cumath, elementwise, reduction, scan, tools, characterize
        import pycuda.sparse.packeted, pycuda.curandom
        import sys
        assert drv is barecuda.driver and pycuda.driver is drv
        assert pycuda.gpuarray is barecuda.gpuarray
        assert SourceModule is barecuda.compiler.SourceModule
        assert sys.modules["pycuda.cumath"] is sys.modules["barecuda.cumath"]
        assert pycuda.sparse.packeted is sys.modules["barecuda.sparse.packeted"]
        assert drv.__name__ == "barecuda.driver"
        print(pycuda.VERSION, pycuda.VERSION_STATUS == "", pycuda.VERSION_TEXT,
              pycuda.__barecuda__ == barecuda.__version__)
        """), env={"BARECUDA_AS_PYCUDA": "1"} if how == "env" else None)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(2026, 1) True 2026.1 True"
    assert no_output_but_the_note(r.stderr), r.stderr


def test_env_zero_is_off():
    r = python(TRY_IMPORT, env={"BARECUDA_AS_PYCUDA": "0"})
    assert r.returncode == 0, r.stderr
    assert absent_or_real(r.stdout.strip()), r.stdout


def test_missing_module_named():
    r = python("""
        import barecuda.as_pycuda as a; a.install()
        for name in ("pycuda.gl", "pycuda.compyte.dtypes"):
            try:
                __import__(name)
            except ModuleNotFoundError as e:
                print(e.name, "|", e)
        """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().split("\n")
    assert lines[0] == ("pycuda.gl | No module named 'pycuda.gl': barecuda, which answers for "
                        "pycuda here (barecuda.as_pycuda), has no 'barecuda.gl'")
    assert lines[1].startswith("pycuda.compyte |")


def test_install_idempotent_and_uninstall():
    r = python("""
        import sys
        import barecuda.as_pycuda as a
        a.install(); a.install()
        print(sum(type(f).__name__ == "_Alias" for f in sys.meta_path), a.installed())
        import pycuda.driver
        a.uninstall()
        print(a.installed(), "pycuda" in sys.modules, "pycuda.driver" in sys.modules,
              "barecuda.driver" in sys.modules)
        try:
            import pycuda
        except ModuleNotFoundError:
            print("gone")
        else:   # a real PyCUDA installed beside barecuda: the alias is gone all the same
            print("gone" if not hasattr(pycuda, "__barecuda__") else "still barecuda")
        """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["1 True", "False False False True", "gone"]


def test_real_pycuda_installed_is_named(tmp_path):
    site = fake_pycuda(tmp_path)
    r = python("""
        import barecuda.as_pycuda as a; a.install()
        import pycuda.driver
        print(pycuda.driver.__name__, hasattr(pycuda, "REAL"))
        """, env={"PYTHONPATH": site})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "barecuda.driver False"
    assert "'import pycuda' runs barecuda" in r.stderr
    assert os.path.join(site, "pycuda") in r.stderr
    # quiet=True says nothing
    r = python("import barecuda.as_pycuda as a; a.install(quiet=True); import pycuda",
               env={"PYTHONPATH": site})
    assert r.returncode == 0 and r.stderr == ""


def test_refuses_when_real_pycuda_imported(tmp_path):
    site = fake_pycuda(tmp_path)
    r = python("""
        import pycuda
        import barecuda.as_pycuda as a
        try:
            a.install()
        except RuntimeError as e:
            print(e)
        print(a.installed())
        """, env={"PYTHONPATH": site})
    assert r.returncode == 0, r.stderr
    assert "PyCUDA is already imported in this process" in r.stdout
    assert r.stdout.strip().endswith("False")


@needs_hook   # the child process sees the alias through the variable
def test_command_runs_script_with_args(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(textwrap.dedent("""
        import os, sys, subprocess
        import pycuda.driver as drv
        import helper   # beside the script, as with `python prog.py`
        print(drv.__name__, sys.argv[1:], __name__, helper.X)
        # a process it starts sees the alias too
        out = subprocess.run([sys.executable, "-c", "import pycuda.driver as d; print(d.__name__)"],
                             capture_output=True, text=True)
        print("child:", out.stdout.strip(), out.returncode)
        sys.exit(3)
        """))
    (tmp_path / "helper.py").write_text("X = 42\n")
    r = python(None, module_args=[str(script), "a", "--b"], cwd="/")
    assert r.returncode == 3, r.stderr
    assert r.stdout.split("\n")[:2] == ["barecuda.driver ['a', '--b'] __main__ 42",
                                        "child: barecuda.driver 0"]


def test_command_runs_module(tmp_path):
    (tmp_path / "mymod.py").write_text(
        "import sys, pycuda.driver\nprint(__name__, sys.argv[1:], pycuda.driver.__name__)\n")
    r = python(None, module_args=["-m", "mymod", "x"], env={"PYTHONPATH": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "__main__ ['x'] barecuda.driver"


@pytest.mark.parametrize("args, rc, text", [
    ([], 2, "usage: python -m barecuda.as_pycuda script.py"),
    (["--help"], 0, "usage: python -m barecuda.as_pycuda script.py"),
    (["-m"], 2, "usage:"),
    (["/no/such/script.py"], 2, "can't open file '/no/such/script.py'"),
])
def test_command_bad_input(args, rc, text):
    r = python(None, module_args=args)
    assert r.returncode == rc
    assert text in r.stdout + r.stderr


def test_startup_hook_costs_no_import():
    # without the variable the .pth line imports nothing of barecuda's
    # (an editable install's own loader, _barecuda_editable_loader, is not barecuda's)
    r = python("import sys; print(sorted(m for m in sys.modules "
               "if m == 'barecuda' or m.startswith('barecuda.')))")
    assert r.returncode == 0 and r.stdout.strip() == "[]"
