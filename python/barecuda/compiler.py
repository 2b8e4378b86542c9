# SPDX-License-Identifier: MIT
"""Compiling CUDA C in the process: ``SourceModule``, ``compile`` and the kernel cache.

``SourceModule(source)`` compiles CUDA C (wrapped in ``extern "C" { }`` unless
``no_extern_c``) with NVRTC for the current context's device and loads it::

    mod = SourceModule('''
    __global__ void twice(float *y, const float *x, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = 2 * x[i];
    }''')
    twice = mod.get_function("twice")

Architecture: the device's ``sm_XY`` CUBIN when NVRTC knows it, else PTX for
the newest architecture NVRTC knows that the device can run (the driver JITs
it).  ``backend="nvcc"`` runs nvcc instead, in a temporary directory.

Options are nvcc-style, as PyCUDA passes them; the common ones are translated
for NVRTC (``-I dir``, ``-D X``, ``-lineinfo``, ``-G``, ``-use_fast_math``,
``-Xptxas``, ``-maxrregcount N``, ``-arch``/``-code``), ``-O<n>`` and host-only
flags are dropped (NVRTC always optimises), the rest are passed through.  The
include path always holds barecuda's device headers (``<barecuda_helpers.cuh>``,
PyCUDA's ``<pycuda-complex.hpp>`` and ``<pycuda-helpers.hpp>``) and the CUDA
toolkit's include directory when one is found (for NVRTC also its CCCL
directory: ``<cuda/std/...>``, which ``<curand_kernel.h>`` needs).

NVRTC has no C library headers: barecuda gives it small ones (``<stdio.h>``,
``<math.h>``, ``<stdint.h>``, ``<cmath>``, ... in ``templates/include/nvrtc``,
last on its include path; they work inside the ``extern "C"`` wrapper too), and
force-includes a prelude declaring ``uint``, ``ushort`` and ``ulong``, which
nvcc's host headers make visible everywhere (``-DBARECUDA_NO_PRELUDE`` leaves
them out).  With ``options=None`` the options are ``DEFAULT_NVCC_FLAGS``.

PyCUDA's lower-level names are here too: ``compile_plain`` (NVRTC unless nvcc
is asked for), ``preprocess_source`` and ``get_nvcc_version`` (these two run
nvcc: NVRTC cannot preprocess alone), ``CudaModule`` (SourceModule's base).

Cache: compiled images are kept in memory for the process and on disk, keyed by
a hash of the source, the options, the architecture, the compiler (NVRTC
library file or nvcc executable), barecuda's version and the contents of every
header under the include directories.  On disk the location is ``cache_dir``,
else ``$BARECUDA_CACHE_DIR``, else ``$XDG_CACHE_HOME/barecuda`` (or
``~/.cache/barecuda``); ``cache_dir=False`` turns both layers off.  Entries are
written atomically and checked (length and digest) when read: a damaged entry
is compiled again and rewritten.  A new process finds an NVRTC entry through a
link named by a hash of the input alone, then checks the files the entry
recorded (NVRTC library, header directories, user headers) by their stat, so
a hit costs a read and a few stats (see ``barecuda._diskcache``); barecuda's
own headers count as changed when their directories are (a reinstall).
"""

from __future__ import annotations

import collections
import os
import re
import sys
import threading
import weakref
from typing import TYPE_CHECKING

import barecuda
from barecuda import _cubin, _diskcache, _driver, _headers, _nvcc_compat
from barecuda import driver as _drv

CompileError = _drv.CompileError

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any, Literal

    from typing_extensions import Self

    from barecuda._driver import Function, Module, ModuleGlobal, _MessageHandler

    _Options = Sequence[str] | None
    _CacheDir = str | os.PathLike[str] | bool | None
    _Target = Literal["cubin", "ptx", "fatbin"]

