# SPDX-License-Identifier: MIT
"""barecuda in Jupyter: the ``%%cuda`` cell magic and rich displays.

Load it in a notebook (or IPython) with::

    %load_ext barecuda

A cell starting with ``%%cuda`` is CUDA C.  It is compiled with
``barecuda.compiler.SourceModule`` and each of its kernels becomes a Python
name in the notebook, a ``barecuda.driver.Function`` ready to launch::

    %%cuda --arch sm_90 -D N=256
    __global__ void twice(float *a) { a[threadIdx.x] *= 2; }

Options on the magic line (``%%cuda --help`` lists them): ``-a/--arch``
(``sm_90``, ``compute_90``), ``-D NAME[=VALUE]``, ``-I DIR``, ``-n/--name-expression
[PYNAME=]EXPR`` (C++ kernels such as ``add<float>``, bound as ``add_float`` or
as PYNAME), ``--no-extern-c``, ``-o/--option OPTION`` (any other NVRTC option),
``-m/--module NAME`` (the SourceModule itself as NAME), ``--compile-only``
(compile and report, bind nothing), ``--ptx`` (with --compile-only: PTX instead of
CUBIN) and ``-q/--quiet``.  A compile error shows the compiler's log and the
cell's lines with the errors marked, and no traceback.  On a machine without a
GPU the cell is still compiled (NVRTC needs no GPU) and the report says that its
kernels could not be bound.

The extension also registers HTML displays, through IPython's display
formatters, for ``driver.Device`` (a table of what matters when writing
kernels), ``gpuarray.GPUArray`` (NumPy's summary of the values, read back in
small corner pieces only, plus device and dtype) and ``trace.Trace`` (the timeline
SVG and the summary); :func:`occupancy` returns a small plot of occupancy
against block size for a kernel (``%cuda_occupancy kernel`` shows it).

This module imports IPython only when the extension is loaded, and
``import barecuda`` never imports this module.
"""

from __future__ import annotations

import argparse
import html
import keyword
import re
import shlex
import sys
from typing import TYPE_CHECKING, Any

import numpy as np

from barecuda import driver as _drv
from barecuda._compile.cubin import kernel_names

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

__all__ = ["load_ipython_extension", "unload_ipython_extension", "CellReport",
           "CellCompileError", "CompiledCell", "OccupancyCurve", "occupancy",
           "device_html", "gpuarray_html", "trace_html", "array_preview",
           "kernel_names", "parse_magic_line", "MagicOptionsError"]


# {{{ the magic line

