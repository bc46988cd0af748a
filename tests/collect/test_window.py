"""The profiler window: a pure schedule, and a real profiled run whose trace lands in the run."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from stepscope.collect.window import Action, window_schedule, window_steps
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
    # the traced steps (4..7) are not in the step statistics; 20 steps, 2 warm-up, and the one step
    # whose FLOPs were counted (slowed by counting) outside the window
    from stepscope.analyze.summary import summarize_run

    flops_steps = {r["step"] for r in data.ranks[0].extra.get("flops", [])} - {0, 1, 4, 5, 6, 7}
    st = summarize_run(data).ranks[0].steps
    assert st.measured_steps == 20 - 2 - 4 - len(flops_steps)


def test_profiler_window_longer_than_the_run_never_breaks_it(observed, store):
    r = observed("tiny_train.py", "--steps", "6", opts=("--profile-steps", "50"))
    assert r.rc == 0
    assert load(store).run.status.value == "completed"


def test_profile_memory_names_the_allocating_operators(observed, cli, store):
    r = observed("tiny_train.py", "--steps", "14", opts=("--profile-steps", "2", "--profile-memory",
                                                         "--flops-per-step", "0"))
    assert r.rc == 0, r
    from stepscope.analyze.summary import summarize_run

    ops = {o.name: o for o in summarize_run(load(store)).ranks[0].memory_ops}
    # forward of Linear(16, 32) on a batch of 8 allocates its float32 output in aten::addmm: 8*32*4 bytes,
    # and Linear(32, 4) 8*4*4 bytes; 2 profiled steps
    assert ops["aten::addmm"].calls == 4
    assert ops["aten::addmm"].self_cpu_bytes == 2 * (8 * 32 * 4 + 8 * 4 * 4)
    shown = cli("show", "latest")
    assert "Operators that allocate most" in shown.out and "aten::addmm" in shown.out
