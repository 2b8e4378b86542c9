# SPDX-License-Identifier: MIT
"""ReductionKernel and its workspace: the machinery behind barecuda.reduction.

The public face's docstring (barecuda/reduction.py) says what a ReductionKernel
computes and how its template runs; this module renders ``templates/reduction.cu``
for the given expressions, keeps the per-context workspace of the legacy default
stream (ticket counter and per-block partials) and allocates one per launch on any
other stream.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

import numpy as np
from barecuda import _driver as _drv
from barecuda._core.names import public
from barecuda._driver import _array_alloc
from barecuda._kernels import arrays as _arrays
from barecuda._kernels.cache import (HotEntry, _current_context, cache_store, context_cache,
                                     device_blocks, source_module)
from barecuda._kernels.cdecl import VectorArg, dtype_to_ctype, parse_c_args
from barecuda._kernels.signature import _Signature
from barecuda._kernels.templates import headers_for, render

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt

    from barecuda._driver import Function
    from barecuda._kernels.arrays import GPUArray

BLOCK = 256
BLOCKS_PER_SM = 8       # the grid cap before a kernel's occupancy is known
MAX_BLOCKS_PER_SM = 32  # the hardware's limit: sizes the per-context workspace
WAVES = 2               # grid = WAVES x the blocks resident per SM (see _occupancy)
VEC_BYTES = 16          # bytes per vector load (float4, double2, ...)
VEC_UNROLL = 4          # vector loads in flight per thread and array
WS_HEAD = 256           # workspace bytes before the partials (the ticket counter)


def _env_int(name, default):
    v = os.environ.get(name, "")
    try:
        return int(v) if v.strip() else default
    except ValueError:
        return default


# Launch variants, for comparing them on a GPU (see _tuning): the number of launches
# per reduction (1: last-block finish, 2: a second one-block kernel), vector loads
# on or off, and blocks per multiprocessor (0: the compiled kernel's occupancy).
_PASSES = 2 if _env_int("BARECUDA_REDUCE_PASSES", 1) == 2 else 1
_VEC = _env_int("BARECUDA_REDUCE_VEC", 1) != 0
_BLOCKS_PER_SM = max(0, min(MAX_BLOCKS_PER_SM, _env_int("BARECUDA_REDUCE_BLOCKS_PER_SM", 0)))


def _tuning(passes: int | None = None, vec: bool | None = None,
            blocks_per_sm: int | None = None) -> dict[str, Any]:
    """Set the launch variants of reductions made from now on; returns the old ones.

    For benchmarks: `passes` 1 or 2, `vec` True/False, `blocks_per_sm` 0 (from
    occupancy) to 32.  Forgets gpuarray's cached reduction kernels so that sum, min,
    max and dot pick the change up.  Defaults come from the environment variables
    BARECUDA_REDUCE_PASSES, BARECUDA_REDUCE_VEC and BARECUDA_REDUCE_BLOCKS_PER_SM.
    """
    global _PASSES, _VEC, _BLOCKS_PER_SM
    old = {"passes": _PASSES, "vec": _VEC, "blocks_per_sm": _BLOCKS_PER_SM}
    if passes is not None:
        if passes not in (1, 2):
            raise ValueError(f"passes must be 1 or 2, not {passes!r}")
        _PASSES = passes
    if vec is not None:
        _VEC = bool(vec)
    if blocks_per_sm is not None:
        if not 0 <= blocks_per_sm <= MAX_BLOCKS_PER_SM:
            raise ValueError(f"blocks_per_sm must be 0 to {MAX_BLOCKS_PER_SM}")
        _BLOCKS_PER_SM = blocks_per_sm
    _arrays.tuning_changed()     # the arrays floor forgets its cached reductions
    return old


def _unroll(dtype):
    return 4 if dtype.itemsize >= 16 else 8


_ELEM_RE = r"(?<![A-Za-z0-9_.>])({names})\s*\[\s*i\s*\]"
_I_RE = re.compile(r"(?<![A-Za-z0-9_.>])i(?![A-Za-z0-9_])")


def _vector_plan(args, map_expr):
    """How the reduction may load its input packed: (elements per load, [(name, C
    type)], map_expr with each name[i] replaced by the pack element), or (1, [], "")
    when map_expr reads the index some other way or no array qualifies."""
    vecs = {a.name: a for a in args
            if isinstance(a, VectorArg) and a.dtype.kind in "biufc" and a.dtype.itemsize <= 8
            and a.dtype.itemsize & (a.dtype.itemsize - 1) == 0}
    if not vecs:
        return 1, [], ""
    pat = re.compile(_ELEM_RE.format(names="|".join(map(re.escape, vecs))))
    used = []

    def sub(m):
        if m.group(1) not in used:
            used.append(m.group(1))
        return f"bc_v_{m.group(1)}[bc_u].v[bc_k]"
    vmap = pat.sub(sub, map_expr)
    if not used or _I_RE.search(vmap):
        return 1, [], ""
    # every other use of a packed array (x + 1, x[j]) would see the wrong thing
    for name in used:
        if re.search(rf"(?<![A-Za-z0-9_.>]){re.escape(name)}(?![A-Za-z0-9_])", vmap):
            return 1, [], ""
    width = VEC_BYTES // max(vecs[n].dtype.itemsize for n in used)
    if width < 2:
        return 1, [], ""
    return width, [(n, dtype_to_ctype(vecs[n].dtype)) for n in used], vmap


def _vector_hooks(plan, block):
    width, arrays, vmap = plan
    if width < 2:
        return {"vec": 1, "vunroll": 1, "vec_aligned": "0", "vec_load": "", "vec_map": "0"}
    aligned = " && ".join(f"((unsigned long long)({n}) % (sizeof({t}) * BC_VEC) == 0)"
                          for n, t in arrays)
    loads = []
    for n, t in arrays:
        loads.append(f"bc_pack<{t} > bc_v_{n}[BC_U];\n"
                     f"#pragma unroll\n"
                     f"            for (int bc_u = 0; bc_u < BC_U; bc_u++)\n"
                     f"                bc_v_{n}[bc_u] = reinterpret_cast<const bc_pack<{t} > *>"
                     f"({n})[bc_j + bc_u * {block}];")
    return {"vec": width, "vunroll": VEC_UNROLL, "vec_aligned": aligned,
            "vec_load": "\n            ".join(loads), "vec_map": vmap}


@public("barecuda.reduction")
class ReductionKernel:
    """ReductionKernel(dtype_out, neutral, reduce_expr, map_expr=None, arguments=None,
    name="reduce_kernel", keep=False, options=None, preamble="", allocator=None)

    Call with the arguments in order, plus keyword-only `stream=`, `out=` (a 0-d or
    1-element GPUArray of dtype_out to write into), `range=`/`slice=` (the indices
    to reduce over) and `allocator=`.  Returns a 0-d GPUArray.
    """

    def __init__(self, dtype_out: npt.DTypeLike, neutral: Any, reduce_expr: str,
                 map_expr: str | None = None, arguments: str | Sequence[Any] | None = None,
                 name: str = "reduce_kernel", keep: bool = False,
                 options: Sequence[str] | None = None, preamble: str = "",
                 allocator: Any = None) -> None:
        self.dtype_out = np.dtype(dtype_out)
        dtype_to_ctype(self.dtype_out)
        if arguments is None:
            raise ValueError("ReductionKernel needs arguments (a C declaration list)")
        self.args = parse_c_args(arguments)
        vec = [a for a in self.args if isinstance(a, VectorArg)]
        if not vec:
            raise ValueError("ReductionKernel needs at least one array (pointer) argument")
        for a in self.args:
            if a.name in ("i", "a", "b", "out_t", "index_t", "step") or a.name.startswith("bc_"):
                raise ValueError(f"argument name '{a.name}' is reserved by ReductionKernel")
        if map_expr is None:
            if len(self.args) != 1:
                raise ValueError("map_expr may only be omitted with a single array argument")
            map_expr = f"{self.args[0].name}[i]"
        if not isinstance(reduce_expr, str) or not reduce_expr.strip():
            raise ValueError("reduce_expr must be a non-empty C expression of a and b")
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"kernel name must be a C identifier, not {name!r}")
        self.neutral = str(neutral)
        self.reduce_expr = reduce_expr
        self.map_expr = map_expr
        self.name = name
        self.keep = keep
        self.options = list(options) if options else None
        self.preamble = preamble
        self.allocator = allocator
        self._sig = _Signature(self.args, f"reduction '{name}'")
        self._who = f"ReductionKernel '{name}'"
        self._unroll = _unroll(self.dtype_out)
        self._passes = _PASSES
        self._plan = _vector_plan(self.args, map_expr) if _VEC else (1, [], "")
        self._key = ("reduce", id(self), self._passes, self._plan[0])
        import weakref
        self._ref = weakref.ref(self)
        self._hot = None

    def source(self, index64: bool = False, range_variant: bool = False) -> str:
        """source(index64=False, range_variant=False): the CUDA C++ source of this reduction.

        Two kernels: ``<name>_stage1(out, partials, ticket, <arguments>, n)`` reduces
        each block to a partial in ``partials``; the block that finishes last
        combines them into ``out[0]`` (with ``ticket`` NULL, ``<name>_stage2(out,
        partials, nblocks)`` does that in a second launch).  `index64` uses 64-bit
        indices (for more than 2**31 - 1 elements); `range_variant` adds start/step
        parameters for the ``range=``/``slice=`` calls.  Returns a str; compiles
        nothing.
        """
        sig = self._sig
        index_t = "long long" if index64 else "int"
        params = list(sig.params)
        if range_variant:
            params += [f"{index_t} bc_start", f"{index_t} bc_step"]
            map_expr = self.map_expr
            # The user's expression sees i as the index into the arrays.
            map_hook = "bc_map_range(i)"
            pre = (f"#define bc_map_range(bc_j) ({_subst_i(map_expr, '(bc_start + (bc_j) * bc_step)')})")
        else:
            map_hook = self.map_expr
            pre = ""
        params.append(f"{index_t} bc_n")
        plan = (1, [], "") if range_variant else self._plan
        return render("reduction.cu",
                      headers=headers_for(sig.dtypes + [self.dtype_out]),
                      preamble=self.preamble + "\n" + pre, name=self.name,
                      out_t=dtype_to_ctype(self.dtype_out), neutral=self.neutral,
                      reduce_expr=self.reduce_expr, map_expr=map_hook,
                      params=", ".join(params), unpack=sig.unpack, index_t=index_t,
                      block=BLOCK, unroll=self._unroll, onepass=1,
                      **_vector_hooks(plan, BLOCK))

    def get_functions(self, index64: bool = False, range_variant: bool = False,
                      cache: dict[Any, Any] | None = None) -> tuple[Function, Function]:
        """get_functions(index64=False, range_variant=False, cache=None): the compiled (stage1, stage2) Functions.

        Compiles ``source(index64, range_variant)`` with NVRTC on first use in the
        current context and caches the prepared Functions in `cache` (default: the
        context's cache).  Raises driver.CompileError when the expressions do not
        compile.
        """
        ent = self._entry(index64, range_variant, cache)
        return ent[1], ent[2]

    def _entry(self, index64, range_variant, cache=None):
        """The cache entry (ref, stage1, stage2, module, elements per block step,
        resident blocks per multiprocessor)."""
        if cache is None:
            cache = context_cache()
        key = (self._key, index64, range_variant)
        ent = cache.get(key)
        if ent is None or ent[0]() is not self:
            mod = source_module(self.source(index64, range_variant), self.options, self.keep)
            s1 = mod.get_function(self.name + "_stage1")
            ch = "q" if index64 else "i"
            s1.prepare("PPP" + self._sig.fmt + (ch * 2 if range_variant else "") + ch)
            s2 = mod.get_function(self.name + "_stage2")
            s2.prepare("PPi")
            width = 1 if range_variant else self._plan[0]
            per = BLOCK * (VEC_UNROLL * width if width > 1 else self._unroll)
            ent = cache_store(cache, key, (self._ref, s1, s2, mod, per, _occupancy(s1)))
        return ent

    def __call__(self, *args: Any, **kwargs: Any) -> GPUArray:
        """__call__(*args, stream=None, out=None, range=None, slice=None, allocator=None): run the reduction.

        `args` match the declared arguments in order (GPUArrays for pointers, numbers for
        scalars); at least one must be a GPUArray, whose size is the element count.
        `range`/`slice` pick the indices reduced over.  Returns a 0-d GPUArray of
        dtype_out (`out` when given).  Raises TypeError for a wrong argument count,
        type or keyword, ValueError for mismatched sizes.
        """
        stream = kwargs.pop("stream", None)
        out = kwargs.pop("out", None)
        rng = kwargs.pop("range", None)
        slc = kwargs.pop("slice", None)
        allocator = kwargs.pop("allocator", None) or self.allocator
        if kwargs:
            raise TypeError(f"{self._who}: unexpected keyword arguments {', '.join(sorted(kwargs))}")
        flat, n, rng = self._sig.bind(args, rng, slc, self._who)
        return self._run(flat, n, rng, out, stream, allocator)

    def _run(self, flat, n, rng, out, stream, allocator):
        if out is None:
            out = _arrays.new_scalar(self.dtype_out, allocator, stream)
        else:
            if not isinstance(out, _arrays.array_type) or out.dtype != self.dtype_out or out.size != 1:
                raise TypeError(f"{self._who}: out= must be a 1-element GPUArray of {self.dtype_out}")
        count = len(rng) if rng is not None else n
        ctx = _current_context()
        hot = self._hot
        s1 = hot.get(ctx) if hot is not None and rng is None and count <= _SMALL_N else None
        ws = hot.workspace() if s1 is not None and self._passes == 1 else None
        if s1 is not None and (ws is not None or self._passes == 2):
            # the common case: this context again, 32-bit indices
            per, cap, s2 = hot.per, hot.extra, None
        else:
            cache = context_cache()
            sm = device_blocks(cache)[0]
            if rng is not None:
                hi = (max(abs(rng.start), abs(rng.stop))
                      + abs(rng.step) * (count + sm * MAX_BLOCKS_PER_SM * BLOCK * 16))
                index64 = hi >= 2**31
                flat += [rng.start, rng.step]
            else:
                index64 = count + sm * MAX_BLOCKS_PER_SM * BLOCK * 16 >= 2**31
            ent = self._entry(index64, rng is not None, cache)
            s1, s2, per = ent[1], ent[2], ent[4]
            cap = sm * (_BLOCKS_PER_SM or ent[5])
            ws = _workspace(cache, self.dtype_out.itemsize, sm) if self._passes == 1 else None
            if rng is None:
                h = self._entry(False, False, cache)
                self._hot = HotEntry(ctx if ctx is not None else _current_context(),
                                     h[1], h[2], sm * (_BLOCKS_PER_SM or h[5]), BLOCK, h[4],
                                     workspace=ws)
        flat.append(count)
        grid = _grid(count, per, cap)
        if grid == 1:
            s1.prepared_async_call(_ONE, _BLOCK3, stream, out.ptr, 0, 0, *flat)
            return out
        size = self.dtype_out.itemsize
        if self._passes == 1:
            if stream is None and ws is not None:
                w = int(ws)
                s1.prepared_async_call((grid, 1, 1), _BLOCK3, None, out.ptr, w + WS_HEAD, w, *flat)
                return out
            # another stream: a workspace of this launch's own, its ticket zeroed
            mem = _alloc(WS_HEAD + grid * size, stream, allocator)
            p = int(mem)
            _drv.memset_d32_async(p, 0, 1, stream)
            s1.prepared_async_call((grid, 1, 1), _BLOCK3, stream, out.ptr, p + WS_HEAD, p, *flat)
            return out
        partials = _alloc(grid * size, stream, allocator)
        s1.prepared_async_call((grid, 1, 1), _BLOCK3, stream, out.ptr, int(partials), 0, *flat)
        if s2 is None:
            s2 = hot.second() or self._entry(False, False)[2]
        s2.prepared_async_call(_ONE, _BLOCK3, stream, out.ptr, int(partials), grid)
        return out


def _grid(count, per, cap):
    """Blocks for `count` elements, `per` per block step, at most `cap`: the steps
    spread evenly (no block does two more than another's)."""
    steps = (count + per - 1) // per
    if steps <= cap:
        return steps or 1
    rounds = (steps + cap - 1) // cap
    return (steps + rounds - 1) // rounds


def _occupancy(func):
    """Blocks per multiprocessor for `func`'s grid: WAVES times the blocks resident
    at once, so that the last blocks of the reduction's even split meet a GPU that
    is still full (on the H100, 16 blocks per SM summed 2^28 float32 about 2% faster
    than one wave of 8)."""
    try:
        n = func.max_active_blocks_per_multiprocessor(BLOCK)
    except _drv.Error:
        n = BLOCKS_PER_SM
    return max(1, min(MAX_BLOCKS_PER_SM, WAVES * n))


def _workspace(cache, itemsize, sm):
    """The current context's workspace of one-launch reductions on the legacy default
    stream, for results of `itemsize` bytes: the ticket counter (zeroed here once;
    each launch's last block sets it back to 0) and room for the partials of the
    largest grid.  Launches on that stream run one after another, so they share it;
    launches on other streams get their own (see _run)."""
    key = ("__reduce_ws__", itemsize)
    ws = cache.get(key)
    if ws is None:
        ws = cache[key] = _drv.mem_alloc(WS_HEAD + sm * MAX_BLOCKS_PER_SM * itemsize)
        _drv.memset_d32(ws, 0, WS_HEAD // 4)
    return ws


_SMALL_N = 2**30
_ONE = (1, 1, 1)
_BLOCK3 = (BLOCK, 1, 1)


def _alloc(nbytes, stream, allocator):
    if allocator is not None:
        return allocator(nbytes)
    return _array_alloc(nbytes) if stream is None else _array_alloc(nbytes, stream)


def _subst_i(expr, replacement):
    """expr with every identifier token `i` replaced (outside string literals)."""
    import re
    return re.sub(r"(?<![A-Za-z0-9_.])i(?![A-Za-z0-9_])", replacement, expr)


@public("barecuda.reduction")
def get_reduction_kernel(*args: Any, **kwargs: Any) -> ReductionKernel:
    """PyCUDA-style helper: a ReductionKernel."""
    return ReductionKernel(*args, **kwargs)

