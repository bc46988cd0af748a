"""Perfetto / Chrome-trace export: schema of every event, one process per rank, clock alignment, bounds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from stepscope.cli import main
from stepscope.report.export import perfetto
from tests.conftest import load

PHASES = {"X": {"name", "ph", "pid", "tid", "ts", "dur"}, "C": {"name", "ph", "pid", "ts", "args"},
          "M": {"name", "ph", "pid", "args"}}


def check_schema(doc: dict) -> None:  # type: ignore[type-arg]
    """The Chrome trace event format's rules that ui.perfetto.dev relies on."""
    assert isinstance(doc["traceEvents"], list) and doc["displayTimeUnit"] in ("ms", "ns")
    for ev in doc["traceEvents"]:
        assert PHASES[ev["ph"]] <= set(ev), ev
        assert isinstance(ev["pid"], int)
        if ev["ph"] == "X":
            assert isinstance(ev["tid"], int) and ev["dur"] >= 0 and isinstance(ev["ts"], float | int)
        if ev["ph"] == "C":
            assert all(isinstance(v, float | int) for v in ev["args"].values())
        if ev["ph"] == "M":
            assert ev["name"] in ("process_name", "thread_name", "process_sort_index")


def test_export_cli_writes_one_valid_file(profiled_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    assert main(["export", "--store", str(profiled_store), "--format", "perfetto", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    check_schema(doc)
    data = load(profiled_store)
    steps = data.ranks[0].steps
    ev = doc["traceEvents"]
    slices = [e for e in ev if e["ph"] == "X" and e["pid"] == 0 and e["tid"] == perfetto.TID_STEPS]
    assert len(slices) == len(steps)
    t0 = data.run.start_ns
    assert slices[0]["ts"] == pytest.approx((steps["start_ns"][0] - t0) / 1e3, abs=1e-3)
    assert {e["name"] for e in ev if e["ph"] == "C"} >= {"cpu_process_pct", "metric loss"}
    regions = [e for e in ev if e["ph"] == "X" and e["pid"] == 0 and e["tid"] == perfetto.TID_REGIONS]
    assert len(regions) == len(data.ranks[0].regions)
    # the profiled window sits inside the steps it profiled (same clock)
    window = [e for e in ev if e["pid"] == perfetto.WINDOW_PID and e["ph"] == "X"]
    assert window and doc["otherData"]["window_clock_alignment"]["rank0"].startswith("ProfilerStep")
    prof = [e for e in window if e["name"].startswith("ProfilerStep#")]
    for p in prof:
        inside = [s for s in slices if s["ts"] - 2e3 <= p["ts"] <= s["ts"] + s["dur"]]
        assert inside, p
    assert doc["otherData"]["downsampling"]["rank0.steps"]["every"] == 1


def test_down_sampling_is_bounded_and_stated(profiled_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = load(profiled_store)
    monkeypatch.setattr(perfetto, "MAX_SLICES", 5)
    monkeypatch.setattr(perfetto, "MAX_COUNTER_POINTS", 3)
    doc = perfetto.perfetto_trace(data)
    check_schema(doc)
    n = len(data.ranks[0].steps)
    kept = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["tid"] == perfetto.TID_STEPS]
    info = doc["otherData"]["downsampling"]["rank0.steps"]
    assert len(kept) == info["kept"] <= 5 and info["total"] == n and info["every"] == int(np.ceil(n / 5))
    cpu = [e for e in doc["traceEvents"] if e["ph"] == "C" and e["name"] == "cpu_process_pct"]
    assert len(cpu) <= 3


def test_unwritable_output_is_one_line_error(profiled_store: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc = main(["export", "--store", str(profiled_store), "--format", "perfetto", "-o", str(blocker / "run.json")])
    err = capsys.readouterr().err
    assert rc != 0 and err.count("\n") == 1 and "cannot write" in err
