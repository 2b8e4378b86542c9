# SPDX-License-Identifier: MIT
"""What to compile and for which architecture: nvcc-style options translated for
NVRTC, the architecture options parsed, the source taken as text, and the target
chosen from the device (its own CUBIN when NVRTC knows it, else PTX for the
newest architecture NVRTC knows that the device can run).
"""

from __future__ import annotations

import os
import re

from barecuda import _driver
from barecuda._compile import diskcache as _diskcache
from barecuda._compile.toolkit import _nvrtc_version_text, _supported_archs

CompileError = _driver.CompileError
_KINDS = _diskcache.KINDS
_device_cc = {}                         # device ordinal -> 10 * major + minor


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


def _str_list(options):
    """The options as a list; TypeError naming the first that is not a str."""
    opts = list(options)
    for opt in opts:
        if not isinstance(opt, str):
            raise TypeError(f"options must be str, not {type(opt).__name__}: {opt!r}")
    return opts


def _translate_options(options):
    """nvcc-style options -> (NVRTC options, include dirs named, arch, code).

    ``-arch``/``-code`` given as options are returned (they override the
    SourceModule arguments); include directories are made absolute."""
    out, incs, arch, code = [], [], None, None
    opts = _str_list(options)
    i = 0
    while i < len(opts):
        opt = opts[i]
        i += 1
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



def _seq(value, what):
    if value is None:
        return ()
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{what} must be a list of str, not a single string")
    return tuple(value)


_LINK_ONLY = ("-l", "-L", "--library", "--library-path")
_NVCC_RDC = ("-dc", "--device-c")


def _rdc_options(options):
    """nvcc-style options for one unit of a linked module (DynamicSourceModule):
    link-time options (``-lcudadevrt``, ``-L dir``) dropped, relocatable device code
    switched on unless the options say otherwise."""
    opts = _str_list(_seq(options, "options"))
    out, rdc = [], False
    i = 0
    while i < len(opts):
        opt = opts[i]
        i += 1
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
    return _device_cc_of(_driver.Context.get_device())


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
    except _driver.Error:
        return _supported_archs()[-1]

