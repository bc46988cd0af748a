"""A watched model's forward timed from its call slot (collect/torch/modelcall.py): real training in a session,
checked against known sleeps; the slot's self-check; the slot's previous value kept and called; what
replaces it wrapped; DataParallel replicas, exceptions, and the classes that keep forward hooks."""

from __future__ import annotations

import copy
import pickle
import time
from typing import Any

import numpy as np
import pytest

import stepscope
from stepscope.collect.torch import hooks
from stepscope.collect.torch.modelcall import SLOT, wrappable
from tests.conftest import load

torch = pytest.importorskip("torch")

FORWARD_S = 0.004
STEPS = 8


class Sleepy(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 1)
        self.fail: type[BaseException] | None = None

    def forward(self, x: Any) -> Any:
        time.sleep(FORWARD_S)
        if self.fail is not None:
            raise self.fail("forward failed")
        return self.lin(x)


class OwnState(Sleepy):
    """A class with its own ``__getstate__`` (as DDP has): it may pickle its whole ``__dict__``."""

    def __getstate__(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _train(model: Any, opt: Any, steps: int = STEPS) -> None:
    for _ in range(steps):
        opt.zero_grad()
        model(torch.ones(2, 3)).sum().backward()
        opt.step()


def _timed(slot: Any) -> bool:
    """Whether ``slot`` is what stepscope puts in a watched model's call slot."""
    return getattr(slot, "__name__", None) == "_compiled_call_impl"


def _forward_s(store: Any) -> Any:
    steps = load(store).ranks[0].steps
    return steps["forward_ns"][1:] / 1e9  # step 0 also carries the model's discovery


def test_forward_timed_from_the_slot_with_no_hook(tmp_path: Any) -> None:
    model = Sleepy()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with stepscope.session(name="slot", store=str(tmp_path / "s")):
        _train(model, opt)
        assert _timed(vars(model)[SLOT])
        assert not model._forward_hooks and not model._forward_pre_hooks  # torch's fast path
    assert SLOT not in vars(model)
    fwd = _forward_s(tmp_path / "s")
    assert len(fwd) == STEPS - 1 and (fwd >= FORWARD_S).all() and np.median(fwd) < FORWARD_S + 0.020, fwd


def test_previous_slot_value_is_called_and_given_back(tmp_path: Any) -> None:
    """What ``module.compile()`` put in the slot before the model was watched keeps running, timed."""
    model = Sleepy()
    calls: list[int] = []

    def compiled_call(*args: Any, **kwargs: Any) -> Any:  # stands for torch.compile(model._call_impl)
        calls.append(1)
        return model._call_impl(*args, **kwargs)

    model._compiled_call_impl = compiled_call
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with stepscope.session(name="prev", store=str(tmp_path / "s")):
        _train(model, opt)
        assert vars(model)[SLOT] is not compiled_call
    assert vars(model)[SLOT] is compiled_call
    assert len(calls) == STEPS
    fwd = _forward_s(tmp_path / "s")
    assert (fwd >= FORWARD_S).all(), fwd


def test_a_slot_replaced_while_watched_is_wrapped_by_the_flush_check(tmp_path: Any) -> None:
    """``module.compile()`` after the first step replaces the slot; the flush thread's check wraps the new
    value, and the session's end leaves it in place."""
    model = Sleepy()
    calls: list[int] = []

    def compiled_call(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return model._call_impl(*args, **kwargs)

    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with stepscope.session(name="replaced", store=str(tmp_path / "s")) as s:
        _train(model, opt, 2)
        model._compiled_call_impl = compiled_call
        for check in s.on_flush:  # what the flush thread runs before each flush
            check()
        assert vars(model)[SLOT] is not compiled_call
        _train(model, opt, STEPS - 2)
    assert vars(model)[SLOT] is compiled_call
    assert len(calls) == STEPS - 2
    fwd = _forward_s(tmp_path / "s")
    assert len(fwd) == STEPS - 1 and (fwd >= FORWARD_S).all(), fwd


def test_a_slot_emptied_while_watched_is_timed_again(tmp_path: Any) -> None:
    model = Sleepy()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with stepscope.session(name="emptied", store=str(tmp_path / "s")) as s:
        _train(model, opt, 2)
        del model._compiled_call_impl
        for check in s.on_flush:
            check()
        assert _timed(vars(model)[SLOT])
        _train(model, opt, STEPS - 2)
        checks = list(s.on_flush)
    assert SLOT not in vars(model)  # as it was: deleted
    assert checks and not s.on_flush  # the session's end takes its check off the flush thread ...
    for check in checks:
        check()  # ... and one running late wraps nothing
    assert SLOT not in vars(model)
    fwd = _forward_s(tmp_path / "s")
    assert len(fwd) == STEPS - 1 and (fwd >= FORWARD_S).all(), fwd


def test_copies_and_replicas_carry_nothing(tmp_path: Any) -> None:
    model = Sleepy()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with stepscope.session(name="copies", store=str(tmp_path / "s")):
        _train(model, opt, 2)
        slot = vars(model)[SLOT]
        for clone in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
            assert SLOT not in vars(clone)
        replica = model._replicate_for_data_parallel()  # what DataParallel makes each forward
        assert SLOT not in vars(replica)
        scripted = torch.jit.script(torch.nn.Sequential(torch.nn.Linear(3, 1)))  # a class of torch's
        assert scripted(torch.ones(1, 3)).shape == (1, 1)
        assert vars(model)[SLOT] is slot
    assert torch.nn.Module._replicate_for_data_parallel.__name__ == "_replicate_for_data_parallel"
    assert SLOT not in vars(model._replicate_for_data_parallel())


class Scaled(torch.nn.Module):  # type: ignore[misc]
    """A scriptable model with a keyword argument."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 1)

    def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return self.lin(x) * scale


def test_a_watched_model_is_called_as_before_and_scripts(tmp_path: Any) -> None:
    """The slot passes positional and keyword arguments on and gives the result back; TorchScript scripts the
    watched model (the slot's value is an attribute it leaves out) and the script computes what the model does."""
    model = Scaled()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.ones(2, 3)
    with stepscope.session(name="scripts", store=str(tmp_path / "s")):
        for _ in range(STEPS):
            opt.zero_grad()
            out = model(x, scale=2.0)
            assert torch.equal(out, model._call_impl(x, scale=2.0))
            assert torch.equal(model(x, 3.0), model._call_impl(x, 3.0))
            out.sum().backward()
            opt.step()
        assert _timed(vars(model)[SLOT])
        scripted = torch.jit.script(model)  # a class without annotations of its own: nn.Module's type the slot
        assert torch.equal(scripted(x, 2.0), model(x, scale=2.0))
    steps = load(tmp_path / "s").ranks[0].steps
    assert len(steps) == STEPS and (steps["forward_ns"] > 0).all()


def _train_scaled(model: Any, opt: Any) -> None:
    for _ in range(STEPS):
        opt.zero_grad()
        model(torch.ones(2, 3), scale=2.0).sum().backward()
        opt.step()


def test_forward_that_raises_closes_its_span(tmp_path: Any) -> None:
    """The error (any, KeyboardInterrupt too) reaches the caller unchanged, and the next steps are timed as
    before: the post-hook ran."""
    model = Sleepy()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with stepscope.session(name="raises", store=str(tmp_path / "s")):
        _train(model, opt, 2)
        for err in (ValueError, KeyboardInterrupt):
            model.fail = err
            with pytest.raises(err, match="forward failed"):
                model(torch.ones(2, 3))
        model.fail = None
        _train(model, opt, STEPS - 2)
        assert hooks._WATCH["modules"]._hooks is not None
    fwd = _forward_s(tmp_path / "s")
    assert len(fwd) == STEPS - 1 and (fwd >= FORWARD_S).all(), fwd


def test_a_class_with_its_own_state_keeps_forward_hooks(tmp_path: Any) -> None:
    model = OwnState()
    assert not wrappable(model) and wrappable(Sleepy())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with stepscope.session(name="own", store=str(tmp_path / "s")):
        _train(model, opt)
        assert SLOT not in vars(model) and len(model._forward_pre_hooks) == 1
        clone = pickle.loads(pickle.dumps(model))
        assert len(clone._forward_pre_hooks) == 0
    fwd = _forward_s(tmp_path / "s")
    assert len(fwd) == STEPS - 1 and (fwd >= FORWARD_S).all(), fwd


def test_torch_compile_trains_and_times_forward(tmp_path: Any) -> None:
    """``torch.compile``'s wrapper has its own ``__call__``: it keeps forward hooks, and training is unchanged."""
    torch.manual_seed(0)
    model = Sleepy()
    compiled = torch.compile(model, backend="eager")
    assert not wrappable(compiled)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with stepscope.session(name="compiled", store=str(tmp_path / "s")):
        _train(compiled, opt, 4)
    fwd = _forward_s(tmp_path / "s")
    assert len(fwd) == 3 and (fwd >= FORWARD_S).all(), fwd


def test_a_watched_model_exports_and_compiles_whole(tmp_path: Any) -> None:
    """While watched (its slot holding stepscope's call), the model exports with ``torch.export`` and compiles as
    one graph (``fullgraph=True``), and both compute what the model does: dynamo traces the model's forward,
    not the slot."""
    model = Scaled()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.ones(2, 3)
    with stepscope.session(name="exports", store=str(tmp_path / "s")):
        _train_scaled(model, opt)
        assert _timed(vars(model)[SLOT])
        with torch.no_grad():
            want = model._call_impl(x)
            exported = torch.export.export(model, (x,))
            assert torch.equal(exported.module()(x), want)
            whole = torch.compile(model, backend="eager", fullgraph=True)
            assert torch.equal(whole(x), want)


def test_the_slot_passes_its_self_check_here_and_fails_where_torch_ignores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """On this torch the call slot behaves (used); a torch whose ``Module.__call__`` no longer calls the slot, or
    that pickles it, fails the check with its reason (the models then keep forward hooks)."""
    from stepscope.collect.torch.modelcall import slot_fault

    assert slot_fault() is None
    monkeypatch.setattr(torch.nn.Module, "__call__", lambda self, *a, **k: self._call_impl(*a, **k))
    assert "0 times" in (slot_fault() or "")
    monkeypatch.undo()
    monkeypatch.setattr(torch.nn.Module, "__getstate__", lambda self: dict(self.__dict__))
    assert "pickle" in (slot_fault() or "")
