"""The Python API on its own (it creates a run) and inside `stepscope run` (it joins the run)."""

from __future__ import annotations

import os
import re
import subprocess

import numpy as np
import torch

import stepscope
from stepscope.collect.core import undo as undo_list
from tests.conftest import PY, SCRIPTS, load


def _check_api_run(data, err: str) -> None:
    assert data.run.status.value == "completed"
    rank = data.ranks[0]
    assert rank.stream.role == "learner" and rank.stream.step_source == "api"
    steps = rank.steps
    assert len(steps) == 10  # 40 samples / 4 per batch: one step per item, optimizer steps not counted again
    assert np.all(steps["samples"] == 4)
    paths = set(rank.regions.names)
    assert {"rollout", "Trainer.update", "Trainer.update/forward", "Trainer.update/forward/loss"} <= paths
    for path in paths:
        assert int(rank.regions.mask_of(path).sum()) == 10
    depth = dict(zip(rank.regions.column_strings(), rank.regions["depth"].tolist(), strict=True))
    assert depth["Trainer.update/forward/loss"] == 2
    # nesting: the inner region never outlasts its parent
    outer = rank.regions["duration_ns"][rank.regions.mask_of("Trainer.update/forward")]
    inner = rank.regions["duration_ns"][rank.regions.mask_of("Trainer.update/forward/loss")]
    assert np.all(inner <= outer)
    m = rank.metrics
    loss = m["value"][m.mask_of("loss")]
    reward = m["value"][m.mask_of("reward")]
    assert len(loss) == 10 and list(reward) == list(range(1, 11))
    last = float(re.search(r"LAST_LOSS (\S+)", err).group(1))
    assert loss[-1] == last
    assert list(m["step"][m.mask_of("loss")]) == list(range(10))


def test_api_standalone_creates_a_run(store, tmp_path, region_impl):
    env = {**os.environ, "STEPSCOPE_HOME": str(store)}
    r = subprocess.run([PY, str(SCRIPTS / "api_train.py")], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    data = load(store)
    assert data.run.name == "ppo" and data.run.params == {"lr": "0.01"}
    _check_api_run(data, r.stderr)


def test_api_joins_the_launchers_run(observed, store, region_impl):
    r = observed("api_train.py")
    assert r.rc == 0, r
    from stepscope.store import open_store

    assert len(open_store(store).rows()) == 1  # one run, not two
    _check_api_run(load(store), r.err)


def test_in_process_session_removes_every_hook(tmp_path):
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    orig_backward = torch.autograd.backward
    with stepscope.session(name="inproc", store=str(tmp_path / "s")):
        assert undo_list.installed() > 0
        for _ in range(5):
            opt.zero_grad()
            model(torch.randn(2, 3)).sum().backward()
            opt.step()
    assert undo_list.installed() == 0
    assert torch.autograd.backward is orig_backward
    data = load(tmp_path / "s")
    assert data.run.name == "inproc" and data.run.status.value == "completed"
    assert len(data.ranks[0].steps) == 5 and data.ranks[0].stream.step_source == "optimizer"


def test_exception_in_session_block_marks_the_run_failed(tmp_path):
    try:
        with stepscope.session(name="boom", store=str(tmp_path / "s")):
            stepscope.log(x=1.0)
            raise ValueError("user bug")
    except ValueError:
        pass
    data = load(tmp_path / "s")
    assert data.run.status.value == "failed"
    assert data.ranks[0].stream.exit_reason == "exception"
