"""A real lightning.Trainer (CPU, tiny module with train and validation) under `stepscope run`, standalone
and with DDP (gloo, 2 processes re-launched by Lightning)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from stepscope.analyze.run.summary import summarize_run
from tests.conftest import SCRIPTS, installed_or_skip, load

installed_or_skip("lightning")
pytestmark = pytest.mark.slow
SCRIPT = str(SCRIPTS / "lightning_train.py")
TINY_PARAMS = 16 * 32 + 32 + 32 * 4 + 4


def _steps(rank, phase: int):  # type: ignore[no-untyped-def]
    return rank.steps.take(rank.steps["phase"] == phase)


def _metric(rank, name: str) -> tuple[list[int], list[float]]:  # type: ignore[no-untyped-def]
    t = rank.metrics
    code = t.names.index(name)
    mask = t["name_code"] == code
    return t["step"][mask].tolist(), t["value"][mask].tolist()


def test_under_stepscope_run_one_step_per_batch_with_validation_and_metrics(observed, store: Path) -> None:
    res = observed(SCRIPT, "--profiler")
    assert res.rc == 0, res
    data = load(store)
    assert data.run.status.value == "completed" and len(data.ranks) == 1
    r = data.ranks[0]
    assert r.stream.step_source == "lightning"
    train, val = _steps(r, 0), _steps(r, 1)
    # 80 samples / batch 8 x 2 epochs: 20 steps, not doubled by the optimizer hook; sanity check not counted
    assert train["index"].tolist() == list(range(20))
    assert train["samples"].tolist() == [8.0] * 20
    assert train["epoch"].tolist() == [0] * 10 + [1] * 10
    assert val["index"].tolist() == list(range(8)) and val["samples"].tolist() == [6.0] * 8
    # validation time is kept out of the training step that follows it
    val_end_epoch0 = int(val["end_ns"][3])
    assert int(train["start_ns"][10]) >= val_end_epoch0
    assert np.isfinite(train["data_wait_ns"]).all()
    steps, losses = _metric(r, "loss")
    assert steps == list(range(20)) and all(0 < v < 10 for v in losses)
    assert _metric(r, "lr")[1][0] == pytest.approx(0.05)
    assert _metric(r, "val_loss")[0] == [9, 19]
    rec = r.extra["lightning"][0]
    assert rec["strategy"] == "SingleDeviceStrategy" and rec["module"] == "Tiny" and rec["hparams"] == {"hidden": "32"}
    s = summarize_run(data)
    assert s.models[0]["name"] == "Tiny" and s.models[0]["total_params"] == TINY_PARAMS
    assert s.ranks[0].steps.epochs == 2 and s.ranks[0].steps.validation_steps == 8
    regions = {g.path: g for g in s.ranks[0].regions}
    assert "[Strategy]SingleDeviceStrategy.training_step" in regions  # StepscopeProfiler's actions
    assert s.flops is not None and s.flops.flops_per_step == 2 * (2 * 8 * 16 * 32) + 3 * (2 * 8 * 32 * 4)


def test_standalone_creates_and_ends_its_own_run(tmp_path: Path) -> None:
    store = tmp_path / "own"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPSCOPE_")}
    proc = subprocess.run([sys.executable, SCRIPT, "--standalone", str(store), "--epochs", "1"], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = load(store)
    assert data.run.name == "tiny-lightning" and data.run.status.value == "completed"
    assert data.run.tags == {"suite": "test"} and data.run.params == {"hidden": "32"}
    r = data.ranks[0]
    assert r.stream.step_source == "lightning" and r.stream.complete
    assert len(_steps(r, 0)) == 10 and len(_steps(r, 1)) == 4


def test_ddp_processes_are_rank_streams_of_one_run(observed, store: Path) -> None:
    res = observed(SCRIPT, "--devices", "2", "--epochs", "1")
    assert res.rc == 0, res
    data = load(store)
    assert [r.stream.rank for r in data.ranks] == [0, 1]
    assert data.run.world_size == 2
    for r in data.ranks:
        # DistributedSampler: 40 samples per rank / batch 8 = 5 steps; 12 validation samples / 6 = 2
        assert r.stream.step_source == "lightning" and r.stream.complete
        assert len(_steps(r, 0)) == 5 and len(_steps(r, 1)) == 2
        assert r.extra["lightning"][0]["strategy"] == "DDPStrategy"
