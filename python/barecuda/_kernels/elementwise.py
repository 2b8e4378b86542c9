# SPDX-License-Identifier: MIT
"""ElementwiseKernel: a grid-stride loop over ``n`` elements rendered from
``templates/elementwise.cu`` (barecuda.elementwise shows it)."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from barecuda._core.names import public
from barecuda._kernels import vec as _vec  # noqa: F401  registers float3, int2 ... with the dtype registry
from barecuda._kernels.cache import (BLOCK, BLOCKS_PER_SM, HotEntry, _current_context,
                                     cache_store, context_cache, device_blocks, grid_for,
                                     source_module)
from barecuda._kernels.cdecl import VectorArg, parse_c_args
from barecuda._kernels.signature import _Signature
from barecuda._kernels.templates import headers_for, render

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from barecuda._driver import Function, Stream

#: A kernel whose array arguments hold this many bytes per element or more (and that
#: has no loop_prep/after_loop, which run once per thread) is launched with a block
#: per BLOCK elements, not a grid-stride loop over BLOCKS_PER_SM blocks per SM.  On
#: the H100, float32 + float64 -> float64 (20 bytes) took 1.11x CuPy's time with the
#: loop and 1.01x without, float64 + float64 (24) 1.08x and 0.99x, while float32 +
#: float32 (12) and int32 * float32 -> float64 (16) were faster with the loop (0.91x
#: and 1.02x, against 0.95x and 1.04x), at 2^21 to 2^26 elements.
WIDE_BYTES = 20


def _loop(range_variant):
    if range_variant:
        return ("for (i = bc_start + tid * bc_step; bc_step > 0 ? i < bc_stop : i > bc_stop; "
                "i += total_threads * bc_step)")
    return "for (i = tid; i < n; i += total_threads)"


@public("barecuda.elementwise")
class ElementwiseKernel:
    """A kernel applying `operation` to every index i of its array arguments.

    ElementwiseKernel(arguments, operation, name="kernel", keep=False, options=None,
                      preamble="", loop_prep="", after_loop="")

    `arguments` is a C declaration list ("float a, float *x, double *y") or a list of
    tools.VectorArg/ScalarArg; `operation` is C code using `i` (the index) and the
    argument names (and `n`, the element count).  Call it with the arguments in
    order: GPUArrays for pointers (dtypes checked), numbers for scalars (converted to
    the declared type), plus keyword-only `range=` or `slice=` (the indices to run
    over) and `stream=`.
    """

    def __init__(self, arguments: str | Sequence[Any], operation: str, name: str = "kernel",
                 keep: bool = False, options: Sequence[str] | None = None, preamble: str = "",
                 loop_prep: str = "", after_loop: str = "", **kwargs: Any) -> None:
        if kwargs:
            raise TypeError(f"ElementwiseKernel() got unexpected keyword arguments: "
                            f"{', '.join(sorted(kwargs))}")
        if not isinstance(operation, str) or not operation.strip():
            raise ValueError("operation must be a non-empty string of C code")
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"kernel name must be a C identifier, not {name!r}")
        self.args = parse_c_args(arguments)
        if not self.args:
            raise ValueError("ElementwiseKernel needs at least one argument")
        for a in self.args:
            if a.name in ("n", "i", "tid", "total_threads", "index_t") or a.name.startswith("bc_"):
                raise ValueError(f"argument name '{a.name}' is reserved by ElementwiseKernel")
        if not any(isinstance(a, VectorArg) for a in self.args):
            raise ValueError("ElementwiseKernel needs at least one array (pointer) argument")
        self.name = name
        self.operation = operation
        self.preamble = preamble
        self.loop_prep = loop_prep
        self.after_loop = after_loop
        self.keep = keep
        self.options = list(options) if options else None
        self._sig = _Signature(self.args, f"kernel '{name}'")
        self._who = f"ElementwiseKernel '{name}'"
        self._key = ("elwise", id(self))
        self._ref = weakref.ref(self)
        self._hot = None
        wide = sum(a.dtype.itemsize for a in self.args if isinstance(a, VectorArg))
        #: the grid's cap in blocks per SM (see WIDE_BYTES)
        per_thread = (loop_prep and loop_prep.strip()) or (after_loop and after_loop.strip())
        self._per_sm = (_SMALL_N // BLOCK if wide >= WIDE_BYTES and not per_thread
                        else BLOCKS_PER_SM)

    def source(self, index64: bool = False, range_variant: bool = False) -> str:
        """The CUDA C source of one variant (64-bit indices, range loop)."""
        sig = self._sig
        index_t = "long long" if index64 else "int"
        params = list(sig.params)
        if range_variant:
            params += [f"{index_t} bc_start", f"{index_t} bc_stop", f"{index_t} bc_step"]
        params.append(f"{index_t} n")
        return render("elementwise.cu",
                      headers=headers_for(sig.dtypes), preamble=self.preamble, name=self.name,
                      params=", ".join(params), unpack=sig.unpack, index_t=index_t,
                      loop_prep=self.loop_prep, loop=_loop(range_variant),
                      operation=self.operation, after_loop=self.after_loop)

    def get_function(self, index64: bool = False, range_variant: bool = False,
                     cache: dict[Any, Any] | None = None) -> Function:
        """The prepared Function of one variant for the current context."""
        if cache is None:
            cache = context_cache()
        key = (self._key, index64, range_variant)
        ent = cache.get(key)
        if ent is None or ent[0]() is not self:
            mod = source_module(self.source(index64, range_variant), self.options, self.keep)
            fn = mod.get_function(self.name)
            ch = "q" if index64 else "i"
            fn.prepare(self._sig.fmt + (ch * 3 if range_variant else "") + ch)
            ent = cache_store(cache, key, (self._ref, fn, mod))
        return ent[1]

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        """Run the kernel: ``k(*args, range=None, slice=None, stream=None)``.

        ``args`` follow the declared arguments: GPUArrays (or CuPy/PyTorch/Numba
        arrays) for pointers, numbers for scalars (converted to the declared type).
        ``range``/``slice`` restrict the indices visited; ``stream`` orders the
        launch.  TypeError for a wrong argument count, a dtype that does not match
        its declaration or an unknown keyword; ValueError for non-contiguous arrays.
        """
        rng = kwargs.pop("range", None)
        slc = kwargs.pop("slice", None)
        stream = kwargs.pop("stream", None)
        if kwargs:
            raise TypeError(f"{self._who}: unexpected keyword arguments "
                            f"{', '.join(sorted(kwargs))}")
        flat, n, rng = self._sig.bind(args, rng, slc, self._who)
        if rng is not None:
            count = len(rng)
            if count == 0:
                return
            hi = max(abs(rng.start), abs(rng.stop)) + abs(rng.step) * count
            cache = context_cache()
            grid = grid_for(count, cache, per_sm=self._per_sm)
            index64 = hi + abs(rng.step) * grid * BLOCK >= 2**31
            fn = self.get_function(index64, True, cache)
            flat += [rng.start, rng.stop, rng.step, n]
        else:
            if n == 0:
                return
            cache = context_cache()
            grid = grid_for(n, cache, per_sm=self._per_sm)
            index64 = n + grid * BLOCK >= 2**31
            fn = self.get_function(index64, False, cache)
            flat.append(n)
        fn.prepared_async_call((grid, 1, 1), (BLOCK, 1, 1), stream, *flat)

    def launch_config(self, n: int) -> tuple[Function, tuple[int, int, int]]:
        """(Function, grid) to launch over n > 0 elements in the current context:
        the internal fast path (the caller appends n to the arguments)."""
        ctx = _current_context()
        hot = self._hot
        fn = hot.get(ctx) if hot is not None else None
        if fn is None or n > _SMALL_N:
            cache = context_cache()
            grid = grid_for(n, cache, per_sm=self._per_sm)
            fn = self.get_function(n + grid * BLOCK >= 2**31, False, cache)
            if ctx is None:
                ctx = _current_context()
            self._hot = HotEntry(ctx, self.get_function(False, False, cache), None,
                                 device_blocks(cache)[0] * self._per_sm, BLOCK, BLOCK)
            return fn, (grid, 1, 1)
        grid = (n + BLOCK - 1) // BLOCK
        return fn, ((grid if grid < hot.extra else hot.extra), 1, 1)

    def launch_flat(self, n: int, flat: Any, stream: Stream | None = None) -> None:
        """Launch over n elements with already converted arguments (internal fast path)."""
        if n == 0:
            return
        fn, grid = self.launch_config(n)
        fn.prepared_async_call(grid, _BLOCK3, stream, *flat, n)


_SMALL_N = 2**30        # sizes the hot path serves (32-bit indexing for sure)
_BLOCK3 = (BLOCK, 1, 1)
