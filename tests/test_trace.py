"""barecuda.tools.trace(): the timeline recorder, its outputs, and NVTX.

CPU tests check the JSON builder, the SVG writer, the summary's arithmetic, the
NVTX no-op path and the error cases on synthetic events; GPU tests check what a
real trace records."""

import json
import os
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from barecuda import _driver
from barecuda import driver as drv
from barecuda import tools
from barecuda.trace import Trace, TraceEvent, _merge, _nice_step, summarize

MAIN = threading.main_thread().ident
S1, S2 = 0x1000, 0x2000
T0 = 1_000_000_000


def ev(kind, name, stream=S1, host=(0, 10), gpu=None, nbytes=0, thread=MAIN, **kw):
    g0, g1 = (None, None) if gpu is None else (T0 + gpu[0], T0 + gpu[1])
    grid = (2, 1, 1) if kind == "kernel" else None
    block = (128, 1, 1) if kind == "kernel" else None
    return TraceEvent(kind, name, stream, thread, T0 + host[0], T0 + host[1], g0, g1, nbytes,
                      grid, block, 0, **kw)


def sample():
    return Trace.from_events([
        ev("alloc", "mem_alloc", 0, (0, 500), nbytes=4096),
        ev("copy", "HtoD", S1, (600, 700), (1_000, 5_000), nbytes=4_000_000),
        ev("kernel", "spin", S1, (800, 900), (5_000, 15_000)),
        ev("kernel", "spin", S2, (950, 1_000), (6_000, 16_000)),
        ev("range", "outer", 0, (550, 20_000)),
        ev("mark", "here", 0, (1_200, 1_200)),
        ev("kernel", "tail", S1, (1_300, 1_400), (20_000, 22_000)),
        ev("copy", "DtoH", S1, (1_500, 30_000), (22_000, 26_000), nbytes=2_000_000),
        ev("sync", "Stream.synchronize", 0, (1_600, 26_500)),
        ev("kernel", "captured", S2, (27_000, 27_100)),
    ], start_ns=T0)


# ------------------------------------------------------------------ CPU: outputs

