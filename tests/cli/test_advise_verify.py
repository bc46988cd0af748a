"""`stepscope advise RUN --verify` on real runs: the slow-DataLoader showcase (tests/scripts/verify_loader.py, a
Dataset whose __getitem__ sleeps, num_workers=0) gets its num_workers suggestion confirmed by interleaved A/B
pairs with an interval that excludes no saving; the pairs are stored as a group and shown by `advise`. A run
that cannot be re-run gets one line and exit 2, and nothing is stored."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import PY, SCRIPTS, Result, load, stepscope_cmd

SHOWCASE = ("--steps", "14", "--sleep", "0.01", "--batch-size", "8")


def _counts(store: Path) -> tuple[int, int]:
    """(runs, groups) in the store's index, and run directories on disk must agree with the runs."""
    con = sqlite3.connect(store / "index.sqlite")
    try:
        runs = con.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        groups = con.execute("SELECT COUNT(*) FROM run_groups").fetchone()[0]
    finally:
        con.close()
    assert len([p for p in (store / "runs").iterdir() if p.is_dir()]) == runs
    return int(runs), int(groups)


def test_verify_confirms_num_workers_on_the_slow_loader(cli: Callable[..., Result], store: Path) -> None:
    r = cli("run", "--quiet", "--sample-interval", "0.2", "--", PY, str(SCRIPTS / "verify_loader.py"), *SHOWCASE)
    assert r.rc == 0, r
    run_id = load(store).run.id
    advice = json.loads(cli("advise", run_id, "--json").out)
    wait = next(f for f in advice["findings"] if f["rule_id"] == "input-bound")
    n = max(1, min(4, os.cpu_count() or 1))  # 0 workers: one per core for the one process, at most 4
    assert wait["change"] == {"kind": "loader", "key": "num_workers", "value": n,
                              "label": f"DataLoader num_workers={n}"}, wait
    # at most 10 sequential pairs: on a 2-core host at load 9 the workers' own CPU makes B's step time vary by
    # tens of percent; a quiet host decides at the first look (3 pairs)
    v = cli("advise", run_id, "--verify", "--repeat", "10", "--rule", "input-bound", "--json", "--quiet-runs",
            timeout=1200)
    assert v.rc == 0, v
    doc = json.loads(v.out)
    (o,) = doc["outcomes"]
    assert o["suggestion"]["changes"][0]["key"] == "num_workers"
    # the realised saving, derived from the stored runs' own step times, is what the outcome says
    a = [load(store, i) for i in o["runs_a"]]
    b = [load(store, i) for i in o["runs_b"]]
    assert len(a) == len(b) == o["pairs"] and o["pairs"] in (3, 5, 8, 10)  # stopped at a planned look
    assert o["confidence"] == pytest.approx(1 - 0.01 / 4)  # bench's 1% split over the 4 looks
    assert all(d.run.tags["verify"] == run_id and d.run.group == doc["group"] for d in a + b)
    assert all(d.ranks[0].extra.get("override") is None for d in a)
    for d in b:  # B ran with the workers: the hooks applied and recorded the override
        (ov,) = d.ranks[0].extra["override"]
        assert ov["key"] == "num_workers" and ov["applied"] == 1 and ov["was"] == [0]
    assert o["verdict"] == "confirmed", o
    assert o["ci_high"] < 1.0 and o["saving_low_s"] > 0, o  # the interval excludes "no saving"
    assert 0 < o["saving_s_per_step"] < o["baseline_step_s"]
    # `advise` shows the stored verification after the recommendations
    shown = cli("advise", run_id, "--width", "200")
    assert "Verified advice of run " + run_id in shown.out and "confirmed" in shown.out, shown.out
    assert json.loads(cli("advise", run_id, "--json").out)["verifications"][0]["group"] == doc["group"]
    page = store.parent / "report.html"
    assert cli("report", run_id, "-o", str(page)).rc == 0
    html = page.read_text(encoding="utf-8")
    assert f'data-group="{doc["group"]}"' in html and '<tr data-verdict="confirmed">' in html
    assert cli("report", o["runs_b"][0], "-o", str(page)).rc == 0  # a B run says it ran with the override
    assert "loader num_workers = 2: applied (the code&#x27;s: 0)" in page.read_text(encoding="utf-8")
    site = store.parent / "site"  # the dashboard's copy of the run's report has the section too
    assert cli("dashboard", "build", "-o", str(site), "--reports", "20").rc == 0
    assert f'data-group="{doc["group"]}"' in (site / "runs" / f"{run_id}.html").read_text(encoding="utf-8")


