# SPDX-License-Identifier: MIT
"""Gathers and scatters through integer index arrays, and reductions over a subset:
``take``, ``multi_take``, ``multi_put``, ``multi_take_put``, ``subset_sum``,
``subset_dot``, ``subset_max``, ``subset_min``; re-exported by :mod:`barecuda.gpuarray`.

Arrays are indexed flat, in C order (non-contiguous inputs are copied first).
No index can make these kernels touch memory outside their arrays.  Each call takes
NumPy's ``mode=`` (as ``numpy.take``):

* ``"raise"`` (the default): an index is valid from ``-n`` to ``n - 1``, a negative
  one counting from the end.  The kernel skips a bad index and notes its position;
  the call then raises IndexError naming the first one (and which array), before
  it returns.  So a call in this mode waits for its kernel (the stream is
  synchronized); elements with good indices may have been written.
* ``"wrap"``: indices are taken modulo the size (Python's sign rule); ``"clip"``:
  clamped to ``0 .. n - 1``.  Neither can fail, and both stay asynchronous on
  `stream`.

An index into an empty array is an IndexError in every mode.  The multi_* forms
move several arrays with one launch per group of up to 16 arrays.  (PyCUDA's own
kernel getters, such as ``elementwise.get_take_kernel``, return raw kernels with
PyCUDA's parameters, unchecked as in PyCUDA.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import SupportsIndex

    import numpy.typing as npt

    from barecuda._driver import Stream

    _Allocator = Callable[[int], Any]
    _ShapeLike = SupportsIndex | Sequence[SupportsIndex]

import operator
import threading

import numpy as np

from barecuda import _driver as _drv
from barecuda._array import core as _core
from barecuda._array import reduce as _reduce
from barecuda._array.array import GPUArray
from barecuda._kernels import cache as _kcache
from barecuda._kernels.cdecl import dtype_to_ctype
from barecuda._kernels.reduction import ReductionKernel

__all__ = ["take", "multi_take", "multi_put", "multi_take_put", "subset_sum", "subset_dot",
           "subset_max", "subset_min"]

_CHUNK = 16   # arrays per launch of the multi_* kernels

#: mode= -> the BC_INDEX_* value of <barecuda_helpers.cuh>
_MODES = {"raise": 0, "wrap": 1, "clip": 2}
_NONE = (1 << 64) - 1       # the bad-position word when every index was good
_HELPERS = "#include <barecuda_helpers.cuh>"
_DEVICEMAP = 0x2            # CU_MEMHOSTALLOC_DEVICEMAP


def _mode(name: str, mode: Any) -> int:
    if not isinstance(mode, str):
        raise TypeError(f"{name}(): mode must be 'raise', 'wrap' or 'clip', not "
                        f"{type(mode).__name__}")
    try:
        return _MODES[mode]
    except KeyError:
        raise ValueError(f"{name}(): mode must be 'raise', 'wrap' or 'clip', not "
                         f"{mode!r}") from None


def _index_fn(idt: Any) -> str:
    return "bc_index_unsigned" if np.dtype(idt).kind == "u" else "bc_index_signed"


class _Slot:
    """One thread's bad-index word in one context, kept between calls (in the
    context's kernel_cache, so it never keeps a context alive): a device word, all
    ones at rest, which the kernels lower (bc_index_report), and a mapped page-locked
    word that the collect kernel copies it into, resetting it for the next call."""

    __slots__ = ("word", "host", "host_ptr", "null", "busy")

    def __init__(self) -> None:
        self.word = _drv.mem_alloc(8)
        _drv.memset_d32(int(self.word), 0xFFFFFFFF, 2)
        self.host = _drv.pagelocked_empty(1, np.uint64, mem_flags=_DEVICEMAP)
        self.host_ptr = self.host.base.get_device_pointer()
        self.null = _drv.Stream.from_handle(0)      # the legacy default stream
        self.busy = False


def _slot() -> _Slot:
    """This thread's slot in the current context, marked busy until it is read.
    Calls in "raise" mode wait for their kernels, so one thread never has two
    outstanding; a slot still busy was left by a call that was interrupted between
    its launch and its read, and is replaced rather than trusted."""
    cache = _kcache.context_cache()
    key = ("__bad_index__", threading.get_ident())
    slot = cache.get(key)
    if slot is None or slot.busy:
        slot = cache[key] = _Slot()
    slot.busy = True
    return slot


def _collect_kernel() -> Any:
    return _core._kernel(("bad_index_collect",),
                         "unsigned long long *host, unsigned long long *word",
                         "host[0] = word[0]; word[0] = ~0ull", "bc_bad_index_collect")


class _BadIndex:
    """The first bad position of one mode='raise' call, in this thread's slot: the
    kernels lower its word, and first() copies it out (resetting it) and waits."""

    __slots__ = ("stream", "slot")

    def __init__(self, mode: int, stream: Any) -> None:
        self.stream = stream
        self.slot = _slot() if mode == 0 else None

    @property
    def ptr(self) -> int:
        return 0 if self.slot is None else int(self.slot.word)

    def first(self) -> int | None:
        """The first bad position, or None (waits for the kernel)."""
        slot = self.slot
        if slot is None:
            return None
        _collect_kernel().launch_flat(1, [slot.host_ptr, int(slot.word)], self.stream)
        (slot.null if self.stream is None else self.stream).synchronize()
        pos = int(slot.host[0])
        slot.busy = False
        return None if pos == _NONE else pos


def _value_at(idx: GPUArray, pos: int) -> int:
    """idx.ravel()[pos], read back for an error message."""
    return int(idx.reshape(idx.size)[pos:pos + 1].get()[0])


def _where(idx: GPUArray, pos: int) -> str:
    if idx.ndim <= 1:
        return f"[{pos}]"
    return "[" + ",".join(str(int(k)) for k in np.unravel_index(pos, idx.shape)) + "]"


def _in_range(k: int, n: int) -> bool:
    return -n <= k < n


def _empty_source(name: str, what: str, n_idx: int, sizes: Any) -> None:
    if n_idx and 0 in sizes:
        raise IndexError(f"{name}(): cannot take or put through {n_idx} indices into an "
                         f"empty {what}")

def _indices(name: Any, what: Any, idx: Any, one_d: Any = True) -> Any:
    if not isinstance(idx, GPUArray):
        raise TypeError(f"{name}(): {what} must be a GPUArray of integers, not {type(idx).__name__}")
    if idx.dtype.kind not in "iu":
        raise TypeError(f"{name}(): {what} must have an integer dtype, not {idx.dtype}")
    if one_d and idx.ndim != 1:
        raise ValueError(f"{name}(): {what} must be 1-dimensional, not of shape {idx.shape}")
    return idx._contiguous()


def _same_dtype(name: Any, arrays: Any, what: Any = "arrays") -> Any:
    for a in arrays:
        if not isinstance(a, GPUArray):
            raise TypeError(f"{name}(): {what} must hold GPUArrays, not {type(a).__name__}")
    dts = {a.dtype for a in arrays}
    if len(dts) > 1:
        raise TypeError(f"{name}(): {what} must share one dtype, not {sorted(map(str, dts))}")
    return arrays[0].dtype


def take(a: GPUArray, indices: GPUArray, out: GPUArray | None = None, stream: Stream | None = None,
         mode: str = "raise") -> GPUArray:
    """take(a, indices, out=None, stream=None, mode="raise"): ``a.ravel()[indices]``
    for an integer index GPUArray.

    The result has the shape of `indices` and the dtype of `a` (or is `out`, a
    C-contiguous GPUArray of that size and dtype).  `mode` is NumPy's: "raise"
    (negative indices count from the end; an index outside the array raises
    IndexError, after the kernel, which touched nothing through it), "wrap" or "clip".
    """
    if not isinstance(a, GPUArray) or not isinstance(indices, GPUArray):
        raise TypeError("take(): a and indices must be GPUArrays")
    m = _mode("take", mode)
    idx = _indices("take", "indices", indices, one_d=False)
    _empty_source("take", "array", idx.size, (a.size,))
    src = a._contiguous(stream)
    k = _take_kernel(a.dtype, idx.dtype, m)
    if out is None:
        out = GPUArray(idx.shape, a.dtype, allocator=a.allocator, stream=stream)
    elif not isinstance(out, GPUArray) or out.dtype != a.dtype or out.size != idx.size \
            or not out._c:
        raise ValueError("take(): out must be a contiguous array of the indices' size and a's dtype")
    if idx.size:
        bad = _BadIndex(m, stream)
        k.launch_flat(idx.size, [out.ptr, src.ptr, idx.ptr, a.size, bad.ptr], stream)
        pos = bad.first()
        if pos is not None:
            raise IndexError(f"take(): indices{_where(idx, pos)} = {_value_at(idx, pos)} is out "
                             f"of bounds for an array of size {a.size}")
    return out


def _take_kernel(dt: Any, idt: Any, mode: int = 0) -> Any:
    vt, it = dtype_to_ctype(dt), dtype_to_ctype(idt)
    body = (f"const long long j = {_index_fn(idt)}(idx[i], n_a, {mode});\n"
            "if (j < 0) bc_index_report(bad, i); else z[i] = a[j]")
    return _core._kernel(("take", dt, idt, mode),
                         f"{vt} *z, const {vt} *a, const {it} *idx, long long n_a, "
                         "unsigned long long *bad", body, "bc_take", preamble=_HELPERS)


def _outs(name: Any, arrays: Any, out: Any, shape: Any, dtype: Any) -> Any:
    if out is None:
        if shape is None:
            raise ValueError(f"{name}(): give dest_shape (or out)")
        return [GPUArray(shape, dtype, allocator=arrays[0].allocator) for _ in arrays]
    out = list(out)
    if len(out) != len(arrays):
        raise ValueError(f"{name}(): out has {len(out)} arrays, arrays {len(arrays)}")
    if _same_dtype(name, out, "out") != dtype:
        raise TypeError(f"{name}(): out and arrays must have the same dtype")
    for o in out:
        if not o._c:
            raise ValueError(f"{name}(): every out array must be C-contiguous")
    return out


def _chunks(n: Any) -> Any:
    for start in range(0, n, _CHUNK):
        yield start, min(start + _CHUNK, n)


def _multi_kernel(kind: Any, dtype: Any, idt: Any, count: Any, with_offsets: Any = False,
                  mode: int = 0) -> Any:
    """One launch for `count` arrays: take (d_j[i] = s_j[sidx[i]]), put (d_j[didx[i]] =
    s_j[i]) or take_put (d_j[didx[i]] = s_j[sidx[i] + o_j]); every index checked
    against its own array's size (nd_j, ns_j) under `mode`."""
    vt, it = dtype_to_ctype(dtype), dtype_to_ctype(idt)
    fn = _index_fn(idt)
    params = []
    body = ["bool ok = true; long long d, s;"]
    if kind in ("put", "take_put"):
        params.append(f"const {it} *didx")
    if kind in ("take", "take_put"):
        params.append(f"const {it} *sidx")
    for j in range(count):
        if kind == "take":
            body.append(f"s = {fn}(sidx[i], ns{j}, {mode});")
            dest = "i"
        elif kind == "put":
            body.append(f"d = {fn}(didx[i], nd{j}, {mode});")
            dest = "d"
        else:
            body.append(f"d = {fn}(didx[i], nd{j}, {mode});")
            src = f"(long long)sidx[i] + o{j}" if with_offsets else "sidx[i]"
            sfn = "bc_index_signed" if with_offsets else fn
            body.append(f"s = {sfn}({src}, ns{j}, {mode});")
            dest = "d"
        guard = {"take": "s >= 0", "put": "d >= 0", "take_put": "d >= 0 && s >= 0"}[kind]
        value = "s" if kind != "put" else "i"
        body.append(f"if ({guard}) d{j}[{dest}] = s{j}[{value}]; else ok = false;")
    body.append("(void)d; (void)s; if (!ok) bc_index_report(bad, i)")
    params += [f"{vt} *d{j}" for j in range(count)] + [f"const {vt} *s{j}" for j in range(count)]
    params += [f"long long nd{j}, long long ns{j}" for j in range(count)]
    if with_offsets:
        params += [f"long long o{j}" for j in range(count)]
    params.append("unsigned long long *bad")
    key = ("multi_" + kind, dtype, idt, count, with_offsets, mode)
    return _core._kernel(key, ", ".join(params), "\n".join(body), f"bc_multi_{kind}",
                         preamble=_HELPERS)


