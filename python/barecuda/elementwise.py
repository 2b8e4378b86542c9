# SPDX-License-Identifier: MIT
"""Elementwise kernels generated from C expressions, as ``pycuda.elementwise``.

    lin = ElementwiseKernel("float a, float *x, float *y, float *z",
                            "z[i] = a * x[i] + y[i]", "axpy")
    lin(2.0, x_gpu, y_gpu, z_gpu)

The source is rendered from ``templates/elementwise.cu``: one grid-stride loop over
``n`` elements (the size of the first array argument), indexed with 32-bit ints when
the size allows and 64-bit otherwise, the grid sized from the device (a few blocks per
multiprocessor).  Compiled kernels are cached per context (and on disk by
``SourceModule``).  Array arguments must be contiguous GPUArrays of the declared dtype.
"""

import os
import string
import weakref

import numpy as np

from barecuda import _vec  # noqa: F401  registers float3, int2 ... with tools' dtype registry
from barecuda import driver as _drv
from barecuda._driver import _HotEntry as HotEntry
from barecuda.tools import VectorArg, dtype_to_ctype, parse_c_args

__all__ = ["ElementwiseKernel", "get_elwise_module", "get_elwise_kernel"]

_TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")
_templates = {}

BLOCK = 256          # threads per block of the generated loops
BLOCKS_PER_SM = 8    # 2048 resident threads per SM on every architecture we target


def template(name):
    """The string.Template of templates/<name> (read once)."""
    t = _templates.get(name)
    if t is None:
        with open(os.path.join(_TEMPLATE_DIR, name), encoding="utf-8") as f:
            t = _templates[name] = string.Template(f.read())
    return t


def render(template_name, **hooks):
    """Render templates/<name>; every ${hook} of the template must be given."""
    return template(template_name).substitute(**hooks)


def headers_for(dtypes):
    """The #include lines a kernel handling `dtypes` needs."""
    lines = []
    if any(np.dtype(d) == np.float16 for d in dtypes):
        lines += ["#include <cuda_fp16.h>", "#define BC_HAVE_HALF 1"]
    lines += ["#include <barecuda_complex.cuh>", "#include <barecuda_types.cuh>",
              "using barecuda::bc_cast;"]
    return "\n".join(lines)


# ------------------------------------------------------------ per-context caches

_current_context = _drv.Context.get_current


def context_cache():
    """The dict of compiled kernels of the current context (``Context.kernel_cache``).

    The context owns it, so kernels never keep a context alive: detach() empties
    it, and a context nobody references is collected with its kernels.  An empty
    throwaway dict when no context is current yet.
    """
    ctx = _current_context()
    return {} if ctx is None else ctx.kernel_cache


def cache_store(cache, key, entry):
    """``cache[key] = entry``; entries whose kernel object is gone (first item a
    dead weak reference) are swept out whenever the dict has doubled."""
    if len(cache) >= cache.get("__sweep_at__", 64):
        dead = [k for k, v in cache.items()
                if type(v) is tuple and v and type(v[0]) is weakref.ref and v[0]() is None]
        for k in dead:
            del cache[k]
        cache["__sweep_at__"] = 2 * len(cache) + 64
    cache[key] = entry
    return entry


def device_blocks(cache=None):
    """(multiprocessor count, max threads per block) of the current context's device."""
    if cache is None:
        cache = context_cache()
    info = cache.get("__device__")
    if info is None:
        dev = _drv.Context.get_device()
        info = cache["__device__"] = (dev.multiprocessor_count, dev.max_threads_per_block)
    return info


def grid_for(n, cache=None, block=BLOCK, per_sm=BLOCKS_PER_SM):
    """Blocks for a grid-stride loop over n elements."""
    sm = device_blocks(cache)[0]
    g = (n + block - 1) // block
    cap = sm * per_sm
    return max(1, g if g < cap else cap)


def source_module(source, options=None, keep=False):
    from barecuda.compiler import SourceModule
    return SourceModule(source, options=options, keep=keep, no_extern_c=True)


# ------------------------------------------------------------ argument transport

# struct format characters of scalars passed as they are
_STRUCT_CHAR = {np.dtype(k): v for k, v in (
    (np.int8, "b"), (np.uint8, "B"), (np.int16, "h"), (np.uint16, "H"), (np.int32, "i"),
    (np.uint32, "I"), (np.int64, "q"), (np.uint64, "Q"), (np.float32, "f"), (np.float64, "d"))}


