# SPDX-License-Identifier: MIT
"""Memory pools: PyCUDA's DeviceMemoryPool, PageLockedMemoryPool and their helpers.

Shared by barecuda.driver and barecuda.tools, which both re-export these names (as
PyCUDA's driver and tools do); this module imports only the C extension.
"""

from __future__ import annotations

from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any, Generic, TypeVar

import numpy as _np

from barecuda import _driver as _bc_driver
from barecuda._core.names import public

_drv = _bc_driver

if _TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import SupportsIndex, TextIO

    import numpy.typing as npt

_B = TypeVar("_B")   # a pool's block: a DeviceAllocation, or a uint8 host array


@public("barecuda.tools")
def bitlog2(n: int) -> int:
    """Position of the highest set bit of the positive int n (floor(log2(n)))."""
    if not isinstance(n, int) or isinstance(n, bool):
        raise TypeError(f"bitlog2() takes an int, not {type(n).__name__}")
    if n <= 0:
        raise ValueError(f"bitlog2() needs a positive int, got {n}")
    return n.bit_length() - 1


# --- memory pools (PyCUDA's DeviceMemoryPool and PageLockedMemoryPool) ------------------
# Added by the memory layer.  Blocks are binned by size: a request is rounded up
# to one of four sizes per power of two (at least 256 bytes), and the bin number
# packs bitlog2 of that size with its two next bits.  A pooled device
# allocation is a C object (driver.PooledDeviceAllocation) that copies, kernels
# and int() take like a DeviceAllocation, with its own size checked; freeing it
# (or dropping it) gives its block back to the pool.


_POOL_MANTISSA_BITS = 2
_POOL_MIN_SIZE = 256


