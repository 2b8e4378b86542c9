# SPDX-License-Identifier: MIT
"""Shared fixtures: the GPU probe and the `gpu` marker.

Tests marked `gpu` run only when the driver loads and a device is present;
otherwise they are skipped with the probe's own message as the reason.  With
BARECUDA_REQUIRE_GPU=1 (set by .ci/gpu) a missing GPU fails them instead, so the
GPU suite can never pass by skipping.
"""

import os

import numpy as np
import pytest

from barecuda import driver as drv

_probe = None


def gpu_probe():
    """None when a GPU is usable, else the reason it is not."""
    global _probe
    if _probe is None:
        try:
            drv.init()
            n = drv.Device.count()
            _probe = "" if n > 0 else "the CUDA driver reports no device"
        except drv.Error as exc:
            _probe = f"no GPU: {exc}"
    return _probe or None


def nvrtc_newer_than_driver():
    """A sentence when the NVRTC in use is newer than the driver (pip's newest
    nvidia-cuda-nvrtc on an older driver), else None.  Its CUBIN for the device
    still loads there; its PTX and relocatable code do not (the driver refuses
    them, and barecuda's error says why)."""
    major, minor = drv.nvrtc_version()
    driver = drv.get_driver_version()
    if major * 1000 + minor * 10 <= driver:
        return None
    return (f"NVRTC {major}.{minor} is newer than the driver (CUDA {driver // 1000}."
            f"{driver % 1000 // 10}): the driver cannot load its PTX or relocatable code")


def pytest_collection_modifyitems(config, items):
    reason = gpu_probe()
    if reason is None:
        return
    if os.environ.get("BARECUDA_REQUIRE_GPU") == "1":
        pytest.exit(f"BARECUDA_REQUIRE_GPU=1 but {reason}", returncode=3)
    skip = pytest.mark.skip(reason=reason)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def ctx():
    """The primary context of device 0 (or $CUDA_DEVICE), current for the test."""
    dev = drv.Device(int(os.environ.get("CUDA_DEVICE", "0")))
    context = dev.retain_primary_context()
    context.push()
    try:
        yield context
    finally:
        _trim_array_pool(context)
        drv.Context.pop()
        context.detach()


def _trim_array_pool(context):
    """Freed GPUArray memory stays in the context's pool (no release threshold).
    Past 1 GiB it goes back to the device after each test, so that four test
    processes sharing one GPU never hold so much that another one cannot create
    its context (cuDevicePrimaryCtxRetain: CUDA_ERROR_OUT_OF_MEMORY)."""
    try:
        pool = context.array_pool         # None where the device has no pools
        if pool is not None and pool.reserved_mem_current > (1 << 30):
            context.synchronize()
            pool.trim_to(0)
    except drv.Error:
        pass    # a test that broke its context says so itself


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
