# SPDX-License-Identifier: MIT
"""The whole launch path on the CPU, through a stand-in driver (tests/fakecuda.c,
loaded with BARECUDA_LIBCUDA): real Modules and Functions whose parameter layout
comes from cuFuncGetParamInfo, __call__ and prepared_call at 0, 4, 16 and 64
arguments (the benchmark's kernels and call sites), and the bytes they hand to
cuLaunchKernel read back from the stand-in.

Run as a script (``python tests/test_launch_fakedriver.py``) it prints the
CPU-side cost of a launch: ns per call of the benchmark's own generated loops,
beside the same call sites on a no-op C function (what CPython's call costs
alone) and the packing alone (_driver._bench_pack)."""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FAKE_SRC = HERE / "fakecuda.c"


def toolkit_include():
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.path.isfile(os.path.join(root, "include", "cuda.h")):
            return os.path.join(root, "include")
    return None


def c_compiler():
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def build_fake_driver(outdir):
    """Compile tests/fakecuda.c into outdir/libcuda.so.1; its path."""
    lib = Path(outdir) / "libcuda.so.1"
    subprocess.run([c_compiler(), "-O2", "-shared", "-fPIC", "-I", toolkit_include(),
                    "-o", str(lib), str(FAKE_SRC)], check=True, capture_output=True, text=True)
    return lib


pytestmark = pytest.mark.skipif(toolkit_include() is None or c_compiler() is None,
                                reason="needs a C compiler and a CUDA toolkit's cuda.h")


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory):
    return build_fake_driver(tmp_path_factory.mktemp("fakecuda"))


def run_with(lib, code):
    env = dict(os.environ, BARECUDA_LIBCUDA=str(lib))
    return subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, env=env, timeout=120)


# Shared by the test and the timing script: a context, the benchmark's module.
SETUP = """
import ctypes, os
import numpy as np
from barecuda import driver as drv, _driver
from barecuda.bench import launch as L
drv.init()
ctx = drv.Device(0).retain_primary_context()
ctx.push()
module = drv.module_from_buffer(L.kernel_ptx())
a, b = drv.mem_alloc(1 << 20), drv.mem_alloc(1 << 20)
funcs = {n: module.get_function(f"empty{n}") for n in L.ARG_COUNTS}
fake = ctypes.CDLL(os.environ["BARECUDA_LIBCUDA"])
fake.fake_launch_count.restype = ctypes.c_ulonglong
fake.fake_last_launch.restype = ctypes.c_size_t

def last_launch():
    dims = (ctypes.c_uint * 7)()
    buf = (ctypes.c_ubyte * 4096)()
    n = fake.fake_last_launch(dims, buf, 4096)
    return tuple(dims), bytes(buf[:n])
"""


def test_launches_hand_the_driver_the_packed_bytes(fake_driver):
    r = run_with(fake_driver, SETUP + textwrap.dedent("""
    for n in L.ARG_COUNTS:
        f = funcs[n]
        kinds = L.prepared_signature(n)
        assert f.num_params == n, (n, f.num_params)
        sizes = [8 if k == "P" else 4 for k in kinds]
        assert [s for _, s in f.param_info] == sizes
        cargs = L.call_args(n, a, b)
        want = _driver._pack_args(f, *cargs)
        assert len(want) == sum(sizes)
        # the benchmark's own call site (more than 30 arguments: CPython builds a
        # tuple and a dict and calls through CALL_FUNCTION_EX)
        before = fake.fake_launch_count()
        L.call_loop(f, cargs)(3)
        assert fake.fake_launch_count() == before + 3
        assert last_launch() == ((1, 1, 1, 32, 1, 1, 0), want)
        f(*cargs, block=(8, 2), grid=(3, 2), shared=16)
        assert last_launch() == ((3, 2, 1, 8, 2, 1, 16), want)
        # the benchmark's bare reference makes the same launch from bytes packed once
        _driver._bench_arm(f, (2, 1, 1), (64, 1, 1), cargs)
        _driver._bench_fire(1, 2, block=3)          # its arguments are ignored
        assert last_launch() == ((2, 1, 1, 64, 1, 1, 0), want)
        _driver._bench_arm(None)
        f.prepare(kinds)
        L.prepared_loop(f, L.prepared_args(n, a, b))(2)
        assert fake.fake_launch_count() == before + 7
        assert last_launch() == ((1, 1, 1, 32, 1, 1, 0), want)
        f.prepared_async_call((2,), (4,), None, *L.prepared_args(n, a, b), shared_size=8)
        assert last_launch() == ((2, 1, 1, 4, 1, 1, 8), want)
        if n:
            for bad in (cargs[:-1], cargs + (np.int32(1),)):
                try:
                    f(*bad, block=(1, 1, 1))
                except TypeError as e:
                    assert f"takes {n} argument" in str(e), e
                else:
                    raise AssertionError("no TypeError")
            try:
                f.prepared_call((1,), (1,), *L.prepared_args(n, a, b)[:-1])
            except TypeError as e:
                assert "prepared kernel" in str(e), e
            else:
                raise AssertionError("no TypeError")
    # a freed allocation among 64 arguments is refused, not launched
    c = drv.mem_alloc(256)
    args = list(L.call_args(64, a, b))
    args[6] = c
    c.free()
    before = fake.fake_launch_count()
    for call in (lambda: funcs[64](*args, block=(1, 1, 1)),
                 lambda: funcs[64].prepared_call((1,), (1,), *args)):
        try:
            call()
        except Exception as e:
            assert "freed" in str(e) or "released" in str(e), e
        else:
            raise AssertionError("a freed allocation was launched")
    assert fake.fake_launch_count() == before
    print("ok")
    """))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("ok"), r.stdout


TIMING = """
import statistics, time
REPEATS, N = 21, 20000

def per_call(loop):
    loop(N)
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        loop(N)
        times.append((time.perf_counter() - t0) / N)
    return statistics.median(times) * 1e9

class NoOp:
    prepared_call = _driver._bench_noop

class Fire:
    prepared_call = _driver._bench_fire

print("CPU-side ns per launch (stand-in driver; 'site' = the same call site on a no-op C "
      "function, 'bare' = on _bench_fire (the launch, no argument handled), 'ours' = "
      "what barecuda adds to bare)")
for n in L.ARG_COUNTS:
    f = funcs[n]
    cargs, pargs = L.call_args(n, a, b), L.prepared_args(n, a, b)
    c = per_call(L.call_loop(f, cargs))
    c0 = per_call(L.call_loop(_driver._bench_noop, cargs))
    _driver._bench_arm(f, L.GRID, L.BLOCK, cargs)
    cb = per_call(L.call_loop(_driver._bench_fire, cargs))
    pk = _driver._bench_pack(f, cargs, 200000) * 1e9
    f.prepare(L.prepared_signature(n))
    p = per_call(L.prepared_loop(f, pargs))
    p0 = per_call(L.prepared_loop(NoOp, pargs))
    pb = per_call(L.prepared_loop(Fire, pargs))
    ppk = _driver._bench_pack(f, pargs, 200000, prepared=True) * 1e9
    print(f"{n:3d} args  __call__ {c:6.1f} (site {c0:6.1f}, bare {cb:6.1f}, ours {c - cb:6.1f}, "
          f"pack {pk:5.1f})  prepared_call {p:6.1f} (site {p0:6.1f}, bare {pb:6.1f}, "
          f"ours {p - pb:6.1f}, pack {ppk:5.1f})")
"""


def main():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        r = run_with(build_fake_driver(d), SETUP + TIMING)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
