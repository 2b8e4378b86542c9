# SPDX-License-Identifier: MIT
"""barecuda in IPython/Jupyter (barecuda.jupyter), tested with IPython's own
InteractiveShell: ``%load_ext barecuda``, the ``%%cuda`` cell magic (compiling,
binding, options, errors shown without a traceback; on a machine without a GPU the
compile-only path), ``%cuda_occupancy``, and the HTML displays of Device, GPUArray,
Trace and occupancy curves.  ``import barecuda`` must not import IPython."""

import re
import subprocess
import sys
import types

import numpy as np
import pytest

from barecuda import driver as drv

IPython = pytest.importorskip("IPython")

from IPython.core.error import UsageError  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

from barecuda import jupyter  # noqa: E402
from conftest import gpu_probe  # noqa: E402

ANSI = re.compile(r"\x1b\[[0-9;]*m")

TWICE = """\
__global__ void twice(float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] *= 2.0f;
}
"""

# line 4 lacks its semicolon: NVRTC reports the error on line 5
BROKEN = """\
__global__ void broken(float *a, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int j = i + 1
    if (i < n) a[i] = j;
}
"""

TEMPLATE = """\
template <typename T>
__global__ void scale(T *a, T s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] *= s;
}
"""


@pytest.fixture(scope="module")
def shell():
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "barecuda")
    yield ip


def run(shell, capsys, line, cell):
    """Run `%%cuda line` on `cell`; (result, captured stdout without colours)."""
    capsys.readouterr()
    result = shell.run_cell(f"%%cuda {line}\n{cell}" if line is not None else cell)
    out = capsys.readouterr()
    return result, ANSI.sub("", out.out + out.err)


# ------------------------------------------------------------ no cost at import

