# SPDX-License-Identifier: MIT
"""The disk entries of the kernel cache read back in C (src/diskcache.c):
_cache_digest, _cache_read and the one-call quick look-up _cache_quick, against
entries written by barecuda._compile.diskcache, damaged ones and bad arguments.  No GPU."""

import os
import sys

import numpy as np
import pytest

from barecuda import _driver
from barecuda._compile import diskcache as _diskcache

ENV = ("BARECUDA_TEST_QUICK_A", "BARECUDA_TEST_QUICK_B")


def write_entry(directory, image=b"\x7fELF-image", deps=None, names=None, log="warning: x"):
    key = bytes(range(32))
    name = _diskcache.write(str(directory), key, "cubin", "sm_90", image,
                            names or {"f": "_Z1fv"}, log, deps)
    return os.path.join(str(directory), name), key


def test_digest_is_16_bytes_and_sees_every_bit(rng):
    data = rng.integers(0, 256, 1000, dtype=np.uint8).tobytes()
    d = _driver._cache_digest(data)
    assert type(d) is bytes and len(d) == 16
    assert _driver._cache_digest(bytearray(data)) == d == _driver._cache_digest(memoryview(data))
    seen = {d}
    for bit in rng.choice(len(data) * 8, 64, replace=False):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        seen.add(_driver._cache_digest(flipped))
    assert len(seen) == 65
    # every length up to past two blocks, and zeros of different lengths, differ
    digests = {_driver._cache_digest(bytes(n)) for n in range(80)}
    digests |= {_driver._cache_digest(data[:n]) for n in range(1, 80)}
    assert len(digests) == 159


def test_digest_refuses_non_buffers():
    for bad in ("text", 12, None):
        with pytest.raises(TypeError):
            _driver._cache_digest(bad)


def test_read_gives_back_what_was_written(tmp_path):
    deps = ((("/nonexistent/libnvrtc.so", None),), (), ())
    path, key = write_entry(tmp_path, deps=deps)
    got = _driver._cache_read(path)
    assert got == (key, 0, ("sm_90", {"f": "_Z1fv"}, "warning: x", deps), b"\x7fELF-image")
    e = _diskcache.load(path)
    assert (e.key, e.kind, e.arch, e.names, e.log, e.deps, e.image) == (
        key, "cubin", "sm_90", {"f": "_Z1fv"}, "warning: x", deps, b"\x7fELF-image")
    assert _driver._cache_read(os.fsencode(path)) == got     # bytes paths too


def test_read_missing_and_damaged(tmp_path):
    assert _driver._cache_read(str(tmp_path / "absent.bin")) is None
    assert _diskcache.load(str(tmp_path / "absent.bin")) is None
    path, _ = write_entry(tmp_path, image=bytes(range(256)) * 40)
    with open(path, "rb") as f:
        data = f.read()
    damaged = {
        "short": data[:40],
        "truncated": data[:-1],
        "longer": data + b"\0",
        "magic": b"BCKCACH2" + data[8:],
        "image bit": data[:-100] + bytes([data[-100] ^ 4]) + data[-99:],
        "digest bit": data[:10] + bytes([data[10] ^ 1]) + data[11:],
        "empty": b"",
    }
    for what, blob in damaged.items():
        p = tmp_path / f"bad-{what.replace(' ', '-')}.bin"
        p.write_bytes(blob)
        assert _driver._cache_read(str(p)) is False, what
        assert _diskcache.load(str(p)) is False, what
    # a directory where an entry should be cannot be read as one
    assert _driver._cache_read(str(tmp_path)) in (None, False)


def test_read_refuses_bad_paths():
    with pytest.raises(TypeError):
        _driver._cache_read(3)
    with pytest.raises(ValueError):
        _driver._cache_read("a\0b")


def quick(directory, parts=("source", "options"), env=ENV):
    return _driver._cache_quick(str(directory), parts, env, _diskcache.NOT_SITE)


def link(directory, qkey, path):
    _diskcache.link(str(directory), qkey, os.path.basename(path))