def scalar_transport(arg):
    """(params, unpack code, struct chars, converter) for a scalar argument.

    Complex scalars travel as two reals, float16 as a float and bool as an int; a
    local of the declared type is rebuilt at the top of the kernel.
    """
    dt, name = arg.dtype, arg.name
    ctype = dtype_to_ctype(dt)
    if dt.kind == "c":
        rt = "float" if dt == np.complex64 else "double"
        ch = "f" if dt == np.complex64 else "d"
        conv_t = dt.type

        def conv(v, _t=conv_t):
            c = _t(v)
            return (c.real, c.imag)
        return (f"{rt} {name}_bc_re, {rt} {name}_bc_im",
                f"const {ctype} {name}({name}_bc_re, {name}_bc_im);", ch + ch, conv, 2)
    if dt == np.float16:
        return (f"float {name}_bc_f", f"const __half {name} = __float2half_rn({name}_bc_f);",
                "f", lambda v: float(np.float16(v)), 1)
    if dt == np.bool_:
        return (f"int {name}_bc_b", f"const bool {name} = {name}_bc_b != 0;", "i",
                lambda v: 1 if v else 0, 1)
    if dt.fields is not None:   # a struct (gpuarray.vec.float3 ...): its bytes, as given
        def conv(v, _dt=dt):
            a = np.asarray(v)
            if a.dtype != _dt or a.size != 1:
                a = np.array(v if a.dtype.fields is None else a.tolist(), dtype=_dt)
            if a.size != 1:
                raise ValueError(f"expected one {_dt} value, got {a.size}")
            return a.tobytes()
        return (f"{ctype} {name}", "", f"{dt.itemsize}s", conv, 1)
    ch = _STRUCT_CHAR.get(dt)
    if ch is None:
        raise TypeError(f"scalar argument '{name}' has dtype {dt}, which cannot be passed by value")
    return (f"{ctype} {name}", "", ch, dt.type, 1)


class _Signature:
    """Kernel parameters, unpack code and argument converters for a parsed argument list."""

    def __init__(self, args, kernel_name):
        self.args = args
        params, unpack, fmt, self.converters = [], [], [], []
        for a in args:
            if isinstance(a, VectorArg):
                params.append(f"{dtype_to_ctype(a.dtype)} *{a.name}")
                fmt.append("P")
                self.converters.append(None)
            else:
                p, u, ch, conv, count = scalar_transport(a)
                params.append(p)
                if u:
                    unpack.append(u)
                fmt.append(ch)
                self.converters.append((conv, count))
        self.params = params
        self.unpack = "\n    ".join(unpack)
        self.fmt = "".join(fmt)
        self.name = kernel_name
        self.dtypes = [a.dtype for a in args]

    def bind(self, args, rng, slc, who):
        """The call of a generated kernel: (flat arguments, element count, the range
        of indices or None).  The count is the first array's size; `slc` (a slice)
        becomes a range over it.  TypeError for a wrong argument count, no array
        among the arguments, both range= and slice=, or either of a wrong type."""
        if len(args) != len(self.args):
            raise TypeError(f"{who} takes {len(self.args)} arguments "
                            f"({', '.join(a.name for a in self.args)}), got {len(args)}")
        flat, first = self.convert(args, who)
        if first is None:
            raise TypeError(f"{who}: no GPUArray among the array arguments, so the size is unknown")
        n = first.size
        if slc is not None:
            if rng is not None:
                raise TypeError(f"{who}: give range= or slice=, not both")
            if not isinstance(slc, slice):
                raise TypeError(f"slice= must be a slice, not {type(slc).__name__}")
            rng = range(*slc.indices(n))
        if rng is not None and not isinstance(rng, range):
            raise TypeError(f"range= must be a range, not {type(rng).__name__}")
        return flat, n, rng

    def convert(self, values, who):
        """Flatten user arguments into launch arguments; returns (flat list, first array)."""
        out = []
        first = None
        for a, conv, v in zip(self.args, self.converters, values):
            if conv is None:
                try:
                    ptr = _array_pointer(v, a, who)
                except _Foreign:  # a CuPy/torch/Numba array: a zero-copy GPUArray view
                    from barecuda.gpuarray import _device_view
                    w = _device_view(v)
                    if w is None:
                        raise TypeError(f"argument '{a.name}' of {who} must be a GPUArray "
                                        f"of {a.dtype}, not {type(v).__name__}") from None
                    v = w
                    ptr = _array_pointer(v, a, who)
                if first is None and hasattr(v, "gpudata"):
                    first = v
                out.append(ptr)
            else:
                fn, count = conv
                if _is_array_like(v):
                    raise TypeError(f"argument '{a.name}' of {who} is a scalar ({a.dtype}), "
                                    f"not {type(v).__name__}")
                try:
                    c = fn(v)
                except (TypeError, ValueError, OverflowError) as exc:
                    raise type(exc)(f"argument '{a.name}' of {who}: cannot convert "
                                    f"{v!r} to {a.dtype}: {exc}") from None
                if count == 2:
                    out.extend(c)
                else:
                    out.append(c)
        return out, first