__all__ = ["SourceModule", "compile", "CompileError", "get_cache_dir",
           "clear_memory_cache",
           "CudaModule", "compile_plain", "preprocess_source", "get_nvcc_version",
           "DEFAULT_NVCC_FLAGS"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
#: barecuda's device headers, always on the include path.
INCLUDE_DIR = os.path.join(_PACKAGE_DIR, "templates", "include")
#: C and C++ library headers for NVRTC (<stdio.h>, <cmath>, ...), last on its
#: include path; never given to nvcc, whose host compiler needs the real ones.
NVRTC_STD_INCLUDE_DIR = os.path.join(INCLUDE_DIR, "nvrtc")
#: Force-included into every NVRTC compile: uint/ushort/ulong, which nvcc's
#: host headers make visible everywhere (-DBARECUDA_NO_PRELUDE leaves them out).
_PRELUDE = os.path.join(NVRTC_STD_INCLUDE_DIR, "barecuda_prelude.h")
_ENTRY_HEAD = _diskcache.HEAD
_KINDS = _diskcache.KINDS
_PROGRAM = "kernel.cu"

#: Counters for tests and benchmarks: compiles run, and answers from each cache layer.
#: "disk_quick_hits" counts the disk hits found by the quick look-up (no full key needed).
stats = {"nvrtc": 0, "nvcc": 0, "disk_hits": 0, "memory_hits": 0, "disk_rejected": 0,
         "disk_quick_hits": 0}

_lock = threading.Lock()
_memory = {}                            # memory key -> _Compiled
_loaded = weakref.WeakValueDictionary()  # (context handle, id(_Compiled)) -> _Loaded
# Modules of primary contexts are also held strongly (the last _KEEP_LOADED), so a
# SourceModule built again after the previous one was dropped costs no reload.  A
# primary context stays retained by barecuda's default context anyway; modules of
# contexts from make_context() are only held weakly, so dropping such a context
# still destroys it (DESIGN.md: caches never keep a context alive).
_KEEP_LOADED = 64
_recent = collections.OrderedDict()
_device_cc = {}                         # device ordinal -> 10 * major + minor
_once = {}                              # facts computed once per process


# --------------------------------------------------------------- locations

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


# NVIDIA's CUDA 12 wheels install each component in its own directory under
# site-packages/nvidia/ (CUDA 13's share nvidia/cu13/include): the headers a kernel
# may include beside the runtime's, <curand_kernel.h> and <cuda/std/...>.
_WHEEL_COMPANIONS = ("curand", "cuda_cccl")


def _toolkit_dirs(toolkit):
    """The toolkit's include directory and, when there, its CCCL directory
    (<cuda/std/...>, which CUDA 13's <curand_kernel.h> includes under NVRTC).
    For a CUDA 12 wheel's include directory (nvidia/cuda_runtime/include), the
    include directories of the cuRAND and CCCL wheels beside it as well."""
    if not toolkit:
        return []
    dirs = [toolkit]
    cccl = os.path.join(toolkit, "cccl")
    if os.path.isdir(os.path.join(cccl, "cuda")):
        dirs.append(cccl)
    parent = os.path.dirname(os.path.dirname(toolkit))
    if os.path.basename(parent) == "nvidia":
        for sub in _WHEEL_COMPANIONS:
            inc = os.path.join(parent, sub, "include")
            if inc != toolkit and os.path.isdir(inc):
                dirs.append(inc)
    return dirs


def _toolkit_include_dirs():
    """_toolkit_dirs() of the toolkit found here (an empty list when none is)."""
    return _toolkit_dirs(_toolkit_include())


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


# ------------------------------------------------------------------ options

_DROP = {"-m64", "-m32", "-cubin", "-ptx", "-fatbin", "-keep", "--keep", "-c", "-g", "--debug",
         "--expt-relaxed-constexpr", "-expt-relaxed-constexpr", "--extended-lambda",
         "-extended-lambda", "--expt-extended-lambda", "-expt-extended-lambda",
         "--shared", "-shared"}
# -e/--entries: nvcc makes code for the named kernels only; NVRTC makes every kernel of the
# unit, the named ones among them (kernel_tuner passes -e KERNEL)
_DROP_WITH_VALUE = {"-Xcompiler", "--compiler-options", "-ccbin", "--compiler-bindir",
                    "-Xlinker", "--linker-options", "-o", "--output-file", "-e", "--entries"}
_RENAME = {"-lineinfo": "--generate-line-info", "--generate-line-info": "--generate-line-info",
           "-G": "--device-debug", "--device-debug": "--device-debug",
           "-use_fast_math": "--use_fast_math", "--use_fast_math": "--use_fast_math",
           "-w": "--disable-warnings", "--disable-warnings": "--disable-warnings",
           "-restrict": "--restrict", "--restrict": "--restrict"}
# option (long or short) -> NVRTC form taking "=value"
_WITH_VALUE = {"-I": "--include-path", "--include-path": "--include-path",
               "-D": "-D", "--define-macro": "-D", "-U": "-U", "--undefine-macro": "-U",
               "-include": "--pre-include", "--pre-include": "--pre-include",
               "-Xptxas": "--ptxas-options", "--ptxas-options": "--ptxas-options",
               "-maxrregcount": "--maxrregcount", "--maxrregcount": "--maxrregcount",
               "-std": "--std", "--std": "--std",
               "-arch": "arch", "--gpu-architecture": "arch",
               "-code": "code", "--gpu-code": "code",
               "-rdc": "--relocatable-device-code",
               "--relocatable-device-code": "--relocatable-device-code"}
_O_LEVEL = re.compile(r"^-O[0-9s]?$|^--optimize(=.*)?$")


def _translate_options(options):
    """nvcc-style options -> (NVRTC options, include dirs named, arch, code).

    ``-arch``/``-code`` given as options are returned (they override the
    SourceModule arguments); include directories are made absolute."""
    out, incs, arch, code = [], [], None, None
    opts = list(options)
    i = 0
    while i < len(opts):
        opt = opts[i]
        i += 1
        if not isinstance(opt, str):
            raise TypeError(f"options must be str, not {type(opt).__name__}: {opt!r}")
        if opt in _DROP or _O_LEVEL.match(opt):
            continue
        if opt in _DROP_WITH_VALUE:
            i += 1
            continue
        if opt.split("=", 1)[0] in _DROP_WITH_VALUE:
            continue
        if opt in _RENAME:
            out.append(_RENAME[opt])
            continue
        if opt == "-gencode" or opt.startswith(("-gencode=", "--generate-code")):
            raise ValueError(f"{opt} is an nvcc option that NVRTC does not have: pass "
                             "arch=/code= (one architecture) or use backend='nvcc'")
        name, value = None, None
        if opt in _WITH_VALUE:
            if i >= len(opts):
                raise ValueError(f"option {opt} needs a value")
            name, value = opt, opts[i]
            i += 1
        elif "=" in opt and opt.split("=", 1)[0] in _WITH_VALUE:
            name, value = opt.split("=", 1)
        elif opt[:2] in ("-I", "-D", "-U") and len(opt) > 2:
            name, value = opt[:2], opt[2:]
        if name is None:
            out.append(opt)   # passed through: NVRTC reports what it does not know
            continue
        if not isinstance(value, str):
            raise TypeError(f"the value of {name} must be str, not {type(value).__name__}")
        kind = _WITH_VALUE[name]
        if kind == "arch":
            arch = value
        elif kind == "code":
            code = value
        elif kind == "--include-path":
            value = os.path.abspath(value)
            incs.append(value)
            out.append(f"--include-path={value}")
        elif kind in ("-D", "-U"):
            out.append(kind + value)
        else:
            out.append(f"{kind}={value}")
    return out, incs, arch, code


_ARCH_RE = re.compile(r"^(sm|compute|lto)_(\d+)([af]?)$")


def _parse_arch(text, what):
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a str such as 'sm_90', not {type(text).__name__}")
    m = _ARCH_RE.match(text)
    if not m:
        raise ValueError(f"{what} must look like 'sm_90' or 'compute_90', not {text!r}")
    return m.group(1), int(m.group(2)), m.group(3)


# --------------------------------------------------------------- the errors

_LOG_LINE = re.compile(r"^(?P<file>.*?)\((?P<line>\d+)\): (?P<kind>(?:catastrophic )?error|warning)",
                       re.M)


def _format_error(err, source, offset, what):
    """CompileError message: what failed, the log, the offending lines numbered."""
    log = getattr(err, "log", "") or ""
    shown_log = log
    if offset:
        # number the program's lines as the user wrote them (without the wrapper)
        shown_log = re.sub(r"(?m)^(\S*" + re.escape(_PROGRAM) + r")\((\d+)\)",
                           lambda m: f"{m.group(1)}({int(m.group(2)) - offset})", log)
    parts = [f"{what} failed", shown_log.rstrip() or str(err)]
    lines = source.splitlines()
    wanted = []
    for m in _LOG_LINE.finditer(log):
        if "error" not in m.group("kind") or not m.group("file").endswith(_PROGRAM):
            continue
        n = int(m.group("line")) - offset
        if 1 <= n <= len(lines) and n not in wanted:
            wanted.append(n)
    if wanted:
        shown = set()
        for n in wanted[:6]:
            shown.update(range(max(1, n - 2), min(len(lines), n + 2) + 1))
        width = len(str(max(shown)))
        excerpt = ["source (lines with errors marked >):"]
        prev = None
        for k in sorted(shown):
            if prev is not None and k != prev + 1:
                excerpt.append("   " + " " * width + " ...")
            mark = ">" if k in wanted else " "
            excerpt.append(f" {mark} {k:>{width}} | {lines[k - 1]}")
            prev = k
        parts.append("\n".join(excerpt))
    return "\n\n".join(parts)


def _raise_compile_error(err, source, offset, options, what):
    message = _format_error(err, source, offset, what)
    if offset and '"C" linkage' in (getattr(err, "log", "") or ""):
        message += ("\n\nhint: SourceModule wraps the source in extern \"C\" { }, where C++ "
                    "headers (such as <cuda_fp16.h>) and templates cannot go: pass "
                    "no_extern_c=True and mark the kernels extern \"C\" yourself")
    new = CompileError(message)
    new.log = getattr(err, "log", "") or ""
    new.source = source
    new.options = tuple(options)
    for attr in ("code", "name", "routine"):
        setattr(new, attr, getattr(err, attr, None))
    # PyCUDA's CompileError attributes
    new.msg = what + " failed"
    new.stdout = ""
    new.stderr = new.log
    new.command_line = getattr(err, "command_line", None)
    raise new from None


# ------------------------------------------------------------ disk entries

#: the environment variables that steer the search for NVRTC and the toolkit,
#: part of the quick key
_QUICK_ENV = ("BARECUDA_NVRTC", "CUDA_HOME", "CUDA_PATH")

def _env_deps(nvrtc_path):
    """The dependencies recorded with an NVRTC entry (see _diskcache): the paths
    whose stat stands for the NVRTC library, barecuda's headers and the toolkit's."""
    paths = [nvrtc_path, INCLUDE_DIR, NVRTC_STD_INCLUDE_DIR]
    toolkit = _toolkit_include()
    if toolkit:
        paths.append(toolkit)
    else:   # none found: one appearing where it is looked for first must miss
        paths += [os.path.join(r, "include", "cuda_fp16.h") for r in
                  (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda")
                  if r]
    return paths


def _deps_now(paths, user_dirs):
    """The dependency record of `paths` and `user_dirs` as they are now."""
    sig = _diskcache.sig
    return (tuple([(p, sig(p)) for p in paths]), _diskcache.nvidia_dirs(),
            _header_stamp(user_dirs) if user_dirs else ())


# ------------------------------------------------------------- compiling

class _Compiled:
    """One compiled image and what came with it."""
    __slots__ = ("kind", "image", "names", "log", "arch", "stamp", "dirs", "keep_dir",
                 "cache_path", "__weakref__")

    def __init__(self, kind, image, names, log, arch, stamp, keep_dir=None, cache_path=None,
                 dirs=()):
        self.dirs = dirs
        self.kind = kind
        self.image = image
        self.names = names
        self.log = log
        self.arch = arch
        self.stamp = stamp
        self.keep_dir = keep_dir
        self.cache_path = cache_path


def _seq(value, what):
    if value is None:
        return ()
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{what} must be a list of str, not a single string")
    return tuple(value)


def _source_text(source):
    """The source as str: str, bytes (UTF-8), or an object that renders itself as
    code through its own __str__ (a cgen/codepy syntax tree, as PyCUDA takes)."""
    if isinstance(source, bytes):
        return source.decode("utf-8")
    if isinstance(source, str):
        return source
    if type(source).__str__ is not object.__str__ and not isinstance(source, (int, float)):
        text = str(source)
        if isinstance(text, str):
            return text
    raise TypeError(f"source must be str, bytes or an object whose str() is CUDA code "
                    f"(such as a cgen Module), not {type(source).__name__}")


def _device_cc_of(dev):
    """10 * major + minor of Device `dev` (asked once per device)."""
    cc = _device_cc.get(dev.handle)
    if cc is None:
        major, minor = dev.compute_capability()
        cc = _device_cc[dev.handle] = 10 * major + minor
    return cc


def _current_device_cc():
    """10 * major + minor of the current context's device (activating the primary
    context when none is current), or raises barecuda.driver.Error."""
    return _device_cc_of(_drv.Context.get_device())


def _choose_target(arch, code, target, device_cc, backend, resolve=True):
    """(arch string for the compiler, image kind); (None, None) for the device's
    own architecture when `resolve` is false (the choice needs NVRTC loaded)."""
    if target not in _KINDS:
        raise ValueError(f"target must be one of {', '.join(_KINDS)}, not {target!r}")
    if target == "fatbin" and backend != "nvcc":
        raise ValueError("target='fatbin' needs backend='nvcc' (NVRTC makes CUBIN or PTX)")
    if arch is None and code is None:
        if backend == "nvcc":
            return f"sm_{device_cc}", target
        if not resolve:
            return None, None
        archs = _supported_archs()
        if target == "cubin" and device_cc in archs:
            return f"sm_{device_cc}", "cubin"
        older = [a for a in archs if a <= device_cc]
        if not older:
            raise CompileError(
                f"NVRTC {_nvrtc_version_text()} cannot compile for sm_{device_cc}: it knows "
                f"{', '.join(f'sm_{a}' for a in archs)}; use an older NVRTC or backend='nvcc'")
        return f"compute_{older[-1]}", "ptx"
    if backend == "nvcc":
        return arch or code, target
    chosen = code if code is not None else arch
    family, number, suffix = _parse_arch(chosen, "code" if code is not None else "arch")
    if family == "compute" or target == "ptx":
        return f"compute_{number}{suffix}", "ptx"
    return f"sm_{number}{suffix}", "cubin"


def _default_cc():
    """The current device's architecture, or without a usable GPU the newest
    architecture NVRTC supports."""
    try:
        return _current_device_cc()
    except _drv.Error:
        return _supported_archs()[-1]


def _nvcc_identity(nvcc):
    import shutil
    path = shutil.which(nvcc)
    if path is None:
        raise CompileError(f"nvcc was not found: {nvcc!r} is not on PATH "
                           "(install the CUDA toolkit or use backend='nvrtc')")
    return path, _file_identity(path)


def _run_nvcc(nvcc_path, text, options, arch, code, kind, keep):
    import shutil
    import subprocess
    import tempfile
    d = tempfile.mkdtemp(prefix="barecuda-nvcc-")
    try:
        with open(os.path.join(d, _PROGRAM), "w", encoding="utf-8") as f:
            f.write(text)
        out = "kernel." + kind
        cmd = [nvcc_path, "-" + kind, *options, "-arch", arch]
        if code:
            cmd += ["-code", code]
        cmd += [_PROGRAM, "-o", out]
        stats["nvcc"] += 1
        proc = subprocess.run(cmd, cwd=d, capture_output=True, text=True)
        log = (proc.stdout + proc.stderr).strip()
        if proc.returncode != 0:
            err = CompileError(log)
            err.log = log
            err.command_line = " ".join(cmd)
            raise err
        with open(os.path.join(d, out), "rb") as f:
            image = f.read()
        return image, log, d if keep else None
    finally:
        if keep:
            print(f"*** compiler output in {d}")
        else:
            shutil.rmtree(d, ignore_errors=True)


def _build(source, nvcc, options, keep, no_extern_c, arch, code, cache_dir_arg,
           include_dirs, backend, name_expressions, target, device_cc):
    """Compile (or find in a cache) and return a _Compiled."""
    if backend not in ("nvrtc", "nvcc"):
        raise ValueError(f"backend must be 'nvrtc' or 'nvcc', not {backend!r}")
    text = _source_text(source)
    options = _seq(options, "options")
    name_expressions = _seq(name_expressions, "name_expressions")
    include_dirs = [os.path.abspath(os.fspath(d)) for d in _seq(include_dirs, "include_dirs")]
    directory = get_cache_dir(cache_dir_arg)
    use_disk = directory is not None and not keep
    quick = None                  # NVRTC: the quick key and what its link gave
    bad = []                      # a damaged entry was seen (counted once)

    def quick_hit(stamp):
        """The quick look-up's entry as a _Compiled, if it is current and was made
        with the header stamp `stamp`; else None."""
        qkey, got, current = quick
        if not current:     # no intact entry, or its recorded files changed
            return None
        # unpacked here rather than through _diskcache.entry: no Entry on the hit path
        _, got_kind, (got_arch, got_names, got_log, got_deps), got_image = got
        if got_kind >= len(_KINDS) or got_deps[2] != stamp:
            return None
        stats["disk_quick_hits"] += 1
        stats["disk_hits"] += 1
        return _Compiled(_KINDS[got_kind], got_image, got_names, got_log, got_arch, stamp,
                         cache_path=_diskcache.link_path(directory, qkey), dirs=user_dirs)

    if use_disk and backend == "nvrtc" and all(type(o) is str for o in options):
        # the quick look-up, in C, before the inputs are worked over: a hash of the
        # inputs as given (relative include paths are relative to the working
        # directory), one read of the entry its link points at, a stat of each
        # dependency recorded there
        quick = _driver._cache_quick(directory, (
            "barecuda-kernel-cache-4", barecuda.__version__, target, str(arch), str(code),
            str(device_cc), "no_extern_c" if no_extern_c else "", "\0".join(options),
            "\0".join(include_dirs), os.getcwd(), INCLUDE_DIR, NVRTC_STD_INCLUDE_DIR,
            _PRELUDE, "\0".join(name_expressions), text), _QUICK_ENV, _diskcache.NOT_SITE)
        user_dirs = include_dirs
        if not include_dirs and not any(o.startswith(("-I", "--include-path")) for o in options):
            found = quick_hit(())   # no user header directory (else checked below)
            if found is not None:
                return found
    if backend == "nvcc" and name_expressions:
        raise ValueError("name_expressions needs backend='nvrtc'")

    # NVRTC: a struct attribute after the closing brace applied as nvcc (GCC) applies it
    body = _nvcc_compat.gnu_type_attributes(text) if backend == "nvrtc" else text
    if no_extern_c:
        full, offset = body, 0
    else:
        full, offset = 'extern "C" {\n' + body + "\n}\n", 1

    if backend == "nvrtc":
        opts, opt_incs, opt_arch, opt_code = _translate_options(options)
        arch = opt_arch if opt_arch is not None else arch
        code = opt_code if opt_code is not None else code
    else:
        opts, opt_incs = list(options), []
        for i, o in enumerate(options):
            if o == "-I" and i + 1 < len(options):
                opt_incs.append(os.path.abspath(options[i + 1]))
            elif isinstance(o, str) and o.startswith("-I") and len(o) > 2:
                opt_incs.append(os.path.abspath(o[2:]))
    arch_str, kind = _choose_target(arch, code, target, device_cc, backend, resolve=False)
    # arch_str None: the device's architecture, resolved against NVRTC's list only
    # when compiling, so that a cache hit does not need NVRTC loaded
    arch_key = arch_str or f"auto-{device_cc}-{target}"
    user_dirs = include_dirs + opt_incs

    def hit(entry, stamp, path):
        stats["disk_hits"] += 1
        if bad:
            stats["disk_rejected"] += 1
        return _Compiled(entry.kind, entry.image, entry.names, entry.log, entry.arch, stamp,
                         cache_path=path, dirs=user_dirs)

    if quick is not None:
        if user_dirs:
            found = quick_hit(_header_stamp(user_dirs))
            if found is not None:
                return found
        seen = _diskcache.entry(quick[1])
        if seen is False:
            bad.append(quick[0])
            seen = None
        quick = (quick[0], seen)

    if backend == "nvrtc":
        rest = opts + [f"--include-path={d}" for d in include_dirs + [INCLUDE_DIR]
                       + _toolkit_include_dirs() + [NVRTC_STD_INCLUDE_DIR]]
        rest.append(f"--pre-include={_PRELUDE}")
        nvrtc_path = _nvrtc_path()
        compiler_id = _nvrtc_identity(nvrtc_path) if nvrtc_path is not None else None
    else:
        rest = opts + [f"-I{d}" for d in include_dirs + [INCLUDE_DIR]]
        nvcc_path, compiler_id = _nvcc_identity(nvcc)
    stamp = _header_stamp(user_dirs) if user_dirs else ()
    key = path = None

    def make_key(cid):
        h = _diskcache.blake2b(digest_size=32)
        for part in ("barecuda-kernel-cache-4", barecuda.__version__, backend, cid or "?",
                     target, arch_key, code if backend == "nvcc" and code else "",
                     "\0".join(rest), "\0".join(name_expressions), full):
            h.update(part.encode("utf-8", "surrogateescape"))
            h.update(b"\1")
        h.update(_package_headers_digest())
        h.update(_header_digest(stamp))
        return h.digest()

    def fresh_deps():
        if backend != "nvrtc":
            return None
        return _deps_now(_env_deps(nvrtc_path), user_dirs)

    def lookup():
        name = key.hex() + _diskcache.ENTRY_SUFFIX
        entry = None
        if quick is not None and quick[1] is not None and quick[1].key == key:
            entry = quick[1]        # the link's entry after all: only its record moved
        else:
            entry = _diskcache.load(os.path.join(directory, name))
            if entry is False or (entry is not None and entry.key != key):
                bad.append(name)
                entry = None
        if entry is None:
            return None
        deps = fresh_deps()
        if deps != entry.deps:      # renew the record, so the next look-up is fast
            _diskcache.write(directory, key, entry.kind, entry.arch, entry.image,
                             entry.names, entry.log, deps)
        if quick is not None:
            _diskcache.link(directory, quick[0], name)
        return hit(entry, stamp, os.path.join(directory, name))

    if use_disk and compiler_id is not None:
        _headers.load_index(directory)
        key = make_key(compiler_id)
        _headers.save_index(directory)
        found = lookup()
        if found is not None:
            return found

    keep_dir = None
    if backend == "nvrtc":
        if _driver.loader_info()["libnvrtc"] is None:
            _driver.nvrtc_version()     # loads NVRTC (or raises Error naming the search)
        nvrtc_path = _nvrtc_path()
        real_id = _nvrtc_identity(nvrtc_path)
        if use_disk and real_id != compiler_id:
            # the prediction missed: look again under the loaded library's name
            compiler_id = real_id
            _headers.load_index(directory)
            key = make_key(compiler_id)
            _headers.save_index(directory)
            found = lookup()
            if found is not None:
                return found
        if arch_str is None:
            arch_str, kind = _choose_target(arch, code, target, device_cc, backend)
        final = [f"--gpu-architecture={arch_str}"] + rest
        stats["nvrtc"] += 1
        try:
            image, log, names = _driver._nvrtc_compile(
                full, _PROGRAM, final, None, name_expressions, kind)
        except CompileError as err:
            _raise_compile_error(err, text, offset, final,
                                 f"NVRTC {_nvrtc_version_text()} compiling for {arch_str}")
        if keep:
            keep_dir = _keep_files(full, final, image, kind, log)
    else:
        try:
            final = rest
            image, log, keep_dir = _run_nvcc(nvcc_path, full, final, arch_str,
                                             code if arch is not None else None, kind, keep)
        except OSError as err:
            raise CompileError(f"could not run {nvcc_path}: {err}") from None
        except CompileError as err:
            _raise_compile_error(err, text, offset, final, f"nvcc compiling for {arch_str}")
        names = {}
    if bad:
        stats["disk_rejected"] += 1
    if key is not None:
        name = _diskcache.write(directory, key, kind, arch_str, image, names, log, fresh_deps())
        path = os.path.join(directory, name)
        if quick is not None:
            _diskcache.link(directory, quick[0], name)
    return _Compiled(kind, image, names, log, arch_str, stamp, keep_dir, path, user_dirs)


def _keep_files(full, options, image, kind, log):
    import tempfile
    d = tempfile.mkdtemp(prefix="barecuda-nvrtc-")
    with open(os.path.join(d, _PROGRAM), "w", encoding="utf-8") as f:
        f.write(full)
    with open(os.path.join(d, "options.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(options) + "\n")
    with open(os.path.join(d, "kernel." + kind), "wb") as f:
        f.write(image)
    with open(os.path.join(d, "log.txt"), "w", encoding="utf-8") as f:
        f.write(log)
    print(f"*** compiler output in {d}")
    return d


def _get_compiled(source, nvcc, options, keep, no_extern_c, arch, code, cache_dir_arg,
                  include_dirs, backend, name_expressions, target, device_cc):
    """The memory layer in front of _build."""
    if options is None:
        options = DEFAULT_NVCC_FLAGS
    if _drv.CUDA_DEBUGGING:     # driver.set_debugging(): device debug code, kept, not cached
        options, keep, cache_dir_arg = [*_seq(options, "options"), "-g", "-G"], True, False
    use_memory = cache_dir_arg is not False and not keep
    if use_memory:
        try:
            mkey = (source, nvcc, _seq(options, "options"), bool(no_extern_c), arch, code,
                    _seq(include_dirs, "include_dirs"), backend,
                    _seq(name_expressions, "name_expressions"), target, device_cc)
            hash(mkey)
        except TypeError:
            mkey = None
        if mkey is not None:
            hit = _memory.get(mkey)
            if hit is not None and (not hit.dirs or _header_stamp(hit.dirs) == hit.stamp):
                stats["memory_hits"] += 1
                return hit
    compiled = _build(source, nvcc, options, keep, no_extern_c, arch, code, cache_dir_arg,
                      include_dirs, backend, name_expressions, target, device_cc)
    if use_memory and mkey is not None:
        with _lock:
            _memory[mkey] = compiled
    return compiled


def clear_memory_cache() -> None:
    """Forget the images and modules kept for this process (the disk cache stays)."""
    with _lock:
        _memory.clear()
        _loaded.clear()
        _recent.clear()
        _headers.clear()


def compile(source: str | bytes, nvcc: str = "nvcc", options: _Options = None,
            keep: bool = False, no_extern_c: bool = False, arch: str | None = None,
            code: str | None = None, cache_dir: _CacheDir = None,
            include_dirs: Sequence[str] = [], target: _Target = "cubin",
            name_expressions: Sequence[str] | None = None, backend: str = "nvrtc") -> bytes:
    """Compile CUDA C `source` and return the image (bytes): a CUBIN for
    ``target="cubin"``, PTX text for ``"ptx"``, a fatbin for ``"fatbin"``
    (``backend="nvcc"`` only).

    Needs no GPU when `arch` is given ("sm_90", "compute_90").  Without `arch`
    the current context's device is targeted, or with no usable GPU the newest
    architecture NVRTC supports.  For a device NVRTC does not know, PTX for the
    newest architecture it knows is returned (even for ``target="cubin"``)."""
    cc = None if (arch is not None or code is not None) else _default_cc()
    return _get_compiled(source, nvcc, options, keep, no_extern_c, arch, code, cache_dir,
                         include_dirs, backend, name_expressions, target, cc).image


# ------------------------------------------- PyCUDA's other pycuda.compiler names

def _env_flags():
    text = os.environ.get("BARECUDA_DEFAULT_NVCC_FLAGS")
    if text is None:
        text = os.environ.get("PYCUDA_DEFAULT_NVCC_FLAGS", "")
    return text.split()


#: The options SourceModule and compile use when given ``options=None``:
#: ``$BARECUDA_DEFAULT_NVCC_FLAGS`` (else ``$PYCUDA_DEFAULT_NVCC_FLAGS``) split on
#: white space, read at import; assign a new list to change them for the process.
DEFAULT_NVCC_FLAGS = _env_flags()

_nvcc_versions = {}                     # nvcc path -> its --version text


def _find_nvcc(nvcc, needed_for):
    """The full path of `nvcc`, or CompileError saying what needed it."""
    import shutil
    if not isinstance(nvcc, (str, os.PathLike)):
        raise TypeError(f"nvcc must be a str naming the nvcc executable, not {type(nvcc).__name__}")
    path = shutil.which(os.fspath(nvcc))
    if path is None:
        raise CompileError(f"{needed_for} needs nvcc, and {os.fspath(nvcc)!r} was not found "
                           "(not on PATH, or not executable): install the CUDA toolkit, "
                           "put its bin directory on PATH, or pass nvcc='/path/to/nvcc'")
    return path


def _run(cmd, cwd=None):
    import subprocess
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True)
    except OSError as err:
        raise CompileError(f"could not run {cmd[0]}: {err}") from None


def _nvcc_failure(message, cmd, proc):
    """CompileError with PyCUDA's attributes; the message shows nvcc's stderr (its
    stdout may be pages of partial output) and the command."""
    out = proc.stdout.decode("utf-8", "replace")
    errtext = proc.stderr.decode("utf-8", "replace")
    shown = errtext.strip() or out.strip()[-4000:]
    err = CompileError(f"{message}:\n{shown}\n\ncommand: {' '.join(cmd)}")
    err.msg = message
    err.command_line = " ".join(cmd)
    err.stdout = out
    err.stderr = errtext
    err.log = errtext
    return err


def get_nvcc_version(nvcc: str = "nvcc") -> str:
    """The text ``nvcc --version`` prints (remembered per executable), as PyCUDA's
    get_nvcc_version; ``"nvcc unknown version"``, with a warning, when nvcc runs
    but says nothing useful.  CompileError when `nvcc` cannot be found; NVRTC's
    version is ``barecuda.driver.nvrtc_version()``."""
    path = _find_nvcc(nvcc, "get_nvcc_version")
    text = _nvcc_versions.get(path)
    if text is None:
        proc = _run([path, "--version"])
        if proc.returncode != 0 or not proc.stdout:
            import warnings
            warnings.warn(f"the version of {path} could not be determined", stacklevel=2)
            return "nvcc unknown version"
        text = _nvcc_versions[path] = proc.stdout.decode("utf-8", "replace")
    return text


def preprocess_source(source: str | bytes, options: _Options, nvcc: str = "nvcc") -> str:
    """`source` after nvcc's preprocessor (``nvcc --preprocess``, without line
    markers), as PyCUDA's preprocess_source: `options` are nvcc options (-I, -D,
    ...); barecuda's device headers are on the include path after them.  NVRTC
    has no preprocess-only mode, so this always runs nvcc: CompileError when it
    cannot be found or when preprocessing fails (the message holds nvcc's output)."""
    import tempfile
    text = _source_text(source)
    options = [os.fspath(o) for o in _seq(options, "options")]
    path = _find_nvcc(nvcc, "preprocess_source")
    fd, src_path = tempfile.mkstemp(suffix=".cu", prefix="barecuda-pp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        cmd = [path, "--preprocess", *options, f"-I{INCLUDE_DIR}", src_path,
               "--compiler-options", "-P"]
        proc = _run(cmd)
    finally:
        try:
            os.unlink(src_path)
        except OSError:
            pass
    if proc.returncode != 0:
        raise _nvcc_failure(f"nvcc preprocessing of {src_path} failed", cmd, proc)
    out = proc.stdout.decode("utf-8", "replace")
    if len(out) < 0.5 * len(text):
        raise _nvcc_failure(f"nvcc preprocessing of {src_path} gave almost no output "
                            "(an unsupported host compiler?)", cmd, proc)
    # the temporary file's name would make the text differ from run to run
    return out.replace(os.path.basename(src_path), "")


_ARCH_OPTS = {"-arch": "arch", "--gpu-architecture": "arch", "-code": "code", "--gpu-code": "code"}


def _split_arch(options):
    """(options without -arch/-code, arch, code): the architecture options nvcc
    takes, in any of their spellings, taken out (the last one given wins)."""
    rest, found = [], {"arch": None, "code": None}
    opts = list(options)
    i = 0
    while i < len(opts):
        opt = opts[i]
        i += 1
        if isinstance(opt, str):
            name, eq, value = opt.partition("=")
            if name in _ARCH_OPTS:
                if not eq:
                    if i >= len(opts):
                        raise ValueError(f"option {opt} needs a value")
                    value = opts[i]
                    i += 1
                found[_ARCH_OPTS[name]] = value
                continue
        rest.append(opt)
    return rest, found["arch"], found["code"]


def compile_plain(source: str | bytes, options: _Options, keep: bool, nvcc: str,
                  cache_dir: _CacheDir, target: _Target = "cubin",
                  backend: str | None = None) -> bytes:
    """Compile `source` exactly as given (no extern "C" wrapper, no added include
    directories beyond barecuda's device headers) with the nvcc-style `options`,
    and return the image (bytes), as PyCUDA's compile_plain.

    PyCUDA runs nvcc here; barecuda compiles with NVRTC (``backend="nvrtc"``),
    translating the options as SourceModule does, unless ``backend="nvcc"`` is
    asked for.  ``target="fatbin"``, which NVRTC cannot make, uses nvcc when no
    backend is named.  ``-arch``/``-code`` among the options choose the
    architecture (else the current device's, or with no GPU the newest NVRTC
    knows).  `cache_dir`: a directory, None for barecuda's default, or False
    for no cache.  `keep` keeps the compiler's files and prints where."""
    if backend is None:
        backend = "nvcc" if target == "fatbin" else "nvrtc"
    if target not in _KINDS:
        raise ValueError(f"target must be one of {', '.join(_KINDS)}, not {target!r}")
    rest, arch, code = _split_arch(_seq(options, "options"))
    if backend == "nvcc":
        _find_nvcc(nvcc, "compile_plain(backend='nvcc')")
    return compile(source, nvcc=nvcc, options=rest, keep=keep, no_extern_c=True, arch=arch,
                   code=code, cache_dir=cache_dir, include_dirs=[], target=target,
                   backend=backend)


_ARCH_NUMBER = re.compile(r"^(?:sm|compute|lto)_(\d+)[af]?$")


class CudaModule:
    """Base class of the module classes (PyCUDA's CudaModule): an object holding
    a loaded ``barecuda.driver.Module`` as ``.module``, whose kernels and globals
    it hands out.  ``SourceModule`` is one; subclasses set ``self.module`` and
    then call ``self._bind_module()``."""

    module: Module | None = None

    def _check_arch(self, arch):
        """Warn when `arch` ("sm_90", "compute_90") is newer than the current
        device: the image would not load there.  Quiet without a device."""
        if arch is None:
            return
        m = _ARCH_NUMBER.match(arch) if isinstance(arch, str) else None
        if m is None:
            return  # the compiler reports a malformed architecture
        try:
            cc = _current_device_cc()
        except _drv.Error:
            return
        if int(m.group(1)) > cc:
            import warnings
            warnings.warn(f"compiling for {arch}, newer than the current device "
                          f"(compute capability {cc // 10}.{cc % 10}): the module will "
                          "not load on it", stacklevel=3)

    def _bind_module(self):
        """Expose the loaded module's get_global (and get_texref/get_surfref
        where the driver binding has them) on this object."""
        self.get_global = self.module.get_global
        for name in ("get_texref", "get_surfref"):
            if hasattr(self.module, name):
                setattr(self, name, getattr(self.module, name))

    def get_function(self, name: str) -> Function:
        """The kernel `name` of the loaded module (a ``barecuda.driver.Function``)."""
        if self.module is None:
            raise _drv.LogicError(f"{type(self).__name__} has no loaded module yet")
        return self.module.get_function(name)


class _Loaded:
    """A Module loaded from a _Compiled in one context, shared by SourceModules."""
    __slots__ = ("module", "context", "compiled", "__weakref__")

    def __init__(self, module, context, compiled):
        self.module = module
        self.context = context
        self.compiled = compiled


def _load(image, kind):
    # module_from_buffer NUL-terminates PTX text itself
    return _drv.module_from_buffer(image)


class SourceModule(CudaModule):
    """CUDA C compiled and loaded into the current context (PyCUDA's SourceModule).

    Attributes: ``module`` (the driver Module), ``cubin`` / ``ptx`` (the image,
    None for the kind not produced), ``arch`` (what it was compiled for),
    ``log`` (compiler warnings), ``lowered_names`` ({name expression: mangled
    name}), ``keep_dir`` (with ``keep=True``).
    """

    def __init__(self, source: str | bytes, nvcc: str = "nvcc", options: _Options = None,
                 keep: bool = False, no_extern_c: bool = False, arch: str | None = None,
                 code: str | None = None, cache_dir: _CacheDir = None,
                 include_dirs: Sequence[str] = [], backend: str = "nvrtc",
                 name_expressions: Sequence[str] | None = None) -> None:
        ctx = _drv.Context.get_current()
        if ctx is None:
            _drv.Context.get_device()       # activates the primary context
            ctx = _drv.Context.get_current()
        cc = None
        if arch is None and code is None:
            cc = _device_cc_of(ctx.device)
        compiled = _get_compiled(source, nvcc, options, keep, no_extern_c, arch, code,
                                 cache_dir, include_dirs, backend, name_expressions, "cubin", cc)
        lkey = (ctx.handle, id(compiled))
        loaded = _loaded.get(lkey) if cache_dir is not False else None
        if loaded is None or loaded.compiled is not compiled or loaded.context.released \
                or loaded.context != ctx:
            module = _load(compiled.image, compiled.kind)
            loaded = _Loaded(module, ctx, compiled)
            if cache_dir is not False:
                with _lock:
                    _loaded[lkey] = loaded
                    if ctx.is_primary:
                        _recent[lkey] = loaded
                        if len(_recent) > _KEEP_LOADED:
                            _recent.popitem(last=False)
        self._loaded = loaded
        self.module = loaded.module
        self.cubin = compiled.image if compiled.kind == "cubin" else None
        self.ptx = compiled.image if compiled.kind == "ptx" else None
        self.fatbin = compiled.image if compiled.kind == "fatbin" else None
        self.arch = compiled.arch
        self.log = compiled.log
        self.lowered_names = dict(compiled.names)
        self.keep_dir = compiled.keep_dir
        self.cache_path = compiled.cache_path

    def _lowered(self, name):
        return self.lowered_names.get(name, name)

    def get_function(self, name: str) -> Function:
        """The kernel `name` (a name expression given to SourceModule, or a plain
        extern "C" name)."""
        return self.module.get_function(self._lowered(name))

    def get_global(self, name: str) -> tuple[ModuleGlobal, int]:
        """(device pointer, size in bytes) of the __device__/__constant__ variable `name`."""
        return self.module.get_global(self._lowered(name))

    def __repr__(self) -> str:
        kind = "cubin" if self.cubin is not None else "ptx" if self.ptx is not None else "fatbin"
        return f"<barecuda.compiler.SourceModule {kind} for {self.arch}>"


# ------------------------------------------------- linking (dynamic parallelism)

_LINK_ONLY = ("-l", "-L", "--library", "--library-path")
_NVCC_RDC = ("-dc", "--device-c")


def _rdc_options(options):
    """nvcc-style options for one unit of a linked module: link-time options
    (``-lcudadevrt``, ``-L dir``) dropped, relocatable device code switched on
    unless the options say otherwise."""
    opts = list(_seq(options, "options"))
    out, rdc = [], False
    i = 0
    while i < len(opts):
        opt = opts[i]
        i += 1
        if not isinstance(opt, str):
            raise TypeError(f"options must be str, not {type(opt).__name__}: {opt!r}")
        if opt in _LINK_ONLY:
            i += 1              # the value follows as its own item
            continue
        if opt.startswith(_LINK_ONLY):
            continue
        if opt in _NVCC_RDC:
            opt = "-rdc=true"
        if opt.split("=", 1)[0] in ("-rdc", "--relocatable-device-code"):
            rdc = True
        out.append(opt)
    if not rdc:
        out.append("-rdc=true")
    return out


class DynamicModule:
    """A Module linked from several units by the driver's JIT linker
    (PyCUDA's DynamicModule)::

        mod = DynamicModule()
        mod.add_source(outer_cu).add_source(inner_cu).add_stdlib("cudadevrt")
        mod.link()
        kernel = mod.get_function("outer")

    ``add_source`` compiles CUDA C with NVRTC as relocatable device code (the
    device's CUBIN, or PTX where NVRTC does not know the device); ``add_data``
    and ``add_file`` add images made elsewhere (a jit_input_type says which
    kind); ``add_stdlib("cudadevrt")`` adds the toolkit's device runtime, which
    kernels that launch kernels need.  ``link()`` makes ``module``, after which
    ``get_function``/``get_global`` work.  The arguments mean what they mean
    for SourceModule; `link_options`, `message_handler` and `log_verbose` go to
    the ``driver.Linker``; `cuda_libdir` is where ``add_stdlib`` looks first.
    """

    def __init__(self, nvcc: str = "nvcc", link_options: Any = None, keep: bool = False,
                 no_extern_c: bool = False, arch: str | None = None, code: str | None = None,
                 cache_dir: _CacheDir = None, include_dirs: Sequence[str] = [],
                 message_handler: _MessageHandler = None, log_verbose: bool = False,
                 cuda_libdir: str | os.PathLike[str] | None = None) -> None:
        self.linker = _drv.Linker(message_handler, link_options, log_verbose)
        self.nvcc = nvcc
        self.keep = keep
        self.no_extern_c = no_extern_c
        self.arch = arch
        self.code = code
        self.cache_dir = cache_dir
        self.include_dirs = list(_seq(include_dirs, "include_dirs"))
        self.cuda_libdir = cuda_libdir
        self.module = None
        self._calls_devrt = False   # some add_source unit may call the device runtime

    def _open_linker(self):
        if self.linker is None:
            raise _drv.LogicError("this DynamicModule is already linked: inputs can no "
                                  "longer be added")
        return self.linker

    def add_source(self, source: str | bytes, nvcc_options: _Options = None,
                   name: str = "kernel.ptx") -> Self:
        """Compile CUDA C `source` as relocatable device code and add it; returns
        self.  nvcc-style options as for SourceModule; link-time ones
        (``-lcudadevrt``) are dropped and ``-rdc=true`` is added."""
        linker = self._open_linker()
        image = compile(source, nvcc=self.nvcc, options=_rdc_options(nvcc_options),
                        keep=self.keep, no_extern_c=self.no_extern_c, arch=self.arch,
                        code=self.code, cache_dir=self.cache_dir,
                        include_dirs=self.include_dirs, target="cubin")
        self._calls_devrt = self._calls_devrt or _cubin.needs_device_runtime(image)
        # a CUBIN (ELF) for the device's architecture, else PTX (see compile)
        if bytes(image[:4]) == b"\x7fELF":
            kind = _drv.jit_input_type.CUBIN
            if name == "kernel.ptx":
                name = "kernel.cubin"
        else:
            kind = _drv.jit_input_type.PTX
        linker.add_data(image, kind, name)
        return self

    def add_data(self, data: str | bytes, input_type: int, name: str = "unknown") -> Self:
        """Add an image from memory (see driver.Linker.add_data); returns self."""
        self._open_linker().add_data(data, input_type, name)
        return self

    def add_file(self, filename: str, input_type: int) -> Self:
        """Add an image from a file (see driver.Linker.add_file); returns self."""
        self._open_linker().add_file(filename, input_type)
        return self

    def add_stdlib(self, libname: str) -> Self:
        """Add the toolkit's static device library lib<libname>.a (such as
        "cudadevrt"), from `cuda_libdir` when given, else from where the CUDA
        toolkit is found; returns self."""
        linker = self._open_linker()
        if not isinstance(libname, str):
            raise TypeError(f"libname must be a str, not {type(libname).__name__}")
        if self.cuda_libdir is not None:
            path = os.path.join(os.fspath(self.cuda_libdir), f"lib{libname}.a")
            if not os.path.isfile(path):
                raise FileNotFoundError(f"CUDA library file {path!r} not found "
                                        "(cuda_libdir was given)")
        else:
            path = _driver._find_cuda_library(libname)
        linker.add_file(path, _drv.jit_input_type.LIBRARY)
        return self

    def link(self) -> Self:
        """Link what was added into ``module``; returns self."""
        linker = self._open_linker()
        self.module = linker.link_module()
        self.linker = None
        return self

    def _linked(self):
        if self.module is None:
            raise _drv.LogicError("this DynamicModule is not linked yet: call link() first")
        return self.module

    def get_function(self, name: str) -> Function:
        """The kernel `name` of the linked module."""
        return self._linked().get_function(name)

    def get_global(self, name: str) -> tuple[ModuleGlobal, int]:
        """(device pointer, size in bytes) of the __device__/__constant__ variable `name`."""
        return self._linked().get_global(name)

    def __repr__(self) -> str:
        state = "linked" if self.module is not None else "not linked"
        return f"<barecuda.compiler.{type(self).__name__} ({state})>"


class DynamicSourceModule(DynamicModule):
    """CUDA C compiled as relocatable device code, linked with the device runtime
    (cudadevrt) so its kernels can launch kernels (PyCUDA's DynamicSourceModule).
    Used like SourceModule; the module is linked when the constructor returns.  A unit
    that calls nothing of the device runtime is linked without it (the same module,
    made faster)."""

    def __init__(self, source: str | bytes, nvcc: str = "nvcc", options: _Options = None,
                 keep: bool = False, no_extern_c: bool = False, arch: str | None = None,
                 code: str | None = None, cache_dir: _CacheDir = None,
                 include_dirs: Sequence[str] = [],
                 cuda_libdir: str | os.PathLike[str] | None = None) -> None:
        super().__init__(nvcc=nvcc, link_options=None, keep=keep, no_extern_c=no_extern_c,
                         arch=arch, code=code, cache_dir=cache_dir, include_dirs=include_dirs,
                         cuda_libdir=cuda_libdir)
        if options is None:
            options = globals().get("DEFAULT_NVCC_FLAGS") or []
        options = list(_seq(options, "options"))
        if "-rdc=true" not in options:
            options.append("-rdc=true")
        if "-lcudadevrt" not in options:
            options.append("-lcudadevrt")
        self.add_source(source, nvcc_options=options)
        # the device runtime only where the unit calls it (launches kernels, say): a
        # link with libcudadevrt costs the driver more than compiling the unit does
        if self._calls_devrt:
            self.add_stdlib("cudadevrt")
        self.link()


__all__ += ["DynamicModule", "DynamicSourceModule"]
