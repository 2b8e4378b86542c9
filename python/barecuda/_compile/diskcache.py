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
known without touching the filesystem (the compile's arguments as given, the
working directory that relative include paths depend on, barecuda's version,
the environment variables that steer the search for NVRTC), points at the
entry last made or found for that input.  A hit in a new process is then: hash
the input, read the linked entry once, stat its dependencies
(_driver._cache_quick does all three in one call).  When any differs, the
compiler works out the full key as before, so a changed header or library
misses, and an entry whose dependencies merely moved (a header touched, not
changed) is found again and its record renewed.

Entries are written to a private temporary file and renamed, and checked when
read (magic, lengths and a 128-bit checksum of everything after it): a damaged
entry is reported as False.  Reading an entry and comparing its dependencies
with the filesystem are done in C (src/diskcache.c), which also computes the
checksum: a hit in a new process runs that code once, cold, and in Python most
of its cost was the interpreter's first pass over it.  On the H100 machine
that took the fresh-process hit (module load included) from 0.65 ms to
0.35-0.44 ms.
"""

from __future__ import annotations

import marshal
import os
import struct
import sys
import threading

from barecuda import _driver

try:                        # hashlib would load OpenSSL: milliseconds at import
    from _blake2 import blake2b
except ImportError:         # pragma: no cover - CPython always has it
    from hashlib import blake2b

MAGIC = b"BCKCACH3"
#: magic, digest (of all bytes after it), full key, metadata length, image length, kind
#: (src/diskcache.c reads this layout)
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


def sig(path: str) -> tuple[int, int, int] | None:
    """(inode, size, mtime_ns) of `path` (symbolic links followed), None if absent."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


#: sys.path entries that pip never installs into, left out of the search for
#: ``nvidia`` directories (as are zip archives): the standard library's own
NOT_SITE = (os.path.dirname(os.__file__), os.path.join(os.path.dirname(os.__file__), "lib-dynload"))


def nvidia_dirs() -> tuple:
    """(path, sig) of each ``nvidia`` package directory on sys.path, where NVRTC
    and toolkit headers from pip packages are looked for (_driver._cache_quick
    walks sys.path the same way)."""
    out = []
    for entry in sys.path:
        if (isinstance(entry, str) and entry and entry not in NOT_SITE
                and not entry.endswith(".zip")):
            p = os.path.join(entry, "nvidia")
            s = sig(p)
            if s is not None:
                out.append((p, s))
    return tuple(out)


def entry(got) -> Entry | bool | None:
    """The Entry of what _driver._cache_read or _cache_quick gave: None (no
    file) and False (not an intact entry) as they are."""
    if not got:
        return got
    key, kind, meta, image = got
    if kind >= len(KINDS) or type(meta) is not tuple or len(meta) != 4:
        return False
    arch, names, log, deps = meta
    return Entry(key, KINDS[kind], arch, names, log, deps, image)


def load(path: str) -> Entry | bool | None:
    """The Entry at `path`; None when it cannot be read, False when it is not an
    intact entry."""
    return entry(_driver._cache_read(path))


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
    rest = body + meta + image
    data = MAGIC + _driver._cache_digest(rest) + rest
    name = key.hex() + ENTRY_SUFFIX

    def put(tmp):
        with open(tmp, "wb") as f:
            f.write(data)
    _replace(directory, os.path.join(directory, name), put)
    return name


def link_path(directory: str, qkey: bytes) -> str:
    """Where the link of quick key `qkey` is (as _driver._cache_quick names it)."""
    return os.path.join(directory, qkey.hex() + LINK_SUFFIX)


def link(directory: str, qkey: bytes, name: str) -> None:
    """Point the quick key's link at the entry file `name` (same directory)."""
    path = link_path(directory, qkey)
    try:
        if os.readlink(path) == name:
            return
    except OSError:
        pass
    _replace(directory, path, lambda tmp: os.symlink(name, tmp))