def _sources(name: Any, arrays: Any, stream: Any) -> Any:
    arrays = list(arrays)
    return [a._contiguous(stream) for a in arrays]


def _multi_launch(name: str, kind: str, mode: int, dtype: Any, out: Any, src: Any,
                  index_arrays: Any, n: int, stream: Any, offsets: Any = None) -> int | None:
    """Launch the multi_* kernel over every group of arrays; the first bad position
    (mode 'raise'), or None."""
    if not n:
        return None
    bad = _BadIndex(mode, stream)       # one word for every group: read once, at the end
    for lo, hi in _chunks(len(src)):
        k = _multi_kernel(kind, dtype, index_arrays[0].dtype, hi - lo, offsets is not None, mode)
        flat = [i.ptr for i in index_arrays] + [o.ptr for o in out[lo:hi]] \
            + [s.ptr for s in src[lo:hi]]
        for o, s_ in zip(out[lo:hi], src[lo:hi]):
            flat += [o.size, s_.size]
        if offsets is not None:
            flat += offsets[lo:hi]
        k.launch_flat(n, flat + [bad.ptr], stream)
    return bad.first()


def _bad_index_error(name: str, pos: int, checks: Any) -> IndexError:
    """IndexError for position pos: checks are (index array, its name, [(array
    name, size, offset)]), the first failing one is named."""
    for idx, what, targets in checks:
        v = _value_at(idx, pos)
        for target, size, off in targets:
            if not _in_range(v + off, size):
                shown = f"{v} + {off}" if off else f"{v}"
                return IndexError(f"{name}(): {what}[{pos}] = {shown} is out of bounds for "
                                  f"{target} of size {size}")
    return IndexError(f"{name}(): an index at position {pos} is out of bounds")


