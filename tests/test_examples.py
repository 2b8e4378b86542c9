# SPDX-License-Identifier: MIT
"""The teaching examples in examples/: each runs in a subprocess on the GPU and
prints its OK line; on the CPU every file compiles and every kernel source in
it (module-level strings named KERNEL) compiles with NVRTC for sm_90."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import nvrtc_check


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# example file -> a piece of its success output
SUCCESS = {
    "hello_vector_add.py": "OK: added two vectors",
    "device_query.py": "OK: queried",
    "grid_block_indexing.py": "OK: ",
    "matmul_shared_tiled.py": "OK: ",
    "reduction_by_hand.py": "OK: summed",
    "scan.py": "OK: four scans",
    "elementwise.py": "OK: elementwise kernels",
    "streams_overlap.py": "OK: 16 chunks",
    "pinned_vs_pageable.py": "OK: ",
    "graph_replay.py": "OK: a 3-kernel graph",
    "histogram_atomics.py": "OK: histograms",
    "mandelbrot_png.py": "OK: Mandelbrot",
    "game_of_life.py": "OK: 50 generations",
    "interop_cupy_torch.py": ("OK: barecuda kernel ran", "SKIPPED: neither"),
    "multi_gpu_peer.py": ("OK: data crossed", "SKIPPED: this example needs two GPUs"),
    "texture_resample.py": "rotated a 320x240 image",
    "sparse_cg.py": "OK: solved a",
    "mpi_allreduce.py": ("OK: 1 rank all-reduced", "SKIPPED: this example needs mpi4py"),
    "nccl_allreduce.py": ("OK: all-reduced and gathered", "SKIPPED: this example needs NCCL"),
    "async_server.py": "OK: 256 requests on 4 streams answered",
}


def example_files():
    return sorted(p.name for p in EXAMPLES.glob("*.py"))


def run_example(name, *args, cwd):
    env = dict(os.environ)
    env.pop("PYTHONSAFEPATH", None)
    return subprocess.run([sys.executable, str(EXAMPLES / name), *map(str, args)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_every_example_is_listed():
    assert sorted(SUCCESS) == example_files()


@pytest.mark.parametrize("name", example_files())
def test_example_compiles_and_documents_itself(name):
    source = (EXAMPLES / name).read_text()
    tree = ast.parse(compile(source, name, "exec", ast.PyCF_ONLY_AST))
    doc = ast.get_docstring(tree)
    assert doc and len(doc.splitlines()) >= 3, f"{name} needs a docstring saying what it teaches"
    assert "__main__" in source and "sys.exit" in source
    assert source.count("\n") <= 140, f"{name} is longer than an example should be"


def kernel_sources(name):
    """(KERNEL source, OPTIONS) of an example, read without running it."""
    tree = ast.parse((EXAMPLES / name).read_text())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id in ("KERNEL", "OPTIONS"):
            found[node.targets[0].id] = ast.literal_eval(node.value)
    return found.get("KERNEL"), found.get("OPTIONS")


WITH_KERNELS = [n for n in example_files() if kernel_sources(n)[0] is not None]


def test_most_examples_have_a_kernel():
    assert len(WITH_KERNELS) >= 10


@pytest.mark.parametrize("name", WITH_KERNELS)
def test_example_kernel_compiles(name):
    source, options = kernel_sources(name)
    ptx = nvrtc_check(source, ptx=True, options=options, cache_dir=False, no_extern_c=False)
    assert b".entry" in ptx


@pytest.mark.gpu
@pytest.mark.parametrize("name", example_files())
def test_example_runs(name, tmp_path):
    proc = run_example(name, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{out}"
    expect = SUCCESS[name]
    expect = expect if isinstance(expect, tuple) else (expect,)
    assert any(e in proc.stdout for e in expect), f"{name} printed no success line:\n{out}"
    assert "MISMATCH" not in out


@pytest.mark.gpu
def test_mandelbrot_writes_a_png(tmp_path):
    path = tmp_path / "m.png"
    proc = run_example("mandelbrot_png.py", path, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert data[12:16] == b"IHDR" and int.from_bytes(data[16:20], "big") == 900
    assert data[-8:-4] == b"IEND"


@pytest.mark.gpu
def test_example_takes_a_size_argument(tmp_path):
    proc = run_example("hello_vector_add.py", 1000, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "vectors of 1000 floats with 4 blocks" in proc.stdout
