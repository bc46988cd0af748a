"""The torch step hooks (hooks.py, modules.py, loader.py), one body each: real training runs, their recorded
phases checked against sleeps of known length, nested phases, validation steps, samples from the forward input,
DataLoader epochs, peeks, samples, tokens and data wait, failing hooks, and what a session installs and removes."""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import pytest

import stepscope
from stepscope.collect.torch import hooks
from tests.collect.torch.sleeps import slow_grad
from tests.conftest import load

torch = pytest.importorskip("torch")

FORWARD_S = 0.005
BACKWARD_S = 0.050
LOSS_S = 0.005
MARGIN_S = 0.020
"""What one sleep may overrun by on a busy machine (medians of 7 steps); less than BACKWARD_S - MARGIN_S, so a
forward that counted its nested backward, or a backward counted twice, would fail."""
BATCH = 5
STEPS = 8


SlowGrad = slow_grad(BACKWARD_S)
"""Identity whose backward sleeps BACKWARD_S."""


class Nested(torch.nn.Module):  # type: ignore[misc]
    """A forward that sleeps FORWARD_S and runs a backward of its own inside (as activation checkpointing
    does): the forward's own time leaves that backward out, the backward counts it."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 1)
        self.fail_training = False

    def forward(self, x: Any) -> Any:
        time.sleep(FORWARD_S)
        if torch.is_grad_enabled():
            torch.autograd.backward(SlowGrad.apply(self.lin.weight.sum()))
        return self.lin(x)

    @property
    def training(self) -> bool:  # type: ignore[override]
        if self.__dict__.get("fail_training"):
            raise RuntimeError("training flag unreadable")
        return bool(self.__dict__.get("_training", True))

    @training.setter
    def training(self, value: bool) -> None:
        self.__dict__["_training"] = value


class Unsized:
    """A forward argument whose batch size cannot be read (its ``shape`` raises)."""

    @property
    def shape(self) -> Any:
        raise RuntimeError("no shape here")


def _train(store: str, *, fail_at: int | None = None) -> None:
    """STEPS training steps (a batch made in the loop, no DataLoader), then one eval-mode forward with
    gradients off (a validation step); from step ``fail_at`` on, the model's ``training`` flag raises."""
    model = Nested()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.ones(BATCH, 3)
    with stepscope.session(name="impls", store=store):
        for i in range(STEPS):
            if i == fail_at:
                model.fail_training = True
            loss = SlowGrad.apply(model(x).sum())
            time.sleep(LOSS_S)
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.fail_training = False
        model.eval()
        with torch.no_grad():
            model(x)


def test_phases_match_known_sleeps(tmp_path: Any) -> None:
    """forward = its sleep only (the backward inside it is backward's), backward = both backward sleeps,
    samples = the first forward argument's rows, the eval forward = one validation step."""
    _train(str(tmp_path / "s"))
    steps = load(tmp_path / "s").ranks[0].steps
    train = steps.take(steps["phase"] == 0)
    val = steps.take(steps["phase"] == 1)
    assert len(train) == STEPS and len(val) == 1
    rows = slice(1, None)  # step 0 also carries model discovery and the FLOP count
    fwd = np.median(train["forward_ns"][rows]) / 1e9
    bwd = np.median(train["backward_ns"][rows]) / 1e9
    assert FORWARD_S <= fwd < FORWARD_S + MARGIN_S, fwd  # not the nested backward's 50 ms
    assert 2 * BACKWARD_S <= bwd < 2 * (BACKWARD_S + MARGIN_S), bwd  # each backward sleep once
    assert list(train["samples"]) == [float(BATCH)] * STEPS
    assert val["forward_ns"][0] / 1e9 >= FORWARD_S


