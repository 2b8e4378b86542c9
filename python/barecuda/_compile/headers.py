# SPDX-License-Identifier: MIT
"""Header fingerprints for the kernel cache of ``barecuda.compiler``.

A cache key covers the contents of every header a compile could include, so a
changed header is a miss.  Hashing them all in every new process would cost
more than the rest of a cache hit, so the SHA-256 of each header is remembered
by its path together with its ``(mtime_ns, size, inode)``: in memory for the
process, and in a small text index in the cache directory (``headers-1.idx``)
for the next processes.  A header whose stat differs from the remembered one is
read and hashed again; the index is only ever a memo of those hashes.
"""

from __future__ import annotations

import os
import threading

from barecuda._compile.diskcache import _replace

HEADER_SUFFIXES = (".h", ".cuh", ".hpp", ".hxx", ".hh", ".inc", ".inl", ".cuinc")
_INDEX_NAME = "headers-1.idx"
_INDEX_MAGIC = "barecuda-header-index-1\n"

_lock = threading.Lock()
memo: dict[str, tuple[tuple[int, int, int], bytes]] = {}   # path -> (stat, sha256)
_loaded: set[str] = set()       # cache directories whose index was read
_dirty = False                  # memo has hashes the indexes have not seen


def _scan(dirs: list[str], every_file: bool, with_stat: bool) -> list:
    out = []
    for top in dirs:
        stack = [top]
        while stack:
            d = stack.pop()
            try:
                it = os.scandir(d)
            except OSError:
                continue
            with it:
                for e in it:
                    try:
                        if e.is_dir():
                            stack.append(e.path)
                        elif every_file or e.name.endswith(HEADER_SUFFIXES):
                            if with_stat:
                                st = e.stat()
                                out.append((e.path, st.st_mtime_ns, st.st_size, st.st_ino))
                            else:
                                out.append(e.path)
                    except OSError:
                        continue
    out.sort()
    return out


def header_files(dirs: list[str], every_file: bool = False) -> list[str]:
    """Sorted header files under `dirs` (recursively); with `every_file`, all
    files, for headers named without a suffix (<cmath>)."""
    return _scan(dirs, every_file, False)


def header_stamp(dirs: list[str], every_file: bool = False
                 ) -> tuple[tuple[str, int, int, int], ...]:
    """(path, mtime_ns, size, inode) of every header under `dirs`, sorted: cheap
    to recompute, it says whether a cached image may still be used."""
    return tuple(_scan(dirs, every_file, True))


def header_digest(stamp: tuple[tuple[str, int, int, int], ...]) -> bytes:
    """SHA-256 over the names and contents of the headers in `stamp`."""
    global _dirty
    import hashlib          # here, not at import: it loads OpenSSL (milliseconds)
    h = hashlib.sha256()
    for path, mtime, size, ino in stamp:
        m = memo.get(path)
        if m is None or m[0] != (mtime, size, ino):
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            m = ((mtime, size, ino), hashlib.sha256(data).digest())
            memo[path] = m
            _dirty = True
        h.update(path.encode("utf-8", "surrogateescape") + b"\0" + m[1])
    return h.digest()


def load_index(directory: str) -> None:
    """Add the hashes remembered in `directory`'s index to the memo (once per
    directory and process; a missing or damaged index is simply empty)."""
    if directory in _loaded:
        return
    _loaded.add(directory)
    try:
        with open(os.path.join(directory, _INDEX_NAME), encoding="utf-8",
                  errors="surrogateescape") as f:
            text = f.read()
    except OSError:
        return
    if not text.startswith(_INDEX_MAGIC):
        return
    for line in text[len(_INDEX_MAGIC):].split("\n"):
        parts = line.split(" ", 4)
        if len(parts) != 5 or len(parts[3]) != 64:
            continue
        try:
            st = (int(parts[0]), int(parts[1]), int(parts[2]))
            digest = bytes.fromhex(parts[3])
        except ValueError:
            continue
        memo.setdefault(parts[4], (st, digest))


def save_index(directory: str) -> None:
    """Write the memo to `directory`'s index when it learnt new hashes
    (atomically; an unwritable directory only costs hashing next time)."""
    global _dirty
    if not _dirty:
        return
    with _lock:
        lines = [f"{s[0]} {s[1]} {s[2]} {d.hex()} {p}" for p, (s, d) in memo.items()
                 if "\n" not in p]
        _dirty = False
    text = _INDEX_MAGIC + "\n".join(lines) + "\n"

    def write(tmp):
        with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)

    _replace(directory, os.path.join(directory, _INDEX_NAME), write)


def clear() -> None:
    """Forget the memo (the indexes on disk are read again when next needed)."""
    global _dirty
    memo.clear()
    _loaded.clear()
    _dirty = False
