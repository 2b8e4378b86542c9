# SPDX-License-Identifier: MIT
"""Helpers in PyCUDA's ``pycuda.tools`` style."""

import os

from barecuda import driver as _drv


def make_default_context(ctx_maker=None):
    """Make a context current on this thread and return it.

    Tries the device named by ``CUDA_DEVICE``, else every device in order, and
    returns the first context ``ctx_maker(device)`` gives (default: the device's
    primary context), pushed on this thread's stack.  Raises ``driver.Error`` with
    each device's failure when none works.
    """
    if ctx_maker is None:
        def ctx_maker(dev):
            return dev.retain_primary_context()

    _drv.init()
    wanted = os.environ.get("CUDA_DEVICE")
    if wanted is not None:
        try:
            ordinals = [int(wanted)]
        except ValueError:
            raise _drv.LogicError(f"CUDA_DEVICE={wanted!r} is not a device ordinal") from None
    else:
        ordinals = range(_drv.Device.count())
    failures = []
    for ordinal in ordinals:
        try:
            ctx = ctx_maker(_drv.Device(ordinal))
        except _drv.Error as exc:
            failures.append(f"device {ordinal}: {exc}")
            continue
        if _drv.Context.get_current() != ctx:
            ctx.push()
        return ctx
    raise _drv.RuntimeError("no device could be given a context: " + ("; ".join(failures) or "no devices"))


def bitlog2(n):
    """Position of the highest set bit of the positive int n (floor(log2(n)))."""
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"bitlog2() takes an int, not {type(n).__name__}")
    if n <= 0:
        raise ValueError(f"bitlog2() needs a positive int, got {n}")
    return n.bit_length() - 1


# --- dtypes and C declarations (PyCUDA's dtype_to_ctype, parse_c_arg, ...) -------------
# Added by the array layer; the kernels it generates use these names.

import re as _re

import numpy as _np

_DTYPE_TO_CTYPE = {}
_CTYPE_TO_DTYPE = {}


def register_dtype(dtype, c_names, alias_ok=False):
    """Make `dtype` known by the C type name(s) `c_names` (first one is the canonical one).

    A dtype already registered under another canonical name raises RuntimeError unless
    alias_ok is true, in which case the names become aliases.
    """
    if isinstance(c_names, str):
        c_names = [c_names]
    dtype = _np.dtype(dtype)
    existing = _DTYPE_TO_CTYPE.get(dtype)
    if existing is not None and existing != c_names[0] and not alias_ok:
        raise RuntimeError(f"dtype {dtype} is already registered as '{existing}'")
    if existing is None:
        _DTYPE_TO_CTYPE[dtype] = c_names[0]
    for name in c_names:
        old = _CTYPE_TO_DTYPE.get(name)
        if old is not None and old != dtype:
            raise RuntimeError(f"C type '{name}' is already registered as dtype {old}")
        _CTYPE_TO_DTYPE[name] = dtype


def get_or_register_dtype(c_names, dtype=None):
    """The dtype registered for C type name(s) `c_names`; registers `dtype` when given."""
    if dtype is None:
        if isinstance(c_names, str):
            c_names = [c_names]
        for name in c_names:
            found = _CTYPE_TO_DTYPE.get(_normalize_ctype(name))
            if found is not None:
                return found
        raise TypeError(f"unknown C type '{c_names[0]}'")
    register_dtype(dtype, c_names, alias_ok=True)
    return _np.dtype(dtype)


def _fill_registry():
    reg = register_dtype
    reg(_np.bool_, ["bool"])
    reg(_np.int8, ["signed char", "char", "int8_t"])
    reg(_np.uint8, ["unsigned char", "uint8_t"])
    reg(_np.int16, ["short", "short int", "signed short", "int16_t"])
    reg(_np.uint16, ["unsigned short", "unsigned short int", "uint16_t"])
    reg(_np.int32, ["int", "signed int", "signed", "int32_t"])
    reg(_np.uint32, ["unsigned int", "unsigned", "uint32_t"])
    reg(_np.int64, ["long long", "long long int", "signed long long", "long", "long int",
                    "int64_t", "ptrdiff_t", "ssize_t"])
    reg(_np.uint64, ["unsigned long long", "unsigned long long int", "unsigned long",
                     "unsigned long int", "uint64_t", "size_t"])
    reg(_np.float16, ["__half", "half"])
    reg(_np.float32, ["float"])
    reg(_np.float64, ["double"])
    reg(_np.complex64, ["barecuda::complex<float>", "pycuda::complex<float>", "complex<float>"])
    reg(_np.complex128, ["barecuda::complex<double>", "pycuda::complex<double>", "complex<double>"])
    # NumPy's platform-named integer dtypes (np.intc, np.longlong ...) compare equal to
    # the ones above, so they share the entries.


