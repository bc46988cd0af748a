"""`stepscope advise RUN --verify` on real runs: the slow-DataLoader showcase (tests/scripts/verify_loader.py, a
Dataset whose __getitem__ sleeps, num_workers=0) gets its num_workers suggestion confirmed by interleaved A/B
pairs with an interval that excludes no saving; the pairs are stored as a group and shown by `advise`. A run
that cannot be re-run gets one line and exit 2, and nothing is stored."""

from __future__ import annotations

import json
import math
import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats

from stepscope.cli.common import as_store
from stepscope.cli.verify import stored_outcomes as _stored
from tests.conftest import PY, SCRIPTS, Result, load, stepscope_cmd

SHOWCASE = ("--steps", "14", "--sleep", "0.05", "--batch-size", "1", "--compute", "0.04")
"""A batch (one sample) loads in 50 ms, a step computes 40 ms: 90 ms a step in the process, 40 ms with 2 workers or
more. The workers stay ahead with room to spare, so B's steps do not alternate between waiting and finding a batch
ready, and one sample a batch keeps their wake-ups and transfers few: on 2 cores at a load of 5 the per-pair ratios
were 0.457 to 0.467, decided at the first look (3 pairs)."""


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
    # at most 10 sequential pairs: a quiet or moderately loaded host decides at the first look (3 pairs); the
    # later looks are for a host so loaded that the workers fall behind
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
    assert f"loader num_workers = {n}: applied (the code&#x27;s: 0)" in page.read_text(encoding="utf-8")
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
    failing = tmp_path / "failing"
    _script(failing, "import sys\nimport stepscope\nstepscope.step()\nsys.exit(3)\n")
    assert cli("run", "--quiet", "--", PY, "train.py", cwd=failing).rc == 3
    failed = load(store).run.id
    (work / "train.py").unlink()
    shutil.rmtree(gone)
    before = _counts(store)
    cases = {gone_script: "script train.py is gone", gone_cwd: "which is gone", killed: "was killed",
             failed: "failed (exit code 3)"}
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


API_RUN = "import stepscope\ns = stepscope.session()\nfor _ in range(3):\n    stepscope.step()\n"


