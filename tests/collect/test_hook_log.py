"""The compiled hooks' log mode (collect/_hooks_log.c): once the optimizer's timer marks a common step, the hooks
append events that are applied when anything reads the session or its step. A real training loop with a
DataLoader, nested phases and known sleeps: the log is in use, its rows are those of the Python bodies (which
have no log), what Python reads mid-step includes the logged work, a Python write ends the log and the next
common mark starts it again, and a forked child drops its parent's log."""

from __future__ import annotations

import importlib.util
import os
import time
from typing import Any

import numpy as np
import pytest

import stepscope
from stepscope.collect import hooks
from tests.collect.sleeps import slow_grad
from tests.conftest import load

torch = pytest.importorskip("torch")

if importlib.util.find_spec("stepscope.collect._hooks") is None:
    pytest.skip("the compiled hooks are not built (python setup.py build_ext --inplace)", allow_module_level=True)

from stepscope.collect import _hooks  # noqa: E402

FORWARD_S = 0.004
BACKWARD_S = 0.020
COMM_S = 0.015
MARGIN_S = 0.012
"""What one sleep may overrun by on a busy machine (medians of the steps); less than each nested sleep, so a
phase that counted a nested one would fail."""
BATCH = 4
STEPS = 10


SlowGrad = slow_grad(BACKWARD_S)
"""Identity whose backward sleeps BACKWARD_S."""


class Nested(torch.nn.Module):  # type: ignore[misc]
    """A forward that sleeps FORWARD_S, runs a backward of its own inside (as activation checkpointing does) and
    blocks COMM_S in a communication timed from Python (as comm.py adds it to the step), so the forward's own
    time is its sleep only."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 1)

    def forward(self, x: Any) -> Any:
        time.sleep(FORWARD_S)
        if torch.is_grad_enabled():
            torch.autograd.backward(SlowGrad.apply(self.lin.weight.sum()))
            s = stepscope.collect.session.current()
            t0 = time.perf_counter_ns()
            time.sleep(COMM_S)
            s.step.comm += time.perf_counter_ns() - t0
        return self.lin(x)


def _loop(store: str, states: list[tuple[bool, int]] | None = None) -> None:
    data = torch.utils.data.TensorDataset(torch.ones(BATCH * STEPS, 3), torch.ones(BATCH * STEPS, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH)
    model = Nested()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with stepscope.session(name="log", store=store):
        for x, y in loader:
            loss = SlowGrad.apply(torch.nn.functional.mse_loss(model(x), y))
            opt.zero_grad()
            loss.backward()
            opt.step()
            if states is not None:
                states.append(_hooks.log_state())


def _impl(monkeypatch: pytest.MonkeyPatch, impl: str) -> None:
    if impl == "py":
        monkeypatch.setenv(hooks.ENV_PURE_HOOKS, "1")
    else:
        monkeypatch.delenv(hooks.ENV_PURE_HOOKS, raising=False)


def test_logged_steps_are_the_python_bodies_steps(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop under the compiled bodies logs from its fourth step on (the first marks the steps' source, the
    FLOP counter runs at the next ones' boundaries, then a common mark starts the log), and its rows are the
    Python bodies': the same steps, samples and epochs, each phase its own sleeps (the forward's sleep only: not
    the backward or the communication inside it)."""
    got = {}
    for impl in ("c", "py"):
        _impl(monkeypatch, impl)
        states: list[tuple[bool, int]] = []
        _loop(str(tmp_path / impl), states)
        got[impl] = load(tmp_path / impl).ranks[0].steps
        if impl == "c":
            assert all(on for on, _ in states[3:]), states
            # the forward's communication reads the step (the events so far applied); the forward, the backward
            # and the step after it wait for a reader: the hooks only logged
            assert all(n == 3 for _, n in states[4:]), states
    for impl, steps in got.items():
        assert len(steps) == STEPS and list(steps["phase"]) == [0] * STEPS, impl
        assert list(steps["samples"]) == [float(BATCH)] * STEPS, impl
        assert list(steps["epoch"]) == [0] * STEPS, impl
        rows = slice(1, None)  # step 0 also carries model discovery and the FLOP count
        fwd = np.median(steps["forward_ns"][rows]) / 1e9
        bwd = np.median(steps["backward_ns"][rows]) / 1e9
        comm = np.median(steps["comm_ns"][rows]) / 1e9
        assert FORWARD_S <= fwd < FORWARD_S + MARGIN_S, (impl, fwd)
        assert 2 * BACKWARD_S <= bwd < 2 * (BACKWARD_S + MARGIN_S), (impl, bwd)
        assert COMM_S <= comm < COMM_S + MARGIN_S, (impl, comm)
        assert np.all(steps["data_wait_ns"] > 0), impl
    for col in ("forward_ns", "backward_ns", "comm_ns"):
        medians = [float(np.median(t[col][1:])) for t in got.values()]
        assert abs(medians[0] - medians[1]) / 1e9 < MARGIN_S, (col, medians)