def _pool_bin_number(size: int) -> int:
    size = max(int(size), _POOL_MIN_SIZE)
    step = 1 << (bitlog2(size) - _POOL_MANTISSA_BITS)
    rounded = -(-size // step) * step
    exp = bitlog2(rounded)
    mantissa = (rounded >> (exp - _POOL_MANTISSA_BITS)) & ((1 << _POOL_MANTISSA_BITS) - 1)
    return (exp << _POOL_MANTISSA_BITS) | mantissa


def _pool_alloc_size(bin_nr: int) -> int:
    exp = bin_nr >> _POOL_MANTISSA_BITS
    mantissa = bin_nr & ((1 << _POOL_MANTISSA_BITS) - 1)
    return ((1 << _POOL_MANTISSA_BITS) | mantissa) << (exp - _POOL_MANTISSA_BITS)


def _pool_check_size(nbytes: SupportsIndex) -> int:
    if not isinstance(nbytes, int) or isinstance(nbytes, bool):
        try:
            nbytes = nbytes.__index__()
        except AttributeError:
            raise TypeError(f"allocate() takes an int size, not {type(nbytes).__name__}") from None
    if nbytes < 0:
        raise ValueError(f"allocate(): size must not be negative, got {nbytes}")
    return nbytes


class _BlockPool(Generic[_B]):
    """Bins of free blocks and the counters both pools share."""

    def __init__(self) -> None:
        self._bins: dict[int, list[_B]] = {}
        self._holding = True
        self.active_blocks = 0
        self.active_bytes = 0
        self.managed_bytes = 0

    bin_number = staticmethod(_pool_bin_number)
    alloc_size = staticmethod(_pool_alloc_size)

    if _TYPE_CHECKING:   # what each pool provides
        def _allocate_block(self, size: int) -> _B: raise NotImplementedError
        def _block_dead(self, block: _B) -> bool: raise NotImplementedError
        def _free_block(self, block: _B) -> None: ...

    @property
    def held_blocks(self) -> int:
        """Blocks kept for reuse (not lent out)."""
        return sum(len(b) for b in self._bins.values())

    @property
    def held_bytes(self) -> int:
        return sum(self.alloc_size(nr) * len(b) for nr, b in self._bins.items())

    def _take(self, nbytes: int) -> tuple[int, _B]:
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

    def _give_back(self, nr: int, block: _B) -> None:
        size = self.alloc_size(nr)
        self.active_blocks -= 1
        self.active_bytes -= size
        if self._holding and not self._block_dead(block):
            self._bins.setdefault(nr, []).append(block)
        else:
            self.managed_bytes -= size
            self._free_block(block)

    def free_held(self) -> None:
        """Release every held block to the driver now."""
        bins, self._bins = self._bins, {}
        for nr, blocks in bins.items():
            for block in blocks:
                self.managed_bytes -= self.alloc_size(nr)
                self._free_block(block)

    def stop_holding(self) -> None:
        """Release held blocks and stop keeping returned ones."""
        self._holding = False
        self.free_held()


@public("barecuda.tools")
class DeviceMemoryPool(_BlockPool[_drv.DeviceAllocation]):
    """A caching allocator of device memory (PyCUDA's ``tools.DeviceMemoryPool``).

    ``allocate(nbytes)`` returns a ``driver.PooledDeviceAllocation``; its
    ``free()`` (or its collection) returns the block for reuse.  Pass
    ``pool.allocate`` as a GPUArray allocator.  ``allocator`` makes new blocks
    (default ``driver.mem_alloc``).
    """

    def __init__(self, allocator: Callable[[int], _drv.DeviceAllocation] | None = None) -> None:
        super().__init__()
        self._allocator = allocator or _drv.mem_alloc

    def _allocate_block(self, size: int) -> _drv.DeviceAllocation:
        return self._allocator(size)

    @staticmethod
    def _block_dead(block: _drv.DeviceAllocation) -> bool:
        return block.freed or block.context is None or _context_detached(block.context)

    @staticmethod
    def _free_block(block: _drv.DeviceAllocation) -> None:
        try:
            block.free()
        except _drv.LogicError:
            pass

    def allocate(self, nbytes: SupportsIndex) -> _drv.PooledDeviceAllocation:
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

    def _return_block(self, block: _drv.DeviceAllocation) -> None:
        self._give_back(self.bin_number(block.size), block)


def _context_detached(ctx: _drv.Context) -> bool:
    return bool(ctx.released)


@public("barecuda.tools")
class PooledHostAllocation:
    """A block of a PageLockedMemoryPool lent out as one array; the array's base.

    ``free()`` (or the collection of the last array using it) gives the block
    back to the pool.
    """

    # __dict__: instances take attributes, as PyCUDA's Boost.Python ones do
    __slots__ = ("_pool", "_nr", "_block", "_nbytes", "__array_interface__", "__weakref__",
                 "__dict__")

    def __init__(self, pool: PageLockedMemoryPool, nr: int, block: npt.NDArray[Any],
                 shape: tuple[int, ...], dtype: _np.dtype[Any], order: str) -> None:
        self._pool = pool
        self._nr = nr
        self._block: npt.NDArray[Any] | None = block
        nbytes = dtype.itemsize
        for n in shape:
            nbytes *= n
        self._nbytes = nbytes
        strides: list[int] | tuple[int, ...] | None = None
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

    def __len__(self) -> int:
        """The bytes asked for (PyCUDA's pooled allocations are Sized the same way)."""
        return self._nbytes

    def __bool__(self) -> bool:
        return True

    def free(self) -> None:
        """Give the block back to its pool now (idempotent).

        Every array using this block must no longer be used afterwards: the pool may
        hand the memory to the next ``allocate``.
        """
        block, self._block = self._block, None
        if block is not None:
            self._pool._give_back(self._nr, block)

    def __del__(self) -> None:
        self.free()


@public("barecuda.tools")
class PageLockedAllocator:
    """Makes the page-locked blocks of a PageLockedMemoryPool (PyCUDA's name).

    ``PageLockedAllocator(flags=0)``: `flags` are host_alloc_flags (PORTABLE,
    DEVICEMAP, WRITECOMBINED) given to every cuMemHostAlloc.  Calling it with a
    byte count returns a uint8 NumPy array in new page-locked memory.
    """

    def __init__(self, flags: SupportsIndex = 0) -> None:
        if not isinstance(flags, int) or isinstance(flags, bool):
            try:
                flags = flags.__index__()
            except AttributeError:
                raise TypeError("PageLockedAllocator(): flags must be an int (host_alloc_flags), "
                                f"not {type(flags).__name__}") from None
        if flags < 0 or flags & ~0x7:
            raise ValueError(f"PageLockedAllocator(): unknown host_alloc_flags bits in {flags:#x} "
                             "(allowed: PORTABLE 0x1, DEVICEMAP 0x2, WRITECOMBINED 0x4)")
        self.flags = flags

    def __call__(self, nbytes: SupportsIndex) -> npt.NDArray[Any]:
        """A uint8 array of `nbytes` bytes in new page-locked host memory."""
        return _drv.pagelocked_empty(_pool_check_size(nbytes), _np.uint8, mem_flags=self.flags)

    allocate = __call__

    def __repr__(self) -> str:
        return f"PageLockedAllocator(flags={self.flags:#x})"


@public("barecuda.tools")
class PageLockedMemoryPool(_BlockPool["npt.NDArray[Any]"]):
    """A caching allocator of page-locked host arrays (PyCUDA's ``PageLockedMemoryPool``).

    ``allocate(shape, dtype, order="C")`` returns a NumPy array in pinned memory
    whose ``.base`` is a ``PooledHostAllocation``; the block goes back to the
    pool when the array (and every view of it) is gone, or on ``base.free()``.
    `allocator` is a PageLockedAllocator (default: flags 0) making new blocks.
    """

    def __init__(self, allocator: PageLockedAllocator | SupportsIndex | None = None) -> None:
        super().__init__()
        if allocator is None:
            allocator = PageLockedAllocator()
        elif not isinstance(allocator, PageLockedAllocator):
            # barecuda's earlier spelling: the host_alloc_flags themselves
            allocator = PageLockedAllocator(allocator)
        self.allocator = allocator

    def _allocate_block(self, size: int) -> npt.NDArray[Any]:
        return self.allocator(size)

    @staticmethod
    def _block_dead(block: npt.NDArray[Any]) -> bool:
        return bool(block.base.freed)  # type: ignore[union-attr]  # base: the C host buffer

    @staticmethod
    def _free_block(block: npt.NDArray[Any]) -> None:
        try:
            block.base.free()  # type: ignore[union-attr]  # base: the C host buffer
        except (_drv.LogicError, BufferError):
            pass

    def allocate(self, shape: int | Sequence[SupportsIndex],
                 dtype: npt.DTypeLike | None = None, order: str = "C") -> npt.NDArray[Any]:
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


@public("barecuda.tools")
class DebugMemoryPool(DeviceMemoryPool):
    """A DeviceMemoryPool that reports every allocation (PyCUDA's ``tools`` name).

    ``DebugMemoryPool(interactive=True, logfile=None)``: each ``allocate`` prints,
    to `logfile` (default sys.stdout), the size, the device's free and total
    memory, the pool's held and active blocks, where the call came from, and a
    histogram of the blocks still lent out by origin.  Interactive mode asks for a
    short name for each new call site (kept for the life of the pool) and waits
    for Enter after each report.
    """

    def __init__(self, interactive: bool = True, logfile: TextIO | None = None,
                 allocator: Callable[[int], _drv.DeviceAllocation] | None = None) -> None:
        super().__init__(allocator)
        self.last_free, _ = _drv.mem_get_info()
        self.interactive = bool(interactive)
        if logfile is None:
            import sys

            logfile = sys.stdout
        self.logfile = logfile
        import weakref

        self.blocks: weakref.WeakKeyDictionary[_drv.PooledDeviceAllocation, tuple[int, str]] = \
            weakref.WeakKeyDictionary()   # lent allocation -> (size, origin)
        self.stacktrace_mnemonics: dict[tuple[tuple[str, ...], int], str] = {}

    def allocate(self, size: SupportsIndex) -> _drv.PooledDeviceAllocation:
        """allocate(size): DeviceMemoryPool.allocate(size), reported first (see the class)."""
        import os
        import traceback

        size = _pool_check_size(size)
        stack = tuple(frame.name for frame in traceback.extract_stack()[:-1])
        origin = self.describe(stack, size)
        counts: dict[tuple[int, str], int] = {}
        for key in self.blocks.values():
            counts[key] = counts.get(key, 0) + 1
        common = os.path.commonprefix([o for _, o in counts]) if counts else ""
        free, total = _drv.mem_get_info()
        print(f"\n  Allocation of size {size} occurring (mem: last_free:{self.last_free}, "
              f"free: {free}, total:{total}) (pool: held:{self.held_blocks}, "
              f"active:{self.active_blocks}):\n      at: {origin}", file=self.logfile)
        for (bsize, o), n in sorted(counts.items()):
            print(f"  {o[len(common):]} ({bsize} bytes): {n}x", file=self.logfile)
        if self.interactive:
            input("  [Enter]")
        result = super().allocate(size)
        self.blocks[result] = (size, origin)
        self.last_free, _ = _drv.mem_get_info()
        return result

    __call__ = allocate  # type: ignore[assignment]  # PyCUDA names the argument size

    def describe(self, stack: tuple[str, ...], size: int) -> str:
        """The name of the call site `stack` (function names, outermost first):
        "|"-joined names, or in interactive mode a name asked for once per site."""
        if not self.interactive:
            return "|".join(stack)
        key = (stack, size)
        name = self.stacktrace_mnemonics.get(key)
        while not name:
            print(size, stack, file=self.logfile)
            name = input("Enter mnemonic or [Enter] for more info:")
            if not name:
                import traceback

                traceback.print_stack(file=self.logfile)
        self.stacktrace_mnemonics[key] = name
        return name
