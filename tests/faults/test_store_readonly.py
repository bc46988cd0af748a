"""Issue 19, item 7: read commands open the index read-only. `ls`, `show` and `report -o` work on a store the user
cannot write and on a full disk; only writers set WAL; a write names the real cause, not "check permissions"."""

from __future__ import annotations

import os
import resource
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.faults.store_kit import ROOT, make_runs


def _freeze(path: Path) -> None:
    """Read-only for everyone: files 0444, folders 0555."""
    for dirpath, _, files in os.walk(path):
        for name in files:
            os.chmod(os.path.join(dirpath, name), 0o444)
        os.chmod(dirpath, 0o555)


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder another (unprivileged) user can read: the store must be read-only even to a root test run."""
    base = Path(tempfile.mkdtemp(prefix="stepscope-ro-"))
    os.chmod(base, 0o755)
    yield base
    for dirpath, _, _ in os.walk(base):
        os.chmod(dirpath, 0o755)
    import shutil

    shutil.rmtree(base, ignore_errors=True)


def _run_cli(args: list[str], *, preexec: Callable[[], None] | None, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("STEPSCOPE_HOME", "STEPSCOPE_DB")}
    env.update(PYTHONPATH=str(ROOT / "src"), HOME=str(cwd), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-m", "stepscope", *args], capture_output=True, text=True, timeout=60,
                          env=env, preexec_fn=preexec, cwd=cwd)


def _as_reader() -> Callable[[], None] | None:
    """As root (which writes through any permission bits), drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from
    the child's bounding set: after exec it obeys the read-only bits like any user."""
    if os.geteuid() != 0:
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def drop() -> None:
        for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
            if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")

    return drop


def _disk_full() -> None:
    """Every file write past 0 bytes fails with EFBIG, as on a full disk."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def _read_commands_work(store: Path, run_id: str, out_dir: Path, preexec: Callable[[], None] | None) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in store.iterdir()}
    for args in (["ls"], ["ls", "--json"], ["show", run_id], ["report", run_id, "-o", str(out_dir / "r.html")]):
        p = _run_cli([*args, "--store", str(store)], preexec=preexec, cwd=out_dir)
        assert p.returncode == 0, (args, p.stderr)
        assert "permissions" not in p.stderr and "Traceback" not in p.stderr, p.stderr
        if args[0] == "ls":
            assert run_id in p.stdout
    assert (out_dir / "r.html").stat().st_size > 1000
    after = {p.name: p.stat().st_mtime_ns for p in store.iterdir()}
    assert after == before, "a read command changed the store (a -wal/-shm file, the index)"


def test_read_commands_on_a_read_only_store(shared_tmp: Path) -> None:
    store = shared_tmp / "store"
    (run_id,) = make_runs(store, ["ro"])
    out = shared_tmp / "out"
    out.mkdir()
    os.chmod(out, 0o777)
    _freeze(store)
    _read_commands_work(store, run_id, out, _as_reader())


def test_read_commands_on_a_read_only_store_left_in_wal_mode_by_a_live_writer(shared_tmp: Path) -> None:
    """The index has -wal and -shm files (a writer had it open): still readable without write access."""
    store = shared_tmp / "store"
    (run_id,) = make_runs(store, ["ro"])
    holder = sqlite3.connect(store / "index.sqlite")
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("SELECT count(*) FROM runs").fetchall()
    assert (store / "index.sqlite-shm").exists()
    out = shared_tmp / "out"
    out.mkdir()
    os.chmod(out, 0o777)
    try:
        _freeze(store)
        _read_commands_work(store, run_id, out, _as_reader())
    finally:
        holder.close()


def test_read_commands_on_a_full_disk(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (run_id,) = make_runs(store, ["full"])
    out = tmp_path / "out"
    out.mkdir()
    for args in (["ls"], ["show", run_id]):
        p = _run_cli([*args, "--store", str(store)], preexec=_disk_full, cwd=out)
        assert p.returncode == 0, (args, p.stderr)
        assert "Traceback" not in p.stderr


def test_a_write_to_a_read_only_store_says_why(shared_tmp: Path) -> None:
    store = shared_tmp / "store"
    make_runs(store, ["ro"])
    _freeze(store)
    p = _run_cli(["store", "reindex", "--store", str(store)], preexec=_as_reader(), cwd=shared_tmp)
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
    assert "permissions" not in p.stderr
    assert "read-only" in p.stderr or "not writable" in p.stderr, p.stderr


def test_no_read_command_switches_the_journal_mode(tmp_path: Path) -> None:
    """A store whose index is in rollback-journal mode stays so after `ls` and `show`; a writer sets WAL."""
    store = tmp_path / "store"
    (run_id,) = make_runs(store, ["j"], metrics={"steps": 0.0})
    conn = sqlite3.connect(store / "index.sqlite")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    for args in (["ls"], ["show", run_id]):
        assert _run_cli([*args, "--store", str(store)], preexec=None, cwd=tmp_path).returncode == 0
    conn = sqlite3.connect(store / "index.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()
    make_runs(store, ["writer"])
    conn = sqlite3.connect(store / "index.sqlite")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


HOLDER = textwrap.dedent("""
    import sqlite3, sys, time
    conn = sqlite3.connect(sys.argv[1], isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    conn.execute("UPDATE runs SET name = name")
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
    conn.execute("ROLLBACK")
""")


def test_ls_does_not_wait_for_a_writer_holding_the_lock(tmp_path: Path) -> None:
    """A second real process holds the index's write lock for 20 s; `ls` answers in seconds."""
    store = tmp_path / "store"
    (run_id,) = make_runs(store, ["locked"])
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(store / "index.sqlite"), "20"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        t0 = time.monotonic()
        p = _run_cli(["ls", "--store", str(store)], preexec=None, cwd=tmp_path)
        elapsed = time.monotonic() - t0
        assert p.returncode == 0 and run_id in p.stdout, p.stderr
        assert elapsed < 15, elapsed
    finally:
        holder.kill()
        holder.wait()
    assert stat.S_ISREG((store / "index.sqlite").stat().st_mode)
