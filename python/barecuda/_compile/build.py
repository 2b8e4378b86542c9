# SPDX-License-Identifier: MIT
"""Compiling, with the kernel cache in front: the memory of the process and the disk
(barecuda._compile.diskcache).  Keys hash the source, the options, the architecture,
the compiler (NVRTC library file or nvcc executable), barecuda's version and the
contents of every header under the include directories; an NVRTC entry is first
looked for by a quick key of the input alone (in C), then its recorded files are
checked by their stat.  SourceModule and compile (barecuda.compiler) call _build.
"""

from __future__ import annotations

import collections
import os
import threading
import weakref

import barecuda
from barecuda import _driver
from barecuda._compile import diskcache as _diskcache
from barecuda._compile import headers as _headers
from barecuda._compile import nvcc_compat as _nvcc_compat
from barecuda._compile import toolkit as _toolkit
from barecuda._compile.errors import _PROGRAM, _raise_compile_error
from barecuda._compile.options import _choose_target, _seq, _source_text, _translate_options
from barecuda._compile.toolkit import _nvrtc_version_text
from barecuda._core.names import public

CompileError = _driver.CompileError
_header_stamp = _headers.header_stamp
_header_digest = _headers.header_digest
_ENTRY_HEAD = _diskcache.HEAD
_KINDS = _diskcache.KINDS

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


# ------------------------------------------------------------ disk entries

#: the environment variables that steer the search for NVRTC and the toolkit,
#: part of the quick key
_QUICK_ENV = ("BARECUDA_NVRTC", "CUDA_HOME", "CUDA_PATH")

def _env_deps(nvrtc_path):
    """The dependencies recorded with an NVRTC entry (see _diskcache): the paths
    whose stat stands for the NVRTC library, barecuda's headers and the toolkit's."""
    paths = [nvrtc_path, _toolkit.INCLUDE_DIR, _toolkit.NVRTC_STD_INCLUDE_DIR]
    toolkit = _toolkit._toolkit_include()
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



def _nvcc_identity(nvcc):
    import shutil
    path = shutil.which(nvcc)
    if path is None:
        raise CompileError(f"nvcc was not found: {nvcc!r} is not on PATH "
                           "(install the CUDA toolkit or use backend='nvrtc')")
    return path, _toolkit._file_identity(path)


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
    directory = _toolkit.get_cache_dir(cache_dir_arg)
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
            "\0".join(include_dirs), os.getcwd(), _toolkit.INCLUDE_DIR, _toolkit.NVRTC_STD_INCLUDE_DIR,
            _toolkit._PRELUDE, "\0".join(name_expressions), text), _QUICK_ENV, _diskcache.NOT_SITE)
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
        rest = opts + [f"--include-path={d}" for d in include_dirs + [_toolkit.INCLUDE_DIR]
                       + _toolkit._toolkit_include_dirs() + [_toolkit.NVRTC_STD_INCLUDE_DIR]]
        rest.append(f"--pre-include={_toolkit._PRELUDE}")
        nvrtc_path = _toolkit._nvrtc_path()
        compiler_id = _toolkit._nvrtc_identity(nvrtc_path) if nvrtc_path is not None else None
    else:
        rest = opts + [f"-I{d}" for d in include_dirs + [_toolkit.INCLUDE_DIR]]
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
        h.update(_toolkit._package_headers_digest())
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
        nvrtc_path = _toolkit._nvrtc_path()
        real_id = _toolkit._nvrtc_identity(nvrtc_path)
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



@public("barecuda.compiler")
def clear_memory_cache() -> None:
    """Forget the images and modules kept for this process (the disk cache stays)."""
    with _lock:
        _memory.clear()
        _loaded.clear()
        _recent.clear()
        _headers.clear()

