"""The optimizer's step timer (torch's global step hooks) and the phases it
splits, on real in-process runs checked against sleeps of known length (issue 20's second pass)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

import stepscope
from tests.conftest import load

torch = pytest.importorskip("torch")

FORWARD_S = 0.005
LOSS_S = 0.030
STEP_S = 0.010
ITEM_S = 0.001
BATCH = 4


class SlowModel(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 1)

    def forward(self, x: Any) -> Any:
        time.sleep(FORWARD_S)
        return self.lin(x)


class SlowItems(torch.utils.data.Dataset):  # type: ignore[misc]
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> Any:
        time.sleep(ITEM_S)
        return torch.ones(3), torch.ones(1)


def _slow_sgd() -> Any:
    class SlowSGD(torch.optim.SGD):  # type: ignore[misc]
        """Its own step calls SGD's (both wrapped by torch, both timed: the inner one must not count twice)."""

        def step(self, closure: Any = None) -> Any:
            out = super().step(closure)
            time.sleep(STEP_S)
            return out

    return SlowSGD


def test_phases_match_known_sleeps(tmp_path: Any) -> None:
    """forward = the model's forward only (the loss's sleep is other), optimizer = the whole step() once,
    data wait = the loader's item sleeps."""
    model = SlowModel()
    with stepscope.session(name="timer", store=str(tmp_path / "s")):
        torch.optim.SGD(model.parameters(), lr=0.01)  # SGD's own step is wrapped by torch (and timed) too
        opt = _slow_sgd()(model.parameters(), lr=0.01)  # a class defined after the hooks were installed
        for x, y in torch.utils.data.DataLoader(SlowItems(), batch_size=BATCH):
            loss = ((model(x) - y) ** 2).mean()
            time.sleep(LOSS_S)
            opt.zero_grad()
            loss.backward()
            opt.step()
    steps = load(tmp_path / "s").ranks[0].steps
    assert len(steps) == 64 // BATCH
    rows = slice(1, None)  # step 0 also carries model discovery and the FLOP count
    fwd = np.median(steps["forward_ns"][rows]) / 1e9
    optim = np.median(steps["optimizer_ns"][rows]) / 1e9
    wait = np.median(steps["data_wait_ns"][rows]) / 1e9
    other = np.median((steps.duration_ns - np.nan_to_num(steps["forward_ns"]) - np.nan_to_num(steps["backward_ns"])
                       - np.nan_to_num(steps["optimizer_ns"]) - np.nan_to_num(steps["data_wait_ns"]))[rows]) / 1e9
    # medians of 15 steps, margins for sleeps that overrun on a busy machine
    assert FORWARD_S <= fwd < FORWARD_S + 0.020, fwd  # not the loss's 30 ms
    assert LOSS_S <= other < LOSS_S + 0.020, other
    assert STEP_S <= optim < 2 * STEP_S, optim  # the nested SGD.step is not counted twice
    assert wait >= BATCH * ITEM_S, wait
    assert list(steps["samples"]) == [float(BATCH)] * len(steps)


def test_optimizer_made_before_the_session_with_a_scheduler(tmp_path: Any) -> None:
    """An optimizer (and an LR scheduler that wraps its step on the instance) made before the session
    is timed, through torch's public global step hooks; afterwards no global step hook of ours is left."""
    from torch.optim import optimizer as optim

    before = (len(optim._global_optimizer_pre_hooks), len(optim._global_optimizer_post_hooks))
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2)
    with stepscope.session(name="sched", store=str(tmp_path / "s")):
        assert (len(optim._global_optimizer_pre_hooks), len(optim._global_optimizer_post_hooks)) == (
            before[0] + 1, before[1] + 1)
        for _ in range(6):
            opt.zero_grad()
            model(torch.randn(2, 3)).sum().backward()
            opt.step()
            sched.step()
    assert (len(optim._global_optimizer_pre_hooks), len(optim._global_optimizer_post_hooks)) == before
    steps = load(tmp_path / "s").ranks[0].steps
    assert len(steps) == 6
    assert np.isfinite(steps["optimizer_ns"]).all() and (steps["optimizer_ns"] > 0).all()


def test_a_step_that_raises_marks_no_step(tmp_path: Any) -> None:
    class Flaky(torch.optim.SGD):  # type: ignore[misc]
        calls = 0

        def step(self, closure: Any = None) -> Any:
            Flaky.calls += 1
            if Flaky.calls == 3:
                raise RuntimeError("boom")
            return super().step(closure)

    model = torch.nn.Linear(3, 1)
    with stepscope.session(name="flaky", store=str(tmp_path / "s")):
        opt = Flaky(model.parameters(), lr=0.01)
        for _ in range(6):
            opt.zero_grad()
            model(torch.randn(2, 3)).sum().backward()
            try:
                opt.step()
            except RuntimeError:
                pass
    steps = load(tmp_path / "s").ranks[0].steps
    assert len(steps) == 5  # the raising call marked nothing; the steps after it are marked again