def test_chrome_json_shape(tmp_path):
    t = sample()
    data = json.loads(json.dumps(t.chrome()))
    evs = data["traceEvents"]
    meta = [e for e in evs if e["ph"] == "M"]
    names = {e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert names == {"host (main thread)", "stream 0x1000", "stream 0x2000"}
    assert any(e["name"] == "process_name" for e in meta)
    complete = [e for e in evs if e["ph"] == "X"]
    # a host span for each non-mark event, a stream span for each timed one
    n_host = sum(1 for e in t.events if e.kind != "mark")
    n_gpu = sum(1 for e in t.events if e.on_gpu)
    assert len(complete) == n_host + n_gpu
    marks = [e for e in evs if e["ph"] == "i"]
    assert [m["name"] for m in marks] == ["here"]
    stream_tid = {e["args"]["name"]: e["tid"] for e in meta if e["name"] == "thread_name"}
    spins = [e for e in complete if e["name"] == "spin" and e["tid"] >= 1000]
    assert {e["tid"] for e in spins} == {stream_tid["stream 0x1000"], stream_tid["stream 0x2000"]}
    first = next(e for e in complete if e["name"] == "HtoD" and e["tid"] >= 1000)
    assert first["ts"] == 1.0 and first["dur"] == 4.0  # microseconds from the start
    assert first["args"]["bytes"] == 4_000_000
    kern = next(e for e in complete if e["name"] == "tail")
    assert kern["args"]["grid"] == [2, 1, 1] and kern["args"]["block"] == [128, 1, 1]
    path = t.to_chrome(tmp_path / "t.json")
    assert json.loads(path.read_text()) == data


def test_svg_is_valid_and_has_rows(tmp_path):
    t = sample()
    text = t.svg(width=900)
    root = ET.fromstring(text)
    assert root.tag.endswith("svg") and root.get("width") == "900"
    texts = [e.text for e in root.iter() if e.tag.endswith("text")]
    for label in ("host (main thread)", "stream 0x1000", "stream 0x2000", "kernel", "copy"):
        assert label in texts
    assert any(s and s.endswith(" us") for s in texts)  # axis ticks
    titles = [e.text for e in root.iter() if e.tag.endswith("title")]
    assert any(s.startswith("spin (kernel)") for s in titles)
    assert any("4000000 bytes" in s for s in titles)
    path = t.to_svg(tmp_path / "t.svg")
    ET.parse(path)
    j, s = t.save(tmp_path / "sub", "run")
    assert j.name == "run.json" and s.name == "run.svg" and s.exists()


def test_svg_escapes_names():
    t = Trace.from_events([ev("kernel", "f<int>&g", S1, (0, 10), (0, 10_000))], start_ns=T0)
    root = ET.fromstring(t.svg())
    assert any(e.text == "f<int>&g (kernel) 10.0 us" for e in root.iter() if e.tag.endswith("title"))


def test_empty_trace_outputs():
    t = Trace.from_events([])
    assert t.chrome()["traceEvents"][0]["name"] == "process_name"
    ET.fromstring(t.svg())
    s = t.summary()
    assert s.busy_ns == 0 and s.span_ns == 0 and s.gaps == [] and "GPU busy" in str(s)


def test_summary_arithmetic():
    s = sample().summary()
    assert s == summarize(sample().events)
    assert s.kernels == {"spin": (2, 20_000), "tail": (1, 2_000)}
    assert s.copies == {"HtoD": (1, 4_000_000, 4_000), "DtoH": (1, 2_000_000, 4_000)}
    assert s.rate(4_000_000, 4_000) == pytest.approx(1000.0)  # 4 MB in 4 us: 1000 GB/s
    # GPU spans: [1,5] [5,15] [6,16] [20,22] [22,26] us -> busy 15 + 6, span 25, one gap 16..20
    assert s.busy_ns == 21_000 and s.span_ns == 25_000 and s.idle_ns == 4_000
    assert s.gaps == [(T0 + 16_000, T0 + 20_000)]
    assert s.host_only == 1  # the captured launch
    text = str(s)
    assert "spin" in text and "HtoD" in text and "1000.00" in text and "1 gaps" in text


def test_merge_and_ticks():
    assert _merge([(5, 6), (1, 3), (2, 4), (4, 5)]) == [(1, 6)]
    assert _merge([(1, 2), (3, 4)]) == [(1, 2), (3, 4)]
    assert _nice_step(10) == 1 and _nice_step(37) == 5 and _nice_step(0.003) == pytest.approx(0.0005)


def test_event_properties():
    e = ev("kernel", "k", S1, (0, 40), (100, 350))
    assert e.on_gpu and e.gpu_ns == 250 and e.host_ns == 40
    h = ev("sync", "Context.synchronize", 0, (0, 99))
    assert not h.on_gpu and h.gpu_ns is None


# ------------------------------------------------------------------ CPU: errors

def test_results_before_the_end_raise():
    t = tools.trace()
    with pytest.raises(RuntimeError, match="not ended"):
        t.events
    with pytest.raises(RuntimeError):
        t.summary()
    with pytest.raises(RuntimeError):
        t.to_chrome("x.json")
    with pytest.raises(RuntimeError, match="not recording"):
        t.stop()
    assert not t.recording


def test_a_trace_records_once():
    with pytest.raises(RuntimeError, match="recorded already"):
        sample().start()


def test_bad_paths_and_types(tmp_path):
    t = sample()
    with pytest.raises(TypeError, match="str or os.PathLike"):
        t.to_chrome(3)
    with pytest.raises(TypeError):
        t.to_svg(None)
    with pytest.raises(IsADirectoryError):
        t.to_svg(tmp_path)
    with pytest.raises(FileNotFoundError):
        t.to_chrome(tmp_path / "missing" / "t.json")
    with pytest.raises(ValueError, match="width"):
        t.svg(width=10)
    with pytest.raises(TypeError, match="TraceEvent"):
        Trace.from_events([("kernel",)])


def test_stop_without_start_in_c():
    with pytest.raises(RuntimeError, match="no trace is active"):
        _driver._trace_stop()
    assert _driver._trace_active() is False


def test_start_without_gpu_leaves_nothing_active():
    from conftest import gpu_probe
    if gpu_probe() is None:
        pytest.skip("a GPU is present")
    t = tools.trace()
    with pytest.raises(drv.Error):
        t.start()
    assert not t.recording and _driver._trace_active() is False


def test_trace_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("BARECUDA_TRACE_DIR", str(tmp_path / "env"))
    assert tools.trace_dir(str(tmp_path / "arg")) == tmp_path / "arg"
    assert tools.trace_dir() == tmp_path / "env"
    monkeypatch.delenv("BARECUDA_TRACE_DIR")
    d = tools.trace_dir()
    assert d.is_dir() and d.name.startswith("barecuda-trace-")
    d.rmdir()


# ------------------------------------------------------------------ CPU: NVTX

def test_nvtx_calls_work_either_way():
    assert isinstance(tools.nvtx_available(), bool)
    info = _driver.nvtx_info()
    assert info["available"] is tools.nvtx_available()
    tools.nvtx_push("a")
    tools.nvtx_mark("m")
    tools.nvtx_pop()
    rid = tools.nvtx_range_start("r")
    assert isinstance(rid, int)
    tools.nvtx_range_end(rid)
    tools.nvtx_name_thread("main")
    with tools.nvtx_range("ctx") as r:
        assert r.name == "ctx"

    @tools.nvtx_range("deco")
    def add(a, b=1):
        """adds"""
        return a + b
    assert add(2, b=3) == 5 and add.__name__ == "add" and add.__doc__ == "adds"


def test_nvtx_bad_arguments():
    for fn in (tools.nvtx_push, tools.nvtx_mark, tools.nvtx_range_start, tools.nvtx_name_thread):
        with pytest.raises(TypeError, match="must be a str"):
            fn(3)
    with pytest.raises(TypeError):
        tools.nvtx_range(b"x")
    with pytest.raises(OverflowError):
        tools.nvtx_range_end(-1)


def test_nvtx_missing_library_is_a_noop(tmp_path):
    code = ("import barecuda.tools as t, barecuda._driver as d\n"
            "assert t.nvtx_available() is False\n"
            "info = d.nvtx_info(); assert 'BARECUDA_NVTX' in info['error'], info\n"
            "t.nvtx_push('a'); t.nvtx_mark('m'); t.nvtx_pop()\n"
            "t.nvtx_range_end(t.nvtx_range_start('r'))\n"
            "with t.nvtx_range('x'): pass\n"
            "print('noop ok')\n")
    env = dict(os.environ, BARECUDA_NVTX=str(tmp_path / "no-such-libnvToolsExt.so.1"))
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "noop ok" in proc.stdout


# ------------------------------------------------------------------ GPU

SRC = r"""
__global__ void spin(long long cycles, int *out)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
    if (threadIdx.x == 0) out[blockIdx.x] = 1;
}
__global__ void add_one(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += 1.0f;
}
"""


@pytest.fixture
def mod(ctx):
    from barecuda.compiler import SourceModule
    return SourceModule(SRC)


def cycles_for(ms):
    clock_khz = drv.Context.get_device().get_attribute(drv.device_attribute.CLOCK_RATE)
    return np.int64(clock_khz * ms)


@pytest.mark.gpu
def test_events_match_launches(mod, rng):
    add_one = mod.get_function("add_one")
    add_one.prepare("Pi")
    n = 1000
    x = rng.random(n).astype(np.float32)
    d = drv.mem_alloc(x.nbytes)
    s1, s2 = drv.Stream(), drv.Stream()
    t_wall = time.perf_counter_ns()
    with tools.trace() as t:
        drv.memcpy_htod(d, x)
        add_one(d, np.int32(n), block=(256, 1, 1), grid=(4, 1), stream=s1)
        add_one.prepared_async_call((4, 1), (256, 1, 1), s2, d, n)
        add_one.prepared_call((4, 1), (256, 1, 1), d, n)
        s1.synchronize()
        s2.synchronize()
        out = np.empty_like(x)
        drv.memcpy_dtoh(out, d)
    t_wall = time.perf_counter_ns() - t_wall
    np.testing.assert_allclose(out, x + 3, rtol=1e-6)
    kinds = [(e.kind, e.name) for e in t.events]
    assert kinds == [("copy", "HtoD"), ("kernel", "add_one"), ("kernel", "add_one"),
                     ("kernel", "add_one"), ("sync", "Stream.synchronize"),
                     ("sync", "Stream.synchronize"), ("copy", "DtoH")]
    k = [e for e in t.events if e.kind == "kernel"]
    assert [e.stream for e in k] == [s1.handle, s2.handle, 0]
    assert k[0].grid == (4, 1, 1) and k[0].block == (256, 1, 1)
    timed = [e for e in t.events if e.kind in ("kernel", "copy")]
    assert all(e.on_gpu and e.gpu_ns >= 0 and e.host_ns >= 0 for e in timed)
    assert all(not e.failed and e.thread == threading.get_ident() for e in t.events)
    assert sum(e.gpu_ns for e in timed) <= t_wall
    assert all(t.start_ns <= e.gpu_start_ns for e in timed)
    # in order on the default stream: HtoD, the prepared_call, DtoH
    null = [e for e in timed if e.stream == 0]
    assert [e.name for e in null] == ["HtoD", "add_one", "DtoH"]
    assert all(a.gpu_end_ns <= b.gpu_start_ns + 2_000 for a, b in zip(null, null[1:]))
    d.free()


@pytest.mark.gpu
def test_two_streams_overlap(mod):
    spin = mod.get_function("spin")
    out = drv.mem_alloc(64)
    s1, s2 = drv.Stream(), drv.Stream()
    c = cycles_for(2.0)
    spin(c, out, block=(32, 1, 1), grid=(1, 1), stream=s1)  # warm up
    drv.Context.synchronize()
    with tools.trace() as t:
        spin(c, out, block=(32, 1, 1), grid=(1, 1), stream=s1)
        spin(c, out, block=(32, 1, 1), grid=(1, 1), stream=s2)
        drv.Context.synchronize()
    a, b = [e for e in t.events if e.kind == "kernel"]
    assert a.stream == s1.handle and b.stream == s2.handle
    assert a.gpu_ns >= 1_000_000 and b.gpu_ns >= 1_000_000  # ~2 ms each
    assert max(a.gpu_start_ns, b.gpu_start_ns) < min(a.gpu_end_ns, b.gpu_end_ns), "no overlap"
    s = t.summary()
    assert s.kernels["spin"][0] == 2 and s.busy_ns < a.gpu_ns + b.gpu_ns
    assert t.events[-1].kind == "sync" and t.events[-1].name == "Context.synchronize"
    out.free()


@pytest.mark.gpu
def test_copies_and_memsets(ctx, rng):
    x = rng.random(4096).astype(np.float32)
    pinned = drv.pagelocked_empty(4096, np.float32)
    pinned[:] = x
    a, b = drv.mem_alloc(x.nbytes), drv.mem_alloc(x.nbytes)
    s = drv.Stream()
    with tools.trace() as t:
        drv.memcpy_htod_async(a, pinned, s)
        drv.memcpy_dtod_async(b, a, 8000, s)
        drv.memcpy_dtod(b, a, x.nbytes)
        drv.memset_d32(a, 7, 100)
        drv.memset_d8_async(a, 1, 16, s)
        drv.memcpy_dtoh_async(pinned, b, s)
        s.synchronize()
    np.testing.assert_array_equal(pinned, x)
    got = [(e.kind, e.name, e.bytes, e.stream) for e in t.events]
    assert got == [("copy", "HtoD", x.nbytes, s.handle), ("copy", "DtoD", 8000, s.handle),
                   ("copy", "DtoD", x.nbytes, 0), ("memset", "memset", 400, 0),
                   ("memset", "memset", 16, s.handle), ("copy", "DtoH", x.nbytes, s.handle),
                   ("sync", "Stream.synchronize", 0, 0)]
    summ = t.summary()
    assert summ.copies["DtoD"][:2] == (2, 8000 + x.nbytes)
    assert summ.copies["HtoD"][1] == x.nbytes
    a.free()
    b.free()


@pytest.mark.gpu
def test_allocations_syncs_and_gpuarray(ctx, rng):
    from barecuda import gpuarray
    x = rng.random(1000).astype(np.float32)
    with tools.trace() as t:
        d = drv.mem_alloc(1 << 20)
        h = drv.pagelocked_empty(256, np.float64)
        g = gpuarray.to_gpu(x)
        y = (g * 2 + 1).get()
        ev = drv.Event().record()
        ev.synchronize()
        drv.Context.synchronize()
    np.testing.assert_allclose(y, x * 2 + 1, rtol=1e-6)
    names = [(e.kind, e.name) for e in t.events]
    assert ("alloc", "mem_alloc") in names and ("alloc", "pagelocked_empty") in names
    assert next(e for e in t.events if e.name == "mem_alloc").bytes == 1 << 20
    assert next(e for e in t.events if e.name == "pagelocked_empty").bytes == h.nbytes
    assert ("sync", "Event.synchronize") in names and ("sync", "Context.synchronize") in names
    kernels = [e for e in t.events if e.kind == "kernel"]
    assert kernels and all(e.on_gpu for e in kernels)
    copies = [e.name for e in t.events if e.kind == "copy"]
    assert copies[0] == "HtoD" and copies[-1] == "DtoH"
    d.free()


@pytest.mark.gpu
def test_json_of_a_real_trace(mod, tmp_path):
    add_one = mod.get_function("add_one")
    d = drv.mem_alloc(4096)
    with tools.trace() as t:
        add_one(d, np.int32(1024), block=(256, 1, 1), grid=(4, 1))
        drv.Context.synchronize()
    data = json.loads(t.to_chrome(tmp_path / "t.json").read_text())
    assert isinstance(data["traceEvents"], list)
    xs = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert {e["name"] for e in xs} == {"add_one", "Context.synchronize"}
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in xs)
    ET.parse(t.to_svg(tmp_path / "t.svg"))
    d.free()


