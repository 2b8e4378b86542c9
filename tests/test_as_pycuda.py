# SPDX-License-Identifier: MIT
"""barecuda.as_pycuda: `import pycuda` answered by barecuda, only when asked (CPU tests;
each case runs in a fresh interpreter, since the alias changes the import system)."""

import os
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


def fake_pycuda(tmp_path):
    """A folder holding a package that looks like an installed PyCUDA."""
    pkg = tmp_path / "site" / "pycuda"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("REAL = True\n")
    (pkg / "driver.py").write_text("REAL = True\n")
    return str(tmp_path / "site")


def test_off_unless_asked():
    r = python("""
        import sys, barecuda, barecuda.driver
        try:
            import pycuda
        except ModuleNotFoundError as e:
            print("absent:", e)
        print(any(type(f).__name__ == "_Alias" for f in sys.meta_path))
        print("barecuda.as_pycuda" in sys.modules)
        """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["absent: No module named 'pycuda'", "False", "False"]


@pytest.mark.parametrize("how", ["function", "env"])
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
    assert r.stderr == ""


def test_env_zero_is_off():
    r = python("import pycuda", env={"BARECUDA_AS_PYCUDA": "0"})
    assert r.returncode == 1 and "No module named 'pycuda'" in r.stderr


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
    r = python("import sys; print(sorted(m for m in sys.modules if 'barecuda' in m))")
    assert r.returncode == 0 and r.stdout.strip() == "[]"