class MagicOptionsError(ValueError):
    """A bad option on the ``%%cuda`` line (shown as IPython's UsageError)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:   # argparse would exit the kernel
        raise MagicOptionsError(f"%%cuda: {message}\n{self.format_usage().rstrip()}")

    def exit(self, status: int = 0, message: str | None = None) -> Any:
        raise MagicOptionsError(message or "")


def _parser() -> _Parser:
    p = _Parser(prog="%%cuda", add_help=False, allow_abbrev=False,
                description="Compile the cell as CUDA C with SourceModule and bind its "
                            "kernels as Python names.")
    p.add_argument("-a", "--arch", help="target architecture: sm_XY (CUBIN) or compute_XY "
                   "(PTX); default: the current GPU's")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]",
                   help="a preprocessor definition (repeatable)")
    p.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR",
                   help="a header directory (repeatable)")
    p.add_argument("-n", "--name-expression", dest="names", action="append", default=[],
                   metavar="[PYNAME=]EXPR",
                   help="a C++ kernel to bind, such as 'add<float>' (repeatable)")
    p.add_argument("--no-extern-c", action="store_true",
                   help="do not wrap the cell in extern \"C\" (C++ templates, headers)")
    p.add_argument("-o", "--option", dest="options", action="append", default=[],
                   metavar="OPTION", help="another NVRTC option, e.g. --option=-lineinfo "
                   "(repeatable)")
    p.add_argument("-m", "--module", metavar="NAME",
                   help="also bind the SourceModule (or, compiling only, the CompiledCell)")
    p.add_argument("--compile-only", action="store_true",
                   help="compile and report; load and bind nothing (no GPU needed)")
    p.add_argument("--ptx", action="store_true", help="with --compile-only: PTX, not CUBIN")
    p.add_argument("-q", "--quiet", action="store_true", help="no report after success")
    p.add_argument("-h", "--help", action="store_true", help="show this help")
    return p


_ARCH = re.compile(r"^(sm|compute)_\d+[af]?$")
_DEFINE = re.compile(r"^[A-Za-z_]\w*(=.*)?$", re.S)


def parse_magic_line(line: str) -> argparse.Namespace:
    """The options of a ``%%cuda`` line as an argparse Namespace (plus
    ``nvrtc_options``, the list given to the compiler, and ``name_map``,
    {python name: name expression}).  Raises MagicOptionsError, whose message
    says what is wrong, for anything it cannot use."""
    try:
        words = shlex.split(line, posix=True)
    except ValueError as exc:
        raise MagicOptionsError(f"%%cuda: cannot split the options: {exc}") from None
    args = _parser().parse_args(words)
    if args.help:
        return args
    if args.arch is not None and not _ARCH.match(args.arch):
        raise MagicOptionsError(f"%%cuda: --arch must look like sm_90 or compute_90, "
                                f"not {args.arch!r}")
    for d in args.defines:
        if not _DEFINE.match(d):
            raise MagicOptionsError(f"%%cuda: -D takes NAME or NAME=VALUE with NAME a C "
                                    f"identifier, not {d!r}")
    if args.module is not None and not _is_python_name(args.module):
        raise MagicOptionsError(f"%%cuda: --module takes a Python name, not {args.module!r}")
    if args.ptx and not args.compile_only:
        raise MagicOptionsError("%%cuda: --ptx goes with --compile-only (to bind kernels, "
                                "--arch compute_XY compiles to PTX)")
    for o in args.options:
        if not o.startswith("-"):
            raise MagicOptionsError(f"%%cuda: --option takes a compiler option starting "
                                    f"with '-', not {o!r} (write --option=-lineinfo)")
    name_map: dict[str, str] = {}
    for entry in args.names:
        pyname, expr = None, entry
        m = re.match(r"^\s*([A-Za-z_]\w*)\s*=\s*(\S.*)$", entry)
        if m and not m.group(2).startswith("="):
            pyname, expr = m.group(1), m.group(2).strip()
        if not expr.strip():
            raise MagicOptionsError("%%cuda: --name-expression needs an expression")
        pyname = pyname or python_name(expr)
        if not _is_python_name(pyname):
            raise MagicOptionsError(f"%%cuda: {expr!r} makes no Python name: give one as "
                                    f"-n NAME={expr}")
        if pyname in name_map:
            raise MagicOptionsError(f"%%cuda: two name expressions would be bound as "
                                    f"{pyname!r}: give one a name with -n NAME=EXPR")
        name_map[pyname] = expr.strip()
    args.name_map = name_map
    args.nvrtc_options = [f"-D{d}" for d in args.defines] + list(args.options)
    return args


def _is_python_name(name: str) -> bool:
    return name.isidentifier() and not keyword.iskeyword(name)


def python_name(expr: str) -> str:
    """The Python name a kernel's name expression is bound as: ``add<float>`` ->
    ``add_float``, ``ns::scale<int, 4>`` -> ``ns_scale_int_4``."""
    name = re.sub(r"\W+", "_", expr.replace("&", "")).strip("_")
    if name and name[0].isdigit():
        name = "_" + name
    if keyword.iskeyword(name):
        name += "_"
    return name

# }}}


# {{{ kernels in a compiled image

_MANGLED_PLAIN = re.compile(r"^_Z(\d+)")


def _plain_cxx_name(symbol: str) -> str | None:
    """The name of a C++ kernel that is in the global namespace and no template
    (``_Z5scalePfi`` -> ``scale``), else None (plain C names too)."""
    m = _MANGLED_PLAIN.match(symbol)
    if not m:
        return None
    n = int(m.group(1))
    start = m.end()
    name = symbol[start:start + n]
    rest = symbol[start + n:]
    if len(name) != n or not name.isidentifier() or rest.startswith("I"):
        return None         # cut short, or template arguments follow
    return name

# }}}


# {{{ what the magic displays

def _size(nbytes: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024 or unit == "TiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return ""   # not reached


class CompiledCell:
    """What ``%%cuda --compile-only`` (or a cell on a machine without a GPU) made:
    ``image`` (bytes: CUBIN, or PTX text), ``kind`` ("cubin" or "ptx"), ``arch``,
    ``kernels`` (their symbol names) and ``source``."""

    def __init__(self, image: bytes, kind: str, arch: str, kernels: Sequence[str],
                 source: str) -> None:
        self.image = image
        self.kind = kind
        self.arch = arch
        self.kernels = list(kernels)
        self.source = source

    def __repr__(self) -> str:
        return (f"<CompiledCell {self.kind} for {self.arch}, {len(self.image)} bytes, "
                f"kernels {', '.join(self.kernels) or '(none)'}>")


class CellReport:
    """The summary a ``%%cuda`` cell displays: what was compiled and for what,
    which Python names were bound, and notes (kernels left unbound and why)."""

    def __init__(self, arch: str, kind: str, nbytes: int,
                 bound: Sequence[tuple[str, str, str]], notes: Sequence[str] = (),
                 quiet: bool = False) -> None:
        self.arch = arch
        self.kind = kind
        self.nbytes = nbytes
        self.bound = list(bound)     # (python name, symbol, details)
        self.notes = list(notes)
        self.quiet = quiet          # -q: shown only when nothing could be bound

    def _head(self) -> str:
        return f"compiled for {self.arch} ({self.kind.upper()}, {_size(self.nbytes)})"

    def __repr__(self) -> str:
        lines = [self._head()]
        for py, sym, details in self.bound:
            alias = f" (= {sym})" if sym != py else ""
            lines.append(f"  {py}{alias}" + (f": {details}" if details else ""))
        lines += self.notes
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td><code>{html.escape(py)}</code></td>"
            f"<td><code>{html.escape(sym) if sym != py else ''}</code></td>"
            f"<td>{html.escape(details)}</td></tr>" for py, sym, details in self.bound)
        table = (f"<table><tr><th>bound as</th><th>symbol</th><th>resources</th></tr>"
                 f"{rows}</table>") if rows else ""
        notes = "".join(f"<p>{html.escape(n)}</p>" for n in self.notes)
        return f"<div class='barecuda-cell'><p>{html.escape(self._head())}</p>{table}{notes}</div>"


class CellCompileError(_drv.CompileError):
    """A ``%%cuda`` cell did not compile (a ``driver.CompileError``).  IPython
    shows only its message: the compiler's log and the cell's lines, those with
    errors marked with >, and no traceback."""

    def _render_traceback_(self) -> list[str]:
        """The lines IPython shows instead of a traceback."""
        return ["CompileError: " + str(self).rstrip()]


def _gpu_reason() -> str | None:
    """None when a GPU can be used, else why not."""
    from barecuda import driver as drv
    try:
        drv.init()
        if drv.Device.count() == 0:
            return "the CUDA driver reports no device"
    except drv.Error as exc:
        return str(exc)
    return None


def _newest_arch() -> str:
    """The newest architecture NVRTC compiles for (what python -m barecuda uses too)."""
    from barecuda import compiler
    return f"sm_{compiler._supported_archs()[-1]}"


def _function_details(func: Any) -> str:
    parts = []
    for attr, fmt in (("num_regs", "{} registers"), ("shared_size_bytes", "{} B shared"),
                      ("local_size_bytes", "{} B local"),
                      ("max_threads_per_block", "at most {} threads per block")):
        try:
            value = getattr(func, attr)
        except Exception:   # noqa: BLE001 - a detail, never worth failing the cell
            continue
        if attr == "local_size_bytes" and not value:
            continue
        parts.append(fmt.format(value))
    return ", ".join(parts)


def run_cell(line: str, cell: str, namespace: dict[str, Any]) -> CellReport | None:
    """What ``%%cuda LINE`` does with `cell`: compile, bind into `namespace`,
    return the report (None for ``--help``).  Raises MagicOptionsError for bad
    options and CellCompileError when the source does not compile."""
    from barecuda import compiler

    drv = _drv
    args = parse_magic_line(line)
    if args.help:
        print(_parser().format_help())
        return None
    source = cell
    exprs = list(args.name_map.values())
    reason = None if args.compile_only else _gpu_reason()

    if args.compile_only or reason is not None:
        arch = args.arch or _newest_arch()
        target = "ptx" if args.ptx or arch.startswith("compute") else "cubin"
        try:
            image = compiler.compile(source, options=args.nvrtc_options,
                                     no_extern_c=args.no_extern_c, arch=arch,
                                     include_dirs=args.include_dirs, target=target,
                                     name_expressions=exprs or None)
        except drv.CompileError as exc:
            raise CellCompileError(str(exc)) from None
        kernels = kernel_names(image)
        compiled = CompiledCell(image, target, arch, kernels, source)
        if args.module:
            namespace[args.module] = compiled
        notes = [f"kernels: {', '.join(kernels) or '(none)'}"]
        if reason is not None:
            notes.append(f"not bound: there is no GPU to load the kernels on ({reason})")
        else:
            notes.append("not bound (--compile-only)")
        return CellReport(arch, target, len(image), [], notes, args.quiet)

    try:
        mod = compiler.SourceModule(source, options=args.nvrtc_options,
                                    no_extern_c=args.no_extern_c, arch=args.arch,
                                    include_dirs=args.include_dirs,
                                    name_expressions=exprs or None)
    except drv.CompileError as exc:
        raise CellCompileError(str(exc)) from None
    image = mod.cubin if mod.cubin is not None else mod.ptx
    kind = "cubin" if mod.cubin is not None else "ptx"
    symbols = kernel_names(image)
    by_symbol = {mod.lowered_names.get(expr, expr): py for py, expr in args.name_map.items()}
    plain = [_plain_cxx_name(sym) for sym in symbols]
    bound, notes, skipped = [], [], []
    for sym, simple in zip(symbols, plain):
        py = by_symbol.get(sym)
        if py is None:
            # a C++ kernel that is no template, outside any namespace, bound by its
            # name when no other kernel has it (overloads need -n)
            py = simple if simple is not None and plain.count(simple) == 1 else sym
        if not _is_python_name(py) or py.startswith("_Z"):
            skipped.append(sym)
            continue
        func = mod.get_function(sym)
        namespace[py] = func
        bound.append((py, sym, _function_details(func)))
    for py, expr in args.name_map.items():
        if mod.lowered_names.get(expr, expr) not in symbols:
            notes.append(f"name expression {expr!r} is not a kernel of the cell: "
                         f"{py} not bound")
    if skipped:
        notes.append("not bound (C++ names: templates, overloads, namespaces): "
                     + ", ".join(skipped) + "; bind them with -n, e.g. -n 'kernel<float>', "
                     "or declare them extern \"C\"")
    if args.module:
        namespace[args.module] = mod
    if mod.log and mod.log.strip():
        notes.append("compiler messages:\n" + mod.log.rstrip())
    return CellReport(mod.arch, kind, len(image), bound, notes, args.quiet)

# }}}


# {{{ Device

_DEVICE_ROWS = (
    ("Multiprocessors (SMs)", ("MULTIPROCESSOR_COUNT",), "{}"),
    ("Warp size", ("WARP_SIZE",), "{} threads"),
    ("Threads per block, at most", ("MAX_THREADS_PER_BLOCK",), "{}"),
    ("Threads per SM, at most", ("MAX_THREADS_PER_MULTIPROCESSOR",), "{}"),
    ("Blocks per SM, at most", ("MAX_BLOCKS_PER_MULTIPROCESSOR",), "{}"),
    ("Block dimensions, at most", ("MAX_BLOCK_DIM_X", "MAX_BLOCK_DIM_Y", "MAX_BLOCK_DIM_Z"),
     "{} x {} x {}"),
    ("Grid dimensions, at most", ("MAX_GRID_DIM_X", "MAX_GRID_DIM_Y", "MAX_GRID_DIM_Z"),
     "{} x {} x {}"),
    ("Registers per block / per SM", ("MAX_REGISTERS_PER_BLOCK",
                                      "MAX_REGISTERS_PER_MULTIPROCESSOR"), "{} / {}"),
    ("Shared memory per block (opt-in)", ("MAX_SHARED_MEMORY_PER_BLOCK",
                                          "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"), "bytes2"),
    ("Shared memory per SM", ("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",), "bytes"),
    ("L2 cache", ("L2_CACHE_SIZE",), "bytes"),
    ("Memory bus", ("GLOBAL_MEMORY_BUS_WIDTH", "MEMORY_CLOCK_RATE"), "bus"),
    ("SM clock", ("CLOCK_RATE",), "khz"),
    ("Copy engines", ("ASYNC_ENGINE_COUNT",), "{}"),
)


def _fmt_bytes(n: int) -> str:
    return _size(n) if n >= 1024 else f"{n} B"


def device_facts(dev: Any) -> list[tuple[str, str]]:
    """(label, value) rows describing `dev`: any object with the methods of
    ``driver.Device`` (name, compute_capability, total_memory, get_attribute,
    pci_bus_id).  An attribute the driver does not answer shows as "n/a"."""
    from barecuda import driver as drv

    def attr(name: str) -> int | None:
        try:
            return int(dev.get_attribute(getattr(drv.device_attribute, name)))
        except Exception:   # noqa: BLE001 - older drivers lack some attributes
            return None

    rows = []
    try:
        major, minor = dev.compute_capability()
        rows.append(("Compute capability", f"{major}.{minor} (sm_{major}{minor})"))
    except Exception:   # noqa: BLE001
        rows.append(("Compute capability", "n/a"))
    try:
        rows.append(("Global memory", _fmt_bytes(int(dev.total_memory()))))
    except Exception:   # noqa: BLE001
        rows.append(("Global memory", "n/a"))
    for label, names, fmt in _DEVICE_ROWS:
        values = [attr(n) for n in names]
        if values[0] is None:
            rows.append((label, "n/a"))
            continue
        if fmt == "bytes":
            text = _fmt_bytes(values[0])
        elif fmt == "bytes2":
            text = _fmt_bytes(values[0]) + (f" ({_fmt_bytes(values[1])})"
                                             if values[1] is not None else "")
        elif fmt == "bus":
            text = f"{values[0]} bits"
            if values[1]:   # kHz, double data rate: the theoretical peak
                text += (f", {values[1] / 1e3:.0f} MHz, peak about "
                         f"{2 * values[1] * 1e3 * values[0] / 8 / 1e9:.0f} GB/s")
        elif fmt == "khz":
            text = f"{values[0] / 1e3:.0f} MHz"
        else:
            text = fmt.format(*("?" if v is None else v for v in values))
        rows.append((label, text))
    try:
        rows.append(("PCI bus id", str(dev.pci_bus_id())))
    except Exception:   # noqa: BLE001
        pass
    return rows


def device_html(dev: Any) -> str:
    """An HTML table of `dev` (a ``driver.Device``): name, compute capability,
    memory, multiprocessors and the limits a kernel meets."""
    try:
        name = str(dev.name())
    except Exception:   # noqa: BLE001
        name = "?"
    ordinal = ""
    try:
        ordinal = f" (device {dev.handle})" if isinstance(dev.handle, int) else ""
    except Exception:   # noqa: BLE001
        pass
    rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                   f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
                   for k, v in device_facts(dev))
    return (f"<table class='barecuda-device'><caption style='text-align:left'>"
            f"<b>{html.escape(name)}</b>{html.escape(ordinal)}</caption>{rows}</table>")

# }}}


# {{{ GPUArray

EDGE_ITEMS = 3          # as NumPy: items shown at each end of a summarised axis
THRESHOLD = 1000        # as NumPy: above this many items, summarise


def _element_strings(values: np.ndarray) -> list[str]:
    """NumPy's text for each of `values` (any shape), formatted together (so with
    NumPy's common precision and width), in C order."""
    flat = np.ascontiguousarray(values).reshape(-1)
    if flat.size == 0:
        return []
    text = np.array2string(flat, separator="\x1f", threshold=sys.maxsize,
                           max_line_width=sys.maxsize)
    parts = text[1:-1].split("\x1f")
    return [p.strip("\n") for p in parts]