def multi_take(arrays: Sequence[GPUArray], indices: GPUArray, out: list[GPUArray] | None = None,
               stream: Stream | None = None, mode: str = "raise") -> list[GPUArray]:
    """multi_take(arrays, indices, out=None, stream=None, mode="raise"):
    ``[a.ravel()[indices] for a in arrays]``.

    `arrays` share one dtype (their sizes may differ; each index is checked against
    each array); `indices` is a 1-d integer GPUArray; `mode` as for :func:`take`.
    Returns a list of new GPUArrays of the indices' shape (or fills `out`, a list of
    C-contiguous arrays of that shape and dtype).  An empty `arrays` gives [].
    """
    m = _mode("multi_take", mode)
    arrays = list(arrays)
    if not arrays:
        return []
    dtype = _same_dtype("multi_take", arrays)
    idx = _indices("multi_take", "indices", indices)
    _empty_source("multi_take", "array", idx.size, [a.size for a in arrays])
    out = _outs("multi_take", arrays, out, idx.shape, dtype)
    for o in out:
        if o.size != idx.size:
            raise ValueError(f"multi_take(): out arrays must have {idx.size} elements, not {o.size}")
    src = _sources("multi_take", arrays, stream)
    pos = _multi_launch("multi_take", "take", m, dtype, out, src, [idx], idx.size, stream)
    if pos is not None:
        raise _bad_index_error("multi_take", pos, [(idx, "indices", [
            (f"arrays[{j}]", a.size, 0) for j, a in enumerate(arrays)])])
    return out


