"""The notebook API on real runs and real traces: every DataFrame against the CLI's JSON for the same run or
trace, decoded columns against the stored codes, and the bad inputs' one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import stepscope
from stepscope.errors import NotFoundError, TraceError
from stepscope.model.tables import Phase, RegionTable, StepTable
from tests.conftest import TRACES, stepscope_cmd


def cli_json(*args: str) -> dict:  # type: ignore[type-arg]
    proc = subprocess.run(stepscope_cmd(*args), capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "STEPSCOPE_DB"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc: dict = json.loads(proc.stdout)  # type: ignore[type-arg]
    return doc


@pytest.fixture(scope="module")
def prof(nb_store: Path) -> stepscope.notebook.NotebookRun:
    return stepscope.load("prof", store=nb_store)


def test_to_pandas_decodes_phase_and_dictionary_columns() -> None:
    steps = StepTable.from_batches([{"index": [0, 1, 2], "start_ns": [10, 20, 35], "end_ns": [20, 35, 60],
                                     "phase": [Phase.TRAIN, Phase.VALIDATION, Phase.TRAIN]}])
    df = steps.to_pandas()
    assert list(df["phase"]) == ["train", "validation", "train"]
    assert list(df.columns) == list(StepTable.SCHEMA)  # schema order, nothing renamed but the decoded codes
    regions = RegionTable.from_batches([{"path": ["fwd", "fwd/attn", "fwd"], "start_ns": [1, 2, 3],
                                         "duration_ns": [5, 1, 4]}])
    rdf = regions.to_pandas()
    assert list(rdf["path"]) == ["fwd", "fwd/attn", "fwd"] and "path_code" not in rdf.columns
    assert rdf["path"].dtype == "category"
    assert regions.decoded("path_code") == ["fwd", "fwd/attn", "fwd"]


def test_steps_frame_against_show_json(prof, nb_store: Path) -> None:
    doc = cli_json("show", "prof", "--store", str(nb_store), "--json")
    df = prof.steps_df()
    assert len(df) == doc["headline"]["steps"] == 16
    assert set(df["phase"]) == {"train"} and list(df["index"]) == list(range(16))
    raw = prof.data.ranks[0].steps
    assert np.array_equal(df["duration_ns"].to_numpy(), raw["end_ns"] - raw["start_ns"])
    assert np.allclose(df["duration_s"], df["duration_ns"] / 1e9)
    assert df.loc[0, "duration_ns"] == doc["headline"]["first_step_ns"]
    st = doc["ranks"][0]["steps"]["step_time"]
    assert st["min"] in set(df["duration_ns"]) and st["max"] in set(df["duration_ns"])
    assert str(df["start"].dtype) == "datetime64[ns, UTC]"
    assert (df["start"].astype("int64") == df["start_ns"]).all()
    assert df["tokens"].isna().all()  # not measured: NaN, never 0


def test_region_metric_sample_and_rank_frames_against_show_json(prof, nb_store: Path) -> None:
    doc = cli_json("show", "prof", "--store", str(nb_store), "--json")
    r0 = doc["ranks"][0]
    stats = prof.region_stats_df().set_index("path")
    for reg in r0["regions"]:
        assert stats.loc[reg["path"], "p50_ns"] == pytest.approx(reg["time"]["p50"])
        assert stats.loc[reg["path"], "count"] == reg["time"]["count"]
    regions = prof.regions_df()
    for reg in r0["regions"]:  # every instance is a row; their count and sum are the summary's
        rows = regions[regions["path"] == reg["path"]]
        assert len(rows) == reg["time"]["count"] and rows["duration_ns"].sum() == reg["time"]["total"]
    metrics = prof.metrics_df()
    assert set(metrics["name"]) == {"loss", "lr"} and (metrics.loc[metrics["name"] == "lr", "value"] == 0.1).all()
    samples = prof.samples_df()
    for m in r0["system"]:
        assert samples[m["name"]].notna().sum() == m["samples"], m["name"]
        assert samples[m["name"]].max() == pytest.approx(m["peak"])
    ranks = prof.ranks_df()
    assert ranks.loc[0, "step_time_p50_ns"] == r0["steps"]["step_time"]["p50"]
    assert prof.comm_df().empty and list(prof.comm_df().columns)[:3] == ["rank", "op", "step"]


def test_trace_frames_against_trace_analyze_json(prof) -> None:
    [trace] = [Path(prof.data.path) / a for a in prof.data.artifacts if "traces/" in a]
    doc = cli_json("trace", "analyze", str(trace), "--json")["ranks"][0]
    ops = prof.operators_df().set_index("name")
    for o in doc["operators"]:
        assert ops.loc[o["name"], "calls"] == o["calls"]
        assert ops.loc[o["name"], "cpu_self_ns"] == o["cpu_self_ns"]
        assert ops.loc[o["name"], "cpu_total_ns"] == o["cpu_total_ns"]
    assert ops.loc["aten::addmm", "calls"] == 2 * 2  # 2 profiled steps x 2 Linear layers
    mods = prof.modules_df()
    assert list(mods["path"]) == ["/".join(m["path"]) for m in doc["modules"]]
    events = prof.events_df(0)
    assert len(events) == doc["events"]
    addmm = events[(events["name"] == "aten::addmm") & (events["kind"] == "cpu_op")]
    assert len(addmm) == 4  # the raw events, names decoded, count what the operator table counts
    assert (events["end_ns"] == events["ts_ns"] + events["dur_ns"]).all()


def test_trace_set_frames_against_trace_analyze_json() -> None:
    folder = TRACES / "v100_1rank"
    doc = cli_json("trace", "analyze", str(folder), "--json")["ranks"][0]
    ts = stepscope.load_traces(folder)
    assert ts.ranks == [0] and not ts.problems
    temporal = ts.temporal_df().iloc[0]
    for k, v in doc["temporal"].items():
        assert temporal[k] == pytest.approx(v), k
    idle = ts.idle_df()
    assert list(idle["kernel_wait_ns"]) == [s["kernel_wait_ns"] for s in doc["idle"]["streams"]]
    kernels = ts.kernels_df()
    assert len(kernels) == len(doc["kernels"]["by_kernel"])
    assert kernels["sum_ns"].sum() == sum(k["sum_ns"] for k in doc["kernels"]["by_kernel"])
    comps = ts.components_df().set_index("key")
    for c in doc["kernels"]["by_component"]:
        assert comps.loc[c["key"], "count"] == c["count"]
    events = ts.events_df(0)
    assert len(events) == doc["events"]
    table = ts.tables[0]
    assert list(events["name"]) == [table.names[c] for c in table["name"].tolist()]
    assert events["shape"].isna().sum() == (table["shape"] == -1).sum()  # -1: not recorded, missing
    assert events["kind"].isin(["kernel", "memcpy", "memset"]).sum() == doc["gpu_events"]
    assert events["kind"].isin(["kernel", "memcpy", "memset"]).sum() == kernels["count"].sum()
    util = ts.utilization_df().iloc[0]
    for k, v in doc["utilization"].items():
        assert util[k] == pytest.approx(v), k
    steps = ts.trace_steps_df()
    assert list(steps["step"]) == [s["step"] for s in doc["steps"]["steps"]]
    assert list(steps["dur_ns"]) == [s["dur_ns"] for s in doc["steps"]["steps"]]
    parts = [c for c in steps.columns if c.endswith("_ns") and c not in ("start_ns", "dur_ns")]
    assert (steps[parts].sum(axis=1) == steps["dur_ns"]).all()  # the breakdown adds up to the step
    assert steps["kernel_ns"].sum() == doc["steps"]["breakdown_total_ns"]["kernel"]
    assert ts.overlap_df().empty  # one rank, no communication kernels: no row (absent, not zero)


def test_overlap_frame_on_a_communicating_rank() -> None:
    doc = cli_json("trace", "analyze", str(TRACES / "a100_2rank_nccl"), "--json")["ranks"][0]
    row = stepscope.load_traces(TRACES / "a100_2rank_nccl").overlap_df().iloc[0]
    for k, v in doc["overlap"].items():
        assert row[k] == pytest.approx(v), k


def test_a_trace_set_with_an_unreadable_rank_names_it(tmp_path: Path) -> None:
    import shutil

    shutil.copy(TRACES / "v100_1rank" / "rank0.json.gz", tmp_path / "rank0.json.gz")
    (tmp_path / "rank1.json").write_text('{"traceEvents": [')
    ts = stepscope.load_traces(tmp_path)
    assert ts.ranks == [0] and len(ts.problems) == 1 and "rank1.json" in ts.problems[0]
    assert "rank1.json" in ts._repr_html_()
    with pytest.raises(TraceError, match="no such file"):
        stepscope.load_traces(tmp_path / "missing")


def test_load_by_run_directory_and_by_store_path(prof, nb_store: Path) -> None:
    by_dir = stepscope.load(prof.data.path)
    assert by_dir.data.run.id == prof.data.run.id
    latest = stepscope.load(nb_store)  # a store's path: its latest run
    assert latest.data.run.name == "plain"
    with pytest.raises(NotFoundError):
        stepscope.load("no-such-run", store=nb_store)
    with pytest.raises(NotFoundError, match="no table"):
        prof.df("nope")


def test_repr_html_shows_headline_and_top_advice(prof, nb_store: Path) -> None:
    html = prof._repr_html_()
    advice = cli_json("advise", "prof", "--store", str(nb_store), "--json")
    assert advice["findings"], "the run was made input-bound on purpose"
    assert advice["findings"][0]["title"] in html
    head = cli_json("show", "prof", "--store", str(nb_store), "--json")["headline"]
    assert f"{head['steps']} ({head['warmup_steps']})" in html  # steps (warm-up steps), as `show` counts them
    assert "<script>" not in html
    from stepscope.app import RunAnalysis
    from stepscope.notebook.run import run_repr_html

    assert run_repr_html(RunAnalysis(prof.data)) == html  # the function the lead binds to RunAnalysis
    adf = prof.advice_df()
    assert list(adf["rule_id"]) == [f["rule_id"] for f in advice["findings"]]


def test_diff_view_against_diff_json(prof, nb_store: Path) -> None:
    plain = stepscope.load("plain", store=nb_store)
    view = plain.diff(prof)
    doc = cli_json("diff", "plain", "prof", "--store", str(nb_store), "--json")
    ov = view.overview_df().set_index("key")
    for row in doc["overview"]:
        if isinstance(row["baseline"], float | int) and not isinstance(row["baseline"], bool):
            assert ov.loc[row["key"], "baseline"] == pytest.approx(row["baseline"]), row["key"]
    assert doc["verdict"] in view._repr_html_()


def test_without_pandas_one_line_saying_what_to_install(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['pandas'] = None\n"
            "import stepscope\n"
            "from stepscope.errors import UserError\n"
            f"ts = stepscope.load_traces({str(TRACES / 'v100_1rank')!r})\n"
            "try:\n    ts.kernels_df()\nexcept UserError as e:\n    print('USERERROR', e)\n"
            "from stepscope.model.tables import StepTable\n"
            "try:\n    StepTable.empty().to_pandas()\nexcept ImportError as e:\n    print('IMPORTERROR', e)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2
    for line in lines:
        assert "pip install 'stepscope[pandas]'" in line


def test_import_stepscope_stays_light() -> None:
    """The zero-code hooks import stepscope in every observed process: no pandas, pyarrow or analysis."""
    code = ("import sys, stepscope\n"
            "heavy = [m for m in ('pandas', 'pyarrow', 'stepscope.notebook', 'stepscope.app', 'stepscope.analyze',"
            " 'stepscope.report') if m in sys.modules]\n"
            "print(heavy)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    assert callable(stepscope.load) and callable(stepscope.load_traces)
    assert isinstance(pd.DataFrame(), pd.DataFrame)