def _summarized(corners: np.ndarray, shape: tuple[int, ...], edge: int) -> str:
    """The text ``numpy.array2string(a, separator=", ")`` gives for a summarised
    array `a` of `shape` (without line wrapping), from `corners`: the items of `a`
    NumPy shows, i.e. along each axis longer than 2 * edge the first and last
    `edge`, along the others all."""
    strings = np.array(_element_strings(corners), dtype=object).reshape(corners.shape) \
        if corners.size else np.empty(corners.shape, dtype=object)
    if strings.size:
        width = max(len(s) for s in strings.flat)
        for idx in np.ndindex(strings.shape):
            strings[idx] = strings[idx].rjust(width)
    ndim = len(shape)

    def rec(index: tuple[int, ...], indent: str) -> str:
        axis = len(index)
        if axis == ndim:
            return str(strings[index])
        n = shape[axis]
        summarise = n > 2 * edge
        lead = list(range(edge)) if summarise else list(range(n))
        trail = list(range(edge, 2 * edge)) if summarise else []
        axes_left = ndim - axis
        inner = indent + " "
        if axes_left == 1:
            items = [rec(index + (i,), inner) for i in lead]
            if summarise:
                items.append("...")
                items += [rec(index + (i,), inner) for i in trail]
            return "[" + ", ".join(items) + "]"
        sep = "," + "\n" * (axes_left - 1)
        blocks = [rec(index + (i,), inner) for i in lead]
        if summarise:
            blocks.append("...")
            blocks += [rec(index + (i,), inner) for i in trail]
        return "[" + (sep + inner).join(blocks) + "]"

    if ndim == 0:
        return str(strings[()])
    return rec((), "")


