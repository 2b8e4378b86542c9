# SPDX-License-Identifier: MIT
"""Enums of the CUDA headers, as IntEnum/IntFlag classes with PyCUDA's names."""

import enum

import pytest

from barecuda import driver as drv


@pytest.mark.parametrize("name", [
    "device_attribute", "ctx_flags", "limit", "func_cache", "function_attribute",
    "event_flags", "stream_flags", "host_alloc_flags", "mem_attach_flags",
    "mem_host_register_flags", "array_format", "address_mode", "filter_mode",
    "pointer_attribute", "jit_option", "jit_target", "jit_input_type", "compute_mode",
    "memory_type", "shared_config", "array3d_flags", "ipc_mem_flags", "stream_capture_mode",
])
def test_pycuda_enum_names_exist(name):
    cls = getattr(drv, name)
    assert issubclass(cls, (enum.IntEnum, enum.IntFlag))
    assert len(cls.__members__) > 0
    assert name in drv.enum_names()


def test_known_values_match_the_header():
    assert drv.device_attribute.MAX_THREADS_PER_BLOCK == 1
    assert drv.device_attribute.MULTIPROCESSOR_COUNT == 16
    assert drv.device_attribute.COMPUTE_CAPABILITY_MAJOR == 75
    assert drv.ctx_flags.SCHED_AUTO == 0 and drv.ctx_flags.SCHED_BLOCKING_SYNC == 4
    assert drv.host_alloc_flags.PORTABLE == 1 and drv.host_alloc_flags.DEVICEMAP == 2
    assert drv.host_alloc_flags.WRITECOMBINED == 4
    assert drv.mem_attach_flags.GLOBAL == 1 and drv.mem_attach_flags.HOST == 2
    assert drv.event_flags.DISABLE_TIMING == 2
    assert drv.address_mode.WRAP == 0 and drv.address_mode.BORDER == 3
    assert drv.filter_mode.LINEAR == 1
    assert drv.array_format.FLOAT == 0x20 and drv.array_format.UNSIGNED_INT8 == 0x01
    assert drv.limit.STACK_SIZE == 0
    assert drv.func_cache.PREFER_SHARED == 1 and drv.func_cache.PREFER_L1 == 2
    assert drv.stream_capture_mode.GLOBAL == 0 and drv.jit_option.MAX_REGISTERS == 0


def test_reprs_are_readable_and_flags_combine():
    assert repr(drv.device_attribute.WARP_SIZE) == "<device_attribute.WARP_SIZE: 10>"
    both = drv.host_alloc_flags.PORTABLE | drv.host_alloc_flags.DEVICEMAP
    assert int(both) == 3 and drv.host_alloc_flags.DEVICEMAP in both
    assert drv.device_attribute(16) is drv.device_attribute.MULTIPROCESSOR_COUNT


def test_enum_is_cached_and_unknown_names_fail():
    assert drv.device_attribute is drv.device_attribute
    with pytest.raises(AttributeError, match="no attribute 'no_such_enum'"):
        drv.no_such_enum
