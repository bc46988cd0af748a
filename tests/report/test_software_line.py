"""The `software:` line of `show` names the framework the run used (its version as installed), and no torch
where the run never imported it."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import PY, installed_or_skip, observe, stepscope_cmd

installed_or_skip("tensorflow")
pytestmark = pytest.mark.slow


def test_keras_run_names_tensorflow_and_keras_not_torch(tmp_path) -> None:  # type: ignore[no-untyped-def]
    tf, keras = subprocess.run([PY, "-c", "import tensorflow, keras; print(tensorflow.__version__, keras.__version__)"],
                               capture_output=True, text=True, timeout=120, check=True).stdout.split()
    store = tmp_path / "store"
    res = observe(store, "--epochs", "1", "--samples", "32", "--batch", "16", "--sleep", "0",
                  script="tf_loop.py", name="kerasrun")
    assert res.returncode == 0, res.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if k != "STEPSCOPE_DB"}
    proc = subprocess.run(stepscope_cmd("show", "kerasrun", "--store", str(store)), capture_output=True, text=True,
                          timeout=120, env={**env, "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("software:"))
    assert f"tensorflow {tf}" in line and f"keras {keras}" in line, line
    assert "torch" not in line, line