def _corner_pieces(shape: tuple[int, ...], edge: int) -> list[tuple[tuple[slice, ...], tuple[slice, ...]]]:
    """(slice of the array, slice of the preview) for each corner piece."""
    per_axis = []
    for n in shape:
        if n > 2 * edge:
            per_axis.append([(slice(0, edge), slice(0, edge)),
                             (slice(n - edge, n), slice(edge, 2 * edge))])
        else:
            per_axis.append([(slice(0, n), slice(0, n))])
    pieces: list[tuple[tuple[slice, ...], tuple[slice, ...]]] = [((), ())]
    for choices in per_axis:
        pieces = [(src + (s,), dst + (d,)) for src, dst in pieces for s, d in choices]
    return pieces


def _host(piece: Any) -> np.ndarray:
    if isinstance(piece, (np.ndarray, np.generic)):
        return np.asarray(piece)
    return np.asarray(piece.get())


def array_preview(arr: Any, edge: int = EDGE_ITEMS, threshold: int = THRESHOLD) -> str:
    """NumPy's text for `arr` (a GPUArray, or anything with shape, dtype, size,
    slicing and ``get()``; NumPy arrays too), reading only what is shown: the
    whole array when it has at most `threshold` items, else (as NumPy summarises)
    the first and last `edge` items along each long axis, copied back piece by
    piece, so a huge array costs a few small copies."""
    shape = tuple(int(n) for n in arr.shape)
    size = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if size <= threshold or size == 0:
        host = _host(arr)
        return np.array2string(host, separator=", ", threshold=sys.maxsize)
    preview_shape = tuple(min(n, 2 * edge) for n in shape)
    corners = np.empty(preview_shape, dtype=np.dtype(arr.dtype))
    for src, dst in _corner_pieces(shape, edge):
        corners[dst] = _host(arr[src])
    return _summarized(corners, shape, edge)


