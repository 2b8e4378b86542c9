# SPDX-License-Identifier: MIT
"""The build's CUDA headers: include/barecuda/nvrtc_api.h (our declarations of the
NVRTC functions barecuda calls, so no nvrtc.h is needed) agrees with a toolkit's
nvrtc.h, and src/find_cuda_headers.py (meson.build's -Dcuda-headers=wheel lookup)
finds cuda.h in the layouts of NVIDIA's runtime wheels."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIND = ROOT / "src" / "find_cuda_headers.py"
API = ROOT / "include" / "barecuda" / "nvrtc_api.h"


def toolkit_include():
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.path.isfile(os.path.join(root, "include", "nvrtc.h")):
            return os.path.join(root, "include")
    return None


def c_compiler():
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


@pytest.mark.skipif(not (ROOT / "include").is_dir(), reason="needs the source tree")
@pytest.mark.skipif(toolkit_include() is None or c_compiler() is None,
                    reason="needs a C compiler and a CUDA toolkit's nvrtc.h")
def test_nvrtc_api_matches_the_toolkit_header(tmp_path):
    # nvrtc.h first, then ours: every prototype is declared twice, which C accepts
    # only when the two agree; each result code is checked for its value.
    names = re.findall(r"X\((NVRTC_\w+), (\d+)\)", API.read_text())
    assert ("NVRTC_SUCCESS", "0") in names and len(names) >= 12
    checks = "".join(f'_Static_assert({n} == {v}, "{n}");\n' for n, v in names)
    src = tmp_path / "check.c"
    src.write_text("#include <nvrtc.h>\n#include \"barecuda/nvrtc_api.h\"\n" + checks)
    proc = subprocess.run(
        [c_compiler(), "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
         "-I", toolkit_include(), "-I", str(ROOT / "include"), str(src)],
        capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(c_compiler() is None, reason="needs a C compiler")
def test_nvrtc_api_stands_alone(tmp_path):
    # without nvrtc.h the header declares the types itself
    src = tmp_path / "alone.c"
    src.write_text('#include "barecuda/nvrtc_api.h"\n'
                   "nvrtcResult (*p)(nvrtcProgram, int, const char *const *) = 0;\n"
                   '_Static_assert(NVRTC_ERROR_COMPILATION == 6, "value");\n')
    proc = subprocess.run(
        [c_compiler(), "-std=c11", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
         "-I", str(ROOT / "include"), str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def find(tmp_path, *entries):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(e) for e in entries))
    return subprocess.run([sys.executable, "-S", str(FIND)], capture_output=True, text=True,
                          env=env, cwd=str(tmp_path))


def fake_wheel(site, sub):
    inc = site / "nvidia" / sub / "include"
    inc.mkdir(parents=True)
    (inc / "cuda.h").write_text("#define CUDA_VERSION 13000\n")
    return inc


@pytest.mark.skipif(not FIND.is_file(), reason="needs the source tree")
def test_find_cuda_headers_in_the_cu13_wheel(tmp_path):
    old = tmp_path / "a"
    new = tmp_path / "b"
    inc12 = fake_wheel(old, "cuda_runtime")
    inc13 = fake_wheel(new, "cu13")
    # the first sys.path entry that has one wins; within an entry, CUDA 13's layout
    proc = find(tmp_path, new, old)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(inc13)
    proc = find(tmp_path, old)
    assert proc.stdout.strip() == str(inc12)
    fake_wheel(old, "cu13")
    assert find(tmp_path, old).stdout.strip() == str(old / "nvidia" / "cu13" / "include")


@pytest.mark.skipif(not FIND.is_file(), reason="needs the source tree")
def test_find_cuda_headers_says_what_it_searched(tmp_path):
    site = tmp_path / "site"
    (site / "nvidia" / "cu13" / "include").mkdir(parents=True)  # no cuda.h
    proc = find(tmp_path, site)
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert "cuda.h was not found in NVIDIA's wheels" in proc.stderr
    assert str(site / "nvidia" / "cu13" / "include") in proc.stderr
    assert str(site / "nvidia" / "cuda_runtime" / "include") in proc.stderr


# ------------------------------------------------- the C sources under CUDA 12's headers

CI_CACHE = os.path.join(os.environ.get("BARECUDA_CI_CACHE")
                        or os.path.join(os.path.expanduser("~"), ".cache", "barecuda-ci"),
                        "wheels")
CUDA12_RUNTIME = "nvidia-cuda-runtime-cu12>=12.9,<13"


def _cuda12_headers(tmp_path):
    """cuda.h and its neighbours from NVIDIA's CUDA 12 runtime wheel (downloaded once
    into the CI wheel cache, tests/test_install.py's), unpacked under tmp_path."""
    import glob
    import zipfile
    os.makedirs(CI_CACHE, exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--only-binary=:all:", "--disable-pip-version-check",
                        "-d", CI_CACHE, "--find-links", CI_CACHE, CUDA12_RUNTIME],
                       capture_output=True, text=True, timeout=300)
    wheels = sorted(glob.glob(os.path.join(CI_CACHE, "nvidia_cuda_runtime_cu12-12.9*.whl")))
    if not wheels:
        pytest.skip(f"no CUDA 12 runtime wheel: not in {CI_CACHE}, and pip could not fetch "
                    f"{CUDA12_RUNTIME!r} ({(r.stderr or r.stdout).strip()[-200:]})")
    with zipfile.ZipFile(wheels[-1]) as z:
        members = [m for m in z.namelist() if "/include/" in m and m.endswith(".h")]
        z.extractall(tmp_path, members)
    found = [os.path.dirname(p) for p in glob.glob(str(tmp_path / "**" / "cuda.h"), recursive=True)]
    assert len(found) == 1, found
    return found[0]


