# SPDX-License-Identifier: MIT
"""What a relocatable CUBIN (ELF64, as NVRTC makes with -rdc=true) leaves for the linker.

DynamicSourceModule links its unit with the device runtime (libcudadevrt.a), as PyCUDA's
does, so that kernels can launch kernels.  Most units never call the device runtime, and
adding the library to a link costs the driver's linker more than the rest of the link.
``needs_device_runtime`` reads the unit's symbol table: the library is needed only when
the unit leaves a symbol undefined that the linker does not make itself.
``kernel_names`` reads the same table for the kernels a CUBIN defines (barecuda.jupyter
binds them as names in the notebook).

``module_globals`` names the variables an image keeps in its loaded module's memory
(``__constant__``, ``__device__``, ``__managed__``, static ones too): state that
``get_global`` can reach and kernels can write, so two loads of the image must not
share it.  SourceModule shares one loaded module between instances of an image only
when the list is empty (see barecuda.compiler).
"""

from __future__ import annotations

import re
import struct

_SHT_SYMTAB = 2
_STT_FUNC = 2
_DATA_TYPES = (1, 5, 6)  # STT_OBJECT, STT_COMMON, STT_TLS
_SHN_UNDEF, _SHN_LORESERVE = 0, 0xFF00
_STB_GLOBAL, _STB_WEAK = 1, 2
_STO_CUDA_ENTRY = 0x10   # st_other of a kernel's (__global__ function's) symbol
# made by nvlink / the driver's linker for every relocatable unit (unified function and
# data tables, reserved shared memory), never by a library
_LINKER_MADE = ("__UDT", "__UFT", ".nv.")
_PTX_ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$.]+)", re.M)
# Where a CUBIN's object symbols live that are not module state: shared memory (per
# block; -G puts dynamic shared memory in .nv_debug.shared) and the parameter bank of
# each kernel (.nv.constant0.<kernel>, per launch).
_NOT_MODULE_STATE = (".nv.shared", ".nv_debug.shared", ".nv.constant0")
# Read-only data the compiler makes, under names programs do not declare ($ is no C
# identifier character, the others are reserved to the implementation): string
# literals ($str, $str$1: printf's format), anonymous constants (__unnamed_1: assert's
# function name) and the CUDA math library's tables (__cudart_sin_cos_coeffs).
_COMPILER_MADE = ("$str", "__unnamed_", "__cudart_")
# a module-scope variable of PTX: [.visible|.extern|.weak|.common] .global|.const ...
_PTX_VARIABLE = re.compile(
    r"^[ \t]*(?:\.(?:visible|extern|weak|common)[ \t]+)*\.(?:global|const)\b([^;=\n]*)", re.M)


def _symbols(img: bytes) -> list[tuple[str, int, int, int]] | None:
    """(name, st_info, st_other, st_shndx) of every named symbol in the symbol tables of
    a 64-bit little-endian ELF; None when `img` is no such ELF or cannot be read."""
    if img[:4] != b"\x7fELF" or len(img) < 64 or img[4] != 2 or img[5] != 1:
        return None
    try:
        shoff, = struct.unpack_from("<Q", img, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", img, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", img, shoff + i * shentsize)
                    for i in range(shnum)]
        out = []
        for _, kind, _, _, offset, size, link, _, _, _ in sections:
            if kind != _SHT_SYMTAB:
                continue
            strings = sections[link][4]
            for at in range(offset, offset + size - 23, 24):
                name, info, other, shndx, _, _ = struct.unpack_from("<IBBHQQ", img, at)
                if name:
                    out.append((_cstr(img, strings + name), info, other, shndx))
        return out
    except (struct.error, IndexError, ValueError, OverflowError):
        return None