def test_failing_hooks_warn_once_and_training_goes_on(tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A forward argument without a readable batch size, and a post-hook that fails after timing the forward:
    one warning each, every step still recorded, the forward still timed."""
    caplog.set_level(logging.WARNING, logger="stepscope")
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    class TakesTwo(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, tag: Any, x: Any) -> Any:
            return self.inner(x)

    top = TakesTwo()
    with stepscope.session(name="unsized", store=str(tmp_path / "s")):
        for _ in range(4):
            top(Unsized(), torch.ones(BATCH, 3)).sum().backward()
            opt.step()
    texts = [r.getMessage() for r in caplog.records]
    assert sum("reading the batch size from the forward input failed (no shape here)" in t for t in texts) == 1, texts
    steps = load(tmp_path / "s").ranks[0].steps
    assert len(steps) == 4 and np.isfinite(steps["forward_ns"]).all()

    caplog.clear()
    _train(str(tmp_path / "f"), fail_at=3)
    texts = [r.getMessage() for r in caplog.records]
    assert sum("model forward timing failed (training flag unreadable)" in t for t in texts) == 1, texts
    steps = load(tmp_path / "f").ranks[0].steps
    train = steps.take(steps["phase"] == 0)
    assert len(train) == STEPS
    assert (train["forward_ns"] / 1e9 >= FORWARD_S).all()  # timed before the flag was read


def test_failing_step_timer_warns_once(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                      caplog: pytest.LogCaptureFixture) -> None:
    """The step timer failing after the step ran (STEPSCOPE_DEBUG_FAULT=optimizer): one warning, the
    parameters still updated, no step marked."""
    monkeypatch.setenv(hooks.FAULT_ENV, "optimizer")
    caplog.set_level(logging.WARNING, logger="stepscope")
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = model.weight.detach().clone()
    with stepscope.session(name="fault", store=str(tmp_path / "s")):
        for _ in range(3):
            model(torch.ones(2, 3)).sum().backward()
            opt.step()
    texts = [r.getMessage() for r in caplog.records]
    assert sum("step marking failed (injected fault" in t for t in texts) == 1, texts
    assert not torch.equal(model.weight, before)
    assert len(load(tmp_path / "s").ranks[0].steps) == 0


class Flips(torch.nn.Module):  # type: ignore[misc]
    """A forward that switches the model's mode before it returns (``flip``)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 1)
        self.flip = False

    def forward(self, x: Any) -> Any:
        if self.flip:
            self.train(not self.training)
        return self.lin(x)


def test_validation_is_the_mode_a_forward_is_called_in(tmp_path: Any) -> None:
    """With gradients off, a forward called in eval mode is a validation step even if it leaves the model
    training, and one called in training mode is not, even if it leaves the model in eval mode: the mode is
    read as the outermost forward is entered (docs/metrics.md, "Steps")."""
    model = Flips()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.ones(BATCH, 3)
    with stepscope.session(name="modes", store=str(tmp_path / "s")):
        for _ in range(3):
            model(x).sum().backward()
            opt.step()
        model.flip = True
        with torch.no_grad():
            model.eval()
            model(x)  # called in eval mode, leaves it training: one validation step
            assert model.training
            model(x)  # called in training mode, leaves it in eval mode: none
            assert not model.training
            model(x)  # called in eval mode again: a second one
    steps = load(tmp_path / "s").ranks[0].steps
    assert list(steps["phase"]) == [0, 0, 0, 1, 1]


class SlowItems(torch.utils.data.Dataset):  # type: ignore[misc]
    """ITEMS items of TOKENS token ids and 3 features, each read in ITEM_S."""

    def __len__(self) -> int:
        return ITEMS

    def __getitem__(self, i: int) -> dict[str, Any]:
        time.sleep(ITEM_S)
        return {"x": torch.full((3,), float(i)), "input_ids": torch.zeros(TOKENS, dtype=torch.long)}


ITEMS = 12
TOKENS = 5
ITEM_S = 0.002
LOADER_BATCH = 4


def _train_loader(store: str) -> None:
    """Two epochs of a DataLoader of dict batches (ITEMS / LOADER_BATCH steps each), each epoch preceded by a
    peek at the loader through ``it.__next__()`` (the method read from the iterator, not ``next(it)``); then a
    pass of a one-batch loader, a step of its own."""
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(SlowItems(), batch_size=LOADER_BATCH)
    one = torch.utils.data.DataLoader(SlowItems(), batch_size=ITEMS)
    with stepscope.session(name="loader", store=store):
        for _ in range(2):
            assert len(iter(loader).__next__()["x"]) == LOADER_BATCH  # a peek: no epoch, its samples not counted
            for batch in loader:
                model(batch["x"]).sum().backward()
                opt.step()
        for batch in one:
            model(batch["x"]).sum().backward()
            opt.step()


def test_loader_epochs_samples_tokens_data_wait(tmp_path: Any) -> None:
    """Each step's epoch, samples (the peeked batch not counted) and tokens from the batches' structure, and a
    data wait that holds the items' reading (LOADER_BATCH sleeps of ITEM_S) and no more than the step."""
    _train_loader(str(tmp_path / "s"))
    steps = load(tmp_path / "s").ranks[0].steps
    per_epoch = ITEMS // LOADER_BATCH
    assert list(steps["epoch"]) == [0] * per_epoch + [1] * per_epoch + [0]
    assert list(steps["samples"]) == [float(LOADER_BATCH)] * (2 * per_epoch) + [float(ITEMS)]
    # the peeked batch's tokens stay on its epoch's first step (only its samples are taken back: first_of_pass)
    epoch_tokens = [2.0 * LOADER_BATCH * TOKENS] + [float(LOADER_BATCH * TOKENS)] * (per_epoch - 1)
    assert list(steps["tokens"]) == epoch_tokens * 2 + [float(ITEMS * TOKENS)]
    wait = steps["data_wait_ns"] / 1e9
    assert (wait[:-1] >= LOADER_BATCH * ITEM_S).all() and wait[-1] >= ITEMS * ITEM_S, wait
    assert (steps["data_wait_ns"] <= steps.duration_ns).all()


def _train_persistent(store: str) -> None:
    """Three epochs of a DataLoader with a persistent worker: every pass after the first is the same iterator
    object again (torch resets it), each with a new pass of its own."""
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(SlowItems(), batch_size=LOADER_BATCH, num_workers=1,
                                         persistent_workers=True)
    with stepscope.session(name="persistent", store=store):
        its = []
        for _ in range(3):
            it = iter(loader)
            its.append(it)
            for batch in it:
                model(batch["x"]).sum().backward()
                opt.step()
        assert its[0] is its[1] is its[2]  # what makes a kept iterator-to-pass link stale


def test_loader_epochs_of_a_reused_iterator(tmp_path: Any) -> None:
    """A persistent-workers loader's passes, one iterator object: epochs 0, 1, 2 and every batch's samples."""
    _train_persistent(str(tmp_path / "s"))
    steps = load(tmp_path / "s").ranks[0].steps
    per_epoch = ITEMS // LOADER_BATCH
    assert list(steps["epoch"]) == [0] * per_epoch + [1] * per_epoch + [2] * per_epoch
    assert list(steps["samples"]) == [float(LOADER_BATCH)] * (3 * per_epoch)


class ReadyBatches(torch.utils.data.Dataset):  # type: ignore[misc]
    """Batches made ahead (a loader with ``batch_size=None`` yields each as it is): rows 4, 2 and 0, then one whose
    first tensor has no dimension (no batch dimension to count)."""

    BATCHES = ((torch.ones(4, 3),), (torch.ones(2, 3),), (torch.ones(0, 3),), (torch.tensor(5.0), torch.ones(3, 3)))

    def __len__(self) -> int:
        return len(self.BATCHES)

    def __getitem__(self, i: int) -> tuple[Any, ...]:
        return self.BATCHES[i]


class ListIn(torch.nn.Module):  # type: ignore[misc]
    """A model whose first forward argument is a list of tensors: its samples come from batch_size(args)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 1)

    def forward(self, xs: list[Any], scale: float = 1.0) -> Any:
        return self.lin(xs[0]) * scale


def _train_shapes(store: str) -> None:
    """A pass of ReadyBatches, then (a session of its own) steps of a model given a list and a keyword."""
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with stepscope.session(name="shapes", store=store):
        for batch in torch.utils.data.DataLoader(ReadyBatches(), batch_size=None):
            model(batch[-1]).sum().backward()
            opt.step()
    listed = ListIn()
    opt = torch.optim.SGD(listed.parameters(), lr=0.01)
    with stepscope.session(name="listed", store=store + "-listed"):
        for _ in range(3):
            out = listed([torch.ones(BATCH, 3)], scale=2.0)
            assert torch.equal(out, listed.lin(torch.ones(BATCH, 3)) * 2.0)  # the keyword reached forward
            out.sum().backward()
            opt.step()


def test_samples_of_every_batch_shape(tmp_path: Any) -> None:
    """A tensor batch's rows (4, 2), an empty one (0.0), a 0-d first tensor (no batch dimension: unknown, NaN),
    and a forward input that is a list (batch_size of the arguments)."""
    _train_shapes(str(tmp_path / "s"))
    loader = list(load(tmp_path / "s").ranks[0].steps["samples"])
    assert loader[:3] == [4.0, 2.0, 0.0] and np.isnan(loader[3]), loader
    assert list(load(tmp_path / "s-listed").ranks[0].steps["samples"]) == [float(BATCH)] * 3


def test_hooks_in_use_and_removed(tmp_path: Any) -> None:
    """A session installs the optimizer's global step hooks, the backward wrapper, the DataLoader's ``__next__``
    (its self-check passes on this torch) and the model's call slot (no module hook: torch's fast path), and
    removes every one at its end."""
    from torch.optim import optimizer as optim
    from torch.utils.data import dataloader as dl

    orig = torch.autograd.backward
    orig_next = dl._BaseDataLoaderIter.__next__
    n_pre, n_post = len(optim._global_optimizer_pre_hooks), len(optim._global_optimizer_post_hooks)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with stepscope.session(name="in-use", store=str(tmp_path / "s")):
        for _ in range(2):
            model(torch.ones(2, 3)).sum().backward()
            opt.step()
        assert vars(model)["_compiled_call_impl"].__name__ == "_compiled_call_impl"  # timed from its call slot
        assert not model._forward_pre_hooks and not model._forward_hooks
        assert torch.autograd.backward.__wrapped__ is orig  # type: ignore[attr-defined]
        assert dl._BaseDataLoaderIter.__next__ is not orig_next
        assert (len(optim._global_optimizer_pre_hooks), len(optim._global_optimizer_post_hooks)) == (
            n_pre + 1, n_post + 1)
    assert torch.autograd.backward is orig
    assert "_compiled_call_impl" not in vars(model)
    assert dl._BaseDataLoaderIter.__next__ is orig_next
    assert (len(optim._global_optimizer_pre_hooks), len(optim._global_optimizer_post_hooks)) == (n_pre, n_post)
    assert len(load(tmp_path / "s").ranks[0].steps) == 2


def test_a_step_that_raises_marks_none_and_the_next_steps_count(tmp_path: Any) -> None:
    """An optimizer step that raises (torch runs no post-hook for it), caught by the loop: that step marks nothing,
    and every later step, plain or nested (a subclass's ``super().step()``), marks exactly one step."""

    class Outer(torch.optim.SGD):  # type: ignore[misc]
        def step(self, closure: Any = None) -> Any:
            return super().step(closure)

    model = torch.nn.Linear(3, 1)
    opt = Outer(model.parameters(), lr=0.01)

    def failing() -> Any:
        raise ValueError("closure failed")

    with stepscope.session(name="raises", store=str(tmp_path / "s")):
        for i in range(6):
            model(torch.ones(2, 3)).sum().backward()
            if i in (1, 3):
                with pytest.raises(ValueError, match="closure failed"):
                    opt.step(failing)
            else:
                opt.step()
    steps = load(tmp_path / "s").ranks[0].steps
    assert len(steps) == 4  # steps 0, 2, 4, 5


def test_steps_count_where_torch_calls_the_step_hooks_from_two_frames(tmp_path: Any) -> None:
    """A torch whose step wrapper calls the pre- and post-hooks from helpers of their own (two frames): the stack
    of open steps is matched by depth, and every step, nested ones included, marks once."""
    from torch.optim import optimizer as optim

    real = vars(optim.Optimizer)["profile_hook_step"]  # the staticmethod itself, put back as it was

    def profile_hook_step(func: Any) -> Any:
        def pre_hooks(self: Any, args: Any, kwargs: Any) -> None:
            for hook in [*optim._global_optimizer_pre_hooks.values(), *self._optimizer_step_pre_hooks.values()]:
                hook(self, args, kwargs)

        def post_hooks(self: Any, args: Any, kwargs: Any) -> None:
            for hook in [*self._optimizer_step_post_hooks.values(), *optim._global_optimizer_post_hooks.values()]:
                hook(self, args, kwargs)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            pre_hooks(args[0], args, kwargs)
            out = func(*args, **kwargs)
            post_hooks(args[0], args, kwargs)
            return out

        wrapper.hooked = True  # type: ignore[attr-defined]
        return wrapper

    class Plain(optim.Optimizer):  # type: ignore[misc]
        """An optimizer of its own (no torch optimizer's step inside, which torch's real wrapper would call)."""

        def __init__(self, params: Any) -> None:
            super().__init__(params, {"lr": 0.01})

        @torch.no_grad()  # type: ignore[misc]
        def step(self, closure: Any = None) -> Any:
            for group in self.param_groups:
                for q in group["params"]:
                    if q.grad is not None:
                        q.add_(q.grad, alpha=-group["lr"])

    class Outer(Plain):
        def step(self, closure: Any = None) -> Any:
            return super().step(closure)

    optim.Optimizer.profile_hook_step = staticmethod(profile_hook_step)  # type: ignore[assignment]
    try:
        model = torch.nn.Linear(3, 1)
        Plain(model.parameters())  # its step wrapped too: Outer's step nests a wrapped step
        opt = Outer(model.parameters())
        assert getattr(Plain.step, "hooked", False) and getattr(Outer.step, "hooked", False)
        with stepscope.session(name="two-frames", store=str(tmp_path / "s")):
            for _ in range(5):
                model(torch.ones(2, 3)).sum().backward()
                opt.step()
    finally:
        optim.Optimizer.profile_hook_step = real
    assert len(load(tmp_path / "s").ranks[0].steps) == 5