def _meson_sources():
    text = (ROOT / "meson.build").read_text()
    block = re.search(r"extension_module\('_driver',(.*?)tables,", text, re.S).group(1)
    return re.findall(r"'(src/\w+\.c)'", block)


@pytest.mark.skipif(not (ROOT / "meson.build").is_file(), reason="needs the source tree")
@pytest.mark.skipif(c_compiler() is None, reason="needs a C compiler")
def test_sources_compile_cleanly_with_cuda_12_headers(tmp_path):
    """The README's CUDA 12 build (cuda.h from a 12.x toolkit or NVIDIA's cu12 runtime
    wheel): every C file of the extension, with the tables generated from 12.9's cuda.h,
    passes the compiler's checks at -Wall -Wextra -Werror (syntax and types only: the
    CPU build of CI uses CUDA 13's headers, and a CUDA 13 name or signature used
    without its CUDA 12 form would fail only here)."""
    import sysconfig

    import numpy
    inc = _cuda12_headers(tmp_path / "cu12")
    version = re.search(r"#define CUDA_VERSION (\d+)",
                        pathlib.Path(inc, "cuda.h").read_text(encoding="utf-8"))
    assert version and 12000 <= int(version.group(1)) < 13000, version
    gen = tmp_path / "gen"
    gen.mkdir()
    subprocess.run([sys.executable, str(ROOT / "src" / "gen_tables.py"),
                    os.path.join(inc, "cuda.h"), str(gen / "bc_tables.h")], check=True)
    sources = _meson_sources()
    assert len(sources) > 30, sources
    cmd = [c_compiler(), "-std=c11", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
           "-Wno-missing-field-initializers", "-D_GNU_SOURCE", "-fvisibility=hidden",
           f"-I{ROOT / 'include'}", f"-I{inc}", f"-I{numpy.get_include()}",
           f"-I{sysconfig.get_paths()['include']}", f"-I{gen}",
           *[str(ROOT / s) for s in sources]]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr[-3000:]