def _data_objects(img: bytes) -> list[tuple[str, str]] | None:
    """(symbol name, section name) of the data objects (object, common and TLS
    symbols) a 64-bit little-endian ELF defines; None when `img` is no such ELF or
    cannot be read.  Reads only the names it returns: a CUBIN's symbol table is
    mostly sections and functions."""
    if img[:4] != b"\x7fELF" or len(img) < 64 or img[4] != 2 or img[5] != 1:
        return None
    try:
        shoff, = struct.unpack_from("<Q", img, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", img, 0x3A)
        if shentsize != 64 or shoff + 64 * shnum > len(img):
            return None
        view = memoryview(img)
        sections = list(struct.iter_unpack("<IIQQQQIIQQ", view[shoff:shoff + 64 * shnum]))
        out = []
        for _, kind, _, _, offset, size, link, _, _, _ in sections:
            if kind != _SHT_SYMTAB:
                continue
            strings = sections[link][4]
            for name, info, _, shndx, _, _ in struct.iter_unpack(
                    "<IBBHQQ", view[offset:offset + size - size % 24]):
                if info & 0xF not in _DATA_TYPES or shndx == _SHN_UNDEF:
                    continue
                section = (_cstr(img, sections[shstrndx][4] + sections[shndx][0])
                           if shndx < _SHN_LORESERVE else "")
                out.append((_cstr(img, strings + name), section))
        return out
    except (struct.error, IndexError, ValueError, OverflowError):
        return None


def _cstr(img, start):
    return img[start:img.index(b"\0", start)].decode("ascii", "replace")


def undefined_symbols(image: bytes) -> list[str] | None:
    """Names of the global/weak symbols `image` uses but does not define; None when
    `image` is not a 64-bit little-endian ELF (PTX, say) or cannot be read."""
    symbols = _symbols(bytes(image))
    if symbols is None:
        return None
    return [name for name, info, _, shndx in symbols
            if shndx == 0 and info >> 4 in (_STB_GLOBAL, _STB_WEAK)]


def kernel_names(image: bytes | str) -> list[str]:
    """The kernels (``__global__`` functions, by their symbol names: mangled for C++
    kernels) of a CUBIN or of PTX text, in the order they appear; [] when `image` is
    an ELF that cannot be read."""
    if isinstance(image, str):
        return _PTX_ENTRY.findall(image)
    img = bytes(image)
    if img[:4] != b"\x7fELF":
        return _PTX_ENTRY.findall(img.decode("utf-8", "replace").rstrip("\0"))
    return [name for name, info, other, _ in _symbols(img) or ()
            if info & 0xF == _STT_FUNC and other & _STO_CUDA_ENTRY]


def needs_device_runtime(image: bytes) -> bool:
    """Whether linking `image` may need libcudadevrt: True unless it is a CUBIN whose
    undefined symbols are all ones the linker makes itself."""
    names = undefined_symbols(image)
    return names is None or any(not n.startswith(_LINKER_MADE) for n in names)


def module_globals(image: bytes | str) -> list[str] | None:
    """The variables (symbol names) a CUBIN or PTX image keeps in its module's memory:
    ``__constant__``, ``__device__`` and ``__managed__`` variables, at file scope or
    static in a function, const or not; None when `image` cannot be read (neither an
    ELF this module reads nor text).

    Not counted: shared memory, kernels' parameter banks, and the read-only data the
    compiler makes under names programs do not declare (string literals, the math
    library's tables).  Any other object symbol counts, in whatever section it is, so
    a section a new toolkit invents errs on the side of a global."""
    if isinstance(image, str):
        return _ptx_globals(image)
    img = bytes(image)
    if img[:4] != b"\x7fELF":
        try:
            return _ptx_globals(img.decode("utf-8").rstrip("\0"))
        except UnicodeDecodeError:
            return None
    objects = _data_objects(img)
    if objects is None:
        return None
    return [name for name, section in objects
            if not section.startswith(_NOT_MODULE_STATE) and not name.startswith(_COMPILER_MADE)]


def _ptx_globals(text: str) -> list[str] | None:
    """module_globals of PTX text: its .global and .const variables; None for text
    that is not PTX."""
    if ".target" not in text:
        return None
    found = []
    for declared in _PTX_VARIABLE.findall(text):
        words = declared.split()
        name = words[-1].split("[", 1)[0] if words else ""
        if not name.startswith(_COMPILER_MADE):
            found.append(name)
    return found


def has_module_globals(image: bytes | str) -> bool:
    """Whether `image` keeps variables in its module's memory (module_globals); True
    when that cannot be told, so a caller sharing a loaded module only on False is
    never wrong."""
    return module_globals(image) != []
