"""`stepscope diff` on real runs: identical script -> no significant change, a 10% sleep -> slower and named
first, bad input -> one line; and on the fixture trace pair."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stepscope.cli import main

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "diff_train.py"
PAIR = Path(__file__).resolve().parents[2] / "tests" / "data" / "traces" / "a100_8rank_diff"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three real runs, one after the other: base and same (the unchanged script twice) and slow (sleeps 10%
    of each step's own time). Steps are dominated by a 20 ms wait, as a GPU-bound step's host is, so CPU
    contention from other jobs on a shared machine moves them little."""
    root = tmp_path_factory.mktemp("diffruns")
    common = ["--wait", "0.02", "--width", "8", "--steps", "80"]
    variants = {"base": common, "same": common, "slow": [*common, "--slow-pct", "10"]}
    env = {k: v for k, v in os.environ.items() if k not in ("STEPSCOPE_HOME", "STEPSCOPE_DB")}
    for name, extra in variants.items():
        p = subprocess.run([sys.executable, "-m", "stepscope", "run", "--store", str(root / name), "--quiet",
                            "--sample-interval", "0.2", "--flops-per-step", "0", "--", sys.executable, str(SCRIPT),
                            *extra], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300)
        assert p.returncode == 0, (name, p.stderr[-2000:])
    return {name: next((root / name / "runs").iterdir()) for name in variants}


def _diff_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:  # type: ignore[type-arg]
    assert main(["diff", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _row(doc: dict, key: str) -> dict:  # type: ignore[type-arg]
    return next(r for r in doc["overview"] if r["key"] == key)


def test_unchanged_script_twice_is_no_significant_change(runs: dict[str, Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # On a shared machine the load differs between two runs made one after the other; their step times
    # then really differ by a few per cent (up to ~4% seen with 6 other jobs running), which the default 2%
    # threshold rightly reports. This check uses a 5% practical threshold; the 10% slowdown below is judged
    # at the default 2%.
    doc = _diff_json(capsys, str(runs["base"]), str(runs["same"]), "--threshold", "5")
    step = _row(doc, "step_time_median_ns")
    assert step["change"]["verdict"] == "no_significant_change", step
    assert doc["findings"][0]["kind"] == "step_time"
    assert doc["settings"]["threshold"] == 0.05 and "Mann-Whitney" in doc["settings"]["test"]
    assert not doc["context"]  # same command, model, data loader
    assert doc["schema"] == "stepscope.diff/1"


def test_ten_percent_sleep_is_slower_and_named_first(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    from stepscope.store.rundir import read_run

    doc = _diff_json(capsys, str(runs["base"]), str(runs["slow"]))
    step = _row(doc, "step_time_median_ns")
    assert step["change"]["verdict"] == "slower", step
    assert step["change"]["ratio"] > 1.05
    head = doc["findings"][0]
    assert head["kind"] == "step_time" and head["verdict"] == "slower"
    parts = [f for f in doc["findings"] if f["kind"] in ("phase", "region")]
    # the new region is named first; its sleep lies outside every measured phase, so the "other" phase grows
    # by the same amount and may rank level with it (noise decides): then it must be the region's time
    top = {p["name"]: p for p in parts[:2]}
    assert "extra" in top and top["extra"]["baseline"] is None
    if parts[0]["name"] == "other":
        other_delta = parts[0]["experiment"] - parts[0]["baseline"]
        assert 0.5 * top["extra"]["experiment"] < other_delta < 2 * top["extra"]["experiment"]
    # the region's mean per step, derived from the stored records independently of the diff
    slow = read_run(runs["slow"]).ranks[0]
    extra = slow.regions.mask_of("extra")
    assert extra.sum() >= 70
    row = next(r for r in doc["breakdown"] if r["name"] == "extra")
    assert row["presence"] == "only in experiment"
    stored_mean = slow.regions["duration_ns"][extra].mean()
    assert 0.5 * stored_mean < row["experiment_ns"] < 2 * stored_mean
    assert any(c["key"] == "command" for c in doc["context"])
    assert "not profiled" in doc["trace_note"] and "--profile-steps" in doc["trace_note"]
    trends = {t["key"]: t for t in doc["trends"]}
    assert trends["cumulative_time"]["baseline"]["y"][-1] > 0 and "logged.loss" in trends


def test_terminal_names_the_change_first(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(runs["base"]), str(runs["slow"]), "--width", "160"]) == 0
    out = capsys.readouterr().out
    assert out.index("SLOWER") < out.index("region extra") < out.index("Overview")
    assert "only in experiment" in out and "Traceback" not in out


def test_run_with_itself(runs: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    doc = _diff_json(capsys, str(runs["base"]), str(runs["base"]))
    assert any("with itself" in m for m in doc["messages"])
    base = str(runs["base"])
    assert main(["diff", base, base, "--html", base]) == 2  # a folder: cannot be written
    err = capsys.readouterr().err
    assert err.startswith("stepscope: error: cannot write") and len(err.strip().splitlines()) == 1
    assert all(r["delta"] in (0, None) for r in doc["overview"])
    assert _row(doc, "step_time_median_ns")["change"]["verdict"] == "no_significant_change"


def test_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["diff", str(empty), str(empty), "--store", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "no .json or .json.gz trace" in err and len(err.strip().splitlines()) == 1
    assert main(["diff", "nosuchrun", "latest", "--store", str(tmp_path / "s")]) != 0
    err = capsys.readouterr().err
    assert err.startswith("stepscope: error:") and "Traceback" not in err
    assert main(["diff", str(empty), str(empty), "--threshold", "-1"]) == 2


def test_fixture_trace_pair(capsys: pytest.CaptureFixture[str]) -> None:
    doc = _diff_json(capsys, str(PAIR / "control_rank3.json.gz"), str(PAIR / "test_rank3.json.gz"))
    assert doc["baseline"]["kind"] == "traces" and doc["world"] == "per_rank_and_totals"
    assert any("world sizes differ (8 vs 2)" in m for m in doc["messages"])
    setup = {f["name"]: f for f in doc["findings"] if f["kind"] == "setup"}
    assert "A100" in setup["device"]["baseline_text"] and "V100" in setup["device"]["experiment_text"]
    assert doc["findings"][0]["kind"] == "step_time"
    kernels = doc["traces"]["kernels"]
    assert abs(kernels[0]["delta"]) == max(abs(k["delta"]) for k in kernels)