def _normalize_ctype(name):
    name = " ".join(name.replace("*", " ").split())
    name = _re.sub(r"\s*([<>,])\s*", r"\1", name)
    return name


def dtype_to_ctype(dtype):
    """The C type name barecuda's kernels use for `dtype` (e.g. 'float', '__half',
    'barecuda::complex<float>'); TypeError for a dtype with no C counterpart."""
    if dtype is None:
        raise ValueError("dtype may not be None")
    dt = _np.dtype(dtype)
    try:
        return _DTYPE_TO_CTYPE[dt]
    except KeyError:
        raise TypeError(f"dtype {dt} has no C type known to barecuda "
                        "(register one with tools.register_dtype)") from None


class Argument:
    """One kernel argument parsed from a C declaration: name and dtype."""

    def __init__(self, dtype, name):
        self.dtype = _np.dtype(dtype)
        self.name = name

    def __repr__(self):
        return f"{type(self).__name__}({self.dtype!r}, {self.name!r})"

    def __eq__(self, other):
        return type(self) is type(other) and self.dtype == other.dtype and self.name == other.name

    def __hash__(self):
        return hash((type(self), self.dtype, self.name))


class VectorArg(Argument):
    """A pointer argument (an array): `dtype *name`."""

    def declarator(self):
        """The C declaration of the parameter, e.g. ``float *x``."""
        return f"{dtype_to_ctype(self.dtype)} *{self.name}"

    struct_char = "P"   # the ``Function.prepare`` format character of a pointer


class ScalarArg(Argument):
    """A by-value argument: `dtype name`."""

    def declarator(self):
        """The C declaration of the parameter, e.g. ``int n``."""
        return f"{dtype_to_ctype(self.dtype)} {self.name}"

    @property
    def struct_char(self):
        """The ``Function.prepare`` format character of the dtype (an attribute, as
        PyCUDA's): its NumPy char ("f", "l", "F" complex64, "e" float16, "?" bool),
        "<n>s" for a structured dtype of n bytes."""
        ch = self.dtype.char
        return f"{self.dtype.itemsize}s" if ch == "V" else ch


_QUALIFIERS = {"const", "volatile", "__restrict__", "restrict", "__restrict", "register"}


def parse_c_arg(c_arg):
    """Parse one C declaration ('float *x', 'const double a', 'pycuda::complex<float> *z')
    into a VectorArg or ScalarArg."""
    if not isinstance(c_arg, str):
        raise TypeError(f"a C argument declaration must be a str, not {type(c_arg).__name__}")
    decl = c_arg.strip()
    if not decl:
        raise ValueError("empty C argument declaration")
    if "[" in decl:
        m = _re.fullmatch(r"(.*?)(\w+)\s*\[\s*\]", decl)
        if m is None:
            raise ValueError(f"cannot parse C argument '{c_arg}': only 'type name[]' arrays are supported")
        decl = f"{m.group(1)} *{m.group(2)}"
    pointer = decl.count("*")
    if pointer > 1:
        raise ValueError(f"cannot parse C argument '{c_arg}': pointers to pointers are not supported")
    words = decl.replace("*", " * ").replace("<", " < ").replace(">", " > ").split()
    if not words:
        raise ValueError(f"cannot parse C argument '{c_arg}'")
    name = words[-1]
    if not (name.isidentifier()) or name in _QUALIFIERS or name == "*":
        raise ValueError(f"cannot parse C argument '{c_arg}': no argument name")
    tp = [w for w in words[:-1] if w not in _QUALIFIERS and w != "*"]
    if not tp:
        raise ValueError(f"cannot parse C argument '{c_arg}': a type and a name are needed")
    type_name = _normalize_ctype(" ".join(tp))
    dtype = _CTYPE_TO_DTYPE.get(type_name)
    if dtype is None:
        raise TypeError(f"cannot parse C argument '{c_arg}': unknown C type '{type_name}'")
    return (VectorArg if pointer else ScalarArg)(dtype, name)