def test_import_barecuda_does_not_import_ipython():
    code = ("import sys, barecuda, barecuda.driver, barecuda.compiler\n"
            "assert callable(barecuda.load_ipython_extension)\n"
            "bad = [m for m in ('IPython', 'barecuda.jupyter') if m in sys.modules]\n"
            "assert not bad, bad\n"
            "import barecuda.jupyter\n"
            "assert 'IPython' not in sys.modules, 'barecuda.jupyter imported IPython'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd="/")
    assert done.returncode == 0, done.stderr


def test_load_ext_registers_the_magics_and_displays(shell):
    magics = shell.magics_manager.magics
    assert "cuda" in magics["cell"]
    assert "cuda_occupancy" in magics["line"]
    html = shell.display_formatter.formatters["text/html"]
    from barecuda.gpuarray import GPUArray
    from barecuda.trace import Trace
    for cls in (drv.Device, GPUArray, Trace):
        assert html.lookup_by_type(cls) is not None, cls
    # the C type itself is left alone: no method was patched onto it
    assert not hasattr(drv.Device, "_repr_html_")


# ------------------------------------------------------------------ the magic

def test_magic_compiles_and_binds_or_reports_no_gpu(shell, capsys):
    shell.user_ns.pop("twice", None)
    result, out = run(shell, capsys, "-m twice_mod", TWICE)
    assert result.error_in_exec is None, out
    assert "compiled for sm_" in out
    if gpu_probe() is None:
        assert isinstance(shell.user_ns["twice"], drv.Function)
        assert "twice" in out and "registers" in out
    else:
        # no GPU: compiled all the same, nothing bound, and the report says why
        assert "twice" not in shell.user_ns
        assert "not bound: there is no GPU" in out
        compiled = shell.user_ns["twice_mod"]
        assert isinstance(compiled, jupyter.CompiledCell)
        assert compiled.kernels == ["twice"]
        assert compiled.kind == "cubin" and compiled.image[:4] == b"\x7fELF"


def test_compile_only_with_arch_and_defines(shell, capsys):
    cell = ("#if SCALE != 3 || !defined(FLAG)\n#error the -D options did not arrive\n#endif\n"
            "__global__ void k1(float *a) { a[threadIdx.x] *= SCALE; }\n"
            "__global__ void k2(float *a) { a[threadIdx.x] += SCALE; }\n"
            "__device__ float helper(float x) { return x; }\n")
    result, out = run(shell, capsys, "--compile-only --arch sm_80 -D SCALE=3 -DFLAG -m m80",
                      cell)
    assert result.error_in_exec is None, out
    compiled = shell.user_ns["m80"]
    assert compiled.arch == "sm_80" and compiled.kind == "cubin"
    assert sorted(compiled.kernels) == ["k1", "k2"]      # kernels only, not helper
    assert "compiled for sm_80 (CUBIN" in out and "not bound (--compile-only)" in out
    assert "k1" not in shell.user_ns


def test_compile_only_ptx(shell, capsys):
    result, out = run(shell, capsys, "--compile-only --ptx --arch sm_80 -m p80", TWICE)
    assert result.error_in_exec is None, out
    compiled = shell.user_ns["p80"]
    assert compiled.kind == "ptx" and b".entry twice" in compiled.image
    assert jupyter.kernel_names(compiled.image) == ["twice"]


def test_compile_only_name_expressions(shell, capsys):
    result, out = run(shell, capsys, "--compile-only --arch sm_80 --no-extern-c "
                      "-n 'scale<float>' -n sd=scale<double> -m tm", TEMPLATE)
    assert result.error_in_exec is None, out
    kernels = shell.user_ns["tm"].kernels
    assert len(kernels) == 2 and all(k.startswith("_Z") for k in kernels), kernels


def test_compile_error_shows_the_marked_source_without_traceback(shell, capsys):
    result, out = run(shell, capsys, "", BROKEN)
    err = result.error_in_exec
    assert isinstance(err, jupyter.CellCompileError)
    assert isinstance(err, drv.CompileError)
    assert "CompileError:" in out and "error" in out
    # the cell's own lines, the faulty one marked
    assert re.search(r"^ > +5 \| +if \(i < n\) a\[i\] = j;", out, re.M), out
    assert re.search(r"^ {3}\s*4 \| +int j = i \+ 1$", out, re.M), out
    assert "Traceback" not in out
    assert "compiler.py" not in out and "jupyter.py" not in out
    assert "broken" not in shell.user_ns


@pytest.mark.parametrize("line,message", [
    ("--arch 90", "--arch must look like sm_90 or compute_90, not '90'"),
    ("--arch", "argument -a/--arch: expected one argument"),
    ("-D 1X=2", "-D takes NAME or NAME=VALUE with NAME a C identifier, not '1X=2'"),
    ("--bogus", "unrecognized arguments: --bogus"),
    ("-m 1x", "--module takes a Python name, not '1x'"),
    ("--ptx", "--ptx goes with --compile-only"),
    ("-o lineinfo", "--option takes a compiler option starting with '-'"),
    ("-n 'a<int>' -n a_int=b<int>", "two name expressions would be bound as 'a_int'"),
    ("-n '<>'", "makes no Python name"),
    ("-D 'X", "cannot split the options"),
])
def test_bad_options_are_usage_errors(shell, capsys, line, message):
    result, out = run(shell, capsys, line, TWICE)
    assert isinstance(result.error_in_exec, UsageError), out
    assert message in out
    assert "Traceback" not in out
    with pytest.raises(jupyter.MagicOptionsError, match=re.escape(message)):
        jupyter.parse_magic_line(line)


def test_help(shell, capsys):
    result, out = run(shell, capsys, "--help", "// the options are printed, nothing compiled")
    assert result.error_in_exec is None
    for option in ("--arch", "-D NAME[=VALUE]", "--name-expression", "--no-extern-c",
                   "--compile-only", "--module"):
        assert option in out


def test_parse_magic_line():
    args = jupyter.parse_magic_line(
        "-a compute_90 -D N=4 -DFAST -I /tmp/inc --option=-lineinfo "
        "-n 'add<float>' -n addd=add<double> -n 'ns::k<int, 2>' --no-extern-c -q")
    assert args.arch == "compute_90" and args.no_extern_c and args.quiet
    assert args.nvrtc_options == ["-DN=4", "-DFAST", "-lineinfo"]
    assert args.include_dirs == ["/tmp/inc"]
    assert args.name_map == {"add_float": "add<float>", "addd": "add<double>",
                             "ns_k_int_2": "ns::k<int, 2>"}
    assert jupyter.python_name("&k<3>") == "k_3" and jupyter.python_name("class") == "class_"


def test_plain_cxx_names():
    assert jupyter._plain_cxx_name("_Z5scalePfi") == "scale"
    assert jupyter._plain_cxx_name("_Z5scaleIfEvPT_S0_i") is None     # a template
    assert jupyter._plain_cxx_name("_ZN2ns1kEPf") is None             # in a namespace
    assert jupyter._plain_cxx_name("twice") is None


def test_kernel_names_of_images():
    ptx = ".version 8.0\n.target sm_80\n.visible .entry _Z1kPf(\n)\n{\n}\n.entry other(\n)\n"
    assert jupyter.kernel_names(ptx) == ["_Z1kPf", "other"]
    assert jupyter.kernel_names(ptx.encode() + b"\0") == ["_Z1kPf", "other"]
    assert jupyter.kernel_names(b"\x7fELF garbage") == []


# ------------------------------------------------------------------ displays

class FakeGPUArray:
    """A NumPy array dressed as a GPUArray; records the size of every get()."""

    def __init__(self, host, log):
        self.host, self.log = host, log
        self.shape, self.dtype, self.size = host.shape, host.dtype, host.size
        self.nbytes, self.ptr = host.nbytes, 0

    def __getitem__(self, index):
        return FakeGPUArray(self.host[index], self.log)

    def get(self):
        self.log.append(self.host.size)
        return self.host.copy()


@pytest.mark.parametrize("shape,dtype", [
    ((5,), np.float32), ((2000,), np.float64), ((3000,), np.int32), ((40, 50), np.float32),
    ((1001, 2), np.int64), ((3, 400), np.float64), ((6, 7, 30), np.float32),
    ((20, 20, 20), np.int16), ((4, 5, 6, 7), np.float64), ((1200,), np.bool_),
    ((1100,), np.complex64), ((), np.float32), ((0, 5), np.float32),
])
def test_array_preview_is_numpy_text(shape, dtype):
    rng = np.random.default_rng(1)
    host = np.asarray((rng.standard_normal(shape) * 100).astype(dtype))
    log = []
    text = jupyter.array_preview(FakeGPUArray(host, log))
    assert text == np.array2string(host, separator=", ", max_line_width=sys.maxsize
                                   if host.size > 1000 else 75)
    if host.size > 1000:
        # only the corners were read: at most 6 items along each axis
        assert sum(log) <= np.prod([min(n, 6) for n in shape])


def test_gpuarray_html_reads_only_corners_of_a_huge_array():
    log = []
    host = np.arange(10_000_000, dtype=np.float32)
    html = jupyter.gpuarray_html(FakeGPUArray(host, log))
    assert sum(log) == 6
    assert "shape=(10000000,)" in html and "dtype=float32" in html and "38.1 MiB" in html
    # NumPy summarises it the same way
    assert np.array2string(host, separator=", ", max_line_width=sys.maxsize) in html


class FakeDevice:
    handle = 0

    def name(self):
        return "Fake GPU <1>"

    def compute_capability(self):
        return (9, 0)

    def total_memory(self):
        return 80 * 2**30

    def pci_bus_id(self):
        return "0000:01:00.0"

    def get_attribute(self, attr):
        values = {"MULTIPROCESSOR_COUNT": 132, "WARP_SIZE": 32, "MAX_THREADS_PER_BLOCK": 1024,
                  "MAX_SHARED_MEMORY_PER_BLOCK": 49152,
                  "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448,
                  "GLOBAL_MEMORY_BUS_WIDTH": 5120, "MEMORY_CLOCK_RATE": 2619000}
        name = drv.device_attribute(attr).name
        if name not in values:
            raise drv.LogicError("not answered")
        return values[name]


def test_device_html_from_a_device_like_object():
    html = jupyter.device_html(FakeDevice())
    assert "<b>Fake GPU &lt;1&gt;</b>" in html
    for text in ("9.0 (sm_90)", "80.0 GiB", "132", "1024", "48.0 KiB (227.0 KiB)",
                 "5120 bits, 2619 MHz, peak about 3352 GB/s", "0000:01:00.0"):
        assert text in html, text
    assert "n/a" in html       # attributes the driver did not answer


def _fake_trace():
    from barecuda.trace import Trace, TraceEvent
    t0 = 1_000_000
    events = [TraceEvent("copy", "HtoD", 1, 7, t0, t0 + 2000, t0 + 1000, t0 + 9000, 1 << 20),
              TraceEvent("kernel", "twice", 1, 7, t0 + 2500, t0 + 4000, t0 + 9500, t0 + 20000,
                         0, (4, 1, 1), (256, 1, 1)),
              TraceEvent("sync", "Context.synchronize", 0, 7, t0 + 4500, t0 + 21000)]
    return Trace.from_events(events, t0)


def test_trace_display(shell):
    t = _fake_trace()
    data, _ = shell.display_formatter.format(t)
    html = data["text/html"]
    assert html.startswith("<div class='barecuda-trace'><svg") and "</svg>" in html
    assert "twice" in html and "summary of 3 events" in html
    from barecuda.trace import Trace
    assert jupyter.trace_html(Trace()) is None        # not ended: plain repr instead


def test_occupancy_curve_from_resources(shell):
    devdata = types.SimpleNamespace(
        max_threads=1024, warp_size=32, warps_per_mp=64, thread_blocks_per_mp=32,
        registers=65536, shared_memory=49152, smem_alloc_granularity=128,
        smem_granularity=32, register_allocation_unit="warp")
    curve = jupyter.OccupancyCurve.from_resources(devdata, registers=64, shared_mem=0,
                                                  name="k")
    by_size = {b: (o, why) for b, o, why in curve.points}
    assert len(curve.points) == 32
    assert by_size[32] == (0.5, "device")          # 32 blocks of 1 warp
    assert by_size[128] == (0.5, "regs")           # 64 regs x 128 threads: 8 blocks
    assert by_size[1024] == (0.5, "regs")         # exactly the 65536 registers
    assert curve.best == (32, 0.5, "device")
    heavy = jupyter.OccupancyCurve.from_resources(devdata, registers=80)
    assert heavy.points[-1] == (1024, 0.0, "too many registers")
    data, _ = shell.display_formatter.format(curve)
    assert "<polyline" in data["text/html"] and "best 50% at 32 threads" in data["text/html"]
    assert data["image/svg+xml"].startswith("<svg")
    assert "64 registers per thread" in data["text/html"]


def test_occupancy_magic_needs_a_function(shell, capsys):
    result, out = run(shell, capsys, None, "%cuda_occupancy")
    assert isinstance(result.error_in_exec, UsageError) and "name a kernel" in out
    shell.user_ns["not_a_kernel"] = 3
    result, out = run(shell, capsys, None, "%cuda_occupancy not_a_kernel")
    assert isinstance(result.error_in_exec, UsageError)
    assert "not_a_kernel is a int, not a driver.Function" in out


def test_unload_removes_the_displays():
    ip = InteractiveShell.instance()
    html = ip.display_formatter.formatters["text/html"]
    ip.run_line_magic("unload_ext", "barecuda")
    try:
        with pytest.raises(KeyError):
            html.lookup_by_type(drv.Device)
    finally:
        ip.run_line_magic("load_ext", "barecuda")
    assert html.lookup_by_type(drv.Device) is not None


# ------------------------------------------------------------------ on a GPU

@pytest.mark.gpu
def test_magic_binds_kernels_that_run(shell, capsys, ctx):
    result, out = run(shell, capsys, "-D FACTOR=3 -m mod3",
                      TWICE.replace("2.0f", "FACTOR"))
    assert result.error_in_exec is None, out
    twice = shell.user_ns["twice"]
    assert isinstance(twice, drv.Function)
    assert shell.user_ns["mod3"].get_function("twice").handle == twice.handle
    a = np.arange(100, dtype=np.float32)
    out_a = a.copy()
    twice(drv.InOut(out_a), np.int32(a.size), block=(128, 1, 1), grid=(1, 1))
    np.testing.assert_array_equal(out_a, 3 * a)


@pytest.mark.gpu
def test_magic_binds_name_expressions(shell, capsys, ctx):
    result, out = run(shell, capsys, "--no-extern-c -n 'scale<float>' -n sd=scale<double>",
                      TEMPLATE + "__global__ void plain_cxx(float *a) { a[0] = 1.0f; }\n")
    assert result.error_in_exec is None, out
    assert isinstance(shell.user_ns["plain_cxx"], drv.Function)   # C++, no template
    for name, dtype in (("scale_float", np.float32), ("sd", np.float64)):
        a = np.arange(10, dtype=dtype)
        b = a.copy()
        shell.user_ns[name](drv.InOut(b), dtype(2), np.int32(10), block=(32, 1, 1),
                            grid=(1, 1))
        np.testing.assert_array_equal(b, 2 * a)
    assert "scale_float (= _Z" in out


@pytest.mark.gpu
def test_device_display(shell, ctx):
    data, _ = shell.display_formatter.format(ctx.device)
    html = data["text/html"]
    assert ctx.device.name() in html
    major, minor = ctx.device.compute_capability()
    assert f"{major}.{minor} (sm_{major}{minor})" in html
    assert f"<td style='text-align:left'>{ctx.device.multiprocessor_count}</td>" in html


@pytest.mark.gpu
def test_gpuarray_display(shell, ctx):
    from barecuda import gpuarray
    small = gpuarray.to_gpu(np.arange(12, dtype=np.float32).reshape(3, 4))
    html = shell.display_formatter.format(small)[0]["text/html"]
    assert "shape=(3, 4) dtype=float32 on device 0" in html
    assert np.array2string(small.get(), separator=", ") in html
    big = gpuarray.arange(3 * 10**6, dtype=np.float64).reshape(1000, 3000)
    html = shell.display_formatter.format(big)[0]["text/html"]
    expect = np.array2string(big.get(), separator=", ", max_line_width=sys.maxsize)
    assert expect.replace("'", "&#x27;") in html
    view = big[::7, 1::3]
    html = shell.display_formatter.format(view)[0]["text/html"]
    assert "strided view" in html
    assert np.array2string(view.get(), separator=", ", max_line_width=sys.maxsize) in html


@pytest.mark.gpu
def test_occupancy_of_a_kernel(shell, capsys, ctx):
    run(shell, capsys, "", TWICE)
    curve = jupyter.occupancy(shell.user_ns["twice"])
    assert curve.points and all(0 <= o <= 1 for _, o, _ in curve.points)
    assert curve.best[1] == 1.0
    result, out = run(shell, capsys, None, "%cuda_occupancy twice")
    assert result.error_in_exec is None and "OccupancyCurve" in out
