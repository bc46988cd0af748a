"""Issue 15, Terminal: Kineto's `USDT: ... profiler_start/stop` lines never reach the user's terminal from a
profiled run, while the training's own output (a `USDT:` line of its own included) stays byte-identical to a
plain run and its environment never holds the variable that silences Kineto."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.conftest import SCRIPTS, Result, load

SCRIPT = "chatty_train.py"


def test_profiled_run_prints_only_the_trainings_own_output(observed: Callable[..., Result], store: Path) -> None:
    plain = subprocess.run([sys.executable, str(SCRIPTS / SCRIPT)], capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    assert "USDT: the user's own line 3" in plain.stderr and "KINETO_LOG_LEVEL=None" in plain.stdout
    res = observed(SCRIPT, opts=("--profile-steps", "2", "--profile-skip", "3"))
    assert res.rc == 0, res
    assert res.out == plain.stdout
    assert res.err == plain.stderr
    assert "profiler_start" not in res.err and "profiler_stop" not in res.err
    data = load(store)
    assert [a for a in data.artifacts if a.startswith("artifacts/traces/")], data.artifacts  # the window did run
