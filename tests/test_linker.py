# SPDX-License-Identifier: MIT
"""The JIT linker (driver.Linker) and linked modules (compiler.DynamicModule,
DynamicSourceModule): several units joined into one module, and kernels that
launch kernels (dynamic parallelism, linked with the device runtime cudadevrt)."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from barecuda import _driver
from barecuda import compiler
from barecuda import driver as drv
from barecuda.compiler import DynamicModule, DynamicSourceModule

from conftest import gpu_probe, nvrtc_newer_than_driver

JIT = drv.jit_input_type

# Unit A defines a device function, unit B's kernel calls it: only linking joins them.
UNIT_HELPER = """
__device__ float blend(float x, float y)
{
    return 0.75f * x - 2.0f * y + 1.0f;
}
"""

UNIT_KERNEL = """
extern __device__ float blend(float x, float y);

__global__ void blend_all(float *out, const float *x, const float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = blend(x[i], y[i]);
}
"""

# A kernel launched by the host that launches a child grid doing the work.
LAUNCHER = """
__global__ void square_plus(const float *a, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = a[i] * a[i] + (float)i;
}

__global__ void launcher(const float *a, float *out, int n)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        square_plus<<<(n + 127) / 128, 128>>>(a, out, n);
}
"""

# Recursion on the device: each level adds its depth to its slice of `out`.
RECURSIVE = """
__global__ void levels(int *out, int depth, int max_depth)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    atomicAdd(&out[i], depth + 1);
    if (depth + 1 < max_depth && i == 0)
        levels<<<gridDim.x, blockDim.x>>>(out, depth + 1, max_depth);
}
"""

CALLS_MISSING = """
extern __device__ int missing_helper_fn(int);

