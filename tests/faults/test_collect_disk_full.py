"""A full disk never breaks the training nor makes the run unreadable (issue 19, item 3).

Real short writes: the training process lowers its own file-size limit (RLIMIT_FSIZE, SIGXFSZ ignored),
or fills a real small tmpfs holding the store, for a stretch of steps. Record writes are all-or-nothing
per batch (no half line, no line glued to the next); what could not be written is kept and written once
space frees; the launcher passes the child's exit code through; nothing lands in the training's stderr
but one warning line, never a traceback, and no OSError reaches the user's script.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.conftest import PY, load, stepscope_cmd

SCRIPT = str(Path(__file__).resolve().parent / "collect_scripts" / "disk_full.py")
pytestmark = pytest.mark.slow


def _run(store: Path, tmp_path: Path, *args: str, db: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STEPSCOPE_HOME": str(store)}
    env.pop("STEPSCOPE_DB", None)
    opts = ("--db", str(db)) if db else ()
    return subprocess.run(stepscope_cmd("run", "--quiet", "--sample-interval", "0", *opts, "--", PY, SCRIPT, *args),
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


def _rank_files(store: Path) -> list[Path]:
    return sorted(store.glob("runs/*/ranks/rank-*.jsonl"))


def _assert_whole_lines(path: Path) -> list[dict[str, object]]:
    raw = path.read_bytes()
    assert raw == b"" or raw.endswith(b"\n"), raw[-200:]
    return [json.loads(line) for line in raw.splitlines() if line.strip()]  # every line is whole JSON


def _assert_quiet(stderr: str) -> None:
    assert "Traceback" not in stderr and "Exception ignored" not in stderr and "OSError" not in stderr, stderr


def test_short_disk_full_loses_no_record(store: Path, tmp_path: Path) -> None:
    # full (file-size limit just above the stream header) from step 1 to step 45: ~2.5 s, one flush or more
    r = _run(store, tmp_path, "--steps", "60", "--sleep", "0.05", "--limit", "2500", "--full-from", "1",
             "--full-until", "45")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "trained 60 steps" in r.stdout
    _assert_quiet(r.stderr)
    assert r.stderr.count("could not write records") == 1  # one warning line, once
    [path] = _rank_files(store)
    lines = _assert_whole_lines(path)
    assert lines[0]["kind"] == "stream" and lines[-1]["kind"] == "end"
    data = load(store)
    assert data.run.status.value == "completed" and data.run.exit_code == 0
    steps = data.ranks[0].steps
    assert steps["index"].tolist() == list(range(60))  # the batches written late, in order, none lost


def test_disk_full_to_the_end_keeps_whole_lines_and_says_what_was_lost(store: Path, tmp_path: Path) -> None:
    r = _run(store, tmp_path, "--steps", "50", "--sleep", "0.05", "--limit", "2500", "--full-from", "1")
    assert r.returncode == 0, r.stderr[-3000:]  # the child's exit code passes through (before: 2)
    _assert_quiet(r.stderr)
    [path] = _rank_files(store)
    assert path.stat().st_size <= 2500
    lines = _assert_whole_lines(path)
    assert lines[0]["kind"] == "stream" and lines[-1]["kind"] == "end"  # the few end bytes still fit
    data = load(store)
    assert any("could not be written" in n for n in data.ranks[0].notes)
    shown = subprocess.run(stepscope_cmd("show", "latest", "--store", str(store)), capture_output=True, text=True,
                           timeout=120)
    assert shown.returncode == 0 and "could not be written" in shown.stdout, shown.stderr


def test_disk_full_before_the_first_record_leaves_a_readable_run(store: Path, tmp_path: Path) -> None:
    r = _run(store, tmp_path, "--steps", "10", "--sleep", "0", "--limit", "100", "--full-from", "0")
    assert r.returncode == 0, r.stderr[-3000:]
    _assert_quiet(r.stderr)
    [path] = _rank_files(store)
    assert path.stat().st_size == 0  # not even the header fitted: nothing half-written
    data = load(store)  # before: "no stream header" refused the run
    assert data.ranks == () and data.run.status.value == "completed"
    assert any("rank-00000.jsonl: empty" in p for p in data.run.extra["record_problems"])  # type: ignore[union-attr]
    shown = subprocess.run(stepscope_cmd("show", "latest", "--store", str(store)), capture_output=True, text=True,
                           timeout=120)
    assert shown.returncode == 0 and "record file skipped" in shown.stdout, shown.stdout + shown.stderr


def test_sigterm_while_the_disk_is_full_raises_nothing_in_the_script(store: Path, tmp_path: Path) -> None:
    r = _run(store, tmp_path, "--steps", "30", "--sleep", "0.02", "--limit", "100", "--full-from", "0",
             "--sigterm-at", "10")
    assert r.returncode == -signal.SIGTERM, r.stderr[-3000:]  # died of the signal, as bare
    assert "SIGTERM now" in r.stdout
    _assert_quiet(r.stderr)
    data = load(store)
    assert data.run.status.value == "incomplete" and data.run.exit_code == 128 + signal.SIGTERM


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir(parents=True)
    if os.geteuid() != 0:
        return False
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", f"stepscope-{uuid.uuid4().hex[:6]}",
                        str(where)], capture_output=True)
    return r.returncode == 0


def test_real_full_tmpfs_for_a_while_loses_no_record(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    if not _mount_tmpfs(mnt, "256k"):
        pytest.skip("mounting a tmpfs needs root (the RLIMIT_FSIZE tests above cover short writes)")
    try:
        store = mnt / "store"
        r = _run(store, tmp_path, "--steps", "60", "--sleep", "0.05", "--fill", str(mnt), "--full-from", "1",
                 "--full-until", "45", db=tmp_path / "index.sqlite")
        assert r.returncode == 0, r.stderr[-3000:]
        _assert_quiet(r.stderr)
        assert r.stderr.count("could not write records") == 1
        [path] = _rank_files(store)
        _assert_whole_lines(path)
        from stepscope.store import open_store

        st = open_store(store, str(tmp_path / "index.sqlite"))
        data = st.load("latest")
        st.close()
        assert data.run.status.value == "completed"
        assert data.ranks[0].steps["index"].tolist() == list(range(60))
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