def _is_array_like(v):
    return hasattr(v, "gpudata") or isinstance(v, np.ndarray) and v.ndim > 0


class _Foreign(Exception):
    """Raised by _array_pointer for a device array of another library."""


def _array_pointer(v, arg, who):
    dt = getattr(v, "dtype", None)
    if dt is None or not hasattr(v, "gpudata"):
        if isinstance(v, int) and not isinstance(v, bool):
            return v  # a raw device pointer
        if (hasattr(v, "__cuda_array_interface__") or hasattr(v, "__dlpack__")) \
                and not isinstance(v, np.ndarray):
            raise _Foreign
        alloc = getattr(_drv, "DeviceAllocation", None)
        if alloc is not None and isinstance(v, alloc):
            return int(v)
        raise TypeError(f"argument '{arg.name}' of {who} must be a GPUArray of {arg.dtype}, "
                        f"not {type(v).__name__}")
    if dt != arg.dtype:
        raise TypeError(f"argument '{arg.name}' of {who} must be a GPUArray of {arg.dtype}, "
                        f"got one of {dt}")
    flags = v.flags
    if not flags.forc:
        raise ValueError(f"argument '{arg.name}' of {who} is not contiguous (strides "
                         f"{v.strides}); pass a contiguous copy (.copy())")
    return v.ptr


def _loop(range_variant):
    if range_variant:
        return ("for (i = bc_start + tid * bc_step; bc_step > 0 ? i < bc_stop : i > bc_stop; "
                "i += total_threads * bc_step)")
    return "for (i = tid; i < n; i += total_threads)"


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

    def __init__(self, arguments, operation, name="kernel", keep=False, options=None,
                 preamble="", loop_prep="", after_loop="", **kwargs):
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

    def source(self, index64=False, range_variant=False):
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

    def get_function(self, index64=False, range_variant=False, cache=None):
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

    def __call__(self, *args, **kwargs):
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
            grid = grid_for(count, cache)
            index64 = hi + abs(rng.step) * grid * BLOCK >= 2**31
            fn = self.get_function(index64, True, cache)
            flat += [rng.start, rng.stop, rng.step, n]
        else:
            if n == 0:
                return
            cache = context_cache()
            grid = grid_for(n, cache)
            index64 = n + grid * BLOCK >= 2**31
            fn = self.get_function(index64, False, cache)
            flat.append(n)
        fn.prepared_async_call((grid, 1, 1), (BLOCK, 1, 1), stream, *flat)

    def launch_config(self, n):
        """(Function, grid) to launch over n > 0 elements in the current context:
        the internal fast path (the caller appends n to the arguments)."""
        ctx = _current_context()
        hot = self._hot
        fn = hot.get(ctx) if hot is not None else None
        if fn is None or n > _SMALL_N:
            cache = context_cache()
            grid = grid_for(n, cache)
            fn = self.get_function(n + grid * BLOCK >= 2**31, False, cache)
            if ctx is None:
                ctx = _current_context()
            self._hot = HotEntry(ctx, self.get_function(False, False, cache), None,
                                 device_blocks(cache)[0] * BLOCKS_PER_SM, BLOCK, BLOCK)
            return fn, (grid, 1, 1)
        grid = (n + BLOCK - 1) // BLOCK
        return fn, ((grid if grid < hot.extra else hot.extra), 1, 1)

    def launch_flat(self, n, flat, stream=None):
        """Launch over n elements with already converted arguments (internal fast path)."""
        if n == 0:
            return
        fn, grid = self.launch_config(n)
        fn.prepared_async_call(grid, _BLOCK3, stream, *flat, n)


_SMALL_N = 2**30        # sizes the hot path serves (32-bit indexing for sure)
_BLOCK3 = (BLOCK, 1, 1)


def get_elwise_kernel(arguments, operation, name="kernel", keep=False, options=None, **kwargs):
    """PyCUDA's helper: an ElementwiseKernel (callable)."""
    return ElementwiseKernel(arguments, operation, name, keep, options, **kwargs)


def get_elwise_module(arguments, operation, name="kernel", keep=False, options=None,
                      preamble="", loop_prep="", after_loop=""):
    """PyCUDA's helper: the SourceModule of an elementwise kernel."""
    k = ElementwiseKernel(arguments, operation, name, keep, options, preamble, loop_prep, after_loop)
    return source_module(k.source(), options, keep)
