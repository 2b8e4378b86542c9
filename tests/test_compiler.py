# SPDX-License-Identifier: MIT
"""barecuda.compiler: NVRTC compilation (CPU), CompileError, options, the caches;
SourceModule loading and running kernels (GPU)."""

import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
from conftest import nvrtc_newer_than_driver

import barecuda
from barecuda import _driver, compiler
from barecuda import driver as drv

SAXPY = r"""
__global__ void saxpy(float *y, const float *x, float a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}
"""

HELPERS = r"""
#include <barecuda_helpers.cuh>
__global__ void scale(float *y, const float *x, float a, long long n)
{
    BC_GRID_STRIDE_LOOP(i, n)
        y[i] = a * x[i];
}
"""

TEMPLATE = r"""
template <typename T>
__global__ void axpy(T a, const T *x, T *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}
"""

BAD = "__global__ void k(int *x)\n{\n  x[0] = y;\n}\n"

ELF = b"\x7fELF"
FATBIN = b"\x50\xed\x55\xba"
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                if os.path.exists("/usr/local/cuda/bin/nvcc") else None)


@pytest.fixture(autouse=True)
def fresh_memory():
    compiler.clear_memory_cache()
    yield
    compiler.clear_memory_cache()


@pytest.fixture
def cache(tmp_path):
    return str(tmp_path / "cache")


def counts():
    return dict(compiler.stats)


def delta(before):
    return {k: compiler.stats[k] - before[k] for k in before}


def cache_files(cache):
    """The entries (and any stray temporary files) of a cache directory; its
    header-hash index (headers-1.idx) and the quick-look-up links (*.hit) are
    not entries."""
    if not os.path.isdir(cache):
        return []
    return sorted(n for n in os.listdir(cache)
                  if n != "headers-1.idx" and not n.endswith(".hit"))


# ------------------------------------------------------------------ NVRTC

def test_supported_archs():
    archs = _driver._nvrtc_supported_archs()
    assert archs == sorted(archs) and all(isinstance(a, int) for a in archs)
    assert 90 in archs


@pytest.mark.parametrize("arch", ["sm_90", "sm_80", "sm_75"])
def test_compile_cubin(arch):
    image = compiler.compile(SAXPY, arch=arch, cache_dir=False)
    assert image.startswith(ELF)
    assert b"saxpy" in image


@pytest.mark.parametrize("arch", ["compute_90", "compute_80"])
def test_compile_ptx(arch):
    ptx = compiler.compile(SAXPY, arch=arch, cache_dir=False)
    text = ptx.decode()
    assert ".visible .entry saxpy(" in text
    assert f".target sm_{arch[-2:]}" in text
    assert not ptx.endswith(b"\0")


def test_compile_ptx_target_from_sm_arch():
    ptx = compiler.compile(SAXPY, arch="sm_90", target="ptx", cache_dir=False)
    assert b".target sm_90" in ptx


def test_compile_default_arch():
    from conftest import gpu_probe
    image = compiler.compile(SAXPY, cache_dir=False)
    assert image.startswith(ELF) or b".entry saxpy" in image
    if gpu_probe() is not None:  # no GPU: the newest architecture NVRTC knows
        newest = compiler._supported_archs()[-1]
        ptx = compiler.compile(SAXPY, target="ptx", cache_dir=False)
        assert f".target sm_{newest}".encode() in ptx


def test_package_headers_on_include_path():
    assert os.path.isfile(os.path.join(compiler.INCLUDE_DIR, "barecuda_helpers.cuh"))
    ptx = compiler.compile(HELPERS, arch="compute_90", cache_dir=False).decode()
    assert ".visible .entry scale(" in ptx


@pytest.mark.skipif(compiler._toolkit_include() is None, reason="no CUDA toolkit headers found")
def test_toolkit_headers_on_include_path():
    src = textwrap.dedent(r"""
        #include <cuda_fp16.h>
        extern "C" __global__ void h(__half *y, const __half *x)
        {
            y[threadIdx.x] = __hadd(x[threadIdx.x], x[threadIdx.x]);
        }
    """)
    assert compiler.compile(src, arch="sm_90", no_extern_c=True, cache_dir=False).startswith(ELF)


def test_nvrtc_compile_direct():
    src = 'extern "C" __global__ void k(int *x) { x[0] = VALUE; }'
    image, log, names = _driver._nvrtc_compile(
        '#include "v.h"\n' + src, "direct.cu", ["--gpu-architecture=sm_90"],
        [("v.h", "#define VALUE 42\n")], (), "cubin")
    assert image.startswith(ELF) and isinstance(log, str) and names == {}
    ptx, _, _ = _driver._nvrtc_compile(src, options=["-arch=compute_90", "-DVALUE=7"],
                                       target="ptx")
    assert b"7;" in ptx


def test_nvrtc_compile_bad_arguments():
    with pytest.raises(TypeError, match="source must be str or bytes"):
        _driver._nvrtc_compile(123)
    with pytest.raises(ValueError, match="NUL"):
        _driver._nvrtc_compile("__global__ void k() {}\0")
    with pytest.raises(TypeError, match="options must be a sequence of str, not a single"):
        _driver._nvrtc_compile("", options="-arch=sm_90")
    with pytest.raises(TypeError, match=r"options\[1\] must be str"):
        _driver._nvrtc_compile("", options=["-arch=sm_90", 5])
    with pytest.raises(TypeError, match=r"headers\[0\] must be a \(name, text\) tuple"):
        _driver._nvrtc_compile("", headers=["a.h"])
    with pytest.raises(ValueError, match="target must be 'cubin' or 'ptx'"):
        _driver._nvrtc_compile("", target="sass")
    with pytest.raises(drv.CompileError, match="virtual architecture"):
        _driver._nvrtc_compile(SAXPY, options=["-arch=compute_90"], target="cubin")


def test_name_expressions_lowered():
    image, _, names = _driver._nvrtc_compile(
        TEMPLATE, options=["-arch=compute_90"], name_expressions=["axpy<float>", "axpy<double>"],
        target="ptx")
    assert set(names) == {"axpy<float>", "axpy<double>"}
    assert names["axpy<float>"] != names["axpy<double>"]
    for lowered in names.values():
        assert lowered.startswith("_Z4axpy")
        assert f".entry {lowered}(".encode() in image
    compiled = compiler._get_compiled(TEMPLATE, "nvcc", None, False, True, "sm_90", None, False,
                                      [], "nvrtc", ["axpy<float>"], "cubin", None)
    assert compiled.names == {"axpy<float>": names["axpy<float>"]}
    assert compiled.names["axpy<float>"].encode() in compiled.image