@pytest.mark.gpu
def test_nothing_recorded_after_the_trace(mod):
    add_one = mod.get_function("add_one")
    d = drv.mem_alloc(4096)
    with tools.trace() as t:
        add_one(d, np.int32(16), block=(16, 1, 1), grid=(1, 1))
    assert len(t.events) == 1 and not _driver._trace_active()
    add_one(d, np.int32(16), block=(16, 1, 1), grid=(1, 1))   # not recorded anywhere
    drv.Context.synchronize()
    assert len(t.events) == 1
    with tools.trace() as t2:
        pass
    assert t2.events == []
    d.free()


@pytest.mark.gpu
def test_exception_inside_ends_the_trace(mod):
    add_one = mod.get_function("add_one")
    d = drv.mem_alloc(4096)
    t = tools.trace()
    with pytest.raises(ZeroDivisionError):
        with t:
            add_one(d, np.int32(16), block=(16, 1, 1), grid=(1, 1))
            1 / 0
    assert not t.recording and not _driver._trace_active()
    assert [e.name for e in t.events] == ["add_one"] and t.events[0].on_gpu
    with tools.trace():   # a new one can start
        pass
    d.free()


@pytest.mark.gpu
def test_second_trace_raises(ctx):
    with tools.trace() as t:
        with pytest.raises(RuntimeError, match="already active"):
            tools.trace().start()
        assert t.recording
    assert t.events == []


