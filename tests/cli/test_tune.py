"""`stepscope tune` with real runs: on a loop whose step time is a known function of two command-line settings it
finds the designed optimum in fewer runs than the grid has cells (a sweep's one run a cell), and claims the gain
from its confirmation's fresh pairs; on a torch DataLoader it tunes settings the hooks apply without editing the
script; bad input is one line, exit 2, nothing stored. The comparison with a real `sweep` on the CosmoFlow-like
example is benchmarks/tune_vs_sweep.py."""

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
        (["--budget", "9", "--", sys.executable, STEPS], "need screen-pairs >= 2, 2 <= min-pairs <= max-pairs, a "
                                                          "budget of 10 or more"),
        (["--screen-pairs", "1", "--", sys.executable, STEPS], "need screen-pairs >= 2"),
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


def test_tune_finds_the_optimum_in_fewer_runs_than_the_grid_has_cells(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Step time 20 ms + 15 ms x |inter - 2| + 15 ms x |intra - 1|: best at inter=2, intra=1, its neighbours 43%
    slower. On the yardstick's 5 x 6 grid (30 cells: a sweep of one run a cell) tune starts from inter=1 intra=1
    (35 ms): the screen's first round (the start, inter 2 and intra 2, 2 pairs: 6 runs) moves inter to 2, its
    second finds inter 3 and intra 2 slower (6 runs); the confirmation's first look (3 fresh pairs) claims x1.75."""
    store = tmp_path / "store"
    grid = ["--param", "inter=1,2,3,4,6", "--param", "intra=1,2,3,4,6,8"]
    cmd = ["--", sys.executable, STEPS, "--steps", "8", "--inter", "{inter}", "--intra", "{intra}"]
    opts = ["--store", str(store), "--sample-interval", "0", "--warmup-steps", "2"]
    assert main(["tune", *opts, "--json", *grid, *cmd]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert doc["schema"] == "stepscope.tune/2" and doc["metric"] == "steps_per_s"  # no batch: steps/s
    assert doc["best"] == doc["screen_best"] == {"inter": "2", "intra": "1"}, doc["comparisons"]
    assert doc["runs"] == len(doc["run_ids"]) < 30
    conf = doc["confirmation"]
    assert conf["outcome"] == "better" and doc["runs"] - doc["screen_runs"] == 2 * conf["pairs"]
    # 35 ms -> 20 ms a step; the gain is the confirmation's ratio, not the screen's
    assert doc["claimed"] and doc["gain"] == conf["ratio"] and 1.4 < doc["gain"] < 2.1
    assert doc["gain_low"] <= doc["gain"] <= doc["gain_high"]
    assert doc["command"][-4:] == ["--inter", "2", "--intra", "1"]
    run = load(store, doc["run_ids"][-1])
    assert run.run.tags["tune"] == doc["group"] and run.run.tags["setting"].startswith("inter=")
    assert run.run.params.keys() == {"inter", "intra"}
    assert out.err.count("tune run ") == doc["runs"] and out.err.count("(confirm, ") == 2 * conf["pairs"]


def test_auto_settings_tune_the_dataloader_without_editing_the_script(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A Dataset sleeping 30 ms a sample (120 ms a batch) read with num_workers=0, and 80 ms of device work a step:
    200 ms a step, 80 ms once two workers keep ahead. The first run finds the loader, and the search moves
    num_workers up (the ladder skips one worker, which only moves a sleep-bound loader's wait), applied by the
    hooks without editing the script. Budget 15: the first run, one screened candidate (2 pairs) and the
    confirmation's two looks (3 and 5 pairs: a busy host's spread needs the second)."""
    store = tmp_path / "store"
    rc = main(["tune", "--store", str(store), "--sample-interval", "0", "--warmup-steps", "2", "--settings", "workers",
               "--budget", "15", "--max-pairs", "5", "--", sys.executable, LOADER, "--steps", "8", "--sleep", "0.03",
               "--compute", "0.08"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "tune run 1: as recorded (first run, as recorded)" in out.err
    best = next(ln for ln in out.out.splitlines() if ln.startswith("best setting:"))
    assert "num_workers=0" not in best and "over the start" in best and "confirmation's pairs" in best, out.out
    assert "  confirmation: num_workers=2 vs the start on fresh pairs" in out.out
    assert "DataLoader num_workers=" in out.out and "STEPSCOPE_OVERRIDES=" in out.out
