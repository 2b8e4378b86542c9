# SPDX-License-Identifier: MIT
"""The table-driven packing of src/argpack.c (CPU only): its fast paths give the
same bytes as the general conversions and keep every check, and the memo of
grid/block objects never hides a change."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from barecuda import _driver
from barecuda import driver as drv


def _fn(params=None, max_threads=1024):
    return _driver._test_function("k", params=params, max_threads=max_threads)


def _layout(fmt):
    """(offset, size) of each item of a native-aligned struct format."""
    out, off = [], 0
    for c in fmt:
        size = struct.calcsize(c)
        off = (off + size - 1) // size * size
        out.append((off, size))
        off += size
    return out


FMT = "bPhiqfdIB"
PY = (-3, 0x7F0012345678, -2, 2**31 - 1, -(2**40), 1.5, -2.25, 2**32 - 1, 255)


def test_prepared_fast_paths_match_struct():
    f = _fn(_layout(FMT)).prepare(FMT)
    want = struct.pack("@" + FMT, *PY)
    assert _driver._pack_prepared(f, *PY) == want
    # NumPy scalars of the parameter's own type take the other fast path
    np_args = (np.int8(-3), np.uintp(0x7F0012345678), np.int16(-2), np.int32(2**31 - 1),
               np.int64(-(2**40)), np.float32(1.5), np.float64(-2.25), np.uint32(2**32 - 1),
               np.uint8(255))
    assert _driver._pack_prepared(f, *np_args) == want


def test_prepared_padding_is_zero():
    f = _fn().prepare("bq")
    assert _driver._pack_prepared(f, 1, 2) == struct.pack("@bq", 1, 2)


@pytest.mark.parametrize("fmt,value,exc", [
    ("i", 2**31, OverflowError), ("i", -(2**31) - 1, OverflowError), ("B", -1, OverflowError),
    ("P", -1, OverflowError), ("q", 2**63, OverflowError), ("f", 1e300, OverflowError),
    ("i", 1.5, TypeError), ("f", "x", TypeError), ("P", 1.0, TypeError),
])
def test_prepared_fast_paths_keep_checks(fmt, value, exc):
    f = _fn().prepare(fmt)
    with pytest.raises(exc, match="parameter #0"):
        _driver._pack_prepared(f, value)


@pytest.mark.parametrize("fmt", ["b", "B", "h", "H", "i", "I", "q", "Q", "P"])
def test_prepared_ints_either_side_of_one_digit(fmt):
    """CPython >= 3.12 answers ints below 2**30 inline (compact ints): values on
    both sides of that line, and of the format's own range, pack as struct does
    or raise OverflowError."""
    f = _fn().prepare(fmt)
    lo, hi = (0, 2 ** (8 * struct.calcsize(fmt)) - 1) if fmt.isupper() or fmt == "P" else \
        (-(2 ** (8 * struct.calcsize(fmt) - 1)), 2 ** (8 * struct.calcsize(fmt) - 1) - 1)
    for v in (0, 1, -1, 2**30 - 1, 2**30, -(2**30), -(2**30) - 1, lo, hi, lo - 1, hi + 1):
        if lo <= v <= hi:
            assert _driver._pack_prepared(f, v) == struct.pack("@" + fmt, v), v
        else:
            with pytest.raises(OverflowError, match="parameter #0"):
                _driver._pack_prepared(f, v)


def test_prepared_other_integer_types_still_convert():
    f = _fn().prepare("iQ")
    assert _driver._pack_prepared(f, np.int64(7), 2**64 - 1) == struct.pack("@iQ", 7, 2**64 - 1)
    assert _driver._pack_prepared(f, True, np.uint8(3)) == struct.pack("@iQ", 1, 3)
    f32 = _fn().prepare("fd")
    assert _driver._pack_prepared(f32, np.float64(0.5), np.float32(0.25)) == \
        struct.pack("@fd", 0.5, 0.25)


def test_call_table_packing_matches_layout_and_checks_sizes():
    f = _fn([(0, 4), (8, 8), (16, 2), (24, 8)])
    out = _driver._pack_args(f, np.int32(-1), np.uintp(5), np.float16(1.0), np.float64(2.0))
    assert out == struct.pack("@iQe6xd", -1, 5, 1.0, 2.0)  # gaps zeroed
    with pytest.raises(TypeError, match="parameter #1 .* is 8 bytes, but the numpy.int32"):
        _driver._pack_args(f, np.int32(1), np.int32(2), np.float16(1), np.float64(2))
    with pytest.raises(TypeError, match="takes 4 arguments, got 3"):
        _driver._pack_args(f, np.int32(1), np.uintp(2), np.float16(1))
    # the same type repeated (the remembered kind) and then a different one
    g = _fn([(0, 4), (4, 4), (8, 4)])
    assert _driver._pack_args(g, np.int32(1), np.int32(2), np.float32(3)) == \
        struct.pack("@iif", 1, 2, 3)
    with pytest.raises(TypeError, match="parameter #2"):
        _driver._pack_args(g, np.int32(1), np.int32(2), np.float64(3))
    with pytest.raises(TypeError, match="parameter #1 .* Python int"):
        _driver._pack_args(g, np.int32(1), 2, np.float32(3))


def test_launch_dims_memo_follows_changes():
    f = _fn([])
    block = (32, 1, 1)
    for _ in range(3):   # parses, then the memo; both reach the (unloaded) launch
        with pytest.raises(drv.LogicError):
            f(block=block, grid=(2, 1))
    with pytest.raises(ValueError, match="block"):
        f(block=(2048, 1, 1))
    lst = [32, 1, 1]     # a list may change between calls: never remembered
    with pytest.raises(drv.LogicError):
        f(block=lst)
    lst[0] = 4096
    with pytest.raises(ValueError, match="too large"):
        f(block=lst)
    small = _fn([], max_threads=64)
    with pytest.raises(drv.LogicError):
        small(block=(64, 1, 1))
    with pytest.raises(ValueError, match="at most 64"):
        small(block=(128, 1, 1))
    with pytest.raises(drv.LogicError):
        small(block=(64, 1, 1))
    with pytest.raises(drv.LogicError):
        small.prepare("").prepared_call((1, 1), (64, 1, 1))
    with pytest.raises(ValueError, match="at most 64"):
        small.prepared_call((1, 1), (65, 1, 1))


def test_keyword_names_built_at_run_time():
    f = _fn([])
    kw = {"".join(["bl", "ock"]): (32, 1, 1), "".join(["gr", "id"]): (1, 1)}
    with pytest.raises(drv.LogicError):
        f(**kw)
    with pytest.raises(TypeError, match="unexpected keyword argument 'blocks'"):
        f(blocks=(1, 1, 1))


def test_bench_pack_measures():
    f = _fn(_layout("Pif"))
    assert 0 < _driver._bench_pack(f, (np.uintp(1), np.int32(2), np.float32(3)), 100) < 1e-3
    f.prepare("Pif")
    assert 0 < _driver._bench_pack(f, (1, 2, 3.0), 100, True) < 1e-3
    with pytest.raises(TypeError):
        _driver._bench_pack(f, (1, 2, 3.0), 10)   # a Python int for __call__
    with pytest.raises(ValueError):
        _driver._bench_pack(f, (), 0)
