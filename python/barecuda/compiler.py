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
a hit costs a read and a few stats (see ``barecuda._compile.diskcache``); barecuda's
own headers count as changed when their directories are (a reinstall).

Loaded modules: each SourceModule has its own ``__constant__``, ``__device__`` and
``__managed__`` variables, as in PyCUDA, so an image that has any is loaded for every
SourceModule made of it.  An image without them (read from its symbol table:
``barecuda._compile.cubin.module_globals``) is loaded once per context and the module
shared by the SourceModules made of it, which then cost no load (``cache_dir=False``
shares nothing).
"""

from __future__ import annotations

import os
import re
import weakref
from typing import TYPE_CHECKING

from barecuda import _driver
from barecuda import driver as _drv
from barecuda._compile import cubin as _cubin
from barecuda._compile import diskcache as _diskcache
from barecuda._compile import headers as _headers
from barecuda._compile import nvcc_compat as _nvcc_compat

# The face of the compilation floor.  Its machinery (barecuda._compile) and the names
# programs and tests reach through this module: the caches and stats are the same
# objects, so what is done to them here shows there.
from barecuda._compile.build import (  # noqa: F401
    _ENTRY_HEAD,
    _KEEP_LOADED,
    _KINDS,
    _QUICK_ENV,
    _Compiled,
    _build,
    _deps_now,
    _env_deps,
    _keep_files,
    _loaded,
    _lock,
    _memory,
    _nvcc_identity,
    _recent,
    _run_nvcc,
    clear_memory_cache as clear_memory_cache,
    stats as stats,
)
from barecuda._compile.errors import _LOG_LINE, _PROGRAM, _format_error, _raise_compile_error  # noqa: F401
from barecuda._compile.options import (  # noqa: F401
    _ARCH_OPTS,
    _ARCH_RE,
    _DROP,
    _DROP_WITH_VALUE,
    _O_LEVEL,
    _RENAME,
    _WITH_VALUE,
    _choose_target,
    _current_device_cc,
    _default_cc,
    _device_cc,
    _device_cc_of,
    _parse_arch,
    _rdc_options,
    _seq,
    _source_text,
    _split_arch,
    _translate_options,
)
from barecuda._compile.toolkit import (  # noqa: F401
    _PACKAGE_DIR,
    _PRELUDE,
    CCCL_MARKER as CCCL_MARKER,
    INCLUDE_DIR as INCLUDE_DIR,
    NVRTC_STD_INCLUDE_DIR as NVRTC_STD_INCLUDE_DIR,
    _cccl_install_advice,
    _file_identity,
    _find_header,
    _header_digest,
    _header_files,
    _header_stamp,
    _nvrtc_identity,
    _nvrtc_path,
    _nvrtc_version_text,
    _once,
    _package_headers_digest,
    _predict_nvrtc,
    _supported_archs,
    _toolkit_dirs,
    _toolkit_include,
    _toolkit_include_dirs,
    _wheel_companions,
    _wheel_header_dirs,
    get_cache_dir as get_cache_dir,
)

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


# --------------------------------------------------------------- compiling
# SourceModule and compile() read DEFAULT_NVCC_FLAGS and driver.CUDA_DEBUGGING here,
# where programs set them; _build (barecuda._compile.build) does the rest.

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


# _Compiled -> whether its image keeps variables in module memory (read once per image)
_holds_globals = weakref.WeakKeyDictionary()


def _has_globals(compiled):
    """Whether the image of `compiled` has __constant__/__device__/__managed__
    variables (barecuda._compile.cubin.module_globals); True when it cannot tell."""
    verdict = _holds_globals.get(compiled)
    if verdict is None:
        verdict = _holds_globals[compiled] = _cubin.has_module_globals(compiled.image)
    return verdict


def _module_for(compiled, ctx, shareable):
    """(Module, _Loaded or None): the module a SourceModule of `compiled` runs in `ctx`.

    Each SourceModule has its own variables, as in PyCUDA: an image with any gets a
    module loaded for this SourceModule alone, which goes (is unloaded) with the last
    of the SourceModule and its Functions.  An image without variables has nothing
    two SourceModules could see of each other, so one module loaded per context is
    shared (kept in _loaded, and the last _KEEP_LOADED of primary contexts in _recent):
    a repeated SourceModule then costs no load.  `shareable` is False for
    cache_dir=False: nothing is kept."""
    if not shareable or _has_globals(compiled):
        return _load(compiled.image, compiled.kind), None
    lkey = (ctx.handle, id(compiled))
    loaded = _loaded.get(lkey)
    if loaded is not None and loaded.compiled is compiled and not loaded.context.released \
            and loaded.context == ctx:
        return loaded.module, loaded
    loaded = _Loaded(_load(compiled.image, compiled.kind), ctx, compiled)
    with _lock:
        _loaded[lkey] = loaded
        if ctx.is_primary:
            _recent[lkey] = loaded
            if len(_recent) > _KEEP_LOADED:
                _recent.popitem(last=False)
    return loaded.module, loaded


class SourceModule(CudaModule):
    """CUDA C compiled and loaded into the current context (PyCUDA's SourceModule).

    Its ``__constant__``/``__device__``/``__managed__`` variables are its own: a
    module is loaded for it alone when the source has any (see the module's
    docstring on sharing the others).

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
        # _loaded holds a shared module weakly: self._loaded keeps its entry alive
        self.module, self._loaded = _module_for(compiled, ctx, cache_dir is not False)
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
