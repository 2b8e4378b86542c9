# SPDX-License-Identifier: MIT
"""Loading the driver and NVRTC: import without a driver, clear messages."""

import os
import subprocess
import sys

import pytest

from barecuda import driver as drv
from barecuda import _driver


def run_python(code, **env):
    full_env = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=full_env, timeout=120, cwd="/")


def test_import_without_driver_and_first_call_says_what_was_searched():
    code = (
        "import barecuda, barecuda.driver as d, barecuda.tools\n"
        "try:\n"
        "    d.Device(0)\n"
        "except d.Error as e:\n"
        "    print('ERR', type(e).__name__, e)\n"
    )
    r = run_python(code, BARECUDA_LIBCUDA="/nonexistent/libcuda.so.1")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert r.stdout.startswith("ERR Error ")
    assert "/nonexistent/libcuda.so.1" in r.stdout
    assert "BARECUDA_LIBCUDA" in r.stdout


def test_failure_is_remembered_and_repeated():
    code = (
        "import barecuda.driver as d\n"
        "msgs = []\n"
        "for _ in range(2):\n"
        "    try:\n"
        "        d.init()\n"
        "    except d.Error as e:\n"
        "        msgs.append(str(e))\n"
        "assert len(msgs) == 2 and msgs[0] == msgs[1], msgs\n"
        "info = d.loader_info()\n"
        "assert info['libcuda'] is None and '/bogus' in info['libcuda_error']\n"
        "print('ok')\n"
    )
    r = run_python(code, BARECUDA_LIBCUDA="/bogus/libcuda.so")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_a_library_that_is_not_a_driver_is_refused():
    # libc loads fine but has no CUDA entry points
    r = run_python("import barecuda.driver as d\ntry:\n    d.init()\nexcept d.Error as e:\n    print(e)",
                   BARECUDA_LIBCUDA="libc.so.6")
    assert r.returncode == 0, r.stderr
    assert "not a usable CUDA driver" in r.stdout


def test_init_validates_flags():
    with pytest.raises(ValueError, match="flags must be 0"):
        drv.init(1)
    with pytest.raises(TypeError):
        drv.init("0")


def test_loader_info_shape():
    info = drv.loader_info()
    assert set(info) == {"libcuda", "libnvrtc", "libnvrtc_builtins", "libcuda_error",
                         "libnvrtc_error", "header_version"}
    assert info["header_version"] == drv.CUDA_VERSION
    assert drv.get_version()[0] == drv.CUDA_VERSION // 1000


def test_nvrtc_is_found_and_versioned():
    major, minor = drv.nvrtc_version()
    assert major >= 12
    path = drv.loader_info()["libnvrtc"]
    assert path and "nvrtc" in os.path.basename(path)


def test_bogus_nvrtc_override_is_an_error_naming_it():
    r = run_python("import barecuda.driver as d\ntry:\n    d.nvrtc_version()\nexcept d.Error as e:\n    print(e)",
                   BARECUDA_NVRTC="/nowhere/libnvrtc.so.13")
    assert r.returncode == 0, r.stderr
    assert "BARECUDA_NVRTC=/nowhere/libnvrtc.so.13" in r.stdout


def test_extension_does_not_link_cuda_or_nvrtc():
    ldd = subprocess.run(["ldd", _driver.__file__], capture_output=True, text=True)
    if ldd.returncode != 0:
        pytest.skip("ldd unavailable: " + ldd.stderr.strip())
    assert "libcuda" not in ldd.stdout
    assert "libnvrtc" not in ldd.stdout


def test_every_submodule_imports_without_a_driver():
    import pkgutil

    import barecuda
    names = [m.name for m in pkgutil.iter_modules(barecuda.__path__)
             if m.name not in ("autoinit", "autoprimaryctx", "__main__") and not m.name.startswith("_bench")]
    code = "import importlib\n" + "".join(f"importlib.import_module('barecuda.{n}')\n" for n in names) + "print('ok')"
    r = run_python(code, BARECUDA_LIBCUDA="/nonexistent/libcuda.so.1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_autoinit_without_driver_raises_clear_error():
    r = run_python("import barecuda.autoinit", BARECUDA_LIBCUDA="/nonexistent/libcuda.so.1")
    assert r.returncode != 0
    assert "barecuda.driver.Error" in r.stderr and "/nonexistent/libcuda.so.1" in r.stderr


def test_nvrtc_builtins_loaded_beside_nvrtc():
    # NVRTC dlopens its builtins by soname; barecuda loads the file next to the
    # libnvrtc it loaded first, whatever libnvrtc's RPATH says (issue 36)
    major, minor = drv.nvrtc_version()
    info = drv.loader_info()
    builtins = info["libnvrtc_builtins"]
    assert builtins is not None, info
    name = os.path.basename(builtins)
    assert name.startswith(f"libnvrtc-builtins.so.{major}.{minor}"), info
    if "/" in info["libnvrtc"]:
        assert os.path.realpath(os.path.dirname(builtins)) == \
            os.path.realpath(os.path.dirname(info["libnvrtc"])), info