@pytest.mark.gpu
def test_failed_launch_is_marked_and_raises(mod):
    add_one = mod.get_function("add_one")
    d = drv.mem_alloc(4096)
    with tools.trace() as t:
        with pytest.raises(drv.Error):   # 1 GiB of dynamic shared memory: the launch fails
            add_one(d, np.int32(16), block=(16, 1, 1), grid=(1, 1), shared=1 << 30)
    assert [e.failed for e in t.events] == [True]
    d.free()


@pytest.mark.gpu
def test_nvtx_ranges_and_other_threads(mod):
    add_one = mod.get_function("add_one")
    d = drv.mem_alloc(4096)
    ctx = drv.Context.get_current()

    def worker():
        ctx.push()
        try:
            add_one(d, np.int32(16), block=(16, 1, 1), grid=(1, 1))
        finally:
            drv.Context.pop()

    with tools.trace() as t:
        with tools.nvtx_range("outer"):
            add_one(d, np.int32(16), block=(16, 1, 1), grid=(1, 1))
            tools.nvtx_mark("middle")
            th = threading.Thread(target=worker)
            th.start()
            th.join()
        rid = tools.nvtx_range_start("async")
        tools.nvtx_range_end(rid)
        drv.Context.synchronize()
    rng_ev = next(e for e in t.events if e.kind == "range" and e.name == "outer")
    k = [e for e in t.events if e.kind == "kernel"]
    assert len(k) == 2 and {e.thread for e in k} == {threading.get_ident(), th.ident}
    assert rng_ev.host_start_ns <= k[0].host_start_ns and k[0].host_end_ns <= rng_ev.host_end_ns
    assert any(e.kind == "mark" and e.name == "middle" for e in t.events)
    assert any(e.kind == "range" and e.name == "async" for e in t.events)
    rows = {e["args"]["name"] for e in t.chrome()["traceEvents"] if e["name"] == "thread_name"}
    assert "host (main thread)" in rows and f"host thread {th.ident}" in rows
    d.free()


