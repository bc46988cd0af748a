"""What happens around the training never costs the run nor the training (issue 19, items 4, 5, 13).

Real runs: a relative store with a script that changes its working directory; a run directory deleted
while the training runs; a launcher killed; an index locked by a second process while the run starts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stepscope.model.run import RunStatus
from stepscope.store import open_store
from stepscope.store.rundir import process_start_ticks, read_run, write_manifest
from tests.conftest import PY, load, stepscope_cmd

pytestmark = pytest.mark.slow

TRAIN = (
    "import torch\n"
    "m = torch.nn.Linear(4, 1); o = torch.optim.SGD(m.parameters(), lr=0.1)\n"
    "for _ in range({steps}):\n"
    "    o.zero_grad(); m(torch.randn(2, 4)).sum().backward(); o.step()\n"
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for k in ("STEPSCOPE_DB", "STEPSCOPE_HOME"):
        env.pop(k, None)
    return env


def test_relative_store_and_chdir_in_the_script_keep_the_run(tmp_path: Path) -> None:
    (tmp_path / "outputs" / "2026-01-01").mkdir(parents=True)
    code = "import os\nos.chdir('outputs/2026-01-01')  # as Hydra does\n" + TRAIN.format(steps=7)
    r = subprocess.run(stepscope_cmd("run", "--quiet", "--sample-interval", "0", "--store", "rel/store", "--",
                                     PY, "-c", code), capture_output=True, text=True, cwd=tmp_path, env=_env(),
                       timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    data = load(tmp_path / "rel" / "store")
    assert data.run.status.value == "completed"
    assert len(data.ranks) == 1 and len(data.ranks[0].steps) == 7  # before: 0 steps, records elsewhere
    assert not list((tmp_path / "outputs").rglob("*.jsonl"))


def test_run_dir_deleted_during_training_keeps_the_childs_exit_code(tmp_path: Path) -> None:
    store = tmp_path / "store"
    code = ("import os, shutil, sys\n" + TRAIN.format(steps=3)
            + "shutil.rmtree(os.environ['STEPSCOPE_RUN_DIR'])\n" + TRAIN.format(steps=3) + "sys.exit(3)\n")
    r = subprocess.run(stepscope_cmd("run", "--sample-interval", "0", "--store", str(store), "--", PY, "-c", code),
                       capture_output=True, text=True, cwd=tmp_path, env=_env(), timeout=180)
    assert r.returncode == 3, r.stderr[-3000:]  # before: 1 and a traceback
    assert "Traceback" not in r.stderr and "Exception ignored" not in r.stderr, r.stderr
    assert "stepscope: warning: could not write the run's end record" in r.stderr
    ls = subprocess.run(stepscope_cmd("ls", "--json", "--store", str(store)), capture_output=True, text=True,
                        env=_env(), timeout=120)
    rows = json.loads(ls.stdout)
    assert [row["status"] for row in rows] == ["failed"] and rows[0]["exit_code"] == 3  # never "running"


def test_killed_launcher_is_not_running_forever(tmp_path: Path) -> None:
    store = tmp_path / "store"
    code = TRAIN.format(steps=2) + "print('READY', flush=True)\nimport time\ntime.sleep(120)\n"
    proc = subprocess.Popen(stepscope_cmd("run", "--quiet", "--sample-interval", "0", "--store", str(store), "--",
                                          PY, "-c", code), stdout=subprocess.PIPE, text=True, cwd=tmp_path,
                            env=_env(), start_new_session=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("READY")

    def statuses() -> list[str]:
        out = subprocess.run(stepscope_cmd("ls", "--json", "--store", str(store)), capture_output=True, text=True,
                             env=_env(), timeout=120).stdout
        return [row["status"] for row in json.loads(out)]

    assert statuses() == ["running"]
    os.killpg(proc.pid, signal.SIGKILL)  # the launcher and the training, no end record, no final index row
    proc.wait(timeout=30)
    assert statuses() == ["incomplete"]  # derived by the reader from the run directory
    st = open_store(store)
    assert [r.status for r in st.rows()] == ["incomplete"]
    st.close()


def test_a_reused_pid_is_not_a_live_launcher(tmp_path: Path) -> None:
    """The launcher's pid alive but started at another time (the pid was reused): not running."""
    from tests.store.test_rundir import _run  # a plain Run record

    st = open_store(tmp_path / "s", create=True)
    run_id, path = st.new_run_dir()
    base = _run(run_id, "x", time.time_ns())
    me = os.getpid()
    for start, expected in ((process_start_ticks(me), RunStatus.RUNNING),
                            ((process_start_ticks(me) or 0) + 12345, RunStatus.INCOMPLETE)):
        run = type(base)(**{**{f: getattr(base, f) for f in base.__dataclass_fields__},
                            "extra": {"launcher_pid": me, "launcher_host": os.uname().nodename,
                                      "launcher_start": start}})
        write_manifest(path, run)
        assert read_run(path).run.status == expected


def test_a_locked_index_neither_delays_the_training_nor_counts_in_its_duration(tmp_path: Path) -> None:
    """Another process holds the index's write lock until the training has ended and its end record is written:
    the training starts, runs and ends meanwhile (it never waits for the lock, whatever the machine's load),
    the launcher says why the index row comes late, and the run's start and end are the training's own."""
    store = tmp_path / "store"
    st = open_store(store, create=True)
    with st.index.transaction():
        pass  # the index file and its schema exist (reads alone never create them)
    st.close()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sqlite3, sys, time\n"
        f"c = sqlite3.connect({str(store / 'index.sqlite')!r}, isolation_level=None)\n"
        "c.execute('BEGIN IMMEDIATE'); print('LOCKED', flush=True)\n"
        "sys.stdin.readline(); c.execute('COMMIT')\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdin is not None and holder.stdout is not None
    try:
        assert holder.stdout.readline().startswith("LOCKED")
        t0 = time.time()
        code = ("import time\nprint('STARTED', time.time(), flush=True)\n" + TRAIN.format(steps=3)
                + "print('ENDED', time.time(), flush=True)\n")
        job = subprocess.Popen(stepscope_cmd("run", "--quiet", "--sample-interval", "0", "--store", str(store),
                                             "--", PY, "-c", code), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=tmp_path, env=_env())
        deadline = time.monotonic() + 120
        while not list(store.glob("runs/*/end.json")):  # written when the child has exited, lock still held
            assert job.poll() is None and time.monotonic() < deadline, "the training waited for the lock"
            time.sleep(0.1)
        released = time.time()
        holder.stdin.write("\n")
        holder.stdin.flush()
        out, err = job.communicate(timeout=300)
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait(timeout=60)
    assert job.returncode == 0, err[-3000:]
    assert "the index is busy" in err  # and not silently: the launcher says why the row comes late
    started = float(out.split("STARTED", 1)[1].split()[0])
    ended = float(out.split("ENDED", 1)[1].split()[0])
    data = load(store)
    assert data.run.status.value == "completed"
    # the run's duration is the training's: it starts before the child, after the launcher began (not after a
    # lock wait), and ends when the child exits, before the lock was freed (not when the row could be written)
    assert t0 <= data.run.start_ns / 1e9 <= started
    assert data.run.end_ns is not None and ended <= data.run.end_ns / 1e9 <= released
    assert open_store(store).index.runs()[0].status == "completed"
