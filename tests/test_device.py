# SPDX-License-Identifier: MIT
"""Devices: lookup, identity, attributes (checked against CuPy where installed)."""

import uuid

import pytest

from barecuda import driver as drv

pytestmark = pytest.mark.gpu


def test_count_and_lookup():
    n = drv.Device.count()
    assert n >= 1
    for i in range(n):
        d = drv.Device(i)
        assert d.handle == i
        assert d == drv.Device(i) and hash(d) == hash(drv.Device(i))
        assert f"Device {i} '" in repr(d)


def test_bad_lookups():
    n = drv.Device.count()
    with pytest.raises(drv.LogicError, match="ordinal out of range"):
        drv.Device(n)
    with pytest.raises(drv.LogicError, match="ordinal out of range"):
        drv.Device(-1)
    with pytest.raises(drv.LogicError, match="ordinal out of range"):
        drv.Device(2**80)
    with pytest.raises(TypeError, match="int ordinal or a PCI bus id"):
        drv.Device(0.0)
    with pytest.raises(TypeError):
        drv.Device(True)
    with pytest.raises(drv.LogicError, match="PCI bus id"):
        drv.Device("0000:ff:1f.7")


def test_identity_and_basic_queries():
    d = drv.Device(0)
    name = d.name()
    assert isinstance(name, str) and name
    major, minor = d.compute_capability()
    assert major >= 5 and minor >= 0
    assert d.total_memory() > 2**30
    bus = d.pci_bus_id()
    assert drv.Device(bus) == d
    assert isinstance(d.uuid, uuid.UUID)
    assert d.can_access_peer(d) in (True, False)
    with pytest.raises(TypeError, match="takes a Device"):
        d.can_access_peer(0)


def test_attributes_and_shortcuts():
    d = drv.Device(0)
    attrs = d.get_attributes()
    assert len(attrs) > 100
    da = drv.device_attribute
    assert all(isinstance(k, da) for k in attrs)
    assert attrs[da.WARP_SIZE] == 32 == d.warp_size
    assert d.get_attribute(da.MULTIPROCESSOR_COUNT) == d.multiprocessor_count > 0
    assert d.compute_capability() == (d.compute_capability_major, d.compute_capability_minor)
    with pytest.raises(ValueError, match="is not a device_attribute"):
        d.get_attribute(100000)
    with pytest.raises(TypeError, match="must be a device_attribute"):
        d.get_attribute("WARP_SIZE")
    with pytest.raises(AttributeError):
        d.no_such_attribute
    with pytest.raises(AttributeError):
        d.WARP_SIZE  # shortcuts are lower case


def test_attributes_equal_cupy():
    cupy = pytest.importorskip("cupy")
    ours = {k.name.lower(): v for k, v in drv.Device(0).get_attributes().items()}
    theirs = cupy.cuda.Device(0).attributes
    common = {}
    for name, value in theirs.items():
        # CuPy names attributes in CamelCase after the runtime API (cudaDevAttrWarpSize)
        snake = "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
        if snake in ours:
            common[snake] = (ours[snake], value)
    assert len(common) > 50, sorted(theirs)[:10]
    assert {k: v for k, v in common.items() if v[0] != v[1]} == {}