@pytest.mark.gpu
def test_graph_capture_and_replay(mod):
    add_one = mod.get_function("add_one")
    add_one.prepare("Pi")
    d = drv.mem_alloc(4096)
    s = drv.Stream()
    with tools.trace() as t:
        s.begin_capture()
        add_one.prepared_async_call((1, 1), (256, 1, 1), s, d, 256)
        graph = s.end_capture()
        exe = graph.instantiate()
        exe.launch(s)
        s.synchronize()
    k = next(e for e in t.events if e.kind == "kernel")
    assert not k.on_gpu   # captured, not run
    g = next(e for e in t.events if e.kind == "graph")
    assert g.on_gpu and g.stream == s.handle
    assert t.summary().host_only == 1
    exe.close()
    graph.close()
    d.free()


def test_bench_section_is_listed():
    import importlib

    from barecuda import bench
    assert "trace" in bench.SECTIONS
    assert callable(importlib.import_module("barecuda.bench.trace").run)


@pytest.mark.gpu
def test_bench_section_runs(ctx):
    from barecuda.bench import trace as _bench_trace
    rows = _bench_trace.run()
    assert [r["name"] for r in rows] == [
        "launch __call__ 4 args, trace off", "launch prepared_call 4 args, trace off",
        "launch __call__ 4 args, trace on", "trace end, per recorded launch"]
    assert all(r["value"] > 0 for r in rows) and not _driver._trace_active()