__global__ void uses_missing(int *out)
{
    out[threadIdx.x] = missing_helper_fn(threadIdx.x);
}
"""


def _have_cudadevrt():
    try:
        return _driver._find_cuda_library("cudadevrt")
    except FileNotFoundError:
        return None


needs_cudadevrt = pytest.mark.skipif(_have_cudadevrt() is None,
                                     reason="libcudadevrt.a (CUDA toolkit) not found")


# ------------------------------------------------------------------ CPU

def test_jit_input_type_has_pycudas_names():
    assert JIT.CUBIN == 0 and JIT.PTX == 1 and JIT.FATBINARY == 2
    assert JIT.OBJECT == 3 and JIT.LIBRARY == 4
    assert repr(JIT.PTX) == "<jit_input_type.PTX: 1>"


def test_linker_needs_no_gpu_until_the_first_input():
    with drv.Linker() as linker:
        assert linker.context is None and not linker.closed
        assert linker.num_inputs == 0
        assert linker.info_log == "" and linker.error_log == ""
        assert "0 inputs" in repr(linker)
    assert linker.closed and "closed" in repr(linker)


@pytest.mark.parametrize("kwargs,exc,match", [
    ({"message_handler": 3}, TypeError, "message_handler must be callable"),
    ({"options": 5}, TypeError, "list of"),
    ({"options": [3]}, TypeError, r"options\[0\] must be a \(jit_option, value\) tuple"),
    ({"options": [(1, 2, 3)]}, TypeError, "tuple"),
    ({"options": [(10 ** 6, 1)]}, ValueError, "JIT option must be in"),
    ({"options": [(-1, 1)]}, ValueError, "JIT option must be in"),
    ({"options": [("MAX_REGISTERS", 1)]}, TypeError, "must be an int"),
    ({"options": [(drv.jit_option.MAX_REGISTERS, "x")]}, TypeError, "must be an int"),
    ({"options": [(drv.jit_option.ERROR_LOG_BUFFER, 0)]}, ValueError, "log buffers"),
    ({"options": [(drv.jit_option.INFO_LOG_BUFFER_SIZE_BYTES, 9)]}, ValueError, "log buffers"),
    ({"options": [(0, 1)] * 40}, ValueError, "at most"),
])
def test_linker_rejects_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        drv.Linker(**kwargs)


def test_linker_accepts_pycudas_positional_form():
    seen = []
    linker = drv.Linker(lambda *a: seen.append(a), [(drv.jit_option.MAX_REGISTERS, 32)], True)
    linker.close()
    assert seen == []


@pytest.mark.parametrize("input_type,exc", [
    (99, ValueError), (-1, ValueError), (drv.jit_input_type.NUM_INPUT_TYPES, ValueError),
    ("PTX", TypeError), (1.0, TypeError), (None, TypeError), (2 ** 70, ValueError),
])
def test_bad_input_types_are_refused_before_the_driver(input_type, exc):
    linker = drv.Linker()
    with pytest.raises(exc, match="input_type"):
        linker.add_data(b"\x7fELF....", input_type)
    with pytest.raises(exc, match="input_type"):
        linker.add_file(__file__, input_type)
    assert linker.num_inputs == 0 and linker.context is None


@pytest.mark.parametrize("data,exc,match", [
    (b"", ValueError, "PTX data is empty"),
    ("", ValueError, "PTX data is empty"),
    (12, TypeError, "bytes-like"),
    ([1, 2], TypeError, "bytes-like"),
])
def test_bad_data_is_refused_before_the_driver(data, exc, match):
    with pytest.raises(exc, match=match):
        drv.Linker().add_data(data, JIT.PTX)


def test_bad_names_and_missing_arguments():
    linker = drv.Linker()
    with pytest.raises(TypeError, match="name must be a str"):
        linker.add_data(b"x", JIT.CUBIN, 5)
    with pytest.raises(TypeError, match="name must be a str"):
        linker.add_source_cubin(b"x", name=b"bytes")
    with pytest.raises(TypeError):
        linker.add_data(b"x")
    with pytest.raises(TypeError):
        linker.add_file()
    with pytest.raises(ValueError, match="CUBIN data is empty"):
        linker.add_source_cubin(b"")
    with pytest.raises(ValueError, match="LIBRARY data is empty"):
        linker.add_source_library(bytearray())


def test_add_file_checks_the_file_first(tmp_path):
    linker = drv.Linker()
    missing = tmp_path / "libnothing.a"
    with pytest.raises(FileNotFoundError, match="libnothing.a"):
        linker.add_file(missing, JIT.LIBRARY)
    with pytest.raises(FileNotFoundError):
        linker.add_file(str(missing), JIT.LIBRARY)
    with pytest.raises(IsADirectoryError):
        linker.add_file(tmp_path, JIT.LIBRARY)
    with pytest.raises(TypeError):
        linker.add_file(3.5, JIT.LIBRARY)
    if os.geteuid() != 0:
        secret = tmp_path / "secret.a"
        secret.write_bytes(b"!<arch>\n")
        secret.chmod(0)
        with pytest.raises(PermissionError):
            linker.add_file(secret, JIT.LIBRARY)
    assert linker.num_inputs == 0


def test_link_without_inputs_and_after_close_raise_logic_error():
    linker = drv.Linker()
    with pytest.raises(drv.LogicError, match="no inputs"):
        linker.link_module()
    linker.close()
    linker.close()   # idempotent
    for call in (lambda: linker.add_data(b"x", JIT.PTX),
                 lambda: linker.add_file(__file__, JIT.PTX),
                 lambda: linker.add_source_ptx("x"),
                 linker.link_module):
        with pytest.raises(drv.LogicError, match="closed"):
            call()


def test_linker_cycles_through_its_handler_are_collected():
    import gc
    import weakref

    class Owner:
        def __init__(self):
            self.linker = drv.Linker(self.on_message)

        def on_message(self, *args):
            pass

    ref = weakref.ref(Owner())
    gc.collect()
    assert ref() is None


@pytest.mark.skipif(gpu_probe() is None, reason="checks the no-GPU path")
def test_first_input_without_a_driver_raises_a_driver_error():
    linker = drv.Linker()
    with pytest.raises(drv.Error, match="driver|cuInit"):
        linker.add_source_ptx(".version 8.0\n")
    assert linker.num_inputs == 0 and linker.context is None


# ------------------------------------------------- finding the device runtime

def test_find_cuda_library_names_are_checked():
    for bad in ("", "../cudadevrt", "a/b", "lib cudadevrt", "x" * 300):
        with pytest.raises(ValueError, match="bare name"):
            _driver._find_cuda_library(bad)
    with pytest.raises(TypeError, match="must be a str"):
        _driver._find_cuda_library(b"cudadevrt")


def test_find_cuda_library_reports_what_it_searched(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    with pytest.raises(FileNotFoundError) as info:
        _driver._find_cuda_library("no_such_devlib")
    text = str(info.value)
    assert "libno_such_devlib.a" in text and str(tmp_path / "lib64") in text
    assert "/usr/local/cuda/lib64" in text


def test_find_cuda_library_follows_cuda_home(monkeypatch, tmp_path):
    (tmp_path / "lib64").mkdir()
    lib = tmp_path / "lib64" / "libbcfake.a"
    lib.write_bytes(b"!<arch>\n")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    assert _driver._find_cuda_library("bcfake") == str(lib)


def test_find_cuda_library_finds_pip_wheels_first(monkeypatch, tmp_path):
    for sub in ("cu13", "cuda_runtime"):
        d = tmp_path / "nvidia" / sub / "lib"
        d.mkdir(parents=True)
    wheel13 = tmp_path / "nvidia" / "cu13" / "lib" / "libbcwheel.a"
    wheel12 = tmp_path / "nvidia" / "cuda_runtime" / "lib" / "libbcold.a"
    wheel13.write_bytes(b"!<arch>\n")
    wheel12.write_bytes(b"!<arch>\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path)] + sys.path)
    assert _driver._find_cuda_library("bcwheel") == str(wheel13)
    assert _driver._find_cuda_library("bcold") == str(wheel12)


@needs_cudadevrt
def test_cudadevrt_is_found_in_the_toolkit():
    path = _driver._find_cuda_library("cudadevrt")
    assert os.path.basename(path) == "libcudadevrt.a"
    with open(path, "rb") as f:
        assert f.read(8) == b"!<arch>\n"


# --------------------------------------------------- relocatable compilation

def test_rdc_options_drop_link_options_and_turn_rdc_on():
    assert compiler._rdc_options(None) == ["-rdc=true"]
    assert compiler._rdc_options(["-rdc=true", "-lcudadevrt"]) == ["-rdc=true"]
    assert compiler._rdc_options(["-O3", "-L", "/opt/lib", "-L/x", "-lm"]) == \
        ["-O3", "-rdc=true"]
    assert compiler._rdc_options(["-dc"]) == ["-rdc=true"]
    assert compiler._rdc_options(["--relocatable-device-code=true"]) == \
        ["--relocatable-device-code=true"]
    assert compiler._rdc_options(("-DX=1",)) == ["-DX=1", "-rdc=true"]
    with pytest.raises(TypeError, match="must be str"):
        compiler._rdc_options([1])
    with pytest.raises(TypeError, match="single string"):
        compiler._rdc_options("-rdc=true")


def _rdc(source, target, arch="sm_90", options=None):
    return compiler.compile(source, options=compiler._rdc_options(options), arch=arch,
                            target=target, cache_dir=False)


def test_nvrtc_makes_relocatable_cubins_and_ptx():
    cubin = _rdc(LAUNCHER, "cubin")
    assert cubin[:4] == b"\x7fELF"
    assert int.from_bytes(cubin[16:18], "little") == 1        # ET_REL: relocatable
    ptx = _rdc(LAUNCHER, "ptx", arch="compute_90").decode()
    assert ".entry launcher" in ptx and "LaunchDevice" in ptx
    ptx = _rdc(UNIT_KERNEL, "ptx", arch="compute_90").decode()
    assert ".extern .func" in ptx and "blend" in ptx


def test_device_launch_needs_relocatable_code():
    with pytest.raises(compiler.CompileError, match="device-side kernel launch"):
        compiler.compile(LAUNCHER, arch="sm_90", cache_dir=False)


@pytest.mark.skipif(shutil.which("nvlink") is None and
                    not os.path.exists("/usr/local/cuda/bin/nvlink"),
                    reason="nvlink (CUDA toolkit) not found")
@needs_cudadevrt
def test_units_link_offline_with_nvlink(tmp_path):
    """What DynamicModule hands the driver's linker also links with the
    toolkit's own nvlink: a CPU-side check of the relocatable images."""
    nvlink = shutil.which("nvlink") or "/usr/local/cuda/bin/nvlink"
    libdir = os.path.dirname(_driver._find_cuda_library("cudadevrt"))
    files = {}
    for name, src in [("helper", UNIT_HELPER), ("kernel", UNIT_KERNEL),
                      ("launcher", LAUNCHER), ("missing", CALLS_MISSING)]:
        files[name] = tmp_path / f"{name}.cubin"
        files[name].write_bytes(_rdc(src, "cubin"))

    def link(*names):
        return subprocess.run([nvlink, "-arch=sm_90", *[str(files[n]) for n in names],
                               f"-L{libdir}", "-lcudadevrt", "-o", str(tmp_path / "out.cubin")],
                              capture_output=True, text=True)

    assert link("helper", "kernel").returncode == 0
    assert link("launcher").returncode == 0
    bad = link("kernel")
    assert bad.returncode != 0 and "blend" in bad.stdout + bad.stderr
    bad = link("missing")
    assert bad.returncode != 0 and "missing_helper_fn" in bad.stdout + bad.stderr


