"""The compiled StepState and SessionCore (collect/_hooks_state.c) against their Python references (pystate.py):
every value assigned is read back the same, of the same type, whatever the arithmetic done on it."""

from __future__ import annotations

import importlib.util
import math
import sys
import time
from typing import Any

import pytest

from stepscope.collect import pystate
from stepscope.collect.options import Options
from stepscope.collect.session import Session

BUILT = importlib.util.find_spec("stepscope.collect._hooks") is not None
FIELDS = pystate.PyStepState.__slots__
needs_build = pytest.mark.skipif(not BUILT, reason="the compiled hooks are not built")

# (field, operation, operand): exact ints in and beyond 64 bits, floats, NaN, None, bools, other objects
OPS: list[tuple[str, str, Any]] = [
    ("forward", "+=", 5), ("forward", "+=", 2**63 - 6), ("forward", "+=", 1), ("forward", "-=", 2**63),
    ("backward", "+=", -7), ("backward", "-=", 2.5), ("optimizer", "=", True), ("optimizer", "+=", 1),
    ("comm", "=", 2**80), ("comm", "-=", 2**80 - 3), ("data_wait", "=", float("nan")), ("data_wait", "+=", 1),
    ("start", "=", 123), ("start", "=", None), ("samples", "+=", 48.0), ("samples", "+=", 2), ("samples", "-=", 50),
    ("fetched", "=", True), ("fetched", "=", 1), ("tokens", "=", "x"), ("tokens", "+=", "y"), ("epoch", "=", 3),
    ("epoch", "+=", -4), ("epoch", "=", 2**64),
]


def _seen(v: Any) -> tuple[type, str]:
    return type(v), "nan" if isinstance(v, float) and math.isnan(v) else repr(v)


def _apply(st: Any, field: str, op: str, x: Any) -> None:
    if op == "=":
        setattr(st, field, x)
    elif op == "+=":
        setattr(st, field, getattr(st, field) + x)
    else:
        setattr(st, field, getattr(st, field) - x)


@needs_build
@pytest.mark.parametrize(("start", "epoch"), [(123, 4), (None, -1), (2**70, 0)])
def test_a_new_step_state_matches_the_reference(start: Any, epoch: int) -> None:
    from stepscope.collect import _hooks

    ref = pystate.PyStepState(start, epoch)
    for made in (_hooks.StepState(start, epoch), _hooks.new_step_state(start, epoch)):
        assert type(made) is pystate.StepState is _hooks.StepState
        assert {f: _seen(getattr(made, f)) for f in FIELDS} == {f: _seen(getattr(ref, f)) for f in FIELDS}


@needs_build
def test_step_state_arithmetic_matches_the_reference() -> None:
    from stepscope.collect import _hooks

    c, ref = _hooks.StepState(None, -1), pystate.PyStepState(None, -1)
    for field, op, x in OPS:
        _apply(c, field, op, x)
        _apply(ref, field, op, x)
        assert _seen(getattr(c, field)) == _seen(getattr(ref, field)), (field, op, x)
    for st in (c, ref):
        with pytest.raises(AttributeError):
            st.other = 1  # type: ignore[union-attr]


@needs_build
def test_session_attributes_live_in_the_core_and_read_back(tmp_path: Any) -> None:
    """A Session is a SessionCore: what Python assigns is read back (and deleted) as from an instance dict."""
    from stepscope.collect import _hooks

    s = Session(tmp_path, "r", Options())
    assert isinstance(s, _hooks.SessionCore)
    assert "step" not in vars(s) and "active" not in vars(s)
    assert (s.active, s.disabled, s.api_fetch, s.step_source, s.extras, s.step_index, s.epoch) == (
        False, False, False, None, [], 0, -1)
    assert type(s.step) is _hooks.StepState and s.step.start is None
    marker = object()
    for name in ("step", "active", "disabled", "api_fetch", "step_source", "extras", "step_index", "epoch"):
        setattr(s, name, marker)
        assert getattr(s, name) is marker
        delattr(s, name)
        with pytest.raises(AttributeError):
            getattr(s, name)