def test_api_runs_whose_program_is_not_in_the_command_get_one_line(cli: Callable[..., Result], store: Path,
                                                                   tmp_path: Path) -> None:
    """A run recorded through the Python API from a program read from standard input (`python -`, or `python` with
    the code piped in, as a notebook's or a REPL's code is not in its command line either): re-running its
    command would wait for a program that never comes. One line, exit 2, nothing stored."""
    env = {**os.environ, "STEPSCOPE_HOME": str(store)}
    env.pop("STEPSCOPE_DB", None)
    ids = []
    for argv in ([PY, "-"], [PY]):
        done = subprocess.run(argv, input=API_RUN, text=True, capture_output=True, env=env, cwd=tmp_path,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        run = load(store).run
        assert list(run.command) == argv and run.status.value == "completed"  # what the API recorded
        ids.append(run.id)
    before = _counts(store)
    for run_id, words in zip(ids, ("a program read from standard input", "an interactive interpreter"),
                             strict=True):
        # a --change, so that no advice is needed: without the check the pairs would start
        r = cli("advise", run_id, "--verify", "--repeat", "2", "--change", "env:OMP_NUM_THREADS=1", timeout=60)
        assert r.rc == 2, r
        (line,) = r.err.strip().splitlines()
        assert f"run {run_id} ran {words}" in line and "stepscope run -- python SCRIPT" in line, r
    assert _counts(store) == before  # nothing stored: no run, no group


@pytest.mark.parametrize(("argv", "words"), [
    (["python"], "an interactive interpreter"), (["/usr/bin/python3", "-"], "standard input"),
    (["python", "-i"], "an interactive interpreter"), (["ipython"], "an interactive interpreter"),
    (["python", "-m", "ipykernel_launcher", "-f", "/run/kernel-1.json"], "(ipykernel_launcher)"),
    (["python3", "-m", "colab_kernel_launcher"], "(colab_kernel_launcher)"),
    (["python", "-u", "train.py"], None), (["python", "-X", "importtime", "train.py"], None),
    (["python", "-c", "import train"], None), (["python", "-m", "torch.distributed.run", "train.py"], None),
    (["torchrun", "train.py"], None), (["ipython", "train.py"], None),
])
def test_which_commands_hold_their_program(argv: list[str], words: str | None) -> None:
    """A notebook kernel's command (what `stepscope.session()` records in Jupyter or Colab) cannot be made here
    for real; the rule that refuses it is the one the stdin runs above go through."""
    from stepscope.cli.verify import _no_program

    why = _no_program(argv)
    assert (why is None) if words is None else (why is not None and words in why), why


def _group_spec(store: Path, group: str) -> dict[str, Any]:
    con = sqlite3.connect(store / "index.sqlite")
    try:
        kind, spec = con.execute("SELECT kind, spec FROM run_groups WHERE id = ?", (group,)).fetchone()
        members = con.execute("SELECT COUNT(*) FROM runs WHERE grp = ?", (group,)).fetchone()[0]
    finally:
        con.close()
    return {"kind": kind, "members": members, **json.loads(spec)}


def test_all_tries_two_confirmed_settings_together(cli: Callable[..., Result], store: Path) -> None:
    """Two settings that each shorten a 60 ms step to 35 ms (verify_params.py: sleeps, so the host's load does not
    move them): each is confirmed alone, then --all runs both at once (10 ms) as a third series, which is stored
    in the group with the others and shown by `advise`."""
    base = ("--steps", "12", "--load", "0.03", "--work", "0.03")
    assert cli("run", "--quiet", "--", PY, str(SCRIPTS / "verify_params.py"), *base).rc == 0
    run_id = load(store).run.id
    v = cli("advise", run_id, "--verify", "--all", "--repeat", "5", "--change", "param:load=0.005",
            "--change", "param:work=0.005", "--json", "--quiet-runs", timeout=600)
    assert v.rc == 0, v
    doc = json.loads(v.out)
    labels = [o["suggestion"]["label"] for o in doc["outcomes"]]
    assert labels == ["load=0.005", "work=0.005", "load=0.005 + work=0.005"], labels
    one, two, both = doc["outcomes"]
    assert [o["verdict"] for o in (one, two, both)] == ["confirmed"] * 3, doc
    assert both["suggestion"]["rule_ids"] == ["change", "change"]
    assert [c["key"] for c in both["suggestion"]["changes"]] == ["load", "work"]
    for o, load_s, work_s in ((one, 0.005, 0.03), (two, 0.03, 0.005), (both, 0.005, 0.005)):
        for d in (load(store, i) for i in o["runs_b"]):  # B ran with this series' settings, and only those
            argv = list(d.run.command)
            assert argv[argv.index("--load") + 1] == str(load_s) and argv[argv.index("--work") + 1] == str(work_s)
            assert d.run.tags["verify_change"] == o["suggestion"]["label"]
        assert o["experiment_step_s"] == pytest.approx(load_s + work_s, rel=0.3, abs=0.004), o  # what it sleeps
        assert o["baseline_step_s"] == pytest.approx(0.06, rel=0.3), o
        assert o["saving_low_s"] > 0
    assert both["experiment_step_s"] < min(one["experiment_step_s"], two["experiment_step_s"])
    spec = _group_spec(store, doc["group"])
    assert spec["kind"] == "advise-verify" and spec["run"] == run_id and spec["all"] is True
    assert [s["label"] for s in spec["suggestions"]] == labels  # the combination is stored as tried
    assert [o["verdict"] for o in spec["outcomes"]] == ["confirmed"] * 3
    assert spec["members"] == sum(2 * o["pairs"] for o in doc["outcomes"])  # every A and B run of all three series
    shown = cli("advise", run_id, "--width", "200").out
    assert "3. load=0.005 + work=0.005  [change, change]  confirmed" in shown, shown


def test_cannot_tell_names_the_advise_command_that_would_tell(cli: Callable[..., Result], store: Path,
                                                              tmp_path: Path) -> None:
    """A change that shortens a 20 ms step by 2 ms, on runs that drift 4% from one to the next
    (verify_params.py --drift): the pairs' ratios are about x0.9 * 1.04 and x0.9 / 1.04, so 2 pairs cannot tell.
    The note names the command the user runs (this run, this --change, the --repeat that would tell a change of
    the size seen at the spread the stored runs show), not bench's; --all says why it tried nothing together."""
    ledger = tmp_path / "ledger"
    argv = (str(SCRIPTS / "verify_params.py"), "--steps", "8", "--load", "0.01", "--work", "0.01", "--ledger",
            str(ledger), "--drift", "0.04")
    assert cli("run", "--quiet", "--", PY, *argv).rc == 0
    run_id = load(store).run.id
    v = cli("advise", run_id, "--verify", "--repeat", "2", "--change", "param:work=0.008", "--quiet-runs",
            "--width", "300", "--all")
    assert v.rc == 0, v
    assert "advise --verify --all: 0 of 1 suggestions confirmed: nothing to try together" in v.err, v
    ((_, outs),) = _stored(as_store(str(store)), run_id)
    (o,) = outs
    assert o.verdict == "cannot tell" and o.pairs == 2, o
    from stepscope.analyze.diff.runlevel import run_values

    a = [run_values(load(store, i)).step_ns for i in o.runs_a]
    b = [run_values(load(store, i)).step_ns for i in o.runs_b]
    logs = np.log(np.asarray(b) / np.asarray(a))
    sd = float(np.std(logs, ddof=1))
    assert 0.02 < sd < 0.1 and -0.2 < logs.mean() < -0.04, (a, b)  # the drift's spread, about x0.9
    cmd = f"stepscope advise {run_id} --verify --change param:work=0.008 --repeat "
    note = o.note or ""
    assert cmd in note and "bench" not in note and f"the change seen (x{math.exp(logs.mean()):.2f})" in note, note
    need = int(note.split(cmd)[1].split("`")[0])
    # the interval's half-width beyond the t interval's at the deciding look: the widening for load drift
    assert o.ci_low is not None and o.ci_high is not None and o.confidence is not None
    t = stats.t.ppf(0.5 + o.confidence / 2, 1) * sd / math.sqrt(2)
    widen = max(0.0, math.log(o.ci_high / o.ci_low) / 2 - t)
    assert need == _pairs_needed(sd, abs(float(logs.mean())) - widen) and need > 2, (note, sd, widen)
    assert cmd in v.out, v.out  # the terminal shows it too


def _pairs_needed(sd: float, room: float) -> int:
    """The fewest N whose last look (1% split over the looks at 3, x1.5, ..., N pairs; two-sided) has 80% power,
    at per-pair spread ``sd``, for a change of ``room`` (log) beyond the interval's widening (scipy's t)."""
    for n in range(3, 1000):
        at = [3]
        while at[-1] < n:
            at.append(min(n, max(at[-1] + 1, math.ceil(at[-1] * 1.5))))
        level = 0.01 / len(at)
        if (stats.t.ppf(1 - level / 2, n - 1) + stats.t.ppf(0.8, n - 1)) * sd / math.sqrt(n) <= room:
            return n
    raise AssertionError("more than 1000 pairs")


def test_metric_step_time_mean_confirms_what_the_median_cannot_see(cli: Callable[..., Result], store: Path) -> None:
    """Every 5th step sleeps 50 ms more (slow_fifth.py): removing it (`--change param:slow=0`) leaves the median
    step at 10 ms and cuts the mean from 20 ms to 10 ms. Decided on the median the saving is "not confirmed"; with
    --metric step_time_mean it is confirmed, with the saving the sleeps give (50 ms / 5 per step). The outcome names
    the metric, and one stored without it reads as step_time."""
    from stepscope.analyze.advisor.verify import Outcome

    argv = ("--steps", "35", "--step", "0.01", "--slow", "0.05")
    assert cli("run", "--quiet", "--sample-interval", "0", "--warmup-steps", "5", "--", PY,
               str(SCRIPTS / "slow_fifth.py"), *argv).rc == 0
    run_id = load(store).run.id
    docs = {}
    for metric in ("step_time", "step_time_mean"):
        v = cli("advise", run_id, "--verify", "--repeat", "10", "--change", "param:slow=0", "--metric", metric,
                "--json", "--quiet-runs", timeout=600)
        assert v.rc == 0, v
        docs[metric] = json.loads(v.out)
    (median,), (mean,) = docs["step_time"]["outcomes"], docs["step_time_mean"]["outcomes"]
    assert docs["step_time_mean"]["metric"] == mean["metric"] == "step_time_mean" and median["metric"] == "step_time"
    assert median["verdict"] == "not confirmed", median
    assert mean["verdict"] == "confirmed", mean
    assert mean["baseline_step_s"] == pytest.approx(0.01 + 0.05 / 5, rel=0.25), mean  # sleeps: 10 ms + 50 ms / 5
    assert mean["experiment_step_s"] == pytest.approx(0.01, rel=0.25), mean
    assert 0 < mean["saving_low_s"] < 0.01 < mean["saving_high_s"] < 0.015, mean
    # the stored outcomes name their metric; an outcome stored before the field existed was decided on step time
    stored = [o for _, outs in _stored(as_store(str(store)), run_id) for o in outs]
    assert [o.metric for o in stored] == ["step_time", "step_time_mean"]
    old = {k: v for k, v in mean.items() if k != "metric"}
    assert Outcome.from_dict(old).metric == "step_time"
    shown = cli("advise", run_id, "--width", "300").out  # the latest verification, with the metric it decided on
    assert "A/B pairs, step_time_mean)" in shown and "diff --paired --metric step_time_mean" in shown, shown
    page = store.parent / "report.html"  # the run's report names the clock too
    assert cli("report", run_id, "-o", str(page)).rc == 0
    assert f"<td>{mean['pairs']}</td><td>mean step time</td>" in page.read_text(encoding="utf-8")
