"""`stepscope tune` with real runs: on a loop whose step time is a known function of two command-line settings it
picks the setting `sweep` finds best (or one within sweep's own noise), in fewer runs; on a torch DataLoader it
tunes settings the hooks apply without editing the script; bad input is one line, exit 2, nothing stored."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from stepscope.cli import main
from tests.conftest import SCRIPTS, load

STEPS = str(SCRIPTS / "tune_steps.py")
LOADER = str(SCRIPTS / "verify_loader.py")


def _runs(store: Path) -> list[Path]:
    return list((store / "runs").glob("*")) if (store / "runs").exists() else []


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    cases = [
        ([], "no command to run"),
        (["--param", "inter", "--", sys.executable, STEPS, "--inter", "{inter}"], "expected NAME=V1,V2"),
        (["--param", "inter=", "--", sys.executable, STEPS, "--inter", "{inter}"], "expected NAME=V1,V2"),
        (["--settings", "cores", "--", sys.executable, STEPS], "--settings cores"),
        (["--param", "depth=1,2", "--", sys.executable, STEPS], "no {depth} placeholder and no --depth"),
        (["--budget", "2", "--", sys.executable, STEPS], "need a budget of 4 or more"),
        (["--", str(tmp_path / "missing.py")], "no such executable file"),
    ]
    for argv, words in cases:
        rc = main(["tune", "--store", str(store), *argv])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and words in err and "\n" not in err and "Traceback" not in err, (argv, err)
    assert not _runs(store)


def test_a_command_failing_on_its_first_run_names_its_exit_code_and_last_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    for extra in ([], ["--param", "inter=1,2"]):  # the first run is the probe, or the search's first
        rc = main(["tune", "--store", str(store), "--sample-interval", "0", *extra, "--", sys.executable, STEPS,
                   "--fail", *(["--inter", "{inter}"] if extra else [])])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and err[-1].startswith("stepscope: error: the command failed on its first run (exit code 5)")
        assert "tune_steps: cannot open the data set" in err[-1] and "nothing was stored" in err[-1]
        assert not _runs(store)


def test_tune_finds_sweeps_best_in_fewer_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Step time 20 ms + 15 ms x |inter - 2| + 15 ms x |intra - 1|: best at inter=2, intra=1, its neighbours 43%
    slower; sweep runs 3 x 3 settings 3 times each, tune starts from inter=0, intra=1. Each of tune's moves is a
    verdict at 99% over the search, which takes 3 pairs at the least, so sweep gets as many repeats."""
    store = tmp_path / "store"
    grid = ["--param", "inter=0,1,2", "--param", "intra=1,2,3"]
    cmd = ["--", sys.executable, STEPS, "--steps", "10", "--inter", "{inter}", "--intra", "{intra}"]
    opts = ["--store", str(store), "--sample-interval", "0", "--warmup-steps", "2"]
    assert main(["sweep", *opts, "--repeat", "3", "--metric", "step_time_median_s", "--json", *grid, *cmd]) == 0
    sweep = json.loads(capsys.readouterr().out)
    sweep_runs = sum(p["runs"] for p in sweep["points"])
    assert main(["tune", *opts, "--json", *grid, *cmd]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert doc["schema"] == "stepscope.tune/1" and doc["metric"] == "steps_per_s"  # no batch: steps/s
    best = next(p for p in sweep["points"] if p["values"] == doc["best"])
    top = sweep["best"]
    # tune's setting is sweep's best, or within sweep's own noise of it (two standard deviations)
    assert best["values"] == top["values"] or \
        abs(best["mean"] - top["mean"]) <= 2 * max(best["std"], top["std"]), (doc["best"], top)
    assert doc["runs"] == len(doc["run_ids"]) < sweep_runs == 27
    assert doc["gain"] > 1.5 and doc["gain_low"] <= doc["gain"] <= doc["gain_high"]  # 50 ms -> 20 ms a step
    assert doc["command"][-4:] == ["--inter", doc["best"]["inter"], "--intra", doc["best"]["intra"]]
    run = load(store, doc["run_ids"][-1])
    assert run.run.tags["tune"] == doc["group"] and run.run.tags["setting"].startswith("inter=")
    assert run.run.params.keys() == {"inter", "intra"}
    assert out.err.count("tune run ") == doc["runs"]


def test_auto_settings_tune_the_dataloader_without_editing_the_script(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Dataset sleeping 15 ms a sample, read with num_workers=0: the first run finds the loader, and the search
    moves num_workers up (two workers load two batches at once; the ladder skips one worker, which only moves a
    sleep-bound loader's wait), applied by the hooks without editing the script. Budget 11: the first run and 5
    pairs, the most a move at 99% may need before its second look."""
    store = tmp_path / "store"
    rc = main(["tune", "--store", str(store), "--sample-interval", "0", "--settings", "workers", "--budget", "11",
               "--", sys.executable, LOADER, "--steps", "12", "--sleep", "0.015"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "tune run 1: as recorded (first run, as recorded)" in out.err
    best = next(ln for ln in out.out.splitlines() if ln.startswith("best setting:"))
    assert "num_workers=0" not in best and "over the start" in best, out.out
    assert "DataLoader num_workers=" in out.out and "STEPSCOPE_OVERRIDES=" in out.out