def test_dynamic_module_checks_before_the_driver(tmp_path):
    mod = DynamicModule(cuda_libdir=tmp_path)
    assert "not linked" in repr(mod)
    with pytest.raises(drv.LogicError, match="link\\(\\) first"):
        mod.get_function("f")
    with pytest.raises(drv.LogicError, match="link\\(\\) first"):
        mod.get_global("g")
    with pytest.raises(FileNotFoundError, match="libcudadevrt.a"):
        mod.add_stdlib("cudadevrt")
    with pytest.raises(TypeError, match="libname must be a str"):
        mod.add_stdlib(None)
    with pytest.raises(compiler.CompileError, match="undefined_thing"):
        mod.add_source("__global__ void k() { undefined_thing(); }")
    with pytest.raises(drv.LogicError, match="no inputs"):
        mod.link()


def test_dynamic_module_bad_stdlib_name():
    mod = DynamicModule()
    with pytest.raises(ValueError, match="bare name"):
        mod.add_stdlib("../../etc/passwd")
    with pytest.raises(FileNotFoundError, match="libsurely_not_a_cuda_lib.a"):
        mod.add_stdlib("surely_not_a_cuda_lib")


@pytest.mark.skipif(gpu_probe() is None, reason="checks the no-GPU path")
def test_dynamic_source_module_compiles_then_needs_the_driver():
    """Without a GPU everything up to the first driver call runs: the source is
    compiled as relocatable code (a CompileError would come first)."""
    with pytest.raises(drv.Error, match="driver|cuInit") as info:
        DynamicSourceModule(LAUNCHER, cache_dir=False)
    assert not isinstance(info.value, compiler.CompileError)
    with pytest.raises(compiler.CompileError):
        DynamicSourceModule("__global__ void k( {", cache_dir=False)


