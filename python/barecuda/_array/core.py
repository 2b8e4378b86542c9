# SPDX-License-Identifier: MIT
"""What every GPUArray operation is built from: host/device copies (pageable memory
staged through pinned buffers by several threads, src/staging.c), the strided copy
between any two layouts, fills and casts, and the small elementwise kernels behind
them (cached per dtypes, compiled per context).  Works on what an array exposes
(``ptr``, ``dtype``, ``shape``, ``strides``, ``size``): it never makes one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from barecuda import _driver as _cdrv
from barecuda._array import kept as _kept
from barecuda._array.layout import _alloc
from barecuda._kernels.cdecl import dtype_to_ctype
from barecuda._kernels.elementwise import ElementwiseKernel

_drv = _cdrv

if TYPE_CHECKING:
    import numpy.typing as npt

    from barecuda._kernels.arrays import GPUArray
    from barecuda._driver import Stream

# Synchronous copies of pageable memory go through pinned buffers with several
# threads (src/staging.c): faster than the driver's single bounce buffer.
_htod_staged = _cdrv._htod_staged
_dtoh_staged = _cdrv._dtoh_staged


def _htod(ptr: int, host: npt.NDArray[Any], async_: bool, stream: Stream | None) -> None:
    if async_:
        _drv.memcpy_htod_async(ptr, host, stream)
        return
    if host.nbytes >= _kept.MIN_BYTES:
        _kept.note_copy(host)   # an array the program keeps: maybe registered
    if stream is None:
        _htod_staged(ptr, host)
    else:
        _htod_staged(ptr, host, stream)


def _dtod(dst: int, src: int, nbytes: int, stream: Stream | None) -> None:
    if stream is not None:
        _drv.memcpy_dtod_async(dst, src, nbytes, stream)
    else:
        _drv.memcpy_dtod(dst, src, nbytes)


_kernels: dict[Any, ElementwiseKernel] = {}   # (kind, dtypes...) -> ElementwiseKernel; compiled per context inside


def _kernel(key: Any, arguments: str, operation: str, name: str,
            preamble: str = "") -> ElementwiseKernel:
    k = _kernels.get(key)
    if k is None:
        k = _kernels[key] = ElementwiseKernel(arguments, operation, name, preamble=preamble)
    return k


def _reverse_kernel(dt: np.dtype[Any]) -> ElementwiseKernel:
    pt, ct, decl = _item_ctype(dt)
    return _kernel(("reverse", dt), f"{pt} *z, {pt} *x",
                   f"{_at('z', 'i', pt, ct)} = {_at('x', 'n - 1 - i', pt, ct)}", "bc_reverse",
                   decl)


def _item_ctype(dt: np.dtype[Any]) -> tuple[str, str, str]:
    """How kernels that only move items of dtype dt (copies, fills, reversal) name
    them: (the pointee type of their pointer arguments, the item type, the declaration
    it needs).  The dtype's own C type where it has one; else (a structured dtype,
    bytes ...) a struct of its size and alignment, whose assignment copies the bytes
    as they are, reached through unsigned char pointers (see _at)."""
    try:
        ct = dtype_to_ctype(dt)
        return ct, ct, ""
    except TypeError:
        n, a = dt.itemsize, dt.alignment
        name = f"bc_item_{n}_{a}"
        return "unsigned char", name, f"struct __align__({a}) {name} {{ unsigned char b[{n}]; }};"


def _ct(dt: np.dtype[Any]) -> str:
    """C type computations in dtype dt run in (float for float16)."""
    return "float" if dt == np.float16 else dtype_to_ctype(dt)


def _at(ptr: str, index: str, pt: str, ct: str) -> str:
    """The C lvalue of item `index` of argument `ptr` (see _item_ctype)."""
    return f"{ptr}[{index}]" if pt == ct else f"(({ct} *){ptr})[{index}]"


def _strided_copy_kernel(dt: np.dtype[Any], nd: int) -> ElementwiseKernel:
    """dst[off(i)] = src[off(i)] over an nd-dimensional index space (strides in elements)."""
    key = ("strided_copy", dt, nd)
    k = _kernels.get(key)
    if k is None:
        pt, ct, decl = _item_ctype(dt)
        args = [f"{pt} *dst", f"{pt} *src"] + [f"long long sh{k}, long long ds{k}, long long ss{k}"
                                               for k in range(nd)]
        body = ["long long r = i, doff = 0, soff = 0, q;"]
        for d in reversed(range(nd)):
            body.append(f"q = r % sh{d}; r /= sh{d}; doff += q * ds{d}; soff += q * ss{d};")
        body.append(f"(void)q; (void)r; {_at('dst', 'doff', pt, ct)} = {_at('src', 'soff', pt, ct)}")
        k = _kernel(key, ", ".join(args), "\n".join(body), "bc_strided_copy", decl)
    return k


def _strided_copy(dst: GPUArray, src: GPUArray, stream: Stream | None) -> None:
    """dst[...] = src[...] for arrays of one shape and dtype with any strides."""
    if dst.shape != src.shape:
        raise ValueError(f"shape mismatch: {dst.shape} vs {src.shape}")
    if dst.dtype != src.dtype:
        raise TypeError(f"dtype mismatch: {dst.dtype} vs {src.dtype}")
    if dst.size == 0:
        return
    shape, dstr, sstr = [], [], []
    item = dst.dtype.itemsize
    for d, a, b in zip(dst.shape, dst.strides, src.strides):
        if d == 1:
            continue
        if a % item or b % item:
            raise ValueError("strides that are not a multiple of the item size are not supported")
        shape.append(d)
        dstr.append(a // item)
        sstr.append(b // item)
    if (dst._c and src._c) or (dst._f and src._f and dst.strides == src.strides):
        _dtod(dst.ptr, src.ptr, dst.nbytes, stream)
        return
    k = _strided_copy_kernel(dst.dtype, len(shape))
    flat = [dst.ptr, src.ptr]
    for d, a, b in zip(shape, dstr, sstr):
        flat += [d, a, b]
    k.launch_flat(dst.size, flat, stream)


def _fill(ary: GPUArray, value: Any, stream: Stream | None) -> None:
    dt = ary.dtype
    try:
        if dt.fields is not None:   # a struct (gpuarray.vec): a make_* value, tuple or number
            v = np.asarray(value)
            if v.dtype != dt:
                v = np.array(value if v.dtype.fields is None else v.tolist(), dtype=dt)
            if v.size != 1:
                raise ValueError(f"one value is needed, got {v.size}")
            v = v.reshape(())
        else:
            v = dt.type(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise type(exc)(f"fill(): cannot convert {value!r} to {dt}: {exc}") from None
    if dt.itemsize == 4 and hasattr(_drv, "memset_d32"):
        word = int(np.array(v, dt).view(np.uint32))
        if stream is not None and hasattr(_drv, "memset_d32_async"):
            _drv.memset_d32_async(ary.ptr, word, ary.size, stream)
        else:
            _drv.memset_d32(ary.ptr, word, ary.size)
        return
    if dt.itemsize == 1 and hasattr(_drv, "memset_d8"):
        word = int(np.array(v, dt).view(np.uint8))
        if stream is not None and hasattr(_drv, "memset_d8_async"):
            _drv.memset_d8_async(ary.ptr, word, ary.size, stream)
        else:
            _drv.memset_d8(ary.ptr, word, ary.size)
        return
    pt, ct, decl = _item_ctype(dt)
    if pt == ct:
        k = _fill_kernel(dt)
        k.launch_flat(ary.size, [ary.ptr] + _scalar_flat(k, 1, v), stream)
        return
    # an item with no C type: the kernel copies it from one item in device memory
    item = _alloc(dt.itemsize, None, stream)   # stream-ordered: freed after the kernel
    _htod(int(item), np.array(v, dt).reshape(1), False, stream)
    k = _kernel(("fill_from", dt), "unsigned char *z, unsigned char *v",
                f"{_at('z', 'i', pt, ct)} = {_at('v', '0', pt, ct)}", "bc_fill_from", decl)
    k.launch_flat(ary.size, [ary.ptr, int(item)], stream)


def _fill_kernel(dt: np.dtype[Any]) -> ElementwiseKernel:
    ct = dtype_to_ctype(dt)
    return _kernel(("fill", dt), f"{ct} *z, {ct} v", "z[i] = v", "bc_fill")


def _scalar_flat(kernel: ElementwiseKernel, index: int, value: Any) -> list[Any]:
    conv, count = kernel._sig.converters[index]
    c = conv(value)
    return list(c) if count == 2 else [c]


def _cast_kernel(src_dt: np.dtype[Any], dst_dt: np.dtype[Any]) -> ElementwiseKernel:
    key = ("cast", src_dt, dst_dt)
    k = _kernels.get(key)
    if k is None:
        k = _kernel(key, f"{dtype_to_ctype(dst_dt)} *z, {dtype_to_ctype(src_dt)} *x",
                    f"z[i] = bc_cast<{dtype_to_ctype(dst_dt)}>(x[i])", "bc_cast_kernel")
    return k


def _assign(out: GPUArray, src: GPUArray, stream: Stream | None) -> GPUArray:
    if out.shape != src.shape:
        raise ValueError(f"out has shape {out.shape}, the result {src.shape}")
    _strided_copy(out, src if src.dtype == out.dtype else src.astype(out.dtype), stream)
    return out