def parse_c_args(arguments):
    """Parse a comma-separated C declaration list (or a list of declarations, strings or
    already parsed arguments) into a list of VectorArg/ScalarArg."""
    if isinstance(arguments, str):
        parts = _split_top_level(arguments)
    else:
        parts = list(arguments)
    out = []
    for part in parts:
        out.append(part if isinstance(part, Argument) else parse_c_arg(part))
    names = [a.name for a in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"argument name(s) used twice: {', '.join(sorted(dup))}")
    return out


def _split_top_level(s):
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    parts = [p.strip() for p in parts]
    if len(parts) == 1 and not parts[0]:
        return []
    if any(not p for p in parts):
        raise ValueError(f"cannot parse C argument list '{s}': empty declaration")
    return parts


_fill_registry()


# --- memory pools (PyCUDA's DeviceMemoryPool and PageLockedMemoryPool) ------------------
# Added by the memory layer.  Blocks are binned by size: a request is rounded up
# to one of four sizes per power of two (at least 256 bytes), and the bin number
# packs bitlog2 of that size with its two next bits.  A pooled device
# allocation is a C object (driver.PooledDeviceAllocation) that copies, kernels
# and int() take like a DeviceAllocation, with its own size checked; freeing it
# (or dropping it) gives its block back to the pool.

import numpy as _np  # noqa: E402

from barecuda import _driver as _bc_driver  # noqa: E402

_POOL_MANTISSA_BITS = 2
_POOL_MIN_SIZE = 256


