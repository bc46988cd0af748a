"""`stepscope run`: pass-through of output, exit codes and signals; failures; bad input."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import PY, SCRIPTS, built_once, load, record_tiny, stepscope_cmd


def test_child_sees_its_own_help_and_output_passes_through(cli, store):
    r = cli("run", "--", PY, str(SCRIPTS / "tiny_train.py"), "--help")
    assert r.rc == 0
    assert "tiny training for stepscope tests" in r.out  # the child's argparse help, untouched
    assert "--fail-at" in r.out


def test_summary_printed_at_the_end(cli, store):
    r = cli("run", "--sample-interval", "0", "--", PY, str(SCRIPTS / "tiny_train.py"), "--steps", "12")
    assert r.rc == 0, r
    assert "trained 12 steps" in r.err
    assert "step time median" in r.err and "Time per step by phase" in r.err


def test_no_command_is_a_one_line_error_and_writes_nothing(cli, store):
    for args in (("run",), ("run", "--")):
        r = cli(*args)
        assert r.rc == 2
        assert r.err.strip().count("\n") == 0 and "no command to run" in r.err
    assert not store.exists()


def test_unknown_command_is_a_one_line_error_and_writes_nothing(cli, store):
    r = cli("run", "--", "definitely-not-a-command-xyz", "--flag")
    assert r.rc == 2 and "command not found" in r.err and r.err.count("\n") == 1
    assert "Traceback" not in r.err
    assert not store.exists()


def test_unusable_store_is_a_one_line_error(cli, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    r = cli("run", "--store", str(blocker / "store"), "--", PY, "-c", "pass")
    assert r.rc == 2 and "cannot write the store" in r.err and "Traceback" not in r.err


def test_failing_script_is_stored_failed_with_its_steps(observed, store):
    r = observed("tiny_train.py", "--steps", "20", "--fail-at", "7")
    assert r.rc == 1
    assert "planned failure at step 7" in r.err  # the child's traceback passes through
    data = load(store)
    assert data.run.status.value == "failed" and data.run.exit_code == 1
    assert len(data.ranks[0].steps) == 7
    assert data.ranks[0].stream.exit_reason == "exception"


def test_sigkill_mid_run_is_incomplete_and_keeps_flushed_steps(observed, store, cli):
    # 10 steps, then 2.5 s (> the 2 s flush interval) before SIGKILL: the steps are on disk
    r = observed("tiny_train.py", "--steps", "30", "--kill-at", "10", "--wait-at-kill", "2.5")
    assert r.rc == -signal.SIGKILL  # the launcher dies of the same signal as the child
    data = load(store)
    assert data.run.status.value == "incomplete"
    assert len(data.ranks[0].steps) == 10
    assert not data.ranks[0].stream.complete
    shown = cli("show", "latest")
    assert shown.rc == 0 and "without its end record" in shown.out


def test_sigterm_to_the_launcher_reaches_the_child(store, tmp_path):
    env = {**os.environ, "STEPSCOPE_HOME": str(store)}
    proc = subprocess.Popen(stepscope_cmd("run", "--quiet", "--", PY, str(SCRIPTS / "tiny_train.py"), "--steps",
                                          "100000", "--step-sleep", "0.01", "--print-pid"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("PID")
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGTERM  # the launcher dies of the child's signal
    data = load(store)
    assert data.run.status.value == "incomplete"
    assert data.ranks[0].stream.exit_reason == "signal:SIGTERM"  # the child flushed before dying
    assert len(data.ranks[0].steps) >= 3


def test_two_concurrent_runs_into_one_store(store, tmp_path):
    env = {**os.environ, "STEPSCOPE_HOME": str(store)}
    cmd = stepscope_cmd("run", "--quiet", "--sample-interval", "0", "--", PY, str(SCRIPTS / "tiny_train.py"),
                        "--steps", "15")
    procs = [subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    from stepscope.store import open_store

    st = open_store(store)
    rows = st.rows()
    assert len(rows) == 2 and len({r.id for r in rows}) == 2
    for r in rows:
        d = st.load(r.id)
        assert d.run.status.value == "completed" and len(d.ranks[0].steps) == 15
    assert len(st.index.metrics([r.id for r in rows])) == 2


def test_failing_hook_and_sampler_warn_once_and_training_goes_on(observed, store):
    r = observed("tiny_train.py", "--steps", "15", "--step-sleep", "0.02",
                 env={"STEPSCOPE_DEBUG_FAULT": "optimizer,sampler"})
    assert r.rc == 0
    assert "trained 15 steps" in r.err
    assert r.err.count("step marking failed") == 1
    assert r.err.count("the system sampler stopped") == 1
    notes = load(store).ranks[0].notes
    assert any("step marking failed" in n for n in notes)


def _record_two(folder: Path) -> None:
    for name, steps in (("first", 9), ("second", 4)):
        record_tiny(folder, steps, "--name", name)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store with two real runs of tiny_train.py, recorded once per test session (built_once, also when
    xdist splits the module): `first` (9 steps), then `second` (4 steps). Each test works on its own copy
    (`copied`)."""
    return built_once(tmp_path_factory, "run_two", _record_two) / "store"


@pytest.fixture
def copied(recorded: Path, store: Path) -> Path:
    """The test's own copy of the recorded store, where `cli` runs."""
    shutil.copytree(recorded, store)
    return store


def test_show_unknown_run_names_closest_matches(copied, cli):
    run_id = load(copied).run.id
    r = cli("show", run_id[:-1] + ("x" if run_id[-1] != "x" else "y"))
    assert r.rc == 2 and run_id in r.err and "Traceback" not in r.err
    assert r.err.count("\n") == 1


def test_ls_show_json_export_rm(copied, cli, tmp_path):
    ls = cli("ls")
    assert ls.rc == 0 and "first" in ls.out and "second" in ls.out
    import json

    doc = json.loads(cli("show", "latest~1", "--json").out)
    assert doc["schema"] == "stepscope.summary/1"
    assert doc["run"]["name"] == "first" and doc["headline"]["steps"] == 9
    assert doc["ranks"][0]["steps"]["samples_per_step"] == 8
    out = tmp_path / "csv"
    assert cli("export", "first", "--format", "csv", "-o", str(out)).rc == 0
    rows = (out / "steps.csv").read_text().strip().splitlines()
    assert len(rows) == 1 + 9 and rows[0].startswith("rank,index,start_ns")
    assert cli("rm", "--yes", "first").rc == 0
    assert "first" not in cli("ls").out
    assert cli("show", "first").rc == 2


def test_show_runs_without_torch_installed(copied):
    """Analysing stored runs never imports torch."""
    store = copied
    code = ("import sys; sys.modules['torch'] = None\n"
            "from stepscope.cli import main; raise SystemExit(main(['show', 'latest', '--json']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "STEPSCOPE_HOME": str(store)})
    assert r.returncode == 0, r.stderr
    assert np.isclose(__import__("json").loads(r.stdout)["headline"]["steps"], 4)  # `second`, the latest