def _array_device(arr: Any) -> str:
    from barecuda import driver as drv
    try:
        ordinal = drv.pointer_get_attributes(int(arr.ptr))["device_ordinal"]
        dev = drv.Device(ordinal)
        return f"device {ordinal} ({dev.name()})"
    except Exception:   # noqa: BLE001 - an empty array, a foreign pointer
        return "device ?"


def gpuarray_html(arr: Any) -> str:
    """HTML for a GPUArray: shape, dtype, device, bytes and layout, then NumPy's
    text of its values (summarised past 1000 items, as NumPy does, reading only
    the items shown)."""
    shape = tuple(arr.shape)
    head = (f"GPUArray shape={shape} dtype={np.dtype(arr.dtype)} on {_array_device(arr)}, "
            f"{_fmt_bytes(int(arr.nbytes))}")
    flags = getattr(arr, "flags", None)
    if flags is not None and not getattr(flags, "forc", True):
        head += ", strided view"
    try:
        body = array_preview(arr)
    except Exception as exc:   # noqa: BLE001 - show the head at least
        body = f"(values not read: {type(exc).__name__}: {exc})"
    return (f"<div class='barecuda-gpuarray'><div><small>{html.escape(head)}</small></div>"
            f"<pre>{html.escape(body)}</pre></div>")

