"""Issue 44, item 8: the pages of a run still running say "running", never that a rank was killed. A real observed
training runs while `show`, `show --json` and `report` read it; its ranks have no end record yet, as every running
run's ranks have (before: "rank 0 ended without its end record (killed)")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import PY, stepscope_cmd
from tests.faults.test_collect_disk_full import SCRIPT

pytestmark = pytest.mark.slow


def _cli(store: Path, *args: str) -> str:
    env = {**os.environ, "STEPSCOPE_HOME": str(store), "COLUMNS": "200"}
    env.pop("STEPSCOPE_DB", None)
    out = subprocess.run(stepscope_cmd(*args, "--store", str(store)), capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stdout + out.stderr
    return out.stdout


def test_a_running_runs_pages_say_running_not_killed(store: Path, tmp_path: Path) -> None:
    env = {**os.environ, "STEPSCOPE_HOME": str(store)}
    env.pop("STEPSCOPE_DB", None)
    job = subprocess.Popen(stepscope_cmd("run", "--quiet", "--sample-interval", "0", "--", PY, SCRIPT, "--steps",
                                         "3000", "--sleep", "0.02"), env=env, cwd=tmp_path,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:  # until a rank has flushed steps
            files = list(store.glob("runs/*/ranks/rank-*.jsonl"))
            if files and b'"steps"' in files[0].read_bytes():
                break
            time.sleep(0.3)
        else:
            pytest.fail("the run flushed no steps within 90 s")
        summary = json.loads(_cli(store, "show", "latest", "--json"))
        assert summary["run"]["status"] == "running"
        assert not [w for w in summary["warnings"] if "killed" in w or "without its end record" in w], summary
        text = _cli(store, "show", "latest")
        assert "running" in text and "killed" not in text and "without its end record" not in text
        report = tmp_path / "r.html"
        _cli(store, "report", "latest", "-o", str(report))
        html = report.read_text()
        assert "still running" in html and "without its end record (" not in html and "(killed)" not in html
        assert job.poll() is None  # all of it read while the run was running
    finally:
        job.send_signal(signal.SIGTERM)
        job.wait(timeout=60)
