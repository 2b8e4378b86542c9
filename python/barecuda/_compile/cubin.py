# SPDX-License-Identifier: MIT
"""What a relocatable CUBIN (ELF64, as NVRTC makes with -rdc=true) leaves for the linker.

DynamicSourceModule links its unit with the device runtime (libcudadevrt.a), as PyCUDA's
does, so that kernels can launch kernels.  Most units never call the device runtime, and
adding the library to a link costs the driver's linker more than the rest of the link.
``needs_device_runtime`` reads the unit's symbol table: the library is needed only when
the unit leaves a symbol undefined that the linker does not make itself.
``kernel_names`` reads the same table for the kernels a CUBIN defines (barecuda.jupyter
binds them as names in the notebook).
"""

from __future__ import annotations

import re
import struct

_SHT_SYMTAB = 2
_STT_FUNC = 2
_STB_GLOBAL, _STB_WEAK = 1, 2
_STO_CUDA_ENTRY = 0x10   # st_other of a kernel's (__global__ function's) symbol
# made by nvlink / the driver's linker for every relocatable unit (unified function and
# data tables, reserved shared memory), never by a library
_LINKER_MADE = ("__UDT", "__UFT", ".nv.")
_PTX_ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$.]+)", re.M)


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
                    start = strings + name
                    out.append((img[start:img.index(b"\0", start)].decode("ascii", "replace"),
                                info, other, shndx))
        return out
    except (struct.error, IndexError, ValueError, OverflowError):
        return None


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
