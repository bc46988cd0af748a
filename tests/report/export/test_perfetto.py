"""Perfetto / Chrome-trace export: schema of every event, one process per rank, clock alignment, bounds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from stepscope.cli import main
from stepscope.report.export import perfetto
from stepscope.traces.kineto import read_raw_events, read_trace
from tests.conftest import TRACES, load

PHASES = {"X": {"name", "ph", "pid", "tid", "ts", "dur"}, "C": {"name", "ph", "pid", "ts", "args"},
          "M": {"name", "ph", "pid", "args"}, "s": {"ph", "pid", "tid", "ts", "id"},
          "f": {"ph", "pid", "tid", "ts", "id"}, "i": {"name", "ph", "pid", "ts"}}


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


def _source_counts(path: Path) -> tuple[int, int]:
    """Flow events and kernels with a grid arg in the source file, counted with the standard library."""
    import gzip

    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    flows = sum(1 for e in events if e.get("ph") in ("s", "f", "t"))
    kernels = sum(1 for e in events if e.get("cat") == "kernel" and "grid" in e.get("args", {}))
    return flows, kernels


def test_window_keeps_every_flow_event_and_the_kernel_args(profiled_store: Path) -> None:
    path = TRACES / "v100_1rank" / "rank0.json.gz"
    flows, kernels = _source_counts(path)
    assert flows == 23_234  # 6,401 + 15,023 launch arrows (ac2g) and 2 x 905 forward-backward links
    data = load(profiled_store)
    doc = perfetto.perfetto_trace(data, {0: read_trace(path, rank=0)}, {0: read_raw_events(path)})
    check_schema(doc)
    window = [e for e in doc["traceEvents"] if e["pid"] == perfetto.WINDOW_PID]
    assert sum(1 for e in window if e["ph"] in ("s", "f", "t")) == flows
    exported = [e for e in window if e.get("cat") == "kernel"]
    assert sum(1 for e in exported if "grid" in e.get("args", {})) == kernels > 0
    k = next(e for e in exported if "grid" in e["args"])
    assert {"grid", "block", "registers per thread", "correlation", "External id"} <= set(k["args"])
    # the same arrows: (phase, category, id) of every flow event as in the source
    src = read_raw_events(path)
    key = lambda e: (e["ph"], e.get("cat"), e["id"])  # noqa: E731
    assert sorted(key(e) for e in window if e["ph"] in "sft") == sorted(key(e) for e in src if e.get("ph") in "sft")


def test_profiler_step_names_are_kept_beside_step_numbers(profiled_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    assert main(["export", "--store", str(profiled_store), "--format", "perfetto", "-o", str(out)]) == 0
    ev = json.loads(out.read_text())["traceEvents"]
    prof = {e["name"] for e in ev if e["pid"] == perfetto.WINDOW_PID and str(e.get("name", "")).startswith(
        "ProfilerStep#")}
    steps = [e for e in ev if e["ph"] == "X" and e["pid"] == 0 and e["tid"] == perfetto.TID_STEPS]
    named = {e["args"]["profiler_step"]: e["name"] for e in steps if "profiler_step" in e["args"]}
    assert prof and set(named) == prof
    for prof_name, name in named.items():
        assert name.endswith(f" · {prof_name}") and name.startswith("step ")
