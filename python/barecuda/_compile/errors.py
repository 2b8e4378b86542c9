# SPDX-License-Identifier: MIT
"""CompileError messages: what failed, the compiler's log with the program's own
line numbers, the offending lines of the source, and PyCUDA's attributes."""

from __future__ import annotations

import re

from barecuda import _driver
from barecuda._compile import toolkit as _toolkit

CompileError = _driver.CompileError
_PROGRAM = "kernel.cu"


# A header of CCCL (libcu++, CUB, Thrust and <nv/target>) that NVRTC could not open.
_CCCL_MISSING = re.compile(r'cannot open source file "(?P<header>(?:nv|cuda|cub|thrust)/[^"]*)"')
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


def _cccl_hint(log, options):
    """A hint for a log that says a CCCL header could not be opened while no CCCL
    directory was on the include path ("" otherwise): what to install."""
    m = _CCCL_MISSING.search(log)
    if m is None:
        return ""
    dirs = [o.split("=", 1)[1] for o in options if o.startswith("--include-path=")]
    if not dirs:
        return ""          # nvcc's options: the toolkit it belongs to has CCCL
    if _toolkit._find_header(_toolkit.CCCL_MARKER, dirs) is not None:
        return ""          # CCCL is there: the header itself does not exist
    return (f"\n\nhint: <{m.group('header')}> is a header of CCCL (NVIDIA's C++ core "
            "libraries: libcu++, CUB, Thrust), and no CCCL was found on the include path "
            "(CUDA 13's <curand_kernel.h> includes <nv/target>): "
            + _toolkit._cccl_install_advice())


def _raise_compile_error(err, source, offset, options, what):
    message = _format_error(err, source, offset, what)
    if offset and '"C" linkage' in (getattr(err, "log", "") or ""):
        message += ("\n\nhint: SourceModule wraps the source in extern \"C\" { }, where C++ "
                    "headers (such as <cuda_fp16.h>) and templates cannot go: pass "
                    "no_extern_c=True and mark the kernels extern \"C\" yourself")
    message += _cccl_hint(getattr(err, "log", "") or "", options)
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
    new.command_line = getattr(err, "command_line", None) or list(options)  # NVRTC's options
    raise new from None

