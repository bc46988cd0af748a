"""The stored runs the app tests share: recorded once per test session (`base_store`), copied for each test that
uses `store` (which it may damage; STEPSCOPE_HOME points at the copy)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PY, SCRIPTS, TRACES, built_once, stepscope_cmd


def _cli(store: Path, *args: str) -> None:
    env = {**os.environ, "STEPSCOPE_HOME": str(store)}
    env.pop("STEPSCOPE_DB", None)
    proc = subprocess.run(stepscope_cmd(*args), capture_output=True, text=True, timeout=300, env=env, cwd=store.parent)
    assert proc.returncode == 0, proc.stderr


def _record(folder: Path) -> None:
    store = folder / "store"
    tiny = str(SCRIPTS / "tiny_train.py")
    _cli(store, "run", "--quiet", "--name", "plain", "--", PY, tiny, "--steps", "3")
    _cli(store, "run", "--quiet", "--name", "profiled", "--profile-steps", "2", "--", PY, tiny, "--steps", "8")
    rank1 = folder / "rank1.json.gz"
    shutil.copy(TRACES / "sampled_128rank" / "rank1.json.gz", rank1)
    _cli(store, "import", "profiled", str(rank1), "--accept-misfit")  # another job's trace, on purpose


@pytest.fixture(scope="package")
def base_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with two runs: `plain` (not profiled) and `profiled` (its own rank-0 window of 2 steps, plus a
    rank-1 trace imported from the sampled_128rank fixture). Recorded once per test session (built_once: shared by
    the xdist workers); only copied."""
    return built_once(tmp_path_factory, "app", _record) / "store"




@pytest.fixture
def store(base_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the base store, for this test to damage."""
    copy = tmp_path / "store"
    shutil.copytree(base_store, copy)
    monkeypatch.setenv("STEPSCOPE_HOME", str(copy))
    monkeypatch.delenv("STEPSCOPE_DB", raising=False)
    return copy