@needs_build
def test_hooks_read_sessions_of_any_class_after_a_session_core(tmp_path: Any) -> None:
    """The compiled bodies keep the last SessionCore subclass they met for a one-compare check: a Session and an
    object of another class (read by attribute) are each timed right, in turn and again."""
    from types import SimpleNamespace

    from stepscope.collect import _hooks

    def failed(key: str, text: str) -> None:
        raise AssertionError(text)

    for _ in range(2):
        for s in (Session(tmp_path, "r", Options()),
                  SimpleNamespace(step=pystate.PyStepState(None, 0), active=True, disabled=False, warn_once=failed)):
            wrapped = _hooks.Backward(s, lambda: time.sleep(0.002))
            before = s.step.backward
            wrapped()
            assert 2_000_000 <= s.step.backward - before < 1_000_000_000, type(s)  # the sleep, read from s


@needs_build
@pytest.mark.parametrize("forward", [2**64, 0.25, -(2**63)])
def test_phase_sums_past_c_numbers_take_python_s_arithmetic(tmp_path: Any, forward: Any) -> None:
    """The compiled hooks sum the phases as C numbers only while they are ones; a phase past a long long, or a
    float, goes through Python's arithmetic (the out-of-line paths): the backward's own time (its sleep, an int:
    what was attributed meanwhile is counted in ns) is added to such a backward as Python adds it, and the other
    phase is left as it was."""
    from stepscope.collect import _hooks

    s = Session(tmp_path, "r", Options())
    s.step.forward = 7
    s.step.backward = forward
    wrapped = _hooks.Backward(s, lambda: time.sleep(0.002))
    wrapped()
    got = s.step.backward
    assert type(got) is type(forward + 0), got  # int + int stays an int, a float makes it a float
    assert 2_000_000 <= got - forward < 1_000_000_000
    assert s.step.forward == 7
    wrapped()
    assert 4_000_000 <= s.step.backward - forward < 2_000_000_000


def test_the_references_are_what_an_unbuilt_install_uses() -> None:
    """Without the extension, StepState and SessionCore are the Python references (the import's fallback)."""
    import sys

    saved = sys.modules.get("stepscope.collect._hooks")
    sys.modules["stepscope.collect._hooks"] = None  # type: ignore[assignment]  # import fails as unbuilt
    try:
        fresh = importlib.reload(pystate)
        assert fresh.StepState is fresh.PyStepState and fresh.SessionCore is fresh.PySessionCore
    finally:
        if saved is None:
            del sys.modules["stepscope.collect._hooks"]
        else:
            sys.modules["stepscope.collect._hooks"] = saved
        importlib.reload(pystate)


UNBUILT_TRAINING = """
import sys, time
sys.modules["stepscope.collect._hooks"] = None  # as if the extension had not built
import torch, stepscope
from stepscope.collect import hooks, pystate, session
assert session.StepState is pystate.PyStepState and session.Session.__mro__[1] is pystate.PySessionCore
assert hooks.compiled_hooks() is None

class Slow(torch.nn.Linear):
    def forward(self, x):
        time.sleep(0.005)
        return super().forward(x)

model = Slow(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(15, 3)), batch_size=5)
with stepscope.session(name="unbuilt", store=sys.argv[1]):
    for (x,) in data:
        model(x).sum().backward()
        opt.step()
    assert type(iter(data)._stepscope_pass) is pystate.PyPassState
"""


