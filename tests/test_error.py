# SPDX-License-Identifier: MIT
"""The exception hierarchy and the CUresult table."""

import builtins
import os
import re

import pytest

from barecuda import _driver
from barecuda import driver as drv

CUDA_H = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "include", "cuda.h")


def test_hierarchy():
    for cls in (drv.LogicError, drv.RuntimeError, drv.MemoryError, drv.LaunchError, drv.CompileError):
        assert issubclass(cls, drv.Error)
        assert cls.__module__ == "barecuda.driver"
    assert issubclass(drv.MemoryError, builtins.MemoryError)
    assert issubclass(drv.Error, Exception)


def test_table_covers_every_cuda_result_of_the_headers():
    table = _driver._error_table()
    names = {name for _, name, _ in table}
    assert len(table) == len(names) > 90
    assert "CUDA_SUCCESS" in names and "CUDA_ERROR_UNKNOWN" in names
    if os.path.exists(CUDA_H):
        with open(CUDA_H, encoding="utf-8") as f:
            text = f.read()
        body = re.search(r"typedef enum cudaError_enum \{(.*?)\} CUresult;", text, re.S).group(1)
        header = set(re.findall(r"^\s*(CUDA_\w+)\s*=", body, re.M))
        assert header <= names


@pytest.mark.parametrize("name,cls", [
    ("CUDA_ERROR_OUT_OF_MEMORY", drv.MemoryError),
    ("CUDA_ERROR_INVALID_VALUE", drv.LogicError),
    ("CUDA_ERROR_INVALID_CONTEXT", drv.LogicError),
    ("CUDA_ERROR_INVALID_HANDLE", drv.LogicError),
    ("CUDA_ERROR_NOT_FOUND", drv.LogicError),
    ("CUDA_ERROR_ILLEGAL_ADDRESS", drv.LaunchError),
    ("CUDA_ERROR_MISALIGNED_ADDRESS", drv.LaunchError),
    ("CUDA_ERROR_LAUNCH_FAILED", drv.LaunchError),
    ("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", drv.LaunchError),
    ("CUDA_ERROR_UNKNOWN", drv.RuntimeError),
    ("CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", drv.RuntimeError),
])
def test_classes(name, cls):
    code = {n: c for c, n, _ in _driver._error_table()}[name]
    klass = {n: k for _, n, k in _driver._error_table()}[name]
    assert klass is cls
    with pytest.raises(cls) as info:
        _driver._raise_error(code, "cuMemAlloc")
    exc = info.value
    assert exc.code == code and exc.name == name and exc.routine == "cuMemAlloc"
    assert str(exc).startswith(f"cuMemAlloc failed: {name}")


def test_sticky_faults_say_the_context_is_unusable():
    code = {n: c for c, n, _ in _driver._error_table()}["CUDA_ERROR_ILLEGAL_ADDRESS"]
    with pytest.raises(drv.LaunchError, match="context is now unusable"):
        _driver._raise_error(code, "cuCtxSynchronize")
    code = {n: c for c, n, _ in _driver._error_table()}["CUDA_ERROR_INVALID_VALUE"]
    with pytest.raises(drv.LogicError) as info:
        _driver._raise_error(code, "cuMemcpy")
    assert "unusable" not in str(info.value)


def test_unknown_code_still_raises_cleanly():
    with pytest.raises(drv.RuntimeError, match="cuFoo failed: CUDA_ERROR_UNKNOWN_CODE"):
        _driver._raise_error(123456, "cuFoo")


@pytest.mark.gpu
def test_message_has_driver_text():
    drv.init()
    code = {n: c for c, n, _ in _driver._error_table()}["CUDA_ERROR_OUT_OF_MEMORY"]
    with pytest.raises(drv.MemoryError,
                       match=r"^cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY: out of memory$"):
        _driver._raise_error(code, "cuMemAlloc")


@pytest.mark.gpu
def test_real_out_of_memory(ctx):
    free, total = drv.mem_get_info()
    with pytest.raises(drv.MemoryError, match="CUDA_ERROR_OUT_OF_MEMORY") as info:
        drv.mem_alloc(total * 4)
    assert info.value.routine == "cuMemAlloc"
