"""`stepscope sweep` with real runs: a 2 x 2 grid gives its heat map and best setting, and its failing
points are recorded as failed while the sweep goes on; a placeholder without --param stops before
anything runs, and so does a bad --heatmap."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from stepscope.cli import main
from tests.conftest import SCRIPTS, load

SCRIPT = str(SCRIPTS / "dist_steps.py")


def test_placeholder_without_param_fails_before_running(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    rc = main(["sweep", "--store", str(store), "--param", "batch=4,8", "--", sys.executable, SCRIPT,
               "--batch-size", "{batch}", "--workers", "{workers}"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "\n" not in err
    assert "{workers}" in err and "--param workers=" in err
    assert not store.exists()  # nothing ran, nothing was written
    assert main(["sweep", "--store", str(store), "--param", "batch", "--", sys.executable, SCRIPT]) == 2
    assert "expected NAME=V1,V2" in capsys.readouterr().err
    rc = main(["sweep", "--store", str(store), "--param", "batch=4,8", "--heatmap", "batch,workers", "--",
               sys.executable, SCRIPT, "--batch-size", "{batch}"])
    assert rc == 2 and "--heatmap batch,workers" in capsys.readouterr().err
    assert not store.exists()  # a bad --heatmap stops before the grid runs


def test_grid_heatmap_best_setting_and_failed_points(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    # --fail-at {batch}: batch 4 exits with code 3 at step 4 of 6 (a failed point), batch 16 trains
    rc = main(["sweep", "--store", str(store), "--sample-interval", "0", "--warmup-steps", "1",
               "--param", "sleep=2,20", "--param", "batch=4,16", "--json", "--", sys.executable, SCRIPT,
               "--steps", "6", "--sleep-ms", "{sleep}", "--batch-size", "{batch}", "--fail-at", "{batch}"])
    out = capsys.readouterr()
    assert rc == 1, out.err  # some point failed
    assert out.err.count("FAILED (exit code 3)") == 2 and "sleep=20 batch=16 repeat 1" in out.err
    doc = json.loads(out.out)
    assert doc["schema"] == "stepscope.sweep/1" and len(doc["failed"]) == 2
    cells = doc["heatmap"]["cells"]  # rows sleep 2, 20; columns batch 4, 16
    assert doc["heatmap"]["row_param"] == "sleep" and doc["heatmap"]["col_values"] == ["4", "16"]
    assert cells[0][0] is None and cells[1][0] is None  # batch 4 failed at both sleeps
    assert cells[0][1] > 2 * cells[1][1]  # 16 samples per ~2 ms step vs per ~20 ms step
    assert doc["best"]["values"] == {"sleep": "2", "batch": "16"}
    run = load(store, doc["best"]["run_ids"][0])
    assert run.run.params == {"sleep": "2", "batch": "16"} and run.run.tags["sweep"] == doc["group"]
    assert "--sleep-ms 2 --batch-size 16" in " ".join(run.run.command)
    html = tmp_path / "sweep.html"
    assert main(["sweep", "--store", str(store), "--group", doc["group"], "--html", str(html)]) == 1
    shown = capsys.readouterr().out
    assert "Heat map of samples_per_s: sleep (rows) × batch (columns)" in shown
    assert "best setting: sleep=2 batch=16" in shown
    assert "failed: sleep=2 batch=4 — 1 of 1 run(s)" in shown and "failed: sleep=20 batch=4" in shown
    assert 'data-kind="heatmap"' in html.read_text()
    assert main(["sweep", "--store", str(store), "--group", doc["group"], "--metric", "nope_per_s"]) == 2
    assert "--metric nope_per_s: no run of the sweep has it" in capsys.readouterr().err
