# SPDX-License-Identifier: MIT
"""InclusiveScanKernel and ExclusiveScanKernel: the machinery behind barecuda.scan.

The public face's docstring (barecuda/scan.py) says what they compute; this module
renders ``templates/scan.cu`` (tiles scanned in shared memory, tile totals scanned
recursively, then added to the following tiles) and launches its passes.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np

from barecuda._core.names import public
from barecuda._kernels import arrays as _arrays
from barecuda._kernels.cache import cache_store, context_cache, source_module
from barecuda._kernels.cdecl import dtype_to_ctype
from barecuda._kernels.reduction import _alloc
from barecuda._kernels.templates import headers_for, render

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    import numpy.typing as npt

    from barecuda._driver import Stream
    from barecuda._kernels.arrays import GPUArray

BLOCK = 256
ITEMS = 8
TILE = BLOCK * ITEMS


@public("barecuda.scan")
class _ScanKernelBase:
    exclusive = 0

    def __init__(self, dtype: npt.DTypeLike, scan_expr: str, neutral: Any = None,
                 name_prefix: str = "scan", options: Sequence[str] | None = None,
                 preamble: str = "", devices: Any = None, keep: bool = False) -> None:
        self.dtype = np.dtype(dtype)
        self.ctype = dtype_to_ctype(self.dtype)
        if not isinstance(scan_expr, str) or not scan_expr.strip():
            raise ValueError("scan_expr must be a non-empty C expression of a and b")
        if not isinstance(name_prefix, str) or not name_prefix.isidentifier():
            raise ValueError(f"name_prefix must be a C identifier, not {name_prefix!r}")
        if self.exclusive and neutral is None:
            raise ValueError("ExclusiveScanKernel needs neutral (the identity of scan_expr)")
        self.scan_expr = scan_expr
        self.neutral = None if neutral is None else str(neutral)
        self.name = name_prefix
        self.options = list(options) if options else None
        self.preamble = preamble
        self.keep = keep
        self._key = ("scan", id(self))
        self._ref = weakref.ref(self)

    def source(self) -> str:
        neutral = self.neutral if self.neutral is not None else "v[0]"
        return render("scan.cu", headers=headers_for([self.dtype]), preamble=self.preamble,
                      name=self.name, t=self.ctype, scan_expr=self.scan_expr, block=BLOCK,
                      items=ITEMS, neutral=neutral)

    def _functions(self):
        cache = context_cache()
        ent = cache.get(self._key)
        if ent is None or ent[0]() is not self:
            mod = source_module(self.source(), self.options, self.keep)
            tiles = mod.get_function(self.name + "_tiles")
            tiles.prepare("PPqPi")
            carry = mod.get_function(self.name + "_carry")
            carry.prepare("PqP")
            ent = cache_store(cache, self._key, (self._ref, tiles, carry, mod))
        return ent[1], ent[2]

    def __call__(self, input_ary: GPUArray, output_ary: GPUArray | None = None,
                 allocator: Any = None, stream: Stream | None = None) -> GPUArray:
        who = type(self).__name__
        array_type = _arrays.array_type    # GPUArray, registered by the arrays floor
        if not isinstance(input_ary, array_type):
            raise TypeError(f"{who}: input must be a GPUArray, not {type(input_ary).__name__}")
        if output_ary is None:
            output_ary = input_ary
        elif not isinstance(output_ary, array_type):
            raise TypeError(f"{who}: output must be a GPUArray, not {type(output_ary).__name__}")
        for what, a in (("input", input_ary), ("output", output_ary)):
            if a.dtype != self.dtype:
                raise TypeError(f"{who}: {what} has dtype {a.dtype}, the kernel scans {self.dtype}")
            if not a.flags.forc:
                raise ValueError(f"{who}: {what} is not contiguous; pass a contiguous copy")
        if output_ary.size != input_ary.size:
            raise ValueError(f"{who}: output has {output_ary.size} elements, input {input_ary.size}")
        n = input_ary.size
        if n:
            tiles, carry = self._functions()
            self._scan(tiles, carry, output_ary.ptr, input_ary.ptr, n, self.exclusive,
                       stream, allocator)
        return output_ary

    def _scan(self, tiles, carry, out, inp, n, exclusive, stream, allocator):
        ntiles = (n + TILE - 1) // TILE
        if ntiles == 1:
            tiles.prepared_async_call((1, 1, 1), (BLOCK, 1, 1), stream, out, inp, n, 0, exclusive)
            return
        sums = _alloc(ntiles * self.dtype.itemsize, stream, allocator)
        tiles.prepared_async_call((ntiles, 1, 1), (BLOCK, 1, 1), stream, out, inp, n,
                                  int(sums), exclusive)
        self._scan(tiles, carry, int(sums), int(sums), ntiles, 0, stream, allocator)
        carry.prepared_async_call((ntiles - 1, 1, 1), (BLOCK, 1, 1), stream, out, n, int(sums))


@public("barecuda.scan")
class InclusiveScanKernel(_ScanKernelBase):
    """InclusiveScanKernel(dtype, scan_expr, neutral=None, name_prefix="scan",
    options=None, preamble="", devices=None): out[k] = x[0] op x[1] ... op x[k]."""
    exclusive = 0


@public("barecuda.scan")
class ExclusiveScanKernel(_ScanKernelBase):
    """ExclusiveScanKernel(dtype, scan_expr, neutral=None, name_prefix="scan", options=None,
    preamble="", devices=None): out[0] = neutral, out[k] = x[0] op ... op x[k-1].
    `neutral` (the identity of scan_expr) is required: None raises ValueError, as in
    PyCUDA, where it is a keyword with a None default too."""
    exclusive = 1

    def __init__(self, dtype: npt.DTypeLike, scan_expr: str, neutral: Any = None,
                 name_prefix: str = "scan", options: Sequence[str] | None = None,
                 preamble: str = "", devices: Any = None, keep: bool = False) -> None:
        super().__init__(dtype, scan_expr, neutral, name_prefix, options, preamble, devices, keep)