def test_name_expression_invalid():
    with pytest.raises(drv.CompileError, match="nope") as info:
        compiler.compile(TEMPLATE, arch="sm_90", no_extern_c=True, cache_dir=False,
                         name_expressions=["nope<float>"])
    assert "nope" in info.value.log


# --------------------------------------------------------------- errors

def test_compile_error_contents():
    with pytest.raises(drv.CompileError) as info:
        compiler.compile(BAD, arch="sm_90", cache_dir=False)
    err = info.value
    assert isinstance(err, drv.Error)
    assert 'identifier "y" is undefined' in err.log
    assert err.source == BAD
    assert "--gpu-architecture=sm_90" in err.options
    assert isinstance(err.options, tuple)
    assert err.name == "NVRTC_ERROR_COMPILATION"
    assert err.routine == "nvrtcCompileProgram"
    assert err.stderr == err.log
    msg = str(err)
    assert "compiling for sm_90 failed" in msg
    # numbered as the user wrote it, the extern "C" wrapper line taken off
    assert "kernel.cu(3): error" in msg
    assert " > 3 |   x[0] = y;" in msg
    assert "   2 | {" in msg and "   4 | }" in msg


def test_compile_error_line_numbers_without_wrapper():
    src = 'extern "C" ' + BAD
    with pytest.raises(drv.CompileError) as info:
        compiler.compile(src, arch="sm_90", no_extern_c=True, cache_dir=False)
    assert "kernel.cu(3): error" in info.value.log
    assert " > 3 |   x[0] = y;" in str(info.value)


def test_compile_error_many_lines_shows_context_only():
    body = "\n".join(f"// line {i}" for i in range(1, 40))
    src = body + "\n__global__ void k(int *x) { x[0] = undefined_thing; }\n" + body
    with pytest.raises(drv.CompileError) as info:
        compiler.compile(src, arch="sm_90", cache_dir=False)
    msg = str(info.value)
    assert " > 40 | __global__ void k" in msg
    assert "38 | // line 38" in msg and "42 | // line 2" in msg
    assert "| // line 10\n" not in msg


def test_compile_error_extern_c_hint():
    with pytest.raises(drv.CompileError, match="no_extern_c=True"):
        compiler.compile(TEMPLATE + "template __global__ void axpy<float>(float, const float*, "
                         "float*, int);", arch="sm_90", cache_dir=False)


def test_compile_error_bad_option():
    with pytest.raises(drv.CompileError, match="no-such-option") as info:
        compiler.compile(SAXPY, arch="sm_90", options=["--no-such-option"], cache_dir=False)
    assert info.value.name == "NVRTC_ERROR_INVALID_OPTION"


class _CodeTree:
    """Stands for a cgen/codepy syntax tree: renders itself as code through str()."""

    def __str__(self):
        return '__global__ void from_tree(float *x) { x[0] = 1.0f; }'


def test_source_as_a_code_tree():
    ptx = compiler.compile(_CodeTree(), arch="compute_90", target="ptx")
    assert b"from_tree" in ptx


def test_bad_arguments():
    for bad in (42, 1.5, [b"__global__ void f() {}"], None):
        with pytest.raises(TypeError, match="source must be str, bytes or an object"):
            compiler.compile(bad, arch="sm_90")
    with pytest.raises(TypeError, match="options must be a list of str"):
        compiler.compile(SAXPY, arch="sm_90", options="-O3")
    with pytest.raises(TypeError, match="options must be str"):
        compiler.compile(SAXPY, arch="sm_90", options=[3])
    with pytest.raises(ValueError, match="arch must look like"):
        compiler.compile(SAXPY, arch="sm90")
    with pytest.raises(TypeError, match="arch must be a str"):
        compiler.compile(SAXPY, arch=90)
    with pytest.raises(ValueError, match="target must be one of"):
        compiler.compile(SAXPY, arch="sm_90", target="sass")
    with pytest.raises(ValueError, match="backend must be"):
        compiler.compile(SAXPY, arch="sm_90", backend="clang")
    with pytest.raises(ValueError, match="fatbin.*nvcc"):
        compiler.compile(SAXPY, arch="sm_90", target="fatbin")
    with pytest.raises(ValueError, match="-gencode"):
        compiler.compile(SAXPY, options=["-gencode", "arch=compute_90,code=sm_90"])
    with pytest.raises(ValueError, match="needs a value"):
        compiler.compile(SAXPY, arch="sm_90", options=["-I"])
    with pytest.raises(ValueError, match="name_expressions needs backend='nvrtc'"):
        compiler.compile(SAXPY, arch="sm_90", backend="nvcc", name_expressions=["f"])


def test_bytes_source():
    assert compiler.compile(SAXPY.encode(), arch="sm_90", cache_dir=False).startswith(ELF)


# --------------------------------------------------------------- options

def test_translate_options(tmp_path):
    out, incs, arch, code = compiler._translate_options(
        ["-I", "inc", "-Iother", "--include-path=third", "-DFOO=1", "-D", "BAR", "-UBAZ",
         "-O3", "-O", "-lineinfo", "-G", "-use_fast_math", "-Xcompiler", "-fPIC", "-m64",
         "-arch", "sm_80", "-code=sm_86", "-maxrregcount", "32", "-Xptxas", "-v",
         "-std=c++17", "--expt-relaxed-constexpr", "-ftz=true", "-w", "-g"])
    absp = [os.path.abspath(p) for p in ("inc", "other", "third")]
    assert incs == absp
    assert out == [f"--include-path={p}" for p in absp] + [
        "-DFOO=1", "-DBAR", "-UBAZ", "--generate-line-info", "--device-debug",
        "--use_fast_math", "--maxrregcount=32", "--ptxas-options=-v", "--std=c++17",
        "-ftz=true", "--disable-warnings"]
    assert (arch, code) == ("sm_80", "sm_86")