def multi_put(arrays: Sequence[GPUArray], dest_indices: GPUArray, dest_shape: _ShapeLike | None = None,
              out: list[GPUArray] | None = None, stream: Stream | None = None,
              mode: str = "raise") -> list[GPUArray]:
    """multi_put(arrays, dest_indices, dest_shape=None, out=None, stream=None, mode="raise"):
    scatter each array.

    ``out[j].ravel()[dest_indices[i]] = arrays[j].ravel()[i]`` for every i below
    ``dest_indices.size``; elements of `out` not named by an index are left as
    they were (uninitialised for new arrays of `dest_shape`).  `mode` as for
    :func:`take`, each index checked against each out array.  Returns `out` (a
    list of C-contiguous GPUArrays, made when not given).
    """
    m = _mode("multi_put", mode)
    arrays = list(arrays)
    if not arrays:
        return []
    dtype = _same_dtype("multi_put", arrays)
    idx = _indices("multi_put", "dest_indices", dest_indices)
    for a in arrays:
        if a.size < idx.size:
            raise ValueError(f"multi_put(): arrays need at least {idx.size} elements, "
                             f"one has {a.size}")
    out = _outs("multi_put", arrays, out, dest_shape, dtype)
    _empty_source("multi_put", "out array", idx.size, [o.size for o in out])
    src = _sources("multi_put", arrays, stream)
    pos = _multi_launch("multi_put", "put", m, dtype, out, src, [idx], idx.size, stream)
    if pos is not None:
        raise _bad_index_error("multi_put", pos, [(idx, "dest_indices", [
            (f"out[{j}]", o.size, 0) for j, o in enumerate(out)])])
    return out