@pytest.mark.slow
def test_a_session_records_without_the_extension(tmp_path: Any) -> None:
    """A whole training session on the Python references alone (an install where the C extension did not
    build): every step recorded with its samples, data wait and phases."""
    pytest.importorskip("torch")
    import subprocess

    from tests.conftest import PY, load

    store = tmp_path / "s"
    r = subprocess.run([PY, "-c", UNBUILT_TRAINING, str(store)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    steps = load(store).ranks[0].steps
    assert list(steps["samples"]) == [5.0, 5.0, 5.0] and list(steps["index"]) == [0, 1, 2]
    assert list(steps["epoch"]) == [0, 0, 0]  # the pass counted by the Python PassState
    assert (steps["forward_ns"] >= 5e6).all() and (steps["data_wait_ns"] > 0).all()
    assert (steps["backward_ns"] > 0).all() and (steps["optimizer_ns"] > 0).all()


@needs_build
def test_a_step_row_hook_other_than_the_log_gets_python_s_rows(tmp_path: Any) -> None:
    """Where ``session.step_row`` is not the buffers' StepLog, the compiled timer leaves every mark to Python's
    mark_step (tuples); buffers.py's compiled ``columns`` and a StepLog give those rows the columns zip(*rows)
    gives, and ``columns`` refuses a row of the wrong width."""
    torch = pytest.importorskip("torch")
    import stepscope
    from stepscope.collect import _hooks, buffers
    from stepscope.collect.session import current

    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    rows: list[Any] = []
    with stepscope.session(name="rows", store=str(tmp_path)):
        s = current()
        assert s is not None
        s.step_row, kept = rows.append, s.step_row  # the rows kept here, out of the flusher's reach
        for _ in range(6):
            model(torch.ones(4, 3)).sum().backward()
            opt.step()
        s.step_row = kept
    kinds = [type(r).__name__ for r in rows]
    assert kinds == ["tuple"] * 6, kinds
    mixed = [*rows, (7, 1, 2, 4.0, math.nan, math.nan, 5, 6, 7, math.nan, -1, 0)]
    got, want = buffers._columns(mixed, 12), buffers._py_columns(mixed, 12)
    assert [[_seen(v) for v in col] for col in got] == [[_seen(v) for v in col] for col in want]
    log = _hooks.StepLog()
    for r in mixed:
        log(r)
    assert [[_seen(v) for v in col] for col in log.take()] == [[_seen(v) for v in col] for col in want]
    assert got[0] == (0, 1, 2, 3, 4, 5, 7) and got[3] == (4.0,) * 7
    assert buffers._columns([], 5) == buffers._py_columns([], 5) == [()] * 5
    with pytest.raises(ValueError, match="row 1 has 2 fields, not 3"):
        buffers._columns([(1, 2, 3), (1, 2)], 3)


@needs_build
def test_a_pass_state_matches_the_reference() -> None:
    """The compiled PassState reads back what its reference does, as the loader hooks use it."""
    from stepscope.collect import _hooks

    c, ref = _hooks.PassState(140000, 3), pystate.PyPassState(140000, 3)
    for p in (c, ref):
        p.batches = p.batches + 1
        assert (p.key, p.token, p.batches, p.epoch) == (140000, 3, 1, None)
        p.epoch = 2
        assert p.epoch == 2
    with pytest.raises(AttributeError):
        c.key = 1  # type: ignore[misc]  # the pass's loader and token are fixed


@needs_build
def test_a_step_log_gives_the_columns_zip_gives() -> None:
    """The buffers' compiled StepLog: rows appended by calling it (tuples of any values, and StepRows) come back
    from take() as the columns zip(*rows) makes, ints as ints and every other value the object appended; take()
    leaves it empty, and a row of the wrong width or a non-sequence is refused without a row lost."""
    import gc

    from stepscope.collect import _hooks

    class Obj:
        pass

    log = _hooks.StepLog()
    marker = Obj()
    rows: list[tuple[Any, ...]] = [
        (i, 10**13 + i, 2**70 + i, 48.0, math.nan, i * 3, True, -5, 0, None, marker, 2**63 - 1) for i in range(200)]
    for r in rows:  # 200 rows: the array grows past its first 64
        log(r)
    assert len(log) == 200
    with pytest.raises(ValueError, match="a row has 2 fields, not 12"):
        log((1, 2))
    with pytest.raises(TypeError, match="a row is not a sequence"):
        log(7)
    got = log.take()
    assert len(log) == 0 and log.take() == [()] * 12
    want = list(zip(*rows, strict=True))
    assert [[_seen(v) for v in col] for col in got] == [[_seen(v) for v in col] for col in want]
    assert all(v is marker for v in got[10])
    # a row that holds the log itself: a cycle the collector frees
    ref = _hooks.StepLog()
    ref((0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ref, 11))
    del ref
    assert gc.collect() >= 1


@needs_build
def test_a_step_log_out_of_memory_keeps_every_row() -> None:
    """take() failing for memory at any one of its allocations (tests/scripts/steplog_nomemory.py, in a process of
    its own) raises MemoryError with every row back in the log, and the next take() gives them all, in order."""
    import subprocess

    from tests.conftest import PY, SCRIPTS

    pytest.importorskip("_testcapi")  # CPython's test module, in every CPython build this project uses
    done = subprocess.run([PY, str(SCRIPTS / "steplog_nomemory.py")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    failed, ok = map(int, done.stdout.split())
    assert failed >= 50 and ok >= 1, (failed, ok)  # the failures fell inside take(), and past its last allocation


def _python_calls_of_steps(model: Any, opt: Any, steps: int) -> list[str]:
    """The names of the Python functions called while ``steps`` training steps of ``model`` (a ``Linear(3, 1)``) run
    (``sys.setprofile``)."""
    import torch

    names: list[str] = []
    sys.setprofile(lambda frame, event, arg: names.append(frame.f_code.co_name) if event == "call" else None)
    try:
        for _ in range(steps):
            model(torch.ones(4, 3)).sum().backward()
            opt.step()
    finally:
        sys.setprofile(None)
    return names


@needs_build
def test_the_compiled_timer_writes_its_rows_into_the_step_log(tmp_path: Any) -> None:
    """Inside a session the step hook is bound to the buffers' StepLog, the compiled step timer marks each step
    (no Python mark_step) into it, and the rows read back whole: consecutive indices, each step starting where
    the one before ended, the samples of the forward input."""
    torch = pytest.importorskip("torch")
    import stepscope
    from stepscope.collect import _hooks
    from stepscope.collect.session import current

    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with stepscope.session(name="log", store=str(tmp_path)):
        s = current()
        assert s is not None and isinstance(s.buffers.step_rows, _hooks.StepLog)
        assert s.step_row is s.buffers.step_rows
        for _ in range(4):  # the first steps' marks (the model found, the FLOP count) are Python's
            model(torch.ones(4, 3)).sum().backward()
            opt.step()
        before = len(s.buffers.step_rows)
        py_frames = _python_calls_of_steps(model, opt, 5)
        assert len(s.buffers.step_rows) == before + 5
        assert "mark_step" not in py_frames  # marked by the compiled timer, which wrote into the log
        cols = s.buffers.step_rows.take()
    index, start, end = cols[0], cols[1], cols[2]
    assert list(index[-5:]) == list(range(index[-5], index[-5] + 5))
    assert all(type(v) is int for v in start + end) and all(b > a for a, b in zip(start, end, strict=True))
    assert list(end[-5:-1]) == list(start[-4:])  # each step starts where the one before ended
    assert all(v == 4.0 for v in cols[3][-5:])  # samples of the first forward input


@needs_build
def test_the_compiled_timer_counts_the_step_index_past_a_long_long(tmp_path: Any) -> None:
    """The compiled step mark counts ``session.step_index`` from its row's C number while it is one, and past a
    long long by Python's arithmetic: the rows carry each index once, in order, and the session reads back the
    next one, an int."""
    torch = pytest.importorskip("torch")
    import stepscope
    from stepscope.collect.session import current

    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    first = 2**63 - 2
    with stepscope.session(name="index", store=str(tmp_path)):
        s = current()
        assert s is not None
        for _ in range(4):  # the first steps' marks (the model found, the FLOP count) are Python's
            model(torch.ones(4, 3)).sum().backward()
            opt.step()
        s.buffers.step_rows.take()
        s.step_index = first
        py_frames = _python_calls_of_steps(model, opt, 3)
        assert "mark_step" not in py_frames  # the compiled mark counted them
        assert s.step_index == first + 3 and type(s.step_index) is int
        index = s.buffers.step_rows.take()[0]
    assert list(index) == [first, first + 1, first + 2]