def test_reads_and_writes_apply_the_log_first(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """In log mode a Python read of the step or the session applies the pending events first (it sees the logged
    forward and the step index past the logged marks); a write of a field other than a phase ends log mode (the
    hooks' events assume they alone write the step) and the next common mark starts it again."""
    _impl(monkeypatch, "c")
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(40, 3)), batch_size=BATCH)
    it = iter(loader)
    with stepscope.session(name="rw", store=str(tmp_path / "s")) as s:
        assert s is not None
        done = 0
        while not _hooks.log_state()[0]:  # the source, the FLOP counter's steps, then a common mark
            (x,) = next(it)
            model(x).sum().backward()
            opt.step()
            done += 1
            assert done <= 4, "log mode never started"
        assert _hooks.log_state() == (True, 0)  # the mark that started it was not logged
        (x,) = next(it)
        model(x).sum().backward()
        assert _hooks.log_state() == (True, 3)  # a fetch, a forward, a backward
        assert s.step.forward > 0 and s.step.backward > 0 and s.step.fetched and s.step.samples == BATCH
        assert _hooks.log_state() == (True, 0)
        opt.step()
        (x,) = next(it)
        model(x)
        assert _hooks.log_state() == (True, 3)  # the mark, a fetch, a forward
        assert s.step_index == done + 1 and s.step.samples == BATCH
        s.step.samples = 2.5  # not a phase: log mode ends
        assert _hooks.log_state() == (False, 0)
        opt.step()  # marked by the timer's own path, which starts log mode again
        assert _hooks.log_state() == (True, 0)
    steps = load(tmp_path / "s").ranks[0].steps
    assert list(steps["index"]) == list(range(done + 2))
    assert list(steps["samples"]) == [float(BATCH)] * (done + 1) + [2.5]


def test_a_forked_child_drops_its_parents_log(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child forked in log mode starts with no log (its parent's events are the parent's to apply), and the
    parent's pending events are applied in the parent as before."""
    _impl(monkeypatch, "c")
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(40, 3)), batch_size=BATCH)
    with stepscope.session(name="fork", store=str(tmp_path / "s")) as s:
        assert s is not None
        for (x,) in loader:
            model(x).sum().backward()
            opt.step()
        before = _hooks.log_state()
        assert before[0] and before[1] > 0
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report its log and leave without running any of the parent's exit code
            os.write(w, repr(_hooks.log_state()).encode())
            os._exit(0)
        os.close(w)
        with os.fdopen(r) as f:
            child = f.read()
        os.waitpid(pid, 0)
        assert child == "(False, 0)"
        assert _hooks.log_state() == before
        assert s.step_index == 10
    assert len(load(tmp_path / "s").ranks[0].steps) == 10


def test_a_collector_added_later_runs_from_the_next_boundary_only(tmp_path: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A per-step collector appended to a list read before (no read of the session in between, so the log is not
    applied) is not run for the steps logged before it came: it runs from the next step boundary on, on the
    training thread, once a boundary."""
    _impl(monkeypatch, "c")
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(40, 3)), batch_size=BATCH)
    calls: list[int] = []
    with stepscope.session(name="extras", store=str(tmp_path / "s")) as s:
        assert s is not None
        extras: list[Any] = []
        for i, (x,) in enumerate(loader):
            model(x).sum().backward()
            opt.step()
            if i == 5:
                extras = s.extras  # read in log mode (the FLOP counter has left the list it started with)
            if i == 6:
                assert _hooks.log_state()[0] and _hooks.log_state()[1] > 0  # steps logged, not yet applied
                extras.append(lambda: calls.append(1))
        assert len(calls) == 10 - 7  # the boundaries of steps 7, 8 and 9
        assert s.step_index == 10
    assert len(load(tmp_path / "s").ranks[0].steps) == 10
