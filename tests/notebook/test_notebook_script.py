"""The notebook tour (examples/notebook_tour.py) on a stored profiled run and a fixture trace set: what its
DataFrames show is what `stepscope show --json`, `advise --json` and `trace analyze --json` say."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, PY, TRACES, stepscope_cmd

TOUR = EXAMPLES / "notebook_tour.py"
TRACE_SET = TRACES / "a100_2rank_nccl"


def run_json(cmd: list[str]) -> dict:  # type: ignore[type-arg]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "STEPSCOPE_DB"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc: dict = json.loads(proc.stdout)  # type: ignore[type-arg]
    return doc


def test_the_tour_shows_what_the_cli_says(nb_store: Path) -> None:
    tour = run_json([PY, str(TOUR), "prof", "--store", str(nb_store), "--traces", str(TRACE_SET)])
    show = run_json(stepscope_cmd("show", "prof", "--store", str(nb_store), "--json"))
    advise = run_json(stepscope_cmd("advise", "prof", "--store", str(nb_store), "--json"))
    assert tour["run_id"] == show["run"]["id"]
    assert tour["steps"] == show["headline"]["steps"] and tour["phases"] == ["train"]
    assert tour["first_step_ns"] == show["headline"]["first_step_ns"]
    r0 = show["ranks"][0]
    st = r0["steps"]["step_time"]
    assert st["min"] in tour["step_durations_ns"] and st["max"] in tour["step_durations_ns"]
    assert tour["slowest_step_s"] == pytest.approx(max(tour["step_durations_ns"]) / 1e9)
    for reg in r0["regions"]:
        assert tour["region_totals_ns"][reg["path"]] == reg["time"]["total"]
        assert tour["region_p50_ns"][reg["path"]] == pytest.approx(reg["time"]["p50"])
    assert tour["step_time_p50_ns"] == st["p50"]
    rss = next(m for m in r0["system"] if m["name"] == "rss_bytes")
    assert tour["rss_peak_bytes"] == rss["peak"]
    assert tour["metric_names"] == ["loss", "lr"]
    assert tour["advice"] == [f["rule_id"] for f in advise["findings"]]
    assert {"steps", "regions", "samples", "metrics", "comm", "kernels", "operators", "modules", "temporal", "idle",
            "overlap"} <= set(tour["tables"])

    run_dir = next(p for p in (nb_store / "runs").iterdir() if p.name == show["run"]["id"])
    [trace] = list(run_dir.rglob("rank0.json.gz"))
    window = run_json(stepscope_cmd("trace", "analyze", str(trace), "--json"))["ranks"][0]
    assert tour["operator_calls"] == {o["name"]: o["calls"] for o in window["operators"]}
    assert tour["modules"] == ["/".join(m["path"]) for m in window["modules"]]
    assert tour["events"] == window["events"] and tour["addmm_events"] == 4

    traces = run_json(stepscope_cmd("trace", "analyze", str(TRACE_SET), "--json"))
    seen = tour["traces"]
    assert seen["ranks"] == [r["rank"] for r in traces["ranks"]]
    for r in traces["ranks"]:
        k = str(r["rank"])
        assert seen["idle_pct"][k] == pytest.approx(r["temporal"]["idle_pct"])
        assert seen["window_ns"][k] == r["temporal"]["window_ns"]
        assert seen["top_kernel"][k] == max(r["kernels"]["by_kernel"], key=lambda s: s["sum_ns"])["key"]
        assert seen["kernel_count"][k] == sum(s["count"] for s in r["kernels"]["by_kernel"])
        assert seen["host_wait_ns"][k] == r["idle"]["totals"]["host_wait_ns"]
        assert seen["exposed_comm_ns"][k] == r["overlap"]["exposed_ns"]
        assert seen["events"][k] == r["events"]
