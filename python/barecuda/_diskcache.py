# SPDX-License-Identifier: MIT
"""Disk entries of the kernel cache of ``barecuda.compiler``, and the quick way to them.

An entry, ``<full key>.bin``, holds one compiled image.  Its full key covers
everything that decides the image (source, options, architecture, the NVRTC
library file, barecuda's version, the contents of every header that could be
included); working it out needs the filesystem (finding NVRTC, stat-ing and
hashing headers).  So that a new process can find an image cheaply, each entry
also records its *dependencies*: the files and directories whose (inode, size,
mtime) stand for that environment (the NVRTC library as the loader names it,
barecuda's header directories, which change only when barecuda is
reinstalled, the CUDA toolkit include directories, the ``nvidia`` package
directories on ``sys.path``, and every header under the user's include
directories).  A symbolic link ``<quick key>.hit``, named by a hash of what is
known without touching the filesystem (source, options, architecture,
barecuda's version, the environment variables that steer the search for
NVRTC), points at the entry last made or found for that input.  A hit in a new
process is then: hash the input, read the linked entry once, stat its
dependencies.  When any differs, the compiler works out the full key as
before, so a changed header or library misses, and an entry whose
dependencies merely moved (a header touched, not changed) is found again and
its record renewed.

Entries are written to a private temporary file and renamed, and checked when
read (magic, lengths and a BLAKE2b digest of everything after the digest): a
damaged entry is reported as None.
"""

from __future__ import annotations

import marshal
import os
import struct
import sys
import threading

try:                        # hashlib would load OpenSSL: milliseconds at import
    from _blake2 import blake2b
except ImportError:         # pragma: no cover - CPython always has it
    from hashlib import blake2b

MAGIC = b"BCKCACH2"
#: magic, digest (of all bytes after it), full key, metadata length, image length, kind
HEAD = struct.Struct("<8s16s32sIQB7x")
KINDS = ("cubin", "ptx", "fatbin")
ENTRY_SUFFIX = ".bin"
LINK_SUFFIX = ".hit"


class Entry:
    """One entry read back: its full key, kind, arch, names, log, dependencies, image."""
    __slots__ = ("key", "kind", "arch", "names", "log", "deps", "image")

    def __init__(self, key, kind, arch, names, log, deps, image):
        self.key = key
        self.kind = kind
        self.arch = arch
        self.names = names
        self.log = log
        self.deps = deps
        self.image = image


def quick_key(parts: tuple[str, ...]) -> bytes:
    """A 32-byte hash of `parts` (strings), each ended by a separator."""
    h = blake2b(digest_size=32)
    for part in parts:
        h.update(part.encode("utf-8", "surrogateescape"))
        h.update(b"\1")
    return h.digest()


def sig(path: str) -> tuple[int, int, int] | None:
    """(inode, size, mtime_ns) of `path` (symbolic links followed), None if absent."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def nvidia_dirs() -> tuple:
    """(path, sig) of each ``nvidia`` package directory on sys.path, where NVRTC
    and toolkit headers from pip packages are looked for."""
    out = []
    for entry in sys.path:
        if entry:
            p = os.path.join(entry, "nvidia")
            s = sig(p)
            if s is not None:
                out.append((p, s))
    return tuple(out)


def read(path: str) -> bytes | None:
    """The whole file at `path` in one read, or None when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        # one read of the size fstat gives (a large fixed buffer would cost page faults)
        want = os.fstat(fd).st_size + 1
        data = os.read(fd, want)
        if len(data) == want:       # it grew meanwhile: read the rest
            chunks = [data]
            while data:
                data = os.read(fd, 1 << 16)
                chunks.append(data)
            data = b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data


def parse(data: bytes) -> Entry | None:
    """The Entry in `data`, or None when it is not an intact entry."""
    if len(data) < HEAD.size:
        return None
    magic, digest, key, mlen, ilen, kind = HEAD.unpack_from(data)
    if (magic != MAGIC or kind >= len(KINDS) or len(data) != HEAD.size + mlen + ilen
            or blake2b(memoryview(data)[24:], digest_size=16).digest() != digest):
        return None
    try:    # written by us (the digest matched), so marshal sees its own output
        arch, names, log, deps = marshal.loads(memoryview(data)[HEAD.size:HEAD.size + mlen])
    except (ValueError, EOFError, TypeError):
        return None
    return Entry(key, KINDS[kind], arch, names, log, deps, data[HEAD.size + mlen:])


def _replace(directory, path, write):
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        os.makedirs(directory, exist_ok=True)
        write(tmp)
        os.replace(tmp, path)
    except OSError:
        # an unwritable cache costs a recompile (or the slower look-up) next time
        try:
            os.unlink(tmp)
        except OSError:
            pass


def write(directory: str, key: bytes, kind: str, arch: str, image: bytes,
          names: dict[str, str], log: str, deps) -> str:
    """Write the entry of `key` atomically; returns its file name."""
    meta = marshal.dumps((arch, dict(names), log, deps))
    body = HEAD.pack(MAGIC, bytes(16), key, len(meta), len(image), KINDS.index(kind))[24:]
    h = blake2b(body, digest_size=16)
    h.update(meta)
    h.update(image)
    data = MAGIC + h.digest() + body + meta + image
    name = key.hex() + ENTRY_SUFFIX

    def put(tmp):
        with open(tmp, "wb") as f:
            f.write(data)
    _replace(directory, os.path.join(directory, name), put)
    return name


def link(directory: str, qkey: bytes, name: str) -> None:
    """Point the quick key's link at the entry file `name` (same directory)."""
    path = os.path.join(directory, qkey.hex() + LINK_SUFFIX)
    try:
        if os.readlink(path) == name:
            return
    except OSError:
        pass
    _replace(directory, path, lambda tmp: os.symlink(name, tmp))