# }}}


# {{{ Trace

def trace_html(t: Any, width: int = 900) -> str | None:
    """The timeline SVG of an ended ``trace.Trace``, inline, with its summary
    under a fold; None while it records (IPython then shows the plain repr)."""
    try:
        svg = t.svg(width)
        summary = str(t.summary())
        n = len(t.events)
    except Exception:   # noqa: BLE001 - not ended yet
        return None
    return (f"<div class='barecuda-trace'>{svg}<details><summary>summary of {n} "
            f"events</summary><pre>{html.escape(summary)}</pre></details></div>")

# }}}


# {{{ occupancy

class OccupancyCurve:
    """Occupancy against block size for one kernel: ``points`` is a list of
    (threads per block, occupancy in [0, 1], what limits it), ``name`` the
    kernel's.  Displays as a small SVG plot (``svg()``); ``best`` is the point
    with the highest occupancy (the smallest block among equals)."""

    def __init__(self, points: Iterable[tuple[int, float, str]], name: str = "",
                 note: str = "") -> None:
        self.points = [(int(b), float(o), str(w)) for b, o, w in points]
        self.name = name
        self.note = note

    @classmethod
    def from_resources(cls, devdata: Any, registers: int = 0, shared_mem: int = 0,
                       block_sizes: Iterable[int] | None = None, name: str = "") -> OccupancyCurve:
        """The curve PyCUDA's arithmetic (``tools.OccupancyRecord``) gives for a
        kernel using `registers` per thread and `shared_mem` bytes per block on
        `devdata` (a ``tools.DeviceData``, or any object with its attributes)."""
        from barecuda._core.devicedata import OccupancyRecord
        if block_sizes is None:
            block_sizes = range(devdata.warp_size, devdata.max_threads + 1, devdata.warp_size)
        points = []
        for b in block_sizes:
            try:
                rec = OccupancyRecord(devdata, b, shared_mem, registers)
            except ValueError as exc:
                points.append((b, 0.0, str(exc).split(":")[0]))
                continue
            points.append((b, rec.occupancy, rec.limited_by))
        note = f"{registers} registers per thread, {shared_mem} B shared per block"
        return cls(points, name, note)

    @property
    def best(self) -> tuple[int, float, str]:
        """The (block size, occupancy, limit) with the highest occupancy."""
        return max(self.points, key=lambda p: (p[1], -p[0]))

    def __repr__(self) -> str:
        b, o, _ = self.best if self.points else (0, 0.0, "")
        return (f"<OccupancyCurve {self.name or 'kernel'}: best {o:.0%} at {b} threads "
                f"per block>")

    def svg(self, width: int = 420, height: int = 200) -> str:
        """The plot as a self-contained SVG document."""
        left, right, top, bottom = 44, 12, 24, 34
        pw, ph = width - left - right, height - top - bottom
        xmax = max((b for b, _, _ in self.points), default=1024)

        def x(b: float) -> float:
            return left + pw * b / xmax

        def y(o: float) -> float:
            return top + ph * (1 - o)

        out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
               f"viewBox='0 0 {width} {height}' font-family='sans-serif' font-size='11'>",
               f"<rect x='0' y='0' width='{width}' height='{height}' fill='white'/>"]
        title = f"occupancy of {self.name}" if self.name else "occupancy"
        out.append(f"<text x='{left}' y='15' font-weight='bold'>{html.escape(title)}</text>")
        for frac in (0, 0.25, 0.5, 0.75, 1.0):
            out.append(f"<line x1='{left}' x2='{left + pw}' y1='{y(frac):.1f}' "
                       f"y2='{y(frac):.1f}' stroke='#ddd'/>")
            out.append(f"<text x='{left - 4}' y='{y(frac) + 4:.1f}' "
                       f"text-anchor='end'>{frac:.0%}</text>")
        step = 128 if xmax > 512 else 64 if xmax > 256 else 32
        for b in range(0, xmax + 1, step):
            out.append(f"<text x='{x(b):.1f}' y='{top + ph + 14}' text-anchor='middle'>"
                       f"{b}</text>")
        out.append(f"<text x='{left + pw / 2:.1f}' y='{height - 4}' text-anchor='middle'>"
                   "threads per block</text>")
        if self.points:
            path = " ".join(f"{x(b):.1f},{y(o):.1f}" for b, o, _ in self.points)
            out.append(f"<polyline points='{path}' fill='none' stroke='#4e79a7' "
                       "stroke-width='2'/>")
            for b, o, why in self.points:
                out.append(f"<circle cx='{x(b):.1f}' cy='{y(o):.1f}' r='2.5' fill='#4e79a7'>"
                           f"<title>{b} threads: {o:.0%} ({html.escape(why)})</title></circle>")
            b, o, why = self.best
            out.append(f"<circle cx='{x(b):.1f}' cy='{y(o):.1f}' r='5' fill='none' "
                       "stroke='#e15759' stroke-width='2'/>")
            out.append(f"<text x='{left + pw}' y='15' text-anchor='end'>best {o:.0%} at {b} "
                       f"threads ({html.escape(why)})</text>")
        out.append("</svg>")
        return "".join(out)

    def _repr_svg_(self) -> str:
        return self.svg()

    def _repr_html_(self) -> str:
        note = f"<div><small>{html.escape(self.note)}</small></div>" if self.note else ""
        return f"<div class='barecuda-occupancy'>{self.svg()}{note}</div>"


