"""One real instrumented, profiled run shared by the report tests of a module (seconds, not per test)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PY, SCRIPTS, stepscope_cmd

HOSTILE = "<script>alert(1)</script>"


def observe(store: Path, *args: str, name: str = HOSTILE, opts: tuple[str, ...] = (),
            script: str = "advisor_train.py") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("STEPSCOPE_DB",)}
    return subprocess.run(stepscope_cmd("run", "--store", str(store), "--quiet", "--sample-interval", "0.2",
                                        "--name", name, "--tag", f"owner={HOSTILE}", *opts, "--", PY,
                                        str(SCRIPTS / script), *args),
                          capture_output=True, text=True, timeout=180, env=env, cwd=store.parent)


@pytest.fixture(scope="session")
def profiled_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with one completed run named like an XSS attack: regions, logged metrics, a slow
    dataset (input-bound) and a 2-step profiled window."""
    store = tmp_path_factory.mktemp("report") / "store"
    res = observe(store, "--steps", "16", "--sample-sleep", "0.003", "--instrument", "--compute", "2",
                  opts=("--profile-steps", "2"))
    assert res.returncode == 0, res.stderr[-3000:]
    return store
