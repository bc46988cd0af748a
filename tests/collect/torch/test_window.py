"""The profiler window: a pure schedule, and a real profiled run whose trace lands in the run."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from stepscope.collect.core import warmup
from stepscope.collect.torch.window import Action, window_schedule, window_steps
from tests.conftest import load


def test_schedule_by_hand():
    act = window_schedule(skip=3, wait=1, warmup=1, active=2)
    assert [act(n) for n in range(9)] == [Action.NONE] * 4 + [Action.WARMUP, Action.RECORD,
                                                                 Action.RECORD_AND_SAVE, Action.DONE, Action.DONE]
    assert window_steps(skip=3, wait=1, warmup=1, active=2) == (5, 6)
    one = window_schedule(skip=0, wait=0, warmup=0, active=1)
    assert one(0) is Action.RECORD_AND_SAVE and one(1) is Action.DONE


def test_profiled_run_saves_a_trace_of_exactly_the_window(observed, store):
    r = observed("tiny_train.py", "--steps", "20", opts=("--profile-steps", "3", "--warmup-steps", "2"))
    assert r.rc == 0, r
    data = load(store)
    assert "artifacts/traces/rank0.json.gz" in data.artifacts
    (window,) = data.ranks[0].extra["profile_window"]
    # default skip = max(3, --warmup-steps 2) = 3, wait 1, warm-up 1: steps 5, 6, 7 kept
    assert (window["first_step"], window["last_step"], window["traced_first_step"]) == (5, 7, 4)
    trace = json.loads(gzip.decompress((Path(data.path) / window["trace"]).read_bytes()))
    names = [e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
    labels = sorted(int(re.sub(r"\D", "", n)) + window["profiler_step_offset"] for n in set(names))
    assert labels == [5, 6, 7]
    assert any(e.get("cat") == "cpu_op" and e["name"] == "aten::addmm" for e in trace["traceEvents"])
    # the traced steps (4..7) and the step that carried writing the trace (8) are not in the step
    # statistics; 20 steps, 2 warm-up, and the one step whose FLOPs were counted (slowed by counting)
    from stepscope.analyze.run.summary import summarize_run

    assert window["carried_step"] == 8
    flops_steps = {r["step"] for r in data.ranks[0].extra.get("flops", [])} - {0, 1, 4, 5, 6, 7, 8}
    st = summarize_run(data).ranks[0].steps
    assert st.measured_steps == 20 - 2 - 5 - len(flops_steps)


def test_profiler_window_longer_than_the_run_never_breaks_it(observed, store):
    r = observed("tiny_train.py", "--steps", "6", opts=("--profile-steps", "50"))
    assert r.rc == 0
    assert load(store).run.status.value == "completed"


def test_profile_memory_names_the_allocating_operators(observed, cli, store):
    r = observed("tiny_train.py", "--steps", "14", opts=("--profile-steps", "2", "--profile-memory",
                                                         "--flops-per-step", "0"))
    assert r.rc == 0, r
    from stepscope.analyze.run.summary import summarize_run

    ops = {o.name: o for o in summarize_run(load(store)).ranks[0].memory_ops}
    # forward of Linear(16, 32) on a batch of 8 allocates its float32 output in aten::addmm: 8*32*4 bytes,
    # and Linear(32, 4) 8*4*4 bytes; 2 profiled steps
    assert ops["aten::addmm"].calls == 4
    assert ops["aten::addmm"].self_cpu_bytes == 2 * (8 * 32 * 4 + 8 * 4 * 4)
    shown = cli("show", "latest")
    assert "Operators that allocate most" in shown.out and "aten::addmm" in shown.out


def test_auto_skip_places_the_window_after_the_automatic_warmup():
    from stepscope.analyze.run.steps import MAX_AUTO_WARMUP, warmup_steps

    assert warmup.MAX_AUTO_WARMUP == MAX_AUTO_WARMUP
    assert warmup.auto_skip(None) == 10 and warmup.auto_skip(8) == 3 and warmup.auto_skip(55) == 6
    assert warmup.auto_skip(10_000) == 10
    import numpy as np

    # a run of one epoch of B batches: the window's first traced step is past the automatic warm-up
    for b in (8, 30, 55, 99, 100, 1000):
        assert warmup.auto_skip(b) + 1 >= warmup_steps(np.ones(b))


@pytest.mark.slow
def test_writing_the_trace_is_left_out_of_the_step_statistics(observed, store):
    """The trace of a window of 3 steps with 2,000 ops each takes seconds to write, at the boundary
    after the window: the step that carries it is named and left out, so no measured step holds it."""
    from stepscope.analyze.run.summary import summarize_run

    r = observed("honest_train.py", "many-ops", opts=("--profile-steps", "3", "--flops-per-step", "0"))
    assert r.rc == 0, r
    data = load(store)
    (window,) = data.ranks[0].extra["profile_window"]
    (boundary,) = data.ranks[0].extra["profile_boundary"]
    # 8 batches per epoch: skip max(3, 10% of 8) = 3, wait 1, warm-up 1: steps 5-7 kept, written at 8
    assert (window["traced_first_step"], window["first_step"], window["last_step"]) == (4, 5, 7)
    assert window["carried_step"] == boundary["carried_step"] == 8
    cost_ns = boundary["boundary_s"] * 1e9
    steps = data.ranks[0].steps
    assert steps.duration_ns[8] >= cost_ns  # the raw step holds the cost ...
    assert cost_ns > 0.5e9  # ... which is large (the test can fail) ...
    st = summarize_run(data).ranks[0].steps
    assert st.step_time.max < 0.5 * cost_ns  # ... and no measured step holds it (others: 25-250 ms loaded)
    assert st.measured_steps == 40 - st.warmup_steps - len(set(range(4, 9)) - set(range(st.warmup_steps)))


@pytest.mark.slow
def test_a_run_shorter_than_its_window_says_so(observed, store):
    r = observed("tiny_train.py", "--steps", "6", opts=("--profile-steps", "4", "--flops-per-step", "0"))
    assert r.rc == 0, r
    notes = " ".join(load(store).ranks[0].notes)
    assert "ended after 6 steps, before its profiler window (steps 5-8) was complete" in notes
