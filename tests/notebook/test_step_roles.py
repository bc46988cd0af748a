"""Every exported step row says what it is to the statistics (warm-up, profiled window, the profiler's write,
measured ...), in steps_df(), steps.csv and Parquet alike, and the documented one-liner rebuilds the headline
median from the frame."""

from __future__ import annotations

import csv
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

import stepscope
from tests.conftest import stepscope_cmd


@pytest.fixture(scope="module")
def prof(nb_store: Path) -> stepscope.notebook.NotebookRun:
    return stepscope.load("prof", store=nb_store)


def test_roles_follow_the_stored_records(prof) -> None:
    df = prof.steps_df()
    rank = prof.data.ranks[0]
    warm = prof.summary.ranks[0].steps.warmup_steps
    windows = rank.extra["profile_window"]
    traced = {i for w in windows for i in range(w.get("traced_first_step", w["first_step"]), w["last_step"] + 1)}
    carried = {r["carried_step"] for r in rank.extra.get("profile_boundary", []) + windows
               if isinstance(r.get("carried_step"), int)}
    counted = {r["step"] for r in rank.extra.get("flops", []) if isinstance(r.get("step"), int)}
    assert traced and warm > 0
    for idx, role in zip(df["index"], df["role"], strict=True):
        if idx < warm:
            assert role == "warmup", idx
        elif idx in carried:
            assert role == "profiler_write", idx
        elif idx in counted:
            assert role == "flop_count", idx
        elif idx in traced:
            assert role == "profiled", idx
        else:
            assert role == "measured", idx
    assert (df["role"] == "measured").sum() == prof.summary.ranks[0].steps.measured_steps


def test_one_liner_rebuilds_the_headline_median(prof) -> None:
    df = prof.steps_df()
    # the one-liner of docs/api.md, verbatim
    median = df[(df["rank"] == 0) & (df.role == "measured")].duration_ns.median()
    assert median == prof.summary.headline.step_time_median_ns
    assert df.duration_ns.median() != median or df.role.eq("measured").all()  # the roles make the difference


def test_csv_and_parquet_carry_the_role(prof, nb_store: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "STEPSCOPE_DB"}
    want = list(prof.steps_df()["role"])
    for fmt in ("csv", "parquet"):
        out = tmp_path / fmt
        proc = subprocess.run(stepscope_cmd("export", "prof", "--store", str(nb_store), "--format", fmt, "-o",
                                            str(out)), capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        if fmt == "csv":
            with open(out / "steps.csv", newline="") as fh:
                got = [row["role"] for row in csv.DictReader(fh)]
        else:
            got = list(pd.read_parquet(out / "steps.parquet")["role"])
        assert got == want, fmt


def test_findings_df_keeps_setup_values_as_text(nb_store: Path) -> None:
    base, exp = stepscope.load("prof", store=nb_store), stepscope.load("plain", store=nb_store)
    df = base.diff(exp).findings_df()
    setup = df[df.kind == "setup"].set_index("name")
    assert setup.loc["command", "baseline_text"] == " ".join(base.data.run.command)
    assert setup.loc["command", "experiment_text"] == " ".join(exp.data.run.command)
    assert "--steps 16" in setup.loc["command", "baseline_text"]
    assert df[df.kind != "setup"].baseline_text.isna().all()  # numeric rows keep their numbers in baseline
    assert pd.api.types.is_float_dtype(df.baseline.dtype)
