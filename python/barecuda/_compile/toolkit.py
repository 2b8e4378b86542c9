# SPDX-License-Identifier: MIT
"""Where things are: barecuda's device headers, the CUDA toolkit's include
directories, the NVRTC library file (predicted without loading it, so that a cache
hit need not load NVRTC), the architectures NVRTC knows and the disk cache's
directory.  Facts that cannot change in a process are looked up once (``_once``).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from barecuda import _driver
from barecuda._compile import headers as _headers
from barecuda._core.names import public

if TYPE_CHECKING:
    _CacheDir = str | os.PathLike[str] | bool | None

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: barecuda's device headers, always on the include path.
INCLUDE_DIR = os.path.join(_PACKAGE_DIR, "templates", "include")
#: C and C++ library headers for NVRTC (<stdio.h>, <cmath>, ...), last on its
#: include path; never given to nvcc, whose host compiler needs the real ones.
NVRTC_STD_INCLUDE_DIR = os.path.join(INCLUDE_DIR, "nvrtc")
#: Force-included into every NVRTC compile: uint/ushort/ulong, which nvcc's
#: host headers make visible everywhere (-DBARECUDA_NO_PRELUDE leaves them out).
_PRELUDE = os.path.join(NVRTC_STD_INCLUDE_DIR, "barecuda_prelude.h")
_once = {}                              # facts computed once per process


# --------------------------------------------------------------- locations

@public("barecuda.compiler")
def get_cache_dir(cache_dir: _CacheDir = None) -> str | None:
    """The disk cache directory that `cache_dir` (SourceModule's argument) means,
    or None when the cache is off (``cache_dir=False``)."""
    if cache_dir is False:
        return None
    if cache_dir:
        return os.fspath(cache_dir)
    env = os.environ.get("BARECUDA_CACHE_DIR")
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "barecuda")


def _toolkit_include():
    """The CUDA toolkit include directory (holding cuda_fp16.h), or None."""
    if "toolkit" not in _once:
        found = None
        roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
        cands = [os.path.join(r, "include") for r in roots if r]
        for entry in sys.path:
            if entry and os.path.isdir(os.path.join(entry, "nvidia")):
                for sub in ("cu13", "cuda_runtime", "cuda_nvrtc"):
                    cands.append(os.path.join(entry, "nvidia", sub, "include"))
        for c in cands:
            if os.path.isfile(os.path.join(c, "cuda_fp16.h")):
                found = os.path.abspath(c)
                break
        _once["toolkit"] = found
    return _once["toolkit"]


# NVIDIA's wheels put the headers a kernel may include beside the runtime's in these
# folders under site-packages/nvidia/: CUDA 13's share cu13/include (CCCL in its cccl/
# subfolder), CUDA 12's have one each.  <curand_kernel.h> and CCCL (<cuda/std/...>, and
# <nv/target>, which CUDA 13's curand_kernel.h includes) are looked for in each.
#: A file every CCCL has: an include directory holding it is a CCCL directory.
CCCL_MARKER = os.path.join("cuda", "std", "type_traits")
_WHEEL_HEADERS = {
    "curand_kernel.h": ("cu13/include", "curand/include"),
    CCCL_MARKER: ("cu13/include/cccl", "cuda_cccl/include"),
}


def _cccl_install_advice():
    """What to install for CCCL's headers, for the NVRTC of this process: the wheel of
    its CUDA major version, or a toolkit."""
    try:
        major = _driver.nvrtc_version()[0]
    except _driver.Error:
        major = 13
    wheel = '"nvidia-cuda-cccl>=13,<14"' if major >= 13 else '"nvidia-cuda-cccl-cu12>=12,<13"'
    extra = "cu13" if major >= 13 else "cu12"
    return (f"install NVIDIA's CCCL wheel (`pip install {wheel}`, part of "
            f"`barecuda[{extra}]`), or use a CUDA toolkit, which has it")


def _wheel_roots():
    """Every site-packages/nvidia folder on sys.path, in sys.path's order: a venv, the
    user's site-packages and a `pip install --target` folder may each hold some of
    NVIDIA's wheels (a venv made for PyTorch often lacks CCCL, installed later with
    --user)."""
    return [os.path.join(e, "nvidia") for e in sys.path
            if e and os.path.isdir(os.path.join(e, "nvidia"))]


def _find_header(rel, dirs):
    """The first of `dirs` that holds header `rel`, or None."""
    return next((d for d in dirs if os.path.isfile(os.path.join(d, rel))), None)


def _wheel_header_dirs(rel):
    """The folders of NVIDIA's wheels where header `rel` (a key of _WHEEL_HEADERS)
    would be, in search order."""
    return [os.path.join(w, sub) for w in _wheel_roots() for sub in _WHEEL_HEADERS[rel]]


def _wheel_companions(dirs):
    """The folders of NVIDIA's wheels on sys.path that hold what `dirs` lack of
    _WHEEL_HEADERS (cuRAND's device headers, CCCL), in that order."""
    found = []
    for rel in _WHEEL_HEADERS:
        if _find_header(rel, dirs + found) is None:
            where = _find_header(rel, _wheel_header_dirs(rel))
            if where is not None:
                found.append(where)
    return found


def _toolkit_dirs(toolkit):
    """The toolkit's include directory and, when there, its CCCL directory
    (<cuda/std/...>, which CUDA 13's <curand_kernel.h> includes under NVRTC).
    For the include directory of one of NVIDIA's wheels (nvidia/cu13/include,
    nvidia/cuda_runtime/include), the cuRAND and CCCL headers it lacks, from
    whichever of NVIDIA's wheels on sys.path has them."""
    if not toolkit:
        return []
    dirs = [toolkit]
    cccl = os.path.join(toolkit, "cccl")
    if os.path.isdir(os.path.join(cccl, "cuda")):
        dirs.append(cccl)
    if os.path.basename(os.path.dirname(os.path.dirname(toolkit))) == "nvidia":
        dirs += _wheel_companions(dirs)
    return dirs


def _toolkit_include_dirs():
    """_toolkit_dirs() of the toolkit found here (an empty list when none is), looked
    up once: every compile asks (a search of sys.path took 0.18 ms a call)."""
    if "toolkit_dirs" not in _once:
        _once["toolkit_dirs"] = _toolkit_dirs(_toolkit_include())
    return list(_once["toolkit_dirs"])


def _nvrtc_path():
    """The NVRTC library file that is (or would be) loaded, as the loader names
    it; predicted without loading NVRTC where the loader's search can be
    followed (so a cache hit need not load it); None when it cannot be."""
    path = _driver.loader_info()["libnvrtc"]
    return path if path is not None else _predict_nvrtc()


def _nvrtc_identity(path=None):
    """A string naming the NVRTC library file `path` (default: _nvrtc_path()):
    its real path, size and mtime; None when unknown."""
    if path is None:
        path = _nvrtc_path()
        if path is None:
            return None
    return _file_identity(path)


def _file_identity(path):
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return None
    return f"{real}:{st.st_size}:{st.st_mtime_ns}"


def _predict_nvrtc():
    """Follow src/loader.c's search order over files that exist."""
    names = ("libnvrtc.so.13", "libnvrtc.so.12")
    env = os.environ.get("BARECUDA_NVRTC")
    if env:
        return env if os.path.isfile(env) else None
    dirs = []
    for entry in sys.path:
        if entry and os.path.isdir(os.path.join(entry, "nvidia")):
            dirs.append(os.path.join(entry, "nvidia", "cu13", "lib"))
            dirs.append(os.path.join(entry, "nvidia", "cuda_nvrtc", "lib"))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root:
            dirs += [os.path.join(root, "lib64"), os.path.join(root, "lib")]
    dirs.append("/usr/local/cuda/lib64")
    for d in dirs:
        for n in names:
            p = os.path.join(d, n)
            if os.path.isfile(p):
                return p
    return None


def _supported_archs():
    if "archs" not in _once:
        _once["archs"] = tuple(_driver._nvrtc_supported_archs())
    return _once["archs"]


def _nvrtc_version_text():
    major, minor = _driver.nvrtc_version()
    return f"{major}.{minor}"


# ------------------------------------------------------------------ headers

_header_files = _headers.header_files
_header_stamp = _headers.header_stamp
_header_digest = _headers.header_digest


def _package_headers_digest():
    if "pkg" not in _once:
        _once["pkg"] = _header_digest(_header_stamp([INCLUDE_DIR], every_file=True))
    return _once["pkg"]