def test_quick_finds_the_linked_entry_while_its_files_hold(tmp_path, monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    dep = tmp_path / "lib.so"
    dep.write_bytes(b"1")
    gone = str(tmp_path / "never-there.h")
    deps = (((str(dep), _diskcache.sig(str(dep))), (gone, None)), _diskcache.nvidia_dirs(), ())
    path, key = write_entry(tmp_path, deps=deps)
    qkey, got, current = quick(tmp_path)
    assert len(qkey) == 16 and got is None and current is False     # no link yet
    link(tmp_path, qkey, path)
    assert quick(tmp_path) == (qkey, _driver._cache_read(path), True)
    # the key follows the parts, their order and the environment variables
    assert quick(tmp_path, ("source", "options2"))[0] != qkey
    assert quick(tmp_path, ("options", "source"))[0] != qkey
    assert quick(tmp_path, ("sourceoptions",))[0] != qkey
    monkeypatch.setenv(ENV[1], "/opt/cuda")
    assert quick(tmp_path)[0] != qkey
    monkeypatch.delenv(ENV[1])
    assert quick(tmp_path)[0] == qkey
    # a recorded file changed, an absent one appeared: no longer current
    os.utime(dep, ns=(0, 12345))
    assert quick(tmp_path)[2] is False
    os.utime(dep, ns=(deps[0][0][1][2], deps[0][0][1][2]))
    assert quick(tmp_path)[2] is True
    open(gone, "w").close()
    assert quick(tmp_path)[2] is False


def test_quick_sees_a_new_nvidia_directory_on_sys_path(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(sys, "path", [str(site), "", str(tmp_path / "x.zip"), b"bytes-entry"]
                        + list(sys.path))
    deps = ((), _diskcache.nvidia_dirs(), ())
    path, _ = write_entry(tmp_path / "cache", deps=deps)
    qkey = quick(tmp_path / "cache")[0]
    link(tmp_path / "cache", qkey, path)
    assert quick(tmp_path / "cache")[2] is True
    (site / "nvidia").mkdir()
    assert quick(tmp_path / "cache")[2] is False
    # recorded again, as the compiler would: current once more, also with a
    # trailing separator on the entry (os.path.join's rule)
    path, _ = write_entry(tmp_path / "cache", deps=((), _diskcache.nvidia_dirs(), ()))
    link(tmp_path / "cache", qkey, path)
    assert quick(tmp_path / "cache")[2] is True
    sys.path[0] = str(site) + os.sep
    assert quick(tmp_path / "cache")[2] is True
    # zip archives and the standard library are not searched, on either side
    (tmp_path / "x.zip").mkdir()
    (tmp_path / "x.zip" / "nvidia").mkdir()
    assert quick(tmp_path / "cache")[2] is True


def test_quick_with_damaged_or_odd_records(tmp_path):
    cache = tmp_path / "cache"
    odd_records = [None, (), ((("p",),), (), ()), ((("/", (1, 2)),), (), ()),
                   ((("/", (2**80, 0, 0)),), (), ()), (((7, None),), (), ()),
                   ((), "not a tuple", ())]
    for deps in odd_records:
        path, _ = write_entry(cache, deps=deps)
        qkey = quick(cache)[0]
        link(cache, qkey, path)
        qkey2, got, current = quick(cache)
        assert qkey2 == qkey and got[3] == b"\x7fELF-image" and current is False, deps
    path, _ = write_entry(cache, deps=((), (), ()))
    with open(path, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)[0]
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last ^ 0xFF]))
    assert quick(cache)[1:] == (False, False)


def test_quick_refuses_bad_arguments(tmp_path):
    ns = _diskcache.NOT_SITE
    with pytest.raises(TypeError, match="4 positional"):
        _driver._cache_quick(str(tmp_path), ("a",), ())
    with pytest.raises(TypeError, match="tuples"):
        _driver._cache_quick(str(tmp_path), ["a"], (), ns)
    with pytest.raises(TypeError, match="must be str, not int"):
        _driver._cache_quick(str(tmp_path), ("a", 1), (), ns)
    with pytest.raises(TypeError, match="env_names"):
        _driver._cache_quick(str(tmp_path), ("a",), (b"HOME",), ns)
    with pytest.raises(TypeError):
        _driver._cache_quick(5, ("a",), (), ns)
    # lone surrogates are hashed as os.fsencode keeps them
    assert quick(tmp_path, ("\udcff",))[0] != quick(tmp_path, ("\udcfe",))[0]
