# SPDX-License-Identifier: MIT
"""`python -m barecuda`: the report and the self-test, in a subprocess."""

import io
import os
import subprocess
import sys

import pytest

from conftest import gpu_probe


def run_main(tmp_path, **env):
    e = dict(os.environ, BARECUDA_CACHE_DIR=str(tmp_path / "cache"), **env)
    return subprocess.run([sys.executable, "-m", "barecuda"], capture_output=True, text=True,
                          env=e, cwd=str(tmp_path), timeout=300)


def test_main_reports_nvrtc_and_cache(tmp_path):
    proc = run_main(tmp_path)
    # 0 only when the kernel ran on a GPU; 2 (NO_GPU) when it could not be run
    assert proc.returncode == (0 if gpu_probe() is None else 2), proc.stdout + proc.stderr
    out = proc.stdout
    assert out.startswith("barecuda self-test\n")
    assert "NVRTC " in out and "libnvrtc" in out
    assert f"kernel cache: {tmp_path / 'cache'}" in out
    if gpu_probe() is None:
        assert "matches NumPy: OK" in out
        assert "compiled the self-test kernel for " in out
    else:
        assert "no GPU: " in out
        assert "compiled the self-test kernel for sm_" in out and "but cannot run it" in out
    # a CCCL beside the headers found (the toolkit's, or NVIDIA's wheel) is not worth a line
    from barecuda import compiler
    if compiler._find_header(compiler.CCCL_MARKER, compiler._toolkit_include_dirs()):
        assert "CCCL: not found" not in out
    # the compiled kernel went to the cache
    assert len([f for f in os.listdir(tmp_path / "cache") if f.endswith(".bin")]) == 1


@pytest.mark.skipif(gpu_probe() is None, reason="checks the no-GPU path")
def test_main_without_gpu_is_clear(tmp_path):
    proc = run_main(tmp_path)
    # not a success: the self-test kernel did not run; the output says why
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no GPU: " in proc.stdout
    assert "NOT RUN: the self-test kernel needs a GPU; exit status 2" in proc.stdout
    assert proc.stdout.rstrip().endswith("exit status 2")
    assert "FAILED" not in proc.stdout


def test_main_without_driver_is_nonzero(tmp_path):
    proc = run_main(tmp_path, BARECUDA_LIBCUDA=str(tmp_path / "no-such-libcuda.so.1"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "no GPU: no CUDA driver could be loaded" in proc.stdout
    assert "BARECUDA_LIBCUDA" in proc.stdout
    assert "NOT RUN: the self-test kernel needs a GPU" in proc.stdout


def test_main_fails_without_nvrtc(tmp_path):
    proc = run_main(tmp_path, BARECUDA_NVRTC=str(tmp_path / "no-such-libnvrtc.so"))
    assert proc.returncode == 1
    assert "FAILED: NVRTC could not be loaded" in proc.stdout
    assert "BARECUDA_NVRTC" in proc.stdout


def test_main_says_when_cccl_is_missing(tmp_path, monkeypatch):
    """Headers from NVIDIA's runtime wheel but no CCCL (PyTorch's CUDA 13 environment):
    the report says what cannot compile and what to install."""
    from barecuda import compiler
    from barecuda.__main__ import main
    inc = tmp_path / "site" / "nvidia" / "cu13" / "include"
    inc.mkdir(parents=True)
    (inc / "cuda_fp16.h").write_text("// the runtime wheel's\n")
    monkeypatch.setattr(compiler, "_toolkit_include_dirs", lambda: [str(inc)])
    monkeypatch.setenv("BARECUDA_CACHE_DIR", str(tmp_path / "cache"))
    out = io.StringIO()
    main([], out=out)
    text = out.getvalue()
    assert f"CUDA headers: {inc}\n" in text, text
    line = next(x for x in text.splitlines() if x.startswith("CCCL: "))
    assert "curandom" in line and "<cuda/std/...>" in line and "nvidia-cuda-cccl" in line, line