@pytest.mark.parametrize("entries", [["-e", "saxpy"], ["--entries=saxpy"], ["--entries", "saxpy"]])
def test_entries_option_accepted(entries):
    # nvcc's -e/--entries (kernel_tuner passes -e KERNEL): NVRTC makes every kernel,
    # the named one among them
    assert compiler._translate_options(["-DA=1"] + entries + ["-DB=2"])[0] == ["-DA=1", "-DB=2"]
    image = compiler.compile(SAXPY, arch="sm_90", options=entries + ["-Xcompiler=-Wall"],
                             cache_dir=False)
    assert image.startswith(ELF) and b"saxpy" in image


def test_options_reach_nvrtc(tmp_path):
    src = "#if VALUE != 7\n#error VALUE is not 7\n#endif\n" + SAXPY
    opts = ["-DVALUE=7", "-O3", "-lineinfo", "-use_fast_math", "-Xcompiler", "-Wall"]
    assert compiler.compile(src, arch="sm_90", options=opts, cache_dir=False).startswith(ELF)
    with pytest.raises(drv.CompileError, match="VALUE is not 7"):
        compiler.compile(src, arch="sm_90", options=["-D", "VALUE=8"], cache_dir=False)
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "my.cuh").write_text("#define MY_SCALE 3.0f\n")
    src2 = '#include "my.cuh"\n__global__ void k(float *x) { x[0] *= MY_SCALE; }\n'
    assert compiler.compile(src2, arch="sm_90", options=["-I", str(inc)], cache_dir=False)
    assert compiler.compile(src2, arch="sm_90", include_dirs=[str(inc)], cache_dir=False)


def test_arch_in_options():
    ptx = compiler.compile(SAXPY, options=["-arch", "sm_80"], target="ptx", cache_dir=False)
    assert b".target sm_80" in ptx
    image = compiler.compile(SAXPY, options=["-arch=compute_86"], cache_dir=False)
    assert b".target sm_86" in image


def test_choose_target():
    archs = compiler._supported_archs()
    newest = archs[-1]
    assert compiler._choose_target(None, None, "cubin", 90, "nvrtc") == ("sm_90", "cubin")
    # a device NVRTC does not know: PTX for the newest architecture it knows below it
    assert compiler._choose_target(None, None, "cubin", newest + 500, "nvrtc") == (
        f"compute_{newest}", "ptx")
    assert compiler._choose_target(None, None, "ptx", 90, "nvrtc") == ("compute_90", "ptx")
    with pytest.raises(drv.CompileError, match="cannot compile for sm_10"):
        compiler._choose_target(None, None, "cubin", 10, "nvrtc")
    assert compiler._choose_target("compute_90", "sm_90", "cubin", None, "nvrtc") == (
        "sm_90", "cubin")
    assert compiler._choose_target("sm_90a", None, "cubin", None, "nvrtc") == ("sm_90a", "cubin")


# ------------------------------------------------------------------ cache

