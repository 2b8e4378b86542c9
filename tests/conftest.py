# SPDX-License-Identifier: MIT
"""Shared fixtures: the GPU probe and the `gpu` marker.

Tests marked `gpu` run only when the driver loads and a device is present;
otherwise they are skipped with the probe's own message as the reason.  With
BARECUDA_REQUIRE_GPU=1 (set by .ci/gpu) a missing GPU fails them instead, so the
GPU suite can never pass by skipping.
"""

import os
import re

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


#: BARECUDA_FULL_TEMPLATES=1 (set by .ci/gpu) compiles every dtype combination
#: of the kernel templates; without it a CPU run compiles a cover of them
#: (DTYPE_COVER, and a few of each test's mixed pairings).
FULL_TEMPLATES = os.environ.get("BARECUDA_FULL_TEMPLATES") == "1"


#: The dtypes a CPU run compiles the templates for: bool, a small signed and a wide
#: unsigned integer, half, double and complex.
DTYPE_COVER = [np.dtype(t) for t in (np.bool_, np.int8, np.uint64, np.float16, np.float64,
                                     np.complex64)]


def full_or(everything, cover):
    """The parameters of a compile-check matrix: `everything` with
    BARECUDA_FULL_TEMPLATES=1, else `cover` (a subset of it)."""
    assert all(c in everything for c in cover), "the cover must be part of the matrix"
    return everything if FULL_TEMPLATES else cover


#: How far a CPU test's NVRTC check goes.  Without BARECUDA_FULL_TEMPLATES it stops
#: after NVRTC's front end (-fdevice-syntax-only): preprocessing, parsing, overload
#: resolution, template instantiation and type checking, which is where a template's
#: mistakes show, in about a thirtieth of the time of a PTX compile of barecuda's
#: kernels (NVVM's optimiser owned most of the CPU suite's time).  A check that reads
#: the PTX (parameter sizes, entry names) gets it unoptimised (-G: NVVM at -O0).
#: .ci/gpu sets BARECUDA_FULL_TEMPLATES=1: optimised PTX of everything, and the GPU
#: tests build and run cubins of the same kernels.
_FRONT_END = [] if FULL_TEMPLATES else ["-fdevice-syntax-only"]
_UNOPTIMISED = [] if FULL_TEMPLATES else ["-G"]


def nvrtc_check(source, ptx=False, **kw):
    """Compile `source` with NVRTC, as a CPU test's proof that a template or an
    example is valid CUDA C.  With ptx=True, return the PTX.

    The target is compute_90 (no ptxas: a cubin took five times longer on
    barecuda's reduction kernels, and the GPU suite builds the cubins).  A compile
    error becomes an AssertionError carrying NVRTC's log around the failing line."""
    from barecuda import compiler
    kw.setdefault("no_extern_c", True)
    kw.setdefault("arch", "compute_90")
    kw["options"] = list(kw.get("options") or ()) + (_UNOPTIMISED if ptx else _FRONT_END)
    try:
        image = compiler.compile(source, target="ptx", **kw)
    except drv.CompileError as exc:
        raise AssertionError(str(exc)) from None
    return image if ptx else None


def need_curand_headers():
    """The include directories curandom's generators compile with; skips, with
    curandom's own message (what was searched, what to install), where
    curand_kernel.h or the CCCL it includes is missing: a driver-only install
    without barecuda[cu13]'s cuRAND and CCCL wheels."""
    from barecuda import curandom
    try:
        return curandom._find_curand_headers()
    except drv.RuntimeError as exc:
        pytest.skip(str(exc))


def nvrtc_check_many(sources, size=300):
    """nvrtc_check of many kernels' sources, `size` to a translation unit: one
    NVRTC run parses the headers once for all of them.  Each __global__
    function is renamed name_<n> so that the names stay unique."""
    sources = list(sources)
    for start in range(0, len(sources), size):
        parts = ["#include <cuda_fp16.h>\n#define BC_HAVE_HALF 1\n"]
        for n, src in enumerate(sources[start:start + size], start):
            parts.append(re.sub(r"__global__ void (\w+)\(",
                                lambda m: f"__global__ void {m.group(1)}_{n}(", src))
        nvrtc_check("\n".join(parts))


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


#: Documentation code (README, docs/, the tutorial notebooks) is checked for the
#: barecuda names it uses (tests/test_docs.py, tests/test_notebooks.py).
def missing_api_names(code):
    """The barecuda names `code` imports or reaches as module attributes
    (``drv.mem_alloc`` after ``import barecuda.driver as drv``) that do not exist."""
    import ast
    import importlib
    import importlib.util
    import inspect
    tree = ast.parse(code)
    aliases, missing = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] != "barecuda":
                    continue
                if importlib.util.find_spec(a.name) is None:  # found, not imported:
                    missing.append(a.name)                   # autoinit makes a context
                elif a.name not in ("barecuda.autoinit", "barecuda.autoprimaryctx"):
                    aliases[a.asname or "barecuda"] = a.name if a.asname else "barecuda"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "barecuda":
            module = importlib.import_module(node.module)
            for a in node.names:
                if hasattr(module, a.name):
                    if inspect.ismodule(getattr(module, a.name)):
                        aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                    continue
                try:
                    importlib.import_module(f"{node.module}.{a.name}")
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                except ImportError:
                    missing.append(f"{node.module}.{a.name}")
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain, base = [], node
        while isinstance(base, ast.Attribute):
            chain.append(base.attr)
            base = base.value
        if not (isinstance(base, ast.Name) and base.id in aliases):
            continue
        obj = importlib.import_module(aliases[base.id])
        for i, attr in enumerate(reversed(chain)):
            if inspect.ismodule(obj) and not hasattr(obj, attr):
                try:
                    obj = importlib.import_module(f"{obj.__name__}.{attr}")
                    continue
                except ImportError:
                    pass
            if not hasattr(obj, attr):
                missing.append(f"{aliases[base.id]}.{'.'.join(reversed(chain))}")
                break
            obj = getattr(obj, attr)
    return missing
