"""Issue 19, item 1: `rm` resolves only ids of its own store, never a path, `..` or a link out of it; it shows
what it deletes and asks (without a terminal it needs --yes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.faults.store_kit import ROOT, cli, make_runs, one_line_error


def _victim(tmp_path: Path) -> Path:
    """A folder outside the store that looks like a run directory (what the old `rm` deleted)."""
    victim = tmp_path / "victim"
    (victim / "src").mkdir(parents=True)
    (victim / "manifest.json").write_text("{}")
    (victim / "src" / "precious.py").write_text("x = 1\n")
    return victim


@pytest.mark.parametrize("how", ["absolute", "dotdot", "dotdot-inside"])
def test_rm_never_deletes_a_path_outside_the_store(tmp_path: Path, how: str) -> None:
    store = tmp_path / "store"
    make_runs(store, ["keep"])
    victim = _victim(tmp_path)
    ref = {"absolute": str(victim), "dotdot": "../../victim", "dotdot-inside": "runs/../../victim"}[how]
    p = cli("rm", "--yes", ref, store=store, cwd=tmp_path)
    line = one_line_error(p)
    assert "no run" in line and "not a path" in line, line
    assert (victim / "src" / "precious.py").read_text() == "x = 1\n"
    assert len(list((store / "runs").iterdir())) == 1


def test_rm_refuses_a_link_out_of_the_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    make_runs(store, ["keep"])
    victim = _victim(tmp_path)
    (store / "runs" / "evil0001").symlink_to(victim, target_is_directory=True)
    p = cli("rm", "--yes", "evil0001", store=store)
    assert "symbolic link" in one_line_error(p) or "no run" in one_line_error(p)
    assert (victim / "src" / "precious.py").exists()


def test_rm_without_a_terminal_needs_yes(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (run_id,) = make_runs(store, ["one"])
    p = cli("rm", run_id, store=store)
    line = one_line_error(p)
    assert "--yes" in line
    assert f"will remove {run_id}" in p.stderr and str(store / "runs" / run_id) in p.stderr
    assert (store / "runs" / run_id / "manifest.json").is_file()
    assert run_id in cli("ls", "--json", store=store).stdout


def test_rm_with_yes_removes_directory_and_row(tmp_path: Path) -> None:
    store = tmp_path / "store"
    a, b = make_runs(store, ["one", "two"])
    p = cli("rm", "--yes", a, store=store)
    assert p.returncode == 0, p
    assert f"removed {a}" in p.stdout
    assert not (store / "runs" / a).exists() and (store / "runs" / b).is_dir()
    listed = cli("ls", "--json", store=store).stdout
    assert a not in listed and b in listed


def _rm_on_a_terminal(store: Path, run_id: str, answer: bytes) -> tuple[int, str]:
    """`stepscope rm RUN` with its stdin and stderr on a real pseudo-terminal, answering ``answer``."""
    import pty

    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.pop("STEPSCOPE_HOME", None)
    proc = subprocess.Popen([sys.executable, "-m", "stepscope", "rm", run_id, "--store", str(store)],
                            stdin=slave, stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 30
    while b"[y/N]" not in seen and time.monotonic() < deadline:
        try:
            seen += os.read(master, 4096)
        except OSError:
            break
    os.write(master, answer)
    proc.wait(timeout=30)
    try:
        while True:
            chunk = os.read(master, 4096)
            if not chunk:
                break
            seen += chunk
    except OSError:
        pass
    os.close(master)
    return proc.returncode, seen.decode(errors="replace")


def test_rm_on_a_terminal_asks_and_no_keeps_the_run(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (run_id,) = make_runs(store, ["one"])
    rc, shown = _rm_on_a_terminal(store, run_id, b"n\n")
    assert rc == 1 and "[y/N]" in shown and f"will remove {run_id}" in shown and "nothing removed" in shown
    assert (store / "runs" / run_id).is_dir()
    rc, shown = _rm_on_a_terminal(store, run_id, b"y\n")
    assert rc == 0, shown
    assert not (store / "runs" / run_id).exists()


def test_unknown_ten_kilobyte_id_is_one_short_line(tmp_path: Path) -> None:
    store = tmp_path / "store"
    make_runs(store, ["one"])
    for cmd in (["rm", "--yes"], ["show"], ["report"], ["diff", "latest"]):
        p = cli(*cmd, "x" * 10_000, store=store)
        line = one_line_error(p)
        assert "10000 characters" in line and len(line) < 300, line