def multi_take_put(arrays: Sequence[GPUArray], dest_indices: GPUArray, src_indices: GPUArray,
                   dest_shape: _ShapeLike | None = None, out: list[GPUArray] | None = None,
                   stream: Stream | None = None, src_offsets: Sequence[int] | None = None,
                   mode: str = "raise") -> list[GPUArray]:
    """multi_take_put(arrays, dest_indices, src_indices, dest_shape=None, out=None, stream=None, src_offsets=None, mode="raise")

    ``out[j].ravel()[dest_indices[i]] = arrays[j].ravel()[src_indices[i] + src_offsets[j]]``
    for every i: a gather and a scatter in one pass.  The two index arrays are 1-d,
    of one shape and integer dtype; `src_offsets` (ints, one per array) default to
    0.  `mode` as for :func:`take`, applied to each destination index and to each
    source position (index plus offset).  Returns `out` (made of `dest_shape` when
    not given).
    """
    m = _mode("multi_take_put", mode)
    arrays = list(arrays)
    if not arrays:
        return []
    dtype = _same_dtype("multi_take_put", arrays)
    didx = _indices("multi_take_put", "dest_indices", dest_indices)
    sidx = _indices("multi_take_put", "src_indices", src_indices)
    if didx.dtype != sidx.dtype:
        raise TypeError("multi_take_put(): src_indices and dest_indices must have the same dtype")
    if didx.shape != sidx.shape:
        raise ValueError("multi_take_put(): src_indices and dest_indices must have the same shape")
    if src_offsets is not None:
        src_offsets = [operator.index(o) for o in src_offsets]
        if len(src_offsets) != len(arrays):
            raise ValueError("multi_take_put(): src_offsets must have one entry per array")
        for o in src_offsets:
            if not -(1 << 62) <= o < (1 << 62):
                raise OverflowError(f"multi_take_put(): src_offsets value {o} is out of range")
    out = _outs("multi_take_put", arrays, out, dest_shape, dtype)
    _empty_source("multi_take_put", "array", didx.size,
                  [a.size for a in arrays] + [o.size for o in out])
    src = _sources("multi_take_put", arrays, stream)
    pos = _multi_launch("multi_take_put", "take_put", m, dtype, out, src, [didx, sidx],
                        didx.size, stream, src_offsets)
    if pos is not None:
        offs = src_offsets or [0] * len(arrays)
        raise _bad_index_error("multi_take_put", pos, [
            (didx, "dest_indices", [(f"out[{j}]", o.size, 0) for j, o in enumerate(out)]),
            (sidx, "src_indices", [(f"arrays[{j}]", a.size, offs[j])
                                   for j, a in enumerate(arrays)])])
    return out


def _subset_check(name: Any, subset: Any, arrays: Any) -> Any:
    for x in arrays:
        if not isinstance(x, GPUArray):
            raise TypeError(f"{name}(): arrays must be GPUArrays, not {type(x).__name__}")
    return _indices(name, "subset", subset, one_d=False)