def test_cache_dir_resolution(monkeypatch, tmp_path):
    monkeypatch.delenv("BARECUDA_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert compiler.get_cache_dir() == str(tmp_path / "xdg" / "barecuda")
    monkeypatch.setenv("BARECUDA_CACHE_DIR", str(tmp_path / "env"))
    assert compiler.get_cache_dir() == str(tmp_path / "env")
    assert compiler.get_cache_dir(tmp_path / "arg") == str(tmp_path / "arg")
    assert compiler.get_cache_dir(False) is None
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.delenv("BARECUDA_CACHE_DIR")
    assert compiler.get_cache_dir() == os.path.join(os.path.expanduser("~"), ".cache", "barecuda")


def test_env_cache_dir_used(monkeypatch, tmp_path):
    monkeypatch.setenv("BARECUDA_CACHE_DIR", str(tmp_path / "env"))
    compiler.compile(SAXPY, arch="sm_90")
    assert len(cache_files(str(tmp_path / "env"))) == 1


def test_cache_hits_and_misses(cache):
    before = counts()
    a = compiler.compile(SAXPY, arch="sm_90", cache_dir=cache)
    assert delta(before)["nvrtc"] == 1
    assert len(cache_files(cache)) == 1
    b = compiler.compile(SAXPY, arch="sm_90", cache_dir=cache)
    assert a == b
    assert delta(before) == dict(delta(before), nvrtc=1, memory_hits=1, disk_hits=0)
    compiler.clear_memory_cache()
    c = compiler.compile(SAXPY, arch="sm_90", cache_dir=cache)
    assert c == a
    d = delta(before)
    assert (d["nvrtc"], d["disk_hits"]) == (1, 1)
    # anything that changes the program is a miss
    compiler.compile(SAXPY, arch="sm_80", cache_dir=cache)
    compiler.compile(SAXPY, arch="sm_90", options=["-DX=1"], cache_dir=cache)
    compiler.compile(SAXPY + "\n", arch="sm_90", cache_dir=cache)
    compiler.compile(SAXPY, arch="sm_90", no_extern_c=True, cache_dir=cache)
    compiler.compile(SAXPY, arch="sm_90", target="ptx", cache_dir=cache)
    assert delta(before)["nvrtc"] == 6
    assert len(cache_files(cache)) == 6


def test_cache_disabled(cache):
    before = counts()
    compiler.compile(SAXPY, arch="sm_90", cache_dir=False)
    compiler.compile(SAXPY, arch="sm_90", cache_dir=False)
    d = delta(before)
    assert (d["nvrtc"], d["memory_hits"], d["disk_hits"]) == (2, 0, 0)
    assert not os.path.exists(cache)


def test_memory_hit_is_fast(cache):
    compiler.compile(SAXPY, arch="sm_90", cache_dir=cache)
    n = 2000
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            compiler.compile(SAXPY, arch="sm_90", cache_dir=cache)
        best = min(best, (time.perf_counter() - t) / n)
    assert best < 20e-6, f"a repeat took {best * 1e6:.1f} us"


def test_header_change_recompiles(tmp_path, cache):
    inc = tmp_path / "inc"
    (inc / "sub").mkdir(parents=True)
    header = inc / "sub" / "value.cuh"
    header.write_text("#define VALUE 11\n")
    (inc / "notes.txt").write_text("not a header")
    src = '#include "sub/value.cuh"\n__global__ void k(int *x) { x[0] = VALUE; }\n'
    for how in ("include_dirs", "option"):
        compiler.clear_memory_cache()
        kw = (dict(include_dirs=[str(inc)]) if how == "include_dirs"
              else dict(options=["-I" + str(inc)]))
        kw["cache_dir"] = os.path.join(cache, how)
        header.write_text("#define VALUE 11\n")
        before = counts()
        p1 = compiler.compile(src, arch="compute_90", **kw)
        assert b"11;" in p1
        compiler.compile(src, arch="compute_90", **kw)
        header.write_text("#define VALUE 2222\n")
        p2 = compiler.compile(src, arch="compute_90", **kw)  # memory layer
        assert b"2222;" in p2
        compiler.clear_memory_cache()
        header.write_text("#define VALUE 11\n")
        p3 = compiler.compile(src, arch="compute_90", **kw)  # disk layer
        assert p3 == p1
        # a file that is not a header does not matter
        (inc / "notes.txt").write_text("changed")
        compiler.compile(src, arch="compute_90", **kw)
        d = delta(before)
        assert d["nvrtc"] == 2, d
        # a new header in the directory is part of the key too
        (inc / "extra.h").write_text("// new\n")
        compiler.compile(src, arch="compute_90", **kw)
        assert delta(before)["nvrtc"] == 3
        (inc / "extra.h").unlink()


@pytest.mark.parametrize("damage", ["truncate", "garble", "empty", "junk", "wrong-key"])
def test_corrupt_entry_recompiled(cache, damage):
    good = compiler.compile(SAXPY, arch="sm_90", cache_dir=cache)
    (name,) = cache_files(cache)
    path = os.path.join(cache, name)
    with open(path, "rb") as f:
        data = f.read()
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "garble":
        data = bytearray(data)
        data[len(data) - 100] ^= 0xFF
        data = bytes(data)
    elif damage == "empty":
        data = b""
    elif damage == "junk":
        data = os.urandom(len(data))
    else:
        other = compiler._ENTRY_HEAD.size
        data = data[:8] + bytes(32) + data[40:other] + data[other:]
    with open(path, "wb") as f:
        f.write(data)
    compiler.clear_memory_cache()
    before = counts()
    again = compiler.compile(SAXPY, arch="sm_90", cache_dir=cache)
    d = delta(before)
    assert again == good
    assert (d["nvrtc"], d["disk_hits"], d["disk_rejected"]) == (1, 0, 1)
    # rewritten: the next fresh look-up is a hit
    compiler.clear_memory_cache()
    before = counts()
    assert compiler.compile(SAXPY, arch="sm_90", cache_dir=cache) == good
    assert delta(before)["disk_hits"] == 1


def test_unwritable_cache_still_compiles(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory would go")
    before = counts()
    assert compiler.compile(SAXPY, arch="sm_90", cache_dir=str(blocker / "cache")).startswith(ELF)
    assert delta(before)["nvrtc"] == 1


_CHILD = r"""
import hashlib, sys, time
import barecuda
from barecuda import _driver, compiler
src, cache, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
while time.time() < start:
    time.sleep(0.001)
image = compiler.compile(src, arch="sm_90", cache_dir=cache)
print(hashlib.sha256(image).hexdigest(), compiler.stats["nvrtc"], compiler.stats["disk_hits"])
"""


def test_concurrent_processes_same_source(cache):
    src = SAXPY + f"\n// concurrent {os.getpid()} {time.time_ns()}\n"
    start = time.time() + 3.0
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, src, cache, repr(start)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    digests = {out.split()[0] for out, _ in outs}
    assert len(digests) == 1
    assert cache_files(cache) == [n for n in cache_files(cache) if n.endswith(".bin")]
    assert len(cache_files(cache)) == 1
    image = compiler.compile(src, arch="sm_90", cache_dir=cache)
    import hashlib
    assert hashlib.sha256(image).hexdigest() in digests


_HIT_CHILD = r"""
import sys, time
import barecuda
from barecuda import _driver, compiler
t = time.perf_counter()
compiler.compile(sys.argv[1], arch="sm_90", cache_dir=sys.argv[2])
dt = time.perf_counter() - t
print(compiler.stats["disk_hits"], compiler.stats["nvrtc"],
      _driver.loader_info()["libnvrtc"] is None, dt)
"""


def test_disk_hit_in_fresh_process_needs_no_nvrtc(cache):
    compiler.compile(SAXPY, arch="sm_90", cache_dir=cache)
    out = subprocess.run([sys.executable, "-c", _HIT_CHILD, SAXPY, cache], capture_output=True,
                         text=True, check=True).stdout.split()
    hits, compiles, unloaded, dt = out
    assert (hits, compiles) == ("1", "0")
    assert unloaded == "True"        # the hit did not have to load NVRTC
    assert float(dt) < 0.05


# Long enough to see two compiles overlap (about 1 s on the 2-core CI machine, 0.1 s
# on a fast one), short enough not to dominate a cold-cache CPU run.
BUSY = "\n".join(f"__global__ void k{i}(float *x) {{ for (int j = 0; j < 32; j++) "
                 f"x[j] = sinf(x[j]) * {i}.0f + cosf(x[j + 1]); }}" for i in range(4))


def _busy_compile():
    _driver._nvrtc_compile(BUSY, options=["-arch=sm_90"], target="cubin")


def test_gil_released_while_compiling():
    # the main thread keeps running Python while another thread compiles
    done = threading.Event()
    span = []

    def worker():
        t = time.perf_counter()
        _busy_compile()
        span.append(time.perf_counter() - t)
        done.set()

    th = threading.Thread(target=worker)
    last = time.perf_counter()
    gap = 0.0
    th.start()
    while not done.is_set():
        now = time.perf_counter()
        gap = max(gap, now - last)
        last = now
    th.join()
    assert gap < 0.5 * span[0], f"the main thread stalled {gap:.3f}s of a {span[0]:.3f}s compile"


def test_threads_compile_in_parallel():
    """Two NVRTC programs are in flight at the same time (the GIL is released and
    NVRTC does not serialise them); with free CPUs that halves the wall time."""
    _busy_compile()
    spans = {}

    def one(k):
        t = time.perf_counter()
        _busy_compile()
        spans[k] = (t, time.perf_counter())

    threads = [threading.Thread(target=one, args=(k,)) for k in range(2)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    parallel = time.perf_counter() - t
    (a0, a1), (b0, b1) = spans[0], spans[1]
    overlap = min(a1, b1) - max(a0, b0)
    shorter = min(a1 - a0, b1 - b0)
    assert overlap > 0.5 * shorter, f"compiles overlapped {overlap:.3f}s of {shorter:.3f}s"
    if (os.cpu_count() or 1) >= 4 and shorter > 0.2:
        # enough CPUs, and compiles long enough that NVRTC's fixed serial start-up
        # does not dominate (on a fast machine this source compiles in ~20 ms)
        # enough CPUs that two compiles should not have to share one
        for _ in range(3):
            t = time.perf_counter()
            _busy_compile()
            _busy_compile()
            serial = time.perf_counter() - t
            if parallel < 0.8 * serial:
                break
            threads = [threading.Thread(target=one, args=(k,)) for k in range(2)]
            t = time.perf_counter()
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            parallel = time.perf_counter() - t
        assert parallel < 0.8 * serial, f"2 threads {parallel:.3f}s, one by one {serial:.3f}s"


def test_keep(capsys):
    compiler.compile(SAXPY, arch="sm_90", keep=True)
    out = capsys.readouterr().out
    assert "*** compiler output in " in out
    d = out.split("*** compiler output in ")[1].split()[0]
    try:
        assert sorted(os.listdir(d)) == ["kernel.cu", "kernel.cubin", "log.txt", "options.txt"]
        with open(os.path.join(d, "kernel.cu")) as f:
            assert 'extern "C" {' in f.read()
    finally:
        shutil.rmtree(d)


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_nvcc_backend_compile(cache):
    image = compiler.compile(SAXPY, nvcc=NVCC, arch="sm_90", backend="nvcc", cache_dir=cache)
    assert image.startswith(ELF)
    fat = compiler.compile(SAXPY, nvcc=NVCC, arch="sm_90", backend="nvcc", target="fatbin",
                           cache_dir=False)
    assert fat.startswith(FATBIN)
    before = counts()
    compiler.clear_memory_cache()
    assert compiler.compile(SAXPY, nvcc=NVCC, arch="sm_90", backend="nvcc",
                            cache_dir=cache) == image
    assert delta(before)["disk_hits"] == 1 and delta(before)["nvcc"] == 0
    with pytest.raises(drv.CompileError) as info:
        compiler.compile(BAD, nvcc=NVCC, arch="sm_90", backend="nvcc", cache_dir=False)
    assert 'identifier "y" is undefined' in info.value.log
    assert " > 3 |   x[0] = y;" in str(info.value)


def test_nvcc_missing():
    with pytest.raises(drv.CompileError, match="nvcc was not found"):
        compiler.compile(SAXPY, nvcc="no-such-nvcc-here", arch="sm_90", backend="nvcc")


def test_source_module_without_gpu_says_so():
    from conftest import gpu_probe
    if gpu_probe() is None:
        pytest.skip("a GPU is present")
    with pytest.raises(drv.Error, match="driver|device"):
        compiler.SourceModule(SAXPY, cache_dir=False)


# ----------------------------------------------------------------- GPU

def _to_gpu(a):
    g = drv.mem_alloc(a.nbytes)
    drv.memcpy_htod(g, a)
    return g


def _from_gpu(g, like):
    out = np.empty_like(like)
    drv.memcpy_dtoh(out, g)
    return out


@pytest.mark.gpu
def test_source_module_runs(ctx, rng, cache):
    mod = compiler.SourceModule(SAXPY, cache_dir=cache)
    major, minor = ctx.get_device().compute_capability()
    assert mod.arch in (f"sm_{major}{minor}",) or mod.arch.startswith("compute_")
    assert (mod.cubin is None) != (mod.ptx is None)
    n = 10_000
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    gx, gy = _to_gpu(x), _to_gpu(y)
    mod.get_function("saxpy")(gy, gx, np.float32(2.5), np.int32(n),
                              block=(128, 1, 1), grid=((n + 127) // 128, 1))
    np.testing.assert_allclose(_from_gpu(gy, y), 2.5 * x + y, rtol=1e-5, atol=1e-6)  # the GPU fuses a*x+y (FMA)
    with pytest.raises(drv.LogicError, match="nope"):
        mod.get_function("nope")


@pytest.mark.gpu
def test_source_module_helpers_grid_stride(ctx, rng):
    mod = compiler.SourceModule(HELPERS, cache_dir=False)
    n = 100_003
    x = rng.standard_normal(n).astype(np.float32)
    gx, gy = _to_gpu(x), drv.mem_alloc(x.nbytes)
    mod.get_function("scale")(gy, gx, np.float32(-3.0), np.int64(n), block=(64, 1, 1),
                              grid=(7, 1))
    np.testing.assert_allclose(_from_gpu(gy, x), -3.0 * x, rtol=1e-5, atol=1e-6)  # the GPU fuses a*x+y (FMA)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,expr", [(np.float32, "axpy<float>"), (np.float64, "axpy<double>")])
def test_source_module_templates(ctx, rng, dtype, expr):
    mod = compiler.SourceModule(TEMPLATE, no_extern_c=True, cache_dir=False,
                                name_expressions=["axpy<float>", "axpy<double>"])
    assert set(mod.lowered_names) == {"axpy<float>", "axpy<double>"}
    n = 1000
    x = rng.standard_normal(n).astype(dtype)
    y = rng.standard_normal(n).astype(dtype)
    gx, gy = _to_gpu(x), _to_gpu(y)
    mod.get_function(expr)(dtype(0.5), gx, gy, np.int32(n), block=(256, 1, 1),
                           grid=((n + 255) // 256, 1))
    np.testing.assert_allclose(_from_gpu(gy, y), 0.5 * x + y, rtol=1e-5, atol=1e-6)  # the GPU fuses a*x+y (FMA)


@pytest.mark.gpu
def test_source_module_get_global(ctx, rng):
    src = r"""
    __constant__ float coeffs[4];
    __device__ int counter;
    __global__ void poly(float *y, const float *x, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) {
            float v = x[i];
            y[i] = coeffs[0] + v * (coeffs[1] + v * (coeffs[2] + v * coeffs[3]));
            atomicAdd(&counter, 1);
        }
    }
    """
    mod = compiler.SourceModule(src, cache_dir=False)
    ptr, size = mod.get_global("coeffs")
    assert size == 16
    c = rng.standard_normal(4).astype(np.float32)
    drv.memcpy_htod(ptr, c)
    cptr, csize = mod.get_global("counter")
    assert csize == 4
    drv.memcpy_htod(cptr, np.zeros(1, np.int32))
    n = 4096
    x = rng.standard_normal(n).astype(np.float32)
    gx, gy = _to_gpu(x), drv.mem_alloc(x.nbytes)
    mod.get_function("poly")(gy, gx, np.int32(n), block=(256, 1, 1), grid=(n // 256, 1))
    expected = c[0] + x * (c[1] + x * (c[2] + x * c[3]))
    np.testing.assert_allclose(_from_gpu(gy, x), expected, rtol=1e-5, atol=1e-5)
    got = np.zeros(1, np.int32)
    drv.memcpy_dtoh(got, cptr)
    assert got[0] == n
    with pytest.raises(drv.LogicError, match="missing_var"):
        mod.get_global("missing_var")


def _run_saxpy(mod, rng, name="saxpy"):
    n = 2048
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    gx, gy = _to_gpu(x), _to_gpu(y)
    mod.get_function(name)(gy, gx, np.float32(1.5), np.int32(n), block=(256, 1, 1),
                           grid=(n // 256, 1))
    np.testing.assert_allclose(_from_gpu(gy, y), 1.5 * x + y, rtol=1e-5, atol=1e-6)  # the GPU fuses a*x+y (FMA)


@pytest.mark.gpu
@pytest.mark.parametrize("code", [222, 209, 218])   # UNSUPPORTED_PTX_VERSION, NO_BINARY_FOR_GPU, INVALID_PTX
def test_refused_images_say_when_nvrtc_is_newer_than_the_driver(ctx, code):
    from barecuda import _driver
    major, minor = drv.nvrtc_version()    # the hint speaks of the NVRTC loaded: load it first
    with pytest.raises(drv.Error) as info:
        _driver._raise_error(code, "cuModuleLoadDataEx")
    hinted = f"NVRTC {major}.{minor} is newer than this driver" in str(info.value)
    assert hinted == (nvrtc_newer_than_driver() is not None), str(info.value)
    assert info.value.code == code and info.value.routine == "cuModuleLoadDataEx"
    with pytest.raises(drv.Error) as other:
        _driver._raise_error(2, "cuMemAlloc")    # out of memory: never hinted
    assert "newer than this driver" not in str(other.value)


@pytest.mark.gpu
def test_relocatable_code_links_or_says_why_not(ctx):
    # the linker's half of the case above: -rdc code of an NVRTC newer than the driver
    source = 'extern "C" __global__ void k(int *p) { p[threadIdx.x] = 2 * threadIdx.x; }'
    if nvrtc_newer_than_driver():
        # the driver's linker refuses the object as it is added
        with pytest.raises(drv.Error, match="is newer than this driver"):
            compiler.DynamicModule().add_source(source).link()
        return
    out = drv.mem_alloc(4 * 32)
    compiler.DynamicModule().add_source(source).link().get_function("k")(
        out, block=(32, 1, 1), grid=(1, 1))
    np.testing.assert_array_equal(drv.from_device(out, (32,), np.int32), 2 * np.arange(32))


@pytest.mark.gpu
def test_source_module_ptx(ctx, rng):
    major, minor = ctx.get_device().compute_capability()
    if nvrtc_newer_than_driver():
        # pip's newest NVRTC on an older driver: refused, and the error says why and what to do
        with pytest.raises(drv.Error, match=r"is newer than this driver.*nvidia-cuda-nvrtc=="):
            compiler.SourceModule(SAXPY, arch=f"compute_{major}{minor}", cache_dir=False)
        return
    mod = compiler.SourceModule(SAXPY, arch=f"compute_{major}{minor}", cache_dir=False)
    assert mod.cubin is None and mod.ptx is not None and b".entry saxpy" in mod.ptx
    _run_saxpy(mod, rng)


@pytest.mark.gpu
def test_source_module_ptx_fallback(ctx, rng, monkeypatch):
    major, minor = ctx.get_device().compute_capability()
    cc = 10 * major + minor
    older = tuple(a for a in compiler._supported_archs() if a < cc)
    if not older:
        pytest.skip("NVRTC knows no architecture older than this device")
    if nvrtc_newer_than_driver():
        pytest.skip(nvrtc_newer_than_driver() + " (test_source_module_ptx checks the error)")
    # pretend NVRTC does not know this device: PTX for the newest older one
    monkeypatch.setitem(compiler._once, "archs", older)
    mod = compiler.SourceModule(SAXPY, cache_dir=False)
    assert mod.cubin is None and mod.arch == f"compute_{older[-1]}"
    _run_saxpy(mod, rng)


@pytest.mark.gpu
@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_source_module_nvcc(ctx, rng, cache):
    mod = compiler.SourceModule(SAXPY, nvcc=NVCC, backend="nvcc", cache_dir=cache)
    assert mod.cubin is not None and mod.cubin.startswith(ELF)
    _run_saxpy(mod, rng)


@pytest.mark.gpu
@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
def test_fatbin_from_nvcc_loads(ctx, rng):
    major, minor = ctx.get_device().compute_capability()
    fat = compiler.compile(SAXPY, nvcc=NVCC, backend="nvcc", target="fatbin",
                           arch=f"sm_{major}{minor}", cache_dir=False)
    assert fat.startswith(FATBIN)
    mod = drv.module_from_buffer(fat)
    _run_saxpy(mod, rng)


@pytest.mark.gpu
def test_source_module_repeat_shares_module(ctx, cache):
    a = compiler.SourceModule(SAXPY, cache_dir=cache)
    before = counts()
    b = compiler.SourceModule(SAXPY, cache_dir=cache)
    assert b.module is a.module
    assert delta(before)["memory_hits"] == 1 and delta(before)["nvrtc"] == 0
    n = 2000
    t = time.perf_counter()
    for _ in range(n):
        compiler.SourceModule(SAXPY, cache_dir=cache)
    per = (time.perf_counter() - t) / n
    assert per < 20e-6, f"a repeated SourceModule took {per * 1e6:.1f} us"
    import gc
    import weakref
    # in a primary context the loaded module stays cached after its users are gone
    ref = weakref.ref(a.module)
    del a, b
    gc.collect()
    assert ref() is not None
    assert compiler.SourceModule(SAXPY, cache_dir=cache).module is ref()
    # in a context of make_context() it is held only weakly: dropping every
    # SourceModule unloads it, so the cache never keeps such a context alive
    own = drv.Device(0).make_context()
    try:
        c = compiler.SourceModule(SAXPY, cache_dir=cache)
        assert c.module.context == own
        ref = weakref.ref(c.module)
        del c
        gc.collect()
        assert ref() is None
    finally:
        drv.Context.pop()
        own.detach()


@pytest.mark.gpu
def test_source_module_compile_error(ctx):
    with pytest.raises(drv.CompileError, match=r" > 3 \|   x\[0\] = y;"):
        compiler.SourceModule(BAD, cache_dir=False)


def test_header_index_remembers_hashes_but_changes_still_miss(tmp_path, cache):
    # the header hashes kept in the cache directory's index stand in for reading
    # the headers in a new process; a changed header must still be read again
    inc = tmp_path / "inc"
    inc.mkdir()
    header = inc / "v.cuh"
    header.write_text("#define VALUE 11\n")
    src = '#include "v.cuh"\n__global__ void k(int *x) { x[0] = VALUE; }\n'
    kw = dict(include_dirs=[str(inc)], cache_dir=cache, arch="compute_90")
    before = counts()
    p1 = compiler.compile(src, **kw)
    index = os.path.join(cache, "headers-1.idx")
    with open(index, encoding="utf-8") as f:
        assert str(header) in f.read()
    compiler.clear_memory_cache()            # as a new process: the index is read again
    assert compiler.compile(src, **kw) == p1
    assert delta(before)["nvrtc"] == 1 and delta(before)["disk_hits"] == 1
    compiler.clear_memory_cache()
    header.write_text("#define VALUE 3333\n")
    st = os.stat(header)
    os.utime(header, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert b"3333;" in compiler.compile(src, **kw)
    assert delta(before)["nvrtc"] == 2
    # a damaged index is ignored (and rewritten)
    with open(index, "w", encoding="utf-8") as f:
        f.write("barecuda-header-index-1\n1 2 3 zz " + str(header) + "\ngarbage\n")
    compiler.clear_memory_cache()
    header.write_text("#define VALUE 11\n")
    assert compiler.compile(src, **kw) == p1
    assert delta(before)["nvrtc"] == 2


# ------------------------------------------------ the quick disk look-up (issue 18)

def _fresh(src, **kw):
    """compile() as a new process would: nothing remembered in memory."""
    compiler.clear_memory_cache()
    before = counts()
    image = compiler.compile(src, **kw)
    return image, delta(before)


def test_quick_hit_then_user_header_changed_on_disk_misses(tmp_path, cache):
    inc = tmp_path / "inc"
    inc.mkdir()
    header = inc / "v.cuh"
    header.write_text("#define VALUE 11\n")
    src = '#include "v.cuh"\n__global__ void k(int *x) { x[0] = VALUE; }\n'
    for n, kw in enumerate((dict(include_dirs=[str(inc)]), dict(options=["-I", str(inc)]))):
        kw.update(cache_dir=os.path.join(cache, str(n)), arch="compute_90")
        header.write_text("#define VALUE 11\n")
        p1, d = _fresh(src, **kw)
        assert b"11;" in p1
        p, d = _fresh(src, **kw)
        assert p == p1 and (d["nvrtc"], d["disk_quick_hits"], d["disk_hits"]) == (0, 1, 1)
        # changed on disk (same size, mtime moved on): the recorded stat no longer matches
        header.write_text("#define VALUE 77\n")
        st = os.stat(header)
        os.utime(header, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        p2, d = _fresh(src, **kw)
        assert b"77;" in p2 and d["nvrtc"] == 1 and d["disk_quick_hits"] == 0
        p, d = _fresh(src, **kw)
        assert p == p2 and (d["nvrtc"], d["disk_quick_hits"]) == (0, 1)
        # back to the first contents: the first entry is found again by its full key
        header.write_text("#define VALUE 11\n")
        p, d = _fresh(src, **kw)
        assert p == p1 and (d["nvrtc"], d["disk_hits"], d["disk_quick_hits"]) == (0, 1, 0)
        p, d = _fresh(src, **kw)
        assert p == p1 and (d["nvrtc"], d["disk_quick_hits"]) == (0, 1)


def test_quick_hit_empty_include_dir_gains_the_header(tmp_path, cache):
    """An include directory with no header yet: the entry's header stamp is
    empty, like that of a compile with no include directory at all, and still a
    header appearing there afterwards must miss (-I given as an option and as
    include_dirs)."""
    src = ('#if __has_include("w.cuh")\n#include "w.cuh"\n#else\n#define VALUE 5\n#endif\n'
           "__global__ void k(int *x) { x[0] = VALUE; }\n")
    for n, how in enumerate(("option", "joined", "include_dirs")):
        inc = tmp_path / f"inc{n}"
        inc.mkdir()
        kw = {"option": dict(options=["-I", str(inc)]), "joined": dict(options=[f"-I{inc}"]),
              "include_dirs": dict(include_dirs=[str(inc)])}[how]
        kw.update(cache_dir=os.path.join(cache, str(n)), arch="compute_90")
        p1, d = _fresh(src, **kw)
        assert b"5;" in p1 and d["nvrtc"] == 1, how
        p, d = _fresh(src, **kw)
        assert p == p1 and (d["nvrtc"], d["disk_quick_hits"]) == (0, 1), how
        (inc / "w.cuh").write_text("#define VALUE 9\n")
        p2, d = _fresh(src, **kw)
        assert b"9;" in p2 and d["nvrtc"] == 1 and d["disk_quick_hits"] == 0, how


def test_quick_hit_relative_include_dir_follows_the_working_directory(tmp_path, cache,
                                                                       monkeypatch):
    """options=["-I", "inc"] names a different directory from another working
    directory: the quick key covers the working directory."""
    src = '#include "r.cuh"\n__global__ void k(int *x) { x[0] = VALUE; }\n'
    for name, value in (("a", 31), ("b", 47)):
        (tmp_path / name / "inc").mkdir(parents=True)
        (tmp_path / name / "inc" / "r.cuh").write_text(f"#define VALUE {value}\n")
    kw = dict(options=["-I", "inc"], cache_dir=cache, arch="compute_90")
    monkeypatch.chdir(tmp_path / "a")
    pa, d = _fresh(src, **kw)
    assert b"31;" in pa and d["nvrtc"] == 1
    monkeypatch.chdir(tmp_path / "b")
    pb, d = _fresh(src, **kw)
    assert b"47;" in pb and d["nvrtc"] == 1 and d["disk_quick_hits"] == 0
    p, d = _fresh(src, **kw)
    assert p == pb and (d["nvrtc"], d["disk_quick_hits"]) == (0, 1)
    monkeypatch.chdir(tmp_path / "a")
    p, d = _fresh(src, **kw)
    assert p == pa and (d["nvrtc"], d["disk_quick_hits"]) == (0, 1)


def test_quick_hit_in_fresh_process_then_header_changed(tmp_path, cache):
    inc = tmp_path / "inc"
    inc.mkdir()
    header = inc / "v.cuh"
    header.write_text("#define VALUE 11\n")
    src = '#include "v.cuh"\n__global__ void k(int *x) { x[0] = VALUE; }\n'
    child = ("import sys\nfrom barecuda import compiler\n"
             "p = compiler.compile(sys.argv[1], arch='compute_90', cache_dir=sys.argv[2], "
             "include_dirs=[sys.argv[3]])\n"
             "s = compiler.stats\nprint(s['nvrtc'], s['disk_quick_hits'], b'77;' in p)\n")

    def run():
        return subprocess.run([sys.executable, "-c", child, src, cache, str(inc)],
                              capture_output=True, text=True, check=True).stdout.split()
    assert run() == ["1", "0", "False"]
    assert run() == ["0", "1", "False"]
    header.write_text("#define VALUE 77\n")
    st = os.stat(header)
    os.utime(header, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert run() == ["1", "0", "True"]
    assert run() == ["0", "1", "True"]


def test_quick_hit_needs_the_same_nvrtc_library(tmp_path, cache, monkeypatch):
    # the entry records the NVRTC library file by its stat: a changed file misses
    fake = tmp_path / "libnvrtc.so.13"
    fake.write_bytes(b"one")
    from barecuda._compile import toolkit
    monkeypatch.setattr(toolkit, "_nvrtc_path", lambda: str(fake))
    kw = dict(cache_dir=cache, arch="sm_90")
    good, d = _fresh(SAXPY, **kw)
    assert d["nvrtc"] == 1
    _, d = _fresh(SAXPY, **kw)
    assert (d["nvrtc"], d["disk_quick_hits"]) == (0, 1)
    fake.write_bytes(b"a newer library")
    again, d = _fresh(SAXPY, **kw)
    assert again == good and (d["nvrtc"], d["disk_quick_hits"]) == (1, 0)
    _, d = _fresh(SAXPY, **kw)
    assert (d["nvrtc"], d["disk_quick_hits"]) == (0, 1)


def test_quick_hit_package_headers_reinstalled(tmp_path, cache, monkeypatch):
    # barecuda's own headers stand for themselves by their directories' stat
    # (a reinstall re-creates them); a copy of them plays the installed ones
    import shutil
    inc = tmp_path / "include"
    shutil.copytree(compiler.INCLUDE_DIR, inc)
    from barecuda._compile import toolkit     # where the compiler looks for them
    monkeypatch.setattr(toolkit, "INCLUDE_DIR", str(inc))
    monkeypatch.setattr(toolkit, "NVRTC_STD_INCLUDE_DIR", str(inc / "nvrtc"))
    monkeypatch.setattr(toolkit, "_PRELUDE", str(inc / "nvrtc" / "barecuda_prelude.h"))
    monkeypatch.delitem(compiler._once, "pkg", raising=False)
    src = HELPERS + "\n__global__ void w(int *x) { x[0] = BC_TEST_VALUE; }\n"
    (inc / "barecuda_test_value.h").write_text("#define BC_TEST_VALUE 11\n")
    src = '#include <barecuda_test_value.h>\n' + src
    kw = dict(cache_dir=cache, arch="compute_90")
    p1, d = _fresh(src, **kw)
    assert b"11;" in p1 and d["nvrtc"] == 1
    _, d = _fresh(src, **kw)
    assert (d["nvrtc"], d["disk_quick_hits"]) == (0, 1)
    # "reinstall": the header is replaced by a new file
    os.unlink(inc / "barecuda_test_value.h")
    (inc / "barecuda_test_value.h").write_text("#define BC_TEST_VALUE 55\n")
    monkeypatch.delitem(compiler._once, "pkg", raising=False)
    p2, d = _fresh(src, **kw)
    assert b"55;" in p2 and d["nvrtc"] == 1
    # directories touched but nothing changed: found by the full key, record renewed
    os.utime(inc)
    os.utime(inc / "nvrtc")
    p, d = _fresh(src, **kw)
    assert p == p2 and (d["nvrtc"], d["disk_hits"], d["disk_quick_hits"]) == (0, 1, 0)
    p, d = _fresh(src, **kw)
    assert p == p2 and (d["nvrtc"], d["disk_quick_hits"]) == (0, 1)


def test_quick_hit_new_nvidia_package_on_sys_path(tmp_path, cache, monkeypatch):
    # NVRTC and toolkit headers are also looked for in nvidia/ package directories
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    kw = dict(cache_dir=cache, arch="sm_90")
    good, d = _fresh(SAXPY, **kw)
    _, d = _fresh(SAXPY, **kw)
    assert (d["nvrtc"], d["disk_quick_hits"]) == (0, 1)
    (site / "nvidia").mkdir()
    again, d = _fresh(SAXPY, **kw)
    # the quick look-up declines; the full key (same NVRTC is found) still hits
    assert again == good and (d["nvrtc"], d["disk_hits"], d["disk_quick_hits"]) == (0, 1, 0)
    _, d = _fresh(SAXPY, **kw)
    assert (d["nvrtc"], d["disk_quick_hits"]) == (0, 1)


def test_quick_hit_options_arch_and_version_miss(cache, monkeypatch):
    kw = dict(cache_dir=cache)
    _fresh(SAXPY, arch="sm_90", **kw)
    _, d = _fresh(SAXPY, arch="sm_80", **kw)
    assert d["nvrtc"] == 1
    _, d = _fresh(SAXPY, arch="sm_90", options=["-DX=1"], **kw)
    assert d["nvrtc"] == 1
    monkeypatch.setattr(barecuda, "__version__", barecuda.__version__ + ".test")
    _, d = _fresh(SAXPY, arch="sm_90", **kw)
    assert d["nvrtc"] == 1
    monkeypatch.undo()
    _, d = _fresh(SAXPY, arch="sm_90", **kw)
    assert (d["nvrtc"], d["disk_quick_hits"]) == (0, 1)