def _pool_bin_number(size):
    size = max(int(size), _POOL_MIN_SIZE)
    step = 1 << (bitlog2(size) - _POOL_MANTISSA_BITS)
    rounded = -(-size // step) * step
    exp = bitlog2(rounded)
    mantissa = (rounded >> (exp - _POOL_MANTISSA_BITS)) & ((1 << _POOL_MANTISSA_BITS) - 1)
    return (exp << _POOL_MANTISSA_BITS) | mantissa


def _pool_alloc_size(bin_nr):
    exp = bin_nr >> _POOL_MANTISSA_BITS
    mantissa = bin_nr & ((1 << _POOL_MANTISSA_BITS) - 1)
    return ((1 << _POOL_MANTISSA_BITS) | mantissa) << (exp - _POOL_MANTISSA_BITS)


def _pool_check_size(nbytes):
    if not isinstance(nbytes, int) or isinstance(nbytes, bool):
        try:
            nbytes = nbytes.__index__()
        except AttributeError:
            raise TypeError(f"allocate() takes an int size, not {type(nbytes).__name__}") from None
    if nbytes < 0:
        raise ValueError(f"allocate(): size must not be negative, got {nbytes}")
    return nbytes


class _BlockPool:
    """Bins of free blocks and the counters both pools share."""

    def __init__(self):
        self._bins = {}
        self._holding = True
        self.active_blocks = 0
        self.active_bytes = 0
        self.managed_bytes = 0

    bin_number = staticmethod(_pool_bin_number)
    alloc_size = staticmethod(_pool_alloc_size)

    @property
    def held_blocks(self):
        """Blocks kept for reuse (not lent out)."""
        return sum(len(b) for b in self._bins.values())

    @property
    def held_bytes(self):
        return sum(self.alloc_size(nr) * len(b) for nr, b in self._bins.items())

    def _take(self, nbytes):
        nr = self.bin_number(nbytes)
        blocks = self._bins.get(nr)
        if blocks:
            block = blocks.pop()
        else:
            size = self.alloc_size(nr)
            try:
                block = self._allocate_block(size)
            except _drv.MemoryError:
                self.free_held()
                block = self._allocate_block(size)
            self.managed_bytes += size
        self.active_blocks += 1
        self.active_bytes += self.alloc_size(nr)
        return nr, block

    def _give_back(self, nr, block):
        size = self.alloc_size(nr)
        self.active_blocks -= 1
        self.active_bytes -= size
        if self._holding and not self._block_dead(block):
            self._bins.setdefault(nr, []).append(block)
        else:
            self.managed_bytes -= size
            self._free_block(block)

    def free_held(self):
        """Release every held block to the driver now."""
        bins, self._bins = self._bins, {}
        for nr, blocks in bins.items():
            for block in blocks:
                self.managed_bytes -= self.alloc_size(nr)
                self._free_block(block)

    def stop_holding(self):
        """Release held blocks and stop keeping returned ones."""
        self._holding = False
        self.free_held()


class DeviceMemoryPool(_BlockPool):
    """A caching allocator of device memory (PyCUDA's ``tools.DeviceMemoryPool``).

    ``allocate(nbytes)`` returns a ``driver.PooledDeviceAllocation``; its
    ``free()`` (or its collection) returns the block for reuse.  Pass
    ``pool.allocate`` as a GPUArray allocator.  ``allocator`` makes new blocks
    (default ``driver.mem_alloc``).
    """

    def __init__(self, allocator=None):
        super().__init__()
        self._allocator = allocator or _drv.mem_alloc

    def _allocate_block(self, size):
        return self._allocator(size)

    @staticmethod
    def _block_dead(block):
        return block.freed or block.context is None or _context_detached(block.context)

    @staticmethod
    def _free_block(block):
        try:
            block.free()
        except _drv.LogicError:
            pass

    def allocate(self, nbytes):
        """allocate(nbytes): a PooledDeviceAllocation of at least `nbytes` bytes.

        Reuses a held block of the size class when there is one, else asks the
        allocator (freeing held blocks and retrying once on driver.MemoryError).  The
        pool is also callable: ``pool(nbytes)`` is ``pool.allocate(nbytes)``.  Raises
        TypeError for a non-integer size, ValueError for a negative one.
        """
        nbytes = _pool_check_size(nbytes)
        nr, block = self._take(nbytes)
        return _bc_driver._pooled_allocation(self, block, nbytes)

    __call__ = allocate

    def _return_block(self, block):
        self._give_back(self.bin_number(block.size), block)


def _context_detached(ctx):
    return bool(ctx.released)


class PooledHostAllocation:
    """A block of a PageLockedMemoryPool lent out as one array; the array's base.

    ``free()`` (or the collection of the last array using it) gives the block
    back to the pool.
    """

    __slots__ = ("_pool", "_nr", "_block", "__array_interface__", "__weakref__")

    def __init__(self, pool, nr, block, shape, dtype, order):
        self._pool = pool
        self._nr = nr
        self._block = block
        strides = None
        if order in ("F", "f") and len(shape) > 1:
            strides, step = [], dtype.itemsize
            for n in shape:
                strides.append(step)
                step *= n
            strides = tuple(strides)
        self.__array_interface__ = {
            "version": 3,
            "shape": tuple(shape),
            "typestr": dtype.str,
            "descr": dtype.descr,
            "data": (block.ctypes.data, False),
            "strides": strides,
        }

    def free(self):
        """Give the block back to its pool now (idempotent).

        Every array using this block must no longer be used afterwards: the pool may
        hand the memory to the next ``allocate``.
        """
        block, self._block = self._block, None
        if block is not None:
            self._pool._give_back(self._nr, block)

    def __del__(self):
        self.free()


class PageLockedMemoryPool(_BlockPool):
    """A caching allocator of page-locked host arrays (PyCUDA's ``PageLockedMemoryPool``).

    ``allocate(shape, dtype, order="C")`` returns a NumPy array in pinned memory
    whose ``.base`` is a ``PooledHostAllocation``; the block goes back to the
    pool when the array (and every view of it) is gone, or on ``base.free()``.
    """

    def __init__(self, flags=0):
        super().__init__()
        self._flags = flags

    def _allocate_block(self, size):
        return _drv.pagelocked_empty(size, _np.uint8, mem_flags=self._flags)

    @staticmethod
    def _block_dead(block):
        return block.base.freed

    @staticmethod
    def _free_block(block):
        try:
            block.base.free()
        except (_drv.LogicError, BufferError):
            pass

    def allocate(self, shape, dtype=None, order="C"):
        """allocate(shape, dtype=None, order="C"): an empty NumPy array in pooled page-locked memory.

        As ``numpy.empty(shape, dtype, order)``; the array's ``.base`` is a
        PooledHostAllocation.  Raises TypeError for an object dtype, ValueError for a
        negative dimension or an order other than 'C'/'F'.
        """
        dtype = _np.dtype(dtype)
        if dtype.hasobject:
            raise TypeError(f"allocate(): dtype {dtype} holds Python objects")
        if order not in ("C", "F", "c", "f"):
            raise ValueError(f"allocate(): order must be 'C' or 'F', not {order!r}")
        shape = (shape,) if isinstance(shape, int) else tuple(int(n) for n in shape)
        if any(n < 0 for n in shape):
            raise ValueError(f"allocate(): negative dimension in shape {shape}")
        nbytes = dtype.itemsize
        for n in shape:
            nbytes *= n
        nr, block = self._take(nbytes)
        holder = PooledHostAllocation(self, nr, block, shape, dtype, order)
        return _np.asarray(holder)


# --- contexts for tests and per-context memoization (PyCUDA's tools names) --------------

import functools as _functools
import weakref as _weakref

_memoized = _weakref.WeakSet()   # the per-context caches clear_context_caches() empties



def _check_context(ctx):
    dev = ctx.get_device()
    assert isinstance(dev.name(), str)
    assert isinstance(dev.compute_capability(), tuple)
    assert isinstance(dev.get_attributes(), dict)


def _test_context_done(ctx, pushed):
    import gc

    if pushed and _drv.Context.get_current() == ctx:
        _drv.Context.pop()
    clear_context_caches()
    gc.collect()


def _enter_test_context():
    _drv.init()
    before = _drv.Context.get_current()
    ctx = make_default_context()
    pushed = before != ctx
    if not pushed:            # already current: push it once more, so the pop is ours
        ctx.push()
        pushed = True
    _check_context(ctx)
    return ctx, pushed


def mark_cuda_test(inner_f):
    """Decorate a test so that it runs with a default context pushed (PyCUDA's name).

    The context is popped afterwards, the context-dependent caches are cleared and
    garbage is collected, as in PyCUDA; the test carries pytest's ``cuda`` mark
    when pytest is importable.
    """
    @_functools.wraps(inner_f)
    def f(*args, **kwargs):
        ctx, pushed = _enter_test_context()
        try:
            return inner_f(*args, **kwargs)
        finally:
            _test_context_done(ctx, pushed)

    try:
        import pytest
    except ImportError:
        return f
    return pytest.mark.cuda(f)


def init_cuda_context_fixture():
    """Generator for a pytest fixture: a default context pushed around each test.

    Use as ``yield from init_cuda_context_fixture()`` inside a fixture (PyCUDA's name).
    """
    ctx, pushed = _enter_test_context()
    try:
        yield
    finally:
        _test_context_done(ctx, pushed)


def context_dependent_memoize(func):
    """Cache `func`'s results per current context and arguments (PyCUDA's decorator).

    The cache holds contexts weakly, so it never keeps one alive; a call with no
    context current is not cached.  ``clear_context_caches()`` empties every such cache.
    """
    cache = _weakref.WeakKeyDictionary()

    @_functools.wraps(func)
    def wrapper(*args, **kwargs):
        ctx = _drv.Context.get_current()
        if ctx is None:
            return func(*args, **kwargs)
        key = (args, frozenset(kwargs.items())) if kwargs else args
        per_ctx = cache.get(ctx)
        if per_ctx is None:
            per_ctx = cache[ctx] = {}
        try:
            return per_ctx[key]
        except KeyError:
            value = per_ctx[key] = func(*args, **kwargs)
            return value

    wrapper.clear_cache = cache.clear
    _memoized.add(wrapper)
    return wrapper


def clear_context_caches():
    """Empty every cache of context_dependent_memoize and the current context's
    cache of generated kernels (they are rebuilt from the disk cache on next use)."""
    for wrapper in list(_memoized):
        wrapper.clear_cache()
    ctx = _drv.Context.get_current()
    if ctx is not None:
        ctx.kernel_cache.clear()