def subset_sum(subset: GPUArray, a: GPUArray, dtype: npt.DTypeLike | None = None, stream: Stream | None = None,
               allocator: _Allocator | None = None, mode: str = "raise") -> GPUArray:
    """subset_sum(subset, a, dtype=None, stream=None, allocator=None, mode="raise"): ``sum(a.ravel()[subset])``.

    A 0-d GPUArray, in `dtype` or NumPy's accumulator dtype (as ``gpuarray.sum``),
    computed in one pass without a gathered copy; `allocator` supplies the result's
    memory.  `subset` is an integer GPUArray; `mode` as for :func:`take` (in
    "raise", the call waits for the reduction to know the indices were good).
    """
    m = _mode("subset_sum", mode)
    idx = _subset_check("subset_sum", subset, (a,))
    _empty_source("subset_sum", "array", idx.size, (a.size,))
    res = _reduce._sum_dtype(a.dtype) if dtype is None else np.dtype(dtype)
    acc = np.dtype(np.float32) if res == np.float16 else res
    k = _subset_sum_kernel(idx.dtype, a.dtype, acc, m)
    src = a._contiguous(stream)
    bad = _BadIndex(m if idx.size else 1, stream)      # nothing to check without indices
    r: GPUArray = k._run([idx.ptr, src.ptr, a.size, bad.ptr], idx.size, None, None, stream,
                         allocator)
    pos = bad.first()
    if pos is not None:
        raise IndexError(f"subset_sum(): subset{_where(idx, pos)} = {_value_at(idx, pos)} is "
                         f"out of bounds for an array of size {a.size}")
    return r if acc == res else r.astype(res, stream)


def _subset_sum_kernel(idt: Any, dt: Any, acc: Any, mode: int = 0) -> Any:
    key = ("subset_sum", idt, dt, acc, mode)
    k = _reduce._reductions.get(key)
    if k is None:
        ct, it, vt = dtype_to_ctype(acc), dtype_to_ctype(idt), dtype_to_ctype(dt)
        # the element at s[i], or the sum's zero (and the position noted) for a bad index
        preamble = (f"{_HELPERS}\n"
                    f"static __device__ __forceinline__ {ct} bc_subset_item(const {it} *s, "
                    f"const {vt} *x, long long n_x, unsigned long long *bad, long long i)\n"
                    f"{{\n    const long long j = {_index_fn(idt)}(s[i], n_x, {mode});\n"
                    f"    if (j < 0) {{ bc_index_report(bad, i); return bc_cast<{ct}>(0); }}\n"
                    f"    return bc_cast<{ct}>(x[j]);\n}}\n")
        k = _reduce._reductions[key] = ReductionKernel(
            acc, "0", "a || b" if acc == np.bool_ else "a + b",
            "bc_subset_item(s, x, n_x, bad, i)",
            f"const {it} *s, const {vt} *x, long long n_x, unsigned long long *bad",
            name="bc_subset_sum", preamble=preamble)
    return k


def subset_dot(subset: GPUArray, a: GPUArray, b: GPUArray, dtype: npt.DTypeLike | None = None,
               stream: Stream | None = None, allocator: Any = None,
               mode: str = "raise") -> GPUArray:
    """subset_dot(subset, a, b, dtype=None, stream=None, allocator=None, mode="raise"):
    ``sum(a[subset] * b[subset])`` as a 0-d GPUArray, its memory from `allocator` when
    given."""
    idx = _subset_check("subset_dot", subset, (a, b))
    return _reduce.dot(take(a, idx, stream=stream, mode=mode),  # type: ignore[no-any-return]
                       take(b, idx, stream=stream, mode=mode), dtype, stream, allocator)


def subset_max(subset: GPUArray, a: GPUArray, stream: Stream | None = None, mode: str = "raise") -> GPUArray:
    """subset_max(subset, a, stream=None, mode="raise"): ``max(a.ravel()[subset])`` as a 0-d GPUArray."""
    idx = _subset_check("subset_max", subset, (a,))
    return _reduce.max(take(a, idx, stream=stream, mode=mode), stream)  # type: ignore[no-any-return]


def subset_min(subset: GPUArray, a: GPUArray, stream: Stream | None = None, mode: str = "raise") -> GPUArray:
    """subset_min(subset, a, stream=None, mode="raise"): ``min(a.ravel()[subset])`` as a 0-d GPUArray."""
    idx = _subset_check("subset_min", subset, (a,))
    return _reduce.min(take(a, idx, stream=stream, mode=mode), stream)  # type: ignore[no-any-return]