def test_public_names():
    assert "DynamicModule" in compiler.__all__
    assert "DynamicSourceModule" in compiler.__all__
    import inspect
    assert str(inspect.signature(drv.Linker)) == \
        "(message_handler=None, options=None, log_verbose=False)"
    # unbound C methods show their receiver, as CPython's own do ("$self" in the docstring)
    assert str(inspect.signature(drv.Linker.add_data)) == \
        "(self, /, data, input_type, name='unknown')"
    for name in ("add_source_ptx", "add_source_cubin", "add_source_fatbin",
                 "add_source_object", "add_source_library"):
        assert str(inspect.signature(getattr(drv.Linker, name))) == \
            "(self, /, data, name='unknown')"


# ------------------------------------------------------------------ GPU

def _device_arch(kind="sm"):
    major, minor = drv.Context.get_device().compute_capability()
    return f"{kind}_{major}{minor}"


def _blend(x, y):
    return (np.float32(0.75) * x - np.float32(2.0) * y + np.float32(1.0)).astype(np.float32)


@pytest.fixture
def ctx(ctx):
    """conftest's context; skips the GPU tests here when NVRTC is newer than the
    driver, which then refuses NVRTC's relocatable code (test_compiler's
    test_relocatable_code_links_or_says_why_not checks the error there)."""
    reason = nvrtc_newer_than_driver()
    if reason:
        pytest.skip(reason)
    return ctx


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["cubin", "ptx"])
def test_linker_joins_two_units(ctx, rng, kind):
    arch = _device_arch("sm" if kind == "cubin" else "compute")
    input_type = JIT.CUBIN if kind == "cubin" else JIT.PTX
    seen = []
    linker = drv.Linker(message_handler=lambda *a: seen.append(a))
    linker.add_data(_rdc(UNIT_HELPER, kind, arch=arch), input_type, "helper")
    assert linker.context == ctx and linker.num_inputs == 1
    linker.add_data(_rdc(UNIT_KERNEL, kind, arch=arch), input_type, "kernel")
    module = linker.link_module()
    assert linker.closed and "linked" in repr(linker)
    assert len(seen) == 1 and seen[0][0] is True
    assert all(isinstance(s, str) for s in seen[0][1:])
    assert module.context == ctx

    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = np.zeros_like(x)
    module.get_function("blend_all")(drv.Out(out), drv.In(x), drv.In(y), np.int32(n),
                                     block=(128, 1, 1), grid=((n + 127) // 128, 1))
    np.testing.assert_allclose(out, _blend(x, y), rtol=1e-6, atol=1e-6)
    with pytest.raises(drv.LogicError, match="link_module"):
        linker.add_data(b"x", JIT.PTX)


@pytest.mark.gpu
def test_dynamic_module_joins_sources(ctx, rng):
    mod = DynamicModule(cache_dir=False)
    assert mod.add_source(UNIT_HELPER) is mod
    mod.add_source(UNIT_KERNEL, nvcc_options=["-rdc=true", "-lcudadevrt", "-O3"])
    assert mod.link() is mod and "linked" in repr(mod)
    n = 513
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    out = np.zeros_like(x)
    mod.get_function("blend_all")(drv.Out(out), drv.In(x), drv.In(y), np.int32(n),
                                  block=(64, 1, 1), grid=((n + 63) // 64, 1))
    np.testing.assert_allclose(out, _blend(x, y), rtol=1e-6, atol=1e-6)
    with pytest.raises(drv.LogicError, match="already linked"):
        mod.add_source(UNIT_HELPER)
    with pytest.raises(drv.LogicError, match="already linked"):
        mod.link()


@pytest.mark.gpu
@needs_cudadevrt
@pytest.mark.parametrize("arch_kind", [None, "compute"])
def test_kernel_launches_a_kernel(ctx, rng, arch_kind):
    arch = _device_arch(arch_kind) if arch_kind else None
    mod = DynamicSourceModule(LAUNCHER, arch=arch, cache_dir=False)
    n = 3000
    a = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    mod.get_function("launcher")(drv.In(a), drv.Out(out), np.int32(n),
                                 block=(32, 1, 1), grid=(1, 1))
    ctx.synchronize()
    expect = a * a + np.arange(n, dtype=np.float32)
    np.testing.assert_allclose(out, expect, rtol=1e-6)


@pytest.mark.gpu
@needs_cudadevrt
def test_recursive_device_launches(ctx):
    mod = DynamicSourceModule(RECURSIVE, cache_dir=False)
    levels = mod.get_function("levels")
    depth = 4
    out_gpu = drv.mem_alloc(64 * 4)
    drv.memset_d32(out_gpu, 0, 64)
    levels(out_gpu, np.int32(0), np.int32(depth), block=(32, 1, 1), grid=(2, 1))
    ctx.synchronize()
    out = np.empty(64, np.int32)
    drv.memcpy_dtoh(out, out_gpu)
    np.testing.assert_array_equal(out, np.full(64, sum(range(1, depth + 1)), np.int32))


@pytest.mark.gpu
@needs_cudadevrt
def test_stdlib_and_files_through_the_linker(ctx, rng, tmp_path):
    """add_file of a CUBIN written to disk plus the device runtime library."""
    path = tmp_path / "launcher.cubin"
    path.write_bytes(_rdc(LAUNCHER, "cubin", arch=_device_arch()))
    mod = DynamicModule().add_file(str(path), JIT.CUBIN).add_stdlib("cudadevrt").link()
    n = 100
    a = rng.standard_normal(n).astype(np.float32)
    out = np.zeros(n, np.float32)
    mod.get_function("launcher")(drv.In(a), drv.Out(out), np.int32(n),
                                 block=(1, 1, 1), grid=(1, 1))
    ctx.synchronize()
    np.testing.assert_allclose(out, a * a + np.arange(n, dtype=np.float32), rtol=1e-6)


@pytest.mark.gpu
def test_undefined_symbol_raises_with_the_log(ctx):
    seen = []
    linker = drv.Linker(message_handler=lambda *a: seen.append(a))
    linker.add_source_cubin(_rdc(CALLS_MISSING, "cubin", arch=_device_arch()), name="missing")
    with pytest.raises(drv.Error, match="missing_helper_fn") as info:
        linker.link_module()
    assert "cuLinkComplete" in str(info.value)
    assert "missing_helper_fn" in info.value.log
    assert "missing_helper_fn" in linker.error_log
    assert len(seen) == 1 and seen[0][0] is False and "missing_helper_fn" in seen[0][2]
    linker.close()


@pytest.mark.gpu
def test_bad_ptx_raises_at_add_data(ctx):
    linker = drv.Linker()
    bad = ".version 8.0\n.target sm_75\n.address_size 64\n.visible .entry broken( { ret; }\n"
    with pytest.raises(drv.Error, match="cuLinkAddData"):
        linker.add_source_ptx(bad, name="broken.ptx")
    assert linker.num_inputs == 0
    linker.close()


@pytest.mark.gpu
def test_handler_errors_propagate_and_verbose_logs(ctx):
    def handler(ok, info, err):
        raise KeyError("from the handler")

    linker = drv.Linker(handler, log_verbose=True)
    linker.add_source_ptx(_rdc(UNIT_HELPER + UNIT_KERNEL, "ptx",
                                    arch=_device_arch("compute")))
    with pytest.raises(KeyError, match="from the handler"):
        linker.link_module()
    assert isinstance(linker.info_log, str)


@pytest.mark.gpu
def test_unfinished_linker_is_released_quietly(ctx):
    linker = drv.Linker()
    linker.add_source_cubin(_rdc(UNIT_HELPER, "cubin", arch=_device_arch()))
    del linker   # filterwarnings=error: a warning from the destructor would fail here
    with drv.Linker() as linker:
        linker.add_source_cubin(_rdc(UNIT_HELPER, "cubin", arch=_device_arch()))
    assert linker.closed
    with pytest.raises(drv.LogicError, match="closed"):
        linker.link_module()


# Every thread of every block launches a grid like its own until max_depth:
# each block has `fan` threads and spawns fan * gridDim.x blocks below it.
BLOCK_TREE = """
__device__ int blocks_seen = 0;

__global__ void tree(int max_depth, int depth)
{
    if (threadIdx.x == 0)
        atomicAdd(&blocks_seen, 1);
    if (depth + 1 < max_depth)
        tree<<<gridDim.x, blockDim.x>>>(max_depth, depth + 1);
}
"""


@pytest.mark.gpu
@needs_cudadevrt
@pytest.mark.parametrize("max_depth", [1, 2, 3])
def test_block_tree_counts_with_prepared_calls(ctx, max_depth):
    ctx.set_limit(drv.limit.DEV_RUNTIME_SYNC_DEPTH, max_depth)   # ignored where refused
    mod = DynamicSourceModule(BLOCK_TREE, cache_dir=False)
    counter, size = mod.get_global("blocks_seen")
    assert size == 4
    drv.memset_d32(counter, 0, 1)
    tree = mod.get_function("tree").prepare("ii")
    grid, threads = 2, 2
    tree.prepared_call((grid, 1), (threads, 1, 1), max_depth, 0)
    ctx.synchronize()
    seen = np.empty(1, np.int32)
    drv.memcpy_dtoh(seen, counter)
    expect = sum(grid * (grid * threads) ** d for d in range(max_depth))
    assert int(seen[0]) == expect


# ------------------------------------------- which units need the device runtime (CPU)

def _rdc_cubin(src):
    return compiler.compile(src, options=["-rdc=true"], arch="sm_90", cache_dir=False,
                            target="cubin")


@pytest.mark.parametrize("src, needs, named", [
    ("__global__ void k(float *c) { c[0] = 1; }", False, None),
    ("__global__ void child(float *c) { c[0] = 1; }\n"
     "__global__ void parent(float *c) { child<<<1, 1>>>(c); }", True, "__cudaCDP2LaunchDeviceV2"),
    ("#include <cstdio>\n__global__ void k(float *c) { printf(\"%f\", c[0]); }", True, "vprintf"),
    ("extern __device__ float g;\n__global__ void k(float *c) { c[0] = g; }", True, "g"),
], ids=["plain", "launches_kernels", "printf", "extern_variable"])
def test_needs_device_runtime(src, needs, named):
    from barecuda._compile import cubin as _cubin

    image = _rdc_cubin(src)
    names = _cubin.undefined_symbols(image)
    assert names is not None and all(isinstance(n, str) for n in names)
    if named:
        assert named in names
    assert _cubin.needs_device_runtime(image) is needs


@pytest.mark.parametrize("image", [b"", b"//\n.version 8.0\n.target sm_90\n", b"\x7fELF\x02\x01",
                                   b"\x7fELF\x02\x01" + b"\xff" * 200, b"\x7fELF\x01\x01" + b"\0" * 60],
                         ids=["empty", "ptx", "short", "garbage", "elf32"])
def test_unreadable_images_keep_the_device_runtime(image):
    from barecuda._compile import cubin as _cubin

    assert _cubin.undefined_symbols(image) is None
    assert _cubin.needs_device_runtime(image) is True


@pytest.mark.gpu
@pytest.mark.parametrize("printf", [False, True], ids=["plain", "printf"])
def test_dynamic_source_module_links_devrt_only_when_called(ctx, printf, capfd):
    src = ("#include <cstdio>\n" if printf else "") + """
    __global__ void axpy(float *y, const float *x, float a, int n)
    {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = a * x[i] + y[i];""" + (
        '\n        if (i == 0) printf("axpy ran\\n");' if printf else "") + "\n    }\n"
    mod = DynamicSourceModule(src, cache_dir=False)
    assert mod._calls_devrt is printf
    rng = np.random.default_rng(3)
    x = rng.standard_normal(1000).astype(np.float32)
    y = rng.standard_normal(1000).astype(np.float32)
    out = y.copy()
    mod.get_function("axpy")(drv.InOut(out), drv.In(x), np.float32(2.5), np.int32(1000),
                             block=(256, 1, 1), grid=(4, 1))
    drv.Context.synchronize()
    np.testing.assert_allclose(out, 2.5 * x + y, rtol=1e-5, atol=1e-6)  # FMA or not
    if printf:
        assert "axpy ran" in capfd.readouterr().out
