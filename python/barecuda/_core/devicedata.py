# SPDX-License-Identifier: MIT
"""Device facts and an occupancy estimate: PyCUDA's ``tools.DeviceData`` and
``tools.OccupancyRecord`` (re-exported by barecuda.tools).

The figures come from the driver's device attributes where it has them (threads
and blocks per multiprocessor); the allocation granularities are the fixed
values of every GPU since compute capability 2.0, as in PyCUDA.
"""

from __future__ import annotations

import math as _math
import operator as _operator
from typing import TYPE_CHECKING as _TYPE_CHECKING

from barecuda import _driver
from barecuda._core import enums as _enums
from barecuda._core.names import public

if _TYPE_CHECKING:
    from typing import SupportsIndex

# PyCUDA's figures, used when the driver does not answer an attribute query.
_FALLBACK_WARPS_PER_MP = 64
_FALLBACK_BLOCKS_PER_MP = 8


def _attribute(dev: _driver.Device, name: str, fallback: int | None = None) -> int:
    try:
        return dev.get_attribute(getattr(_enums.get("device_attribute"), name))
    except (_driver.Error, AttributeError):
        if fallback is None:
            raise
        return fallback


def _int_arg(value: SupportsIndex, what: str) -> int:
    try:
        value = _operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, not {type(value).__name__}") from None
    return value


def _round_up(value: float, multiple: int) -> int:
    return _math.ceil(value / multiple) * multiple


@public("barecuda.tools")
class DeviceData:
    """What the occupancy arithmetic needs to know of a device (PyCUDA's name).

    ``DeviceData(dev=None)``: `dev` defaults to the current context's device.
    Attributes: max_threads (per block), warp_size, warps_per_mp,
    thread_blocks_per_mp, registers (per block), shared_memory (bytes per block),
    smem_granularity (threads sharing a bank cycle), smem_alloc_granularity (bytes),
    register_allocation_unit ("warp").
    """

    def __init__(self, dev: _driver.Device | None = None) -> None:
        if dev is None:
            dev = _driver.Context.get_device()
        if not isinstance(dev, _driver.Device):
            raise TypeError(f"DeviceData() takes a driver.Device, not {type(dev).__name__}")
        self.max_threads = _attribute(dev, "MAX_THREADS_PER_BLOCK")
        self.warp_size = _attribute(dev, "WARP_SIZE")
        threads_per_mp = _attribute(dev, "MAX_THREADS_PER_MULTIPROCESSOR",
                                    _FALLBACK_WARPS_PER_MP * self.warp_size)
        self.warps_per_mp = threads_per_mp // self.warp_size
        self.thread_blocks_per_mp = _attribute(dev, "MAX_BLOCKS_PER_MULTIPROCESSOR",
                                               _FALLBACK_BLOCKS_PER_MP)
        self.registers = _attribute(dev, "MAX_REGISTERS_PER_BLOCK")
        self.shared_memory = _attribute(dev, "MAX_SHARED_MEMORY_PER_BLOCK")
        self.smem_alloc_granularity = 128
        self.smem_granularity = 32
        self.register_allocation_unit = "warp"

    def align_bytes(self, word_size: int = 4) -> int:
        """Distance in bytes between base addresses at which accesses of `word_size`
        bytes coalesce: 64 for 4-byte words, 128 for 8- and 16-byte words."""
        if word_size == 4:
            return 64
        if word_size in (8, 16):
            return 128
        raise ValueError(f"no alignment possible for fetches of size {word_size}")

    def align(self, bytes: int, word_size: int = 4) -> int:
        """`bytes` rounded up to a multiple of align_bytes(word_size)."""
        return _round_up(bytes, self.align_bytes(word_size))

    def align_words(self, word_size: int) -> int:
        """align_bytes(word_size) counted in words of `word_size` bytes."""
        words, rest = divmod(self.align_bytes(word_size), word_size)
        if rest:
            raise ValueError(f"alignment is not a whole number of {word_size}-byte words")
        return words

    def align_dtype(self, elements: int, dtype_size: int) -> int:
        """`elements` rounded up to a whole alignment unit of `dtype_size`-byte items."""
        return _round_up(elements, self.align_words(dtype_size))

    def coalesce(self, thread_count: int) -> int:
        """`thread_count` rounded up to a multiple of 16 (a half-warp)."""
        return _round_up(thread_count, 16)

    @staticmethod
    def make_valid_tex_channel_count(size: int) -> int:
        """The smallest texture channel count (1, 2 or 4) holding `size` channels;
        ValueError above 4."""
        for count in (1, 2, 4):
            if size <= count:
                return count
        raise ValueError(f"could not enlarge {size} channels to a valid texture channel count")

    def __repr__(self) -> str:
        return (f"DeviceData(max_threads={self.max_threads}, warp_size={self.warp_size}, "
                f"warps_per_mp={self.warps_per_mp}, "
                f"thread_blocks_per_mp={self.thread_blocks_per_mp})")


@public("barecuda.tools")
class OccupancyRecord:
    """How well a launch of `threads` threads per block fills a multiprocessor
    (PyCUDA's name): ``OccupancyRecord(devdata, threads, shared_mem=0, registers=0)``.

    `shared_mem` is bytes of shared memory per block, `registers` the registers
    each thread uses.  Attributes: tb_per_mp (blocks resident per multiprocessor),
    limited_by ("device", "warps", "regs" or "smem"), warps_per_mp, occupancy (a
    float in [0, 1]), tb_per_mp_limits (every (blocks, reason) considered).
    ValueError when a block cannot fit at all ("too many threads", "too many
    registers", "too much smem").
    """

    def __init__(self, devdata: DeviceData, threads: SupportsIndex,
                 shared_mem: SupportsIndex = 0, registers: SupportsIndex = 0) -> None:
        threads = _int_arg(threads, "threads")
        shared_mem = _int_arg(shared_mem, "shared_mem")
        registers = _int_arg(registers, "registers")
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        if shared_mem < 0 or registers < 0:
            raise ValueError("shared_mem and registers must not be negative")
        if threads > devdata.max_threads:
            raise ValueError(f"too many threads: {threads} > {devdata.max_threads} per block")

        warps = -(-threads // devdata.warp_size)
        smem = _round_up(shared_mem, devdata.smem_alloc_granularity)
        if devdata.register_allocation_unit == "warp":
            regs = warps * 32 * registers
        elif devdata.register_allocation_unit == "block":
            regs = _round_up(warps * 2, 4) * 16 * registers
        else:
            raise ValueError(f"unknown register allocation unit "
                             f"{devdata.register_allocation_unit!r}")
        if regs > devdata.registers:
            raise ValueError(f"too many registers: {regs} > {devdata.registers} per block")
        if smem > devdata.shared_memory:
            raise ValueError(f"too much smem: {smem} > {devdata.shared_memory} bytes per block")

        limits: list[tuple[int, str]] = [(devdata.thread_blocks_per_mp, "device"),
                  (devdata.warps_per_mp // warps, "warps")]
        if registers > 0:
            limits.append((devdata.registers // regs, "regs"))
        if shared_mem > 0:
            limits.append((devdata.shared_memory // smem, "smem"))
        self.tb_per_mp_limits = limits
        self.tb_per_mp, self.limited_by = min(limits)
        self.warps_per_mp = self.tb_per_mp * warps
        self.occupancy = self.warps_per_mp / devdata.warps_per_mp

    def __repr__(self) -> str:
        return (f"OccupancyRecord(tb_per_mp={self.tb_per_mp}, limited_by={self.limited_by!r}, "
                f"occupancy={self.occupancy:.3f})")
