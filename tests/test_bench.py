# SPDX-License-Identifier: MIT
"""The benchmark package barecuda.bench: section discovery, collect(), the command
line (--only, --json, --svg, errors), the table and chart, the shared timing helper,
and the CPU-side parts of the launch and elementwise sections (generated PTX and
call loops, row building).  The sections' figures themselves need a GPU."""

import importlib
import json
import os
import pkgutil
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from barecuda import bench
from barecuda.bench import __main__ as cli
from barecuda.bench import elementwise, launch

ROWS = [
    dict(section="launch", name="launch __call__, empty kernel, 4 args", value=3.0, unit="us",
         ratio=1.05, vs="C floor", note=None),
    dict(section="launch", name="CuPy RawKernel launch, 4 args", value=4.8, unit="us",
         ratio=1.65, vs="C floor", note=None),
    dict(section="copies", name="htod pinned 4 KiB latency", value=7.3, unit="us",
         ratio=0.98, vs="C loop", note=None),
]
KEYS = {"name", "value", "unit", "ratio", "vs", "note", "section"}


def run_cli(*args, **env):
    return subprocess.run([sys.executable, "-m", "barecuda.bench", *args], capture_output=True,
                          text=True, env=dict(os.environ, **env), timeout=120, cwd="/")


@pytest.fixture
def future_section(tmp_path, monkeypatch):
    """A section module written to a folder on barecuda.bench's search path and listed
    in SECTIONS: how a new section is added."""
    (tmp_path / "future.py").write_text(
        '"""A section from the future."""\n'
        "def run():\n"
        "    return [{'name': 'tick', 'value': 1.25, 'unit': 'us', 'ratio': 1.01,\n"
        "             'vs': 'C floor'}, {'name': 'tock', 'value': None, 'unit': 's',\n"
        "             'note': 'peer missing'}]\n")
    (tmp_path / "broken.py").write_text("def run():\n    raise RuntimeError('kaput')\n")
    monkeypatch.setattr(bench, "__path__", [*bench.__path__, str(tmp_path)])
    monkeypatch.setattr(bench, "SECTIONS", [*bench.SECTIONS, "future", "broken", "absent"])
    yield
    for name in ("future", "broken"):
        sys.modules.pop(f"barecuda.bench.{name}", None)
    importlib.invalidate_caches()


# ------------------------------------------------------------ sections and discovery

