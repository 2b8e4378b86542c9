# SPDX-License-Identifier: MIT
"""The benchmark driver: table, JSON round trip and the launch chart (no GPU needed)."""

import json

from barecuda import bench

ROWS = [
    dict(section="launch", name="launch __call__, empty kernel, 4 args", value=3.0, unit="us",
         ratio=1.05, vs="C floor", note=None),
    dict(section="launch", name="CuPy RawKernel launch, 4 args", value=4.8, unit="us",
         ratio=1.65, vs="C floor", note=None),
    dict(section="copies", name="htod pinned 4 KiB latency", value=7.3, unit="us",
         ratio=0.98, vs="C loop", note=None),
]


def test_table_lists_every_row():
    table = bench.format_table(ROWS, [{"section": "x", "error": "boom"}])
    for r in ROWS:
        assert r["name"] in table
    assert "ERROR in section x: boom" in table


def test_launch_chart(tmp_path):
    svg = bench.launch_chart_svg(ROWS)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "C floor" in svg and "barecuda __call__" in svg and "CuPy RawKernel" in svg
    assert "2.86" in svg  # the floor: 3.0 / 1.05
    assert bench.launch_chart_svg(ROWS[2:]) is None


def test_svg_from_an_earlier_json(tmp_path):
    src = tmp_path / "bench.json"
    src.write_text(json.dumps({"environment": {}, "rows": ROWS, "errors": []}))
    out = tmp_path / "launch.svg"
    assert bench.main(["--from-json", str(src), "--svg", str(out)]) == 0
    assert "barecuda __call__" in out.read_text()


def test_interleaved_times_alternates_and_times_each_function():
    import time

    import pytest
    calls, synced = [], []
    fns = [lambda: calls.append(0), lambda: (calls.append(1), time.sleep(0.002))]
    syncs = [lambda: synced.append(0), None]
    t = bench.interleaved_times(fns, syncs, iterations=1, rounds=3, warmup=2)
    assert calls == [0, 0, 1, 1] + [0, 1] * 3          # warm-up, then one loop each per round
    assert synced == [0] * 4                             # after the warm-up and each loop
    assert len(t) == 2 and 0 <= t[0] < 0.002 <= t[1]
    with pytest.raises(ValueError, match="2 functions but 1 syncs"):
        bench.interleaved_times(fns, syncs[:1])