def _script(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / "train.py"
    p.write_text(body)
    return p


PLAIN = "import stepscope\nfor _ in range(3):\n    stepscope.step()\n"


def test_runs_that_cannot_be_rerun_get_one_line_and_exit_2(cli: Callable[..., Result], store: Path,
                                                           tmp_path: Path) -> None:
    work = tmp_path / "work"
    _script(work, PLAIN)
    assert cli("run", "--quiet", "--", PY, "train.py", cwd=work).rc == 0
    gone_script = load(store).run.id
    gone = tmp_path / "gone"
    _script(gone, PLAIN)
    assert cli("run", "--quiet", "--", PY, "train.py", cwd=gone).rc == 0
    gone_cwd = load(store).run.id
    killed_dir = tmp_path / "killed"
    _script(killed_dir, "import os, signal\nimport stepscope\nstepscope.step()\nos.kill(os.getpid(), signal.SIGKILL)\n")
    assert cli("run", "--quiet", "--", PY, "train.py", cwd=killed_dir).rc in (137, -9)  # dies as its child
    killed = load(store).run.id
    (work / "train.py").unlink()
    shutil.rmtree(gone)
    before = _counts(store)
    cases = {gone_script: "script train.py is gone", gone_cwd: "which is gone", killed: "was killed"}
    for run_id, words in cases.items():
        r = cli("advise", run_id, "--verify", "--repeat", "2")
        assert r.rc == 2, r
        lines = r.err.strip().splitlines()
        assert len(lines) == 1 and words in lines[0] and "Traceback" not in r.err, r
    bad = cli("advise", killed, "--verify", "--repeat", "1")
    assert bad.rc == 2 and "at least 2" in bad.err, bad
    assert _counts(store) == before  # nothing stored: no run, no group


def test_a_running_run_is_not_rerun(cli: Callable[..., Result], store: Path, tmp_path: Path) -> None:
    work = tmp_path / "live"
    _script(work, "import sys, time\nimport stepscope\nstepscope.step()\nsys.stdin.read()\n")
    env = {k: v for k, v in os.environ.items() if k != "STEPSCOPE_DB"}
    proc = subprocess.Popen(stepscope_cmd("run", "--store", str(store), "--quiet", "--", PY, "train.py"), cwd=work,
                            env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not list((store / "runs").glob("*/ranks/*")) and time.monotonic() < deadline:
            time.sleep(0.2)  # until the child has recorded its step
        run_id = next((store / "runs").iterdir()).name
        before = _counts(store)
        r = cli("advise", run_id, "--verify", "--repeat", "2")
        assert r.rc == 2 and f"run {run_id} is still running" in r.err, r
        assert len(r.err.strip().splitlines()) == 1 and _counts(store) == before
    finally:
        proc.communicate(b"", timeout=60)
    assert proc.returncode == 0


def test_reruns_have_the_recorded_environment_and_the_change(cli: Callable[..., Result], store: Path,
                                                             tmp_path: Path) -> None:
    """A as recorded (a thread variable of today's shell that the run did not have is left out), B with the
    --change set; both in the run's working directory, which differs from where verify is called."""
    work = tmp_path / "work"
    _script(work, "import os, time\nimport stepscope\nfor _ in range(6):\n    time.sleep(0.01)\n"
                  "    stepscope.step()\nprint(os.getcwd(), os.environ.get('OMP_NUM_THREADS'))\n")
    assert cli("run", "--quiet", "--", PY, "train.py", cwd=work, env={"NCCL_DEBUG": "INFO"}).rc == 0
    base = load(store).run
    assert base.extra["env"].get("NCCL_DEBUG") == "INFO" and "OMP_NUM_THREADS" not in base.extra["env"]
    v = cli("advise", base.id, "--verify", "--repeat", "2", "--change", "env:OMP_NUM_THREADS=1", "--json",
            env={"OMP_NUM_THREADS": "3"})
    assert v.rc == 0, v
    (o,) = json.loads(v.out)["outcomes"]
    assert o["suggestion"]["label"] == "OMP_NUM_THREADS=1" and o["verdict"] in ("not confirmed", "cannot tell")
    assert v.err.count(f"{work} None") == 2 and v.err.count(f"{work} 1") == 2  # the children: --json, to stderr
    for i in o["runs_a"]:
        assert load(store, i).run.extra["env"] == {"NCCL_DEBUG": "INFO"}
    for i in o["runs_b"]:
        assert load(store, i).run.extra["env"] == {"NCCL_DEBUG": "INFO", "OMP_NUM_THREADS": "1"}