def test_section_modules():
    assert bench.module_name("launch") == "barecuda.bench.launch"
    assert bench.module_name("import") == "barecuda.bench.import_"   # a keyword
    assert bench.SECTIONS[:7] == ["copies", "launch", "compile", "gpuarray", "elementwise",
                                  "interop", "import"]
    # every section module in the package is listed, and every listed one is there
    # (modules starting with "_" are helpers of the sections, not sections: __main__, _nccl_procs)
    files = {m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_")}
    assert files == {bench.module_name(s).rsplit(".", 1)[1] for s in bench.SECTIONS}
    assert bench.available() == bench.SECTIONS


def test_every_section_imports_without_a_driver_and_keeps_the_contract():
    code = ("import importlib, inspect, barecuda.bench as b\n"
            "for s in b.SECTIONS:\n"
            "    m = importlib.import_module(b.module_name(s))\n"
            "    assert m.__doc__ and callable(m.run), s\n"
            "    assert not [p for p in inspect.signature(m.run).parameters.values()\n"
            "                if p.default is p.empty], s\n"
            "print('ok', len(b.SECTIONS))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/",
                       env=dict(os.environ, BARECUDA_LIBCUDA="/nonexistent/libcuda.so.1"), timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ok", str(len(bench.SECTIONS))]


def test_contract_is_documented():
    doc = bench.__doc__
    for word in ("SECTIONS", "run()", "name", "value", "unit", "ratio", "vs", "note",
                 "import_", "meson.build", "interleaved_times"):
        assert word in doc


def test_collect_unknown_and_missing_sections():
    assert bench._load("no_such_section") is None
    rows, errors = bench.collect(["nope"])
    assert rows == [] and errors == [{"section": "nope", "error": "unknown section 'nope'",
                                      "traceback": ""}]


def test_a_new_section_is_found_by_listing_it(future_section):
    assert bench.available()[-2:] == ["future", "broken"]       # "absent" has no module
    rows, errors = bench.collect(["future", "absent"])
    assert errors == []                                           # listed, not installed: skipped
    assert rows == [
        dict(section="future", name="tick", value=1.25, unit="us", ratio=1.01, vs="C floor", note=None),
        dict(section="future", name="tock", value=None, unit="s", ratio=None, vs=None, note="peer missing"),
    ]
    for r in rows:
        assert set(r) == KEYS


def test_a_failing_section_does_not_stop_the_others(future_section, capsys):
    import io
    out = io.StringIO()
    rows, errors = bench.collect(["broken", "future"], out=out)
    assert [r["name"] for r in rows] == ["tick", "tock"]
    assert len(errors) == 1 and errors[0]["section"] == "broken"
    assert errors[0]["error"] == "RuntimeError: kaput" and "Traceback" in errors[0]["traceback"]
    assert "[future] running..." in out.getvalue() and "[future] 2 figures in" in out.getvalue()


def test_fake_module_in_sys_modules(monkeypatch):
    import types
    fake = types.ModuleType("barecuda.bench.gpuarray")
    fake.run = lambda: [{"name": "fake", "value": 2.0, "unit": "GB/s"}]
    monkeypatch.setitem(sys.modules, "barecuda.bench.gpuarray", fake)
    rows, errors = bench.collect(["gpuarray"])
    assert errors == [] and rows == [{"name": "fake", "value": 2.0, "unit": "GB/s", "ratio": None,
                                      "vs": None, "note": None, "section": "gpuarray"}]


# ------------------------------------------------------------ the command line

def test_only_and_json(future_section, tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert cli.main(["--only", "future", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "tick" in table and "1.25" in table and "peer missing" in table
    data = json.loads(out.read_text())
    assert set(data) == {"environment", "rows", "errors"}
    assert "python" in data["environment"] and data["errors"] == []
    assert [r["name"] for r in data["rows"]] == ["tick", "tock"]
    assert all(set(r) == KEYS and r["section"] == "future" for r in data["rows"])


def test_failing_section_sets_exit_status_and_is_in_json(future_section, tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert cli.main(["--only", "broken", "future", "--json", str(out)]) == 1
    assert "ERROR in section broken: RuntimeError: kaput" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert [e["section"] for e in data["errors"]] == ["broken"]
    assert len(data["rows"]) == 2


def test_unknown_section_on_the_command_line(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--only", "nope"])
    assert exc.value.code == 2
    assert "invalid choice: 'nope'" in capsys.readouterr().err


def test_python_dash_m():
    r = run_cli("--help")
    assert r.returncode == 0, r.stderr
    assert "--only NAME" in r.stdout and "elementwise" in r.stdout and "--svg FILE" in r.stdout
    r = run_cli("--only", "launchh")
    assert r.returncode == 2 and "invalid choice: 'launchh'" in r.stderr


def test_svg_from_an_earlier_json(tmp_path):
    src = tmp_path / "bench.json"
    src.write_text(json.dumps({"environment": {}, "rows": ROWS, "errors": []}))
    out = tmp_path / "launch.svg"
    assert cli.main(["--from-json", str(src), "--svg", str(out)]) == 0
    assert "barecuda __call__" in out.read_text()


def test_svg_without_launch_rows(tmp_path, capsys):
    src = tmp_path / "bench.json"
    src.write_text(json.dumps({"environment": {}, "rows": ROWS[2:], "errors": []}))
    out = tmp_path / "launch.svg"
    assert cli.main(["--from-json", str(src), "--svg", str(out)]) == 0
    assert "no launch figures to draw" in capsys.readouterr().err and not out.exists()


# ------------------------------------------------------------ table, chart, timing

def test_table_lists_every_row():
    table = bench.format_table(ROWS, [{"section": "x", "error": "boom"}])
    for r in ROWS:
        assert r["name"] in table
    assert "ERROR in section x: boom" in table
    table = bench.format_table([bench.row("x", 1.5, "us", 0.99, "C loop") | {"section": "s"},
                                bench.row("big", 12345678.0, "B") | {"section": "s"}])
    assert "1.5" in table and "0.99" in table and "1.235e+07" in table


def test_launch_chart():
    svg = bench.launch_chart_svg(ROWS)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "C floor" in svg and "barecuda __call__" in svg and "CuPy RawKernel" in svg
    assert "2.86" in svg  # the floor: 3.0 / 1.05
    assert bench.launch_chart_svg(ROWS[2:]) is None


def test_interleaved_times_alternates_and_times_each_function():
    calls, synced = [], []
    fns = [lambda: calls.append(0), lambda: (calls.append(1), time.sleep(0.002))]
    syncs = [lambda: synced.append(0), None]
    t = bench.interleaved_times(fns, syncs, iterations=1, rounds=3, warmup=2)
    assert calls == [0, 0, 1, 1] + [0, 1] * 3          # warm-up, then one loop each per round
    assert synced == [0] * 4                             # after the warm-up and each loop
    assert len(t) == 2 and 0 <= t[0] < 0.002 <= t[1]
    with pytest.raises(ValueError, match="2 functions but 1 syncs"):
        bench.interleaved_times(fns, syncs[:1])


def test_row_helper():
    assert bench.row("n", 1.0, "us") == dict(name="n", value=1.0, unit="us", ratio=None, vs=None,
                                             note=None)


# ------------------------------------------------------------ launch section (CPU side)

def test_launch_signatures_and_args():
    assert launch.ARG_COUNTS == (0, 4, 16, 64)
    assert launch.prepared_signature(0) == ""
    assert launch.prepared_signature(4) == "PPif"
    assert launch.prepared_signature(16) == "P" * 8 + "i" * 4 + "f" * 4
    sig = launch.prepared_signature(64)
    assert sig == "P" * 32 + "i" * 16 + "f" * 16
    with pytest.raises(ValueError):
        launch.prepared_signature(-1)
    a, b = object(), object()
    args = launch.call_args(64, a, b)
    assert len(args) == 64 and args[0] is a and args[1] is b and args[31] is b
    assert all(type(x) is np.int32 for x in args[32:48])
    assert all(type(x) is np.float32 for x in args[48:])
    pargs = launch.prepared_args(4, a, b)
    assert pargs == (a, b, 1000, 2.5) and type(pargs[2]) is int
    assert launch.call_args(0, a, b) == ()


def test_launch_ptx_is_generated_for_every_count():
    ptx = launch.kernel_ptx()
    for n in launch.ARG_COUNTS:
        assert f".visible .entry empty{n}(" in ptx
    body = ptx.split(".visible .entry empty64(")[1].split("{")[0]
    assert body.count(".param .u64") == 32 and body.count(".param .u32") == 16
    assert body.count(".param .f32") == 16 and "p63" in body and "p64" not in body
    assert "empty0()" in ptx


def test_launch_ptx_assembles(tmp_path):
    ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
    if not os.path.exists(ptxas):
        pytest.skip("ptxas not found")
    src = tmp_path / "k.ptx"
    src.write_text(launch.kernel_ptx())
    r = subprocess.run([ptxas, "-arch=sm_90", str(src), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


class _Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, *args, **kw):
        self.calls.append(("call", args, kw))

    def prepared_call(self, *args):
        self.calls.append(("prepared_call", args))

    def prepared_async_call(self, *args):
        self.calls.append(("prepared_async_call", args))


def test_generated_call_loops_pass_every_argument():
    for n in launch.ARG_COUNTS:
        args = tuple(range(n))
        f = _Recorder()
        launch.call_loop(f, args, grid=(2, 1), block=(3, 1, 1))(3)
        assert f.calls == [("call", args, {"block": (3, 1, 1), "grid": (2, 1)})] * 3
        f = _Recorder()
        launch.prepared_loop(f, args, grid=(2, 1), block=(3, 1, 1))(2)
        assert f.calls == [("prepared_call", ((2, 1), (3, 1, 1)) + args)] * 2
        f = _Recorder()
        launch.prepared_loop(f, args, stream="s", use_async=True)(1)
        assert f.calls == [("prepared_async_call", (launch.GRID, launch.BLOCK, "s") + args)]
    launch.call_loop(_Recorder(), ())(0)


# ------------------------------------------------------------ elementwise section (CPU side)

def test_elementwise_cases_match_numpy():
    rng = np.random.default_rng(1)
    labels = [c.label for c in elementwise.CASES]
    assert any("[::2]" in lab for lab in labels)
    for case in elementwise.CASES:
        x, y = elementwise.host_operands(case, 10, rng)
        assert x.shape == y.shape == (10 * case.step,)
        assert (x.dtype.name, y.dtype.name) == case.dtypes
        assert np.unique(x).size > 1 and np.unique(y).size > 1     # random, not constant
        z = case.op(x[::case.step], y[::case.step])
        assert z.shape == (10,) and z.dtype == np.result_type(*case.dtypes)
    mixed = {c.dtypes: c for c in elementwise.CASES}
    assert elementwise.nbytes(mixed[("float32", "float64")], 10) == 10 * (4 + 8 + 8)
    assert elementwise.nbytes(mixed[("int32", "float32")], 10) == 10 * (4 + 4 + 8)


def test_elementwise_rows():
    case = elementwise.CASES[1]
    small, large = elementwise.SMALL, elementwise.LARGE
    r = elementwise.make_row(case, small, 4e-6, 8e-6)
    assert r == dict(name="float32 + float64, 1000 elements", value=pytest.approx(4.0), unit="us/op",
                     ratio=pytest.approx(0.5), vs="cupy, time ours / theirs (less is better)", note=None)
    r = elementwise.make_row(case, large, 1e-4, 1e-4, "WRONG RESULT")
    assert r["name"] == "float32 + float64, 2^24 elements" and r["unit"] == "GB/s"
    assert r["value"] == pytest.approx(20 * large / 1e-4 / 1e9) and r["ratio"] == pytest.approx(1.0)
    assert r["note"] == "WRONG RESULT"
    r = elementwise.make_row(case, small, 4e-6, None, "cupy not installed")
    assert r["ratio"] is None and r["vs"] is None and r["note"] == "cupy not installed"
    r = elementwise.make_row(case, large, None, note="not supported: TypeError: no")
    assert r["value"] is None and r["ratio"] is None and r["note"].startswith("not supported")


def test_elementwise_check():
    a = np.arange(5, dtype=np.float64)
    assert elementwise._check(a, a.copy()) is None
    assert elementwise._check(a + 1, a) == "WRONG RESULT"
    assert elementwise._check(a.astype(np.float32), a).startswith("WRONG DTYPE float32")


def test_elementwise_without_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)      # import cupy -> ImportError
    assert elementwise._cupy() == (None, "cupy not installed")


def test_aio_section_without_a_driver_gives_every_row_skipped():
    from barecuda.bench import aio
    code = ("import json\nfrom barecuda.bench import aio\n"
            "print(json.dumps(aio.run()))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/",
                       env=dict(os.environ, BARECUDA_LIBCUDA="/nonexistent/libcuda.so.1"), timeout=120)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [(x["name"], x["unit"]) for x in rows] == aio.row_names()
    assert len({x["name"] for x in rows}) == len(rows) == 19
    assert all(x["value"] is None and x["note"].startswith("skipped: no GPU (") for x in rows)


# ------------------------------------------------------------ GPU

@pytest.mark.gpu
def test_elementwise_section_rows(ctx, monkeypatch):
    monkeypatch.setattr(elementwise, "LARGE", 1 << 16)
    monkeypatch.setattr(elementwise, "ROUNDS", 2)
    monkeypatch.setattr(elementwise, "ITERATIONS_SMALL", 20)
    monkeypatch.setattr(elementwise, "ITERATIONS_LARGE", 5)
    rows = elementwise.run()
    assert len(rows) == 2 * len(elementwise.CASES)
    for r in rows:
        assert set(r) == KEYS - {"section"}
        assert r["value"] is not None and r["value"] > 0, r
        assert not (r["note"] or "").startswith(("WRONG", "not supported")), r
        assert (r["ratio"] is None) == (elementwise._cupy()[0] is None)


@pytest.mark.gpu
def test_elementwise_section_without_cupy(ctx, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.setattr(elementwise, "LARGE", 1 << 12)
    monkeypatch.setattr(elementwise, "ROUNDS", 1)
    monkeypatch.setattr(elementwise, "ITERATIONS_SMALL", 3)
    monkeypatch.setattr(elementwise, "ITERATIONS_LARGE", 3)
    rows = elementwise.run()
    assert all(r["note"] == "cupy not installed" and r["ratio"] is None and r["value"] > 0
               for r in rows)


@pytest.mark.gpu
def test_launch_kernels_with_64_args_load_and_run(ctx):
    from barecuda import _driver
    from barecuda import driver as drv
    mod = drv.module_from_buffer(launch.kernel_ptx())
    a, b = drv.mem_alloc(256), drv.mem_alloc(256)
    f = mod.get_function("empty64")
    args = launch.call_args(64, a, b)
    f(*args, block=(32, 1, 1), grid=(1, 1))
    f.prepare(launch.prepared_signature(64))
    f.prepared_call((1, 1), (32, 1, 1), *launch.prepared_args(64, a, b))
    assert len(_driver._pack_args(f, *args)) == 32 * 8 + 32 * 4
    assert 0 < _driver._bench_launch(f, (1, 1, 1), (32, 1, 1), args, 10) < 1
    drv.Context.synchronize()
