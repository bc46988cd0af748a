"""Training in multiprocessing / torch.multiprocessing.spawn children is observed (issue 19, item 8):
one run, one stream per training child, the parent (which never trains) and helper processes none."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PY, load, stepscope_cmd

SCRIPT = str(Path(__file__).resolve().parent / "collect_scripts" / "mp_train.py")
STEPS = 5
pytestmark = pytest.mark.slow


def _run(store: Path, tmp_path: Path, mode: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STEPSCOPE_HOME": str(store)}
    env.pop("STEPSCOPE_DB", None)
    return subprocess.run(stepscope_cmd("run", "--quiet", "--sample-interval", "0", "--", PY, SCRIPT, mode),
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


def test_mp_spawn_ddp_ranks_are_observed(store: Path, tmp_path: Path) -> None:
    r = _run(store, tmp_path, "spawn-ddp")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "children done" in r.stdout
    data = load(store)
    assert data.run.status.value == "completed"
    assert sorted(rk.stream.rank for rk in data.ranks) == [0, 1]  # from torch.distributed, one stream each
    assert data.run.world_size == 2
    for rk in data.ranks:
        assert len(rk.steps) == STEPS and rk.stream.complete
    assert len({rk.stream.pid for rk in data.ranks}) == 2


def test_forked_training_children_are_observed_each_in_its_own_stream(store: Path, tmp_path: Path) -> None:
    r = _run(store, tmp_path, "fork")
    assert r.returncode == 0, r.stderr[-3000:]
    data = load(store)
    assert data.run.status.value == "completed"
    assert len(data.ranks) == 2  # two children; the parent never trained
    assert len({rk.stream.pid for rk in data.ranks}) == 2
    for rk in data.ranks:
        assert len(rk.steps) == STEPS and rk.stream.complete and rk.steps["index"].tolist() == list(range(STEPS))
    assert "no process of the command was observed" not in r.stderr
