"""Issue 15, Terminal: `bench` repeats show a rich progress bar on a terminal (stderr, once the work has
taken 2 s) and nothing extra when stderr is a pipe."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import SCRIPTS
from tests.ptyterm import run_in_pty


def _bench(store: Path, repeat: int) -> list[str]:
    return [sys.executable, "-m", "stepscope", "bench", "--store", str(store), "--repeat", str(repeat),
            "--sample-interval", "0.2", "--", sys.executable, str(SCRIPTS / "tiny_train.py"), "--steps", "4",
            "--step-sleep", "0.5"]


def test_bench_shows_progress_on_a_terminal_only(tmp_path: Path) -> None:
    rc, out = run_in_pty(_bench(tmp_path / "tty", 2), cols=100, timeout=180)
    assert rc == 0, out
    assert re.search(r"bench runs .*1/2", out), out  # the bar, after the first run (each takes > 2 s)
    assert out.count("bench: run ") == 2, out
    piped = subprocess.run(_bench(tmp_path / "pipe", 1), capture_output=True, text=True, timeout=180,
                           env={**os.environ, "COLUMNS": "100"})
    assert piped.returncode == 0, piped.stderr
    assert "bench runs" not in piped.stderr and "━" not in piped.stderr, piped.stderr
    assert piped.stderr.count("bench: run ") == 1