def occupancy(func: Any, dynamic_smem: int = 0, block_sizes: Iterable[int] | None = None) \
        -> OccupancyCurve:
    """The occupancy of kernel `func` (a ``driver.Function``) at every block size
    (multiples of the warp size up to what the kernel allows), as the driver
    computes it (``max_active_blocks_per_multiprocessor``), with `dynamic_smem`
    bytes of dynamic shared memory per block.  The limit named at each point comes
    from ``tools.OccupancyRecord``'s arithmetic."""
    from barecuda import driver as drv
    from barecuda._core.devicedata import DeviceData, OccupancyRecord

    dev = drv.Context.get_device()
    data = DeviceData(dev)
    top = min(int(func.max_threads_per_block), data.max_threads)
    if block_sizes is None:
        block_sizes = range(data.warp_size, top + 1, data.warp_size)
    regs = int(func.num_regs)
    smem = int(func.shared_size_bytes) + int(dynamic_smem)
    points = []
    for b in block_sizes:
        blocks = func.max_active_blocks_per_multiprocessor(b, dynamic_smem) if b <= top else 0
        warps = -(-b // data.warp_size)
        occ = blocks * warps / data.warps_per_mp
        try:
            why = OccupancyRecord(data, b, smem, regs).limited_by
        except ValueError as exc:
            why = str(exc).split(":")[0]
        points.append((b, occ, why))
    note = (f"{dev.name()}: {regs} registers per thread, {smem} B shared per block "
            f"({int(dynamic_smem)} B of it dynamic)")
    return OccupancyCurve(points, getattr(func, "name", ""), note)

# }}}


# {{{ loading into IPython

_FORMATTERS: list[tuple[str, type, Callable[[Any], Any]]] = []


def _safe(fn: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
    def formatter(obj: Any) -> str | None:
        try:
            return fn(obj)
        except Exception:   # noqa: BLE001 - a display must never break a cell
            return None
    formatter.__doc__ = fn.__doc__
    return formatter


def load_ipython_extension(ipython: Any) -> None:
    """Register the ``%%cuda`` cell magic, the ``%cuda_occupancy`` line magic and
    the HTML displays of Device, GPUArray and Trace in `ipython` (an IPython
    InteractiveShell).  ``%load_ext barecuda`` calls this."""
    from IPython.core.error import UsageError
    from IPython.display import display

    from barecuda import driver as drv
    from barecuda.gpuarray import GPUArray
    from barecuda.trace import Trace

    def cuda(line: str, cell: str) -> None:
        """%%cuda [options]: compile the cell as CUDA C and bind its kernels
        (``%%cuda --help`` lists the options)."""
        try:
            report = run_cell(line, cell, ipython.user_ns)
        except MagicOptionsError as exc:
            raise UsageError(str(exc)) from None
        if report is not None and (not report.quiet or not report.bound):
            display(report)

    def cuda_occupancy(line: str) -> None:
        """%cuda_occupancy KERNEL [DYNAMIC_SMEM]: plot the occupancy of a kernel
        (a name bound by %%cuda, or any expression giving a driver.Function)."""
        words = line.split()
        if not words:
            raise UsageError("%cuda_occupancy: name a kernel, e.g. %cuda_occupancy twice")
        try:
            func = eval(words[0], ipython.user_ns)  # noqa: S307 - the user's own expression
            smem = int(words[1]) if len(words) > 1 else 0
        except Exception as exc:   # noqa: BLE001
            raise UsageError(f"%cuda_occupancy: {type(exc).__name__}: {exc}") from None
        if not isinstance(func, drv.Function):
            raise UsageError(f"%cuda_occupancy: {words[0]} is a {type(func).__name__}, "
                             "not a driver.Function")
        display(occupancy(func, smem))

    ipython.register_magic_function(cuda, magic_kind="cell", magic_name="cuda")
    ipython.register_magic_function(cuda_occupancy, magic_kind="line",
                                    magic_name="cuda_occupancy")
    html_formatter = ipython.display_formatter.formatters["text/html"]
    for cls, fn in ((drv.Device, device_html), (GPUArray, gpuarray_html), (Trace, trace_html)):
        formatter = _safe(fn)
        html_formatter.for_type(cls, formatter)
        _FORMATTERS.append(("text/html", cls, formatter))


def unload_ipython_extension(ipython: Any) -> None:
    """Remove the displays registered by load_ipython_extension (the magics stay
    until IPython restarts, as with other extensions)."""
    formatters = ipython.display_formatter.formatters
    while _FORMATTERS:
        mime, cls, fn = _FORMATTERS.pop()
        try:
            if formatters[mime].lookup_by_type(cls) is fn:
                formatters[mime].pop(cls)
        except KeyError:
            pass

# }}}
