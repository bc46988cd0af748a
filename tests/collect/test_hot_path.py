"""The zero-code hooks' per-step work, held to a budget without timing anything.

A timing test either flakes on a busy machine or allows so much that it catches nothing; the number of
Python calls stepscope's code makes per training step, and the C functions it calls, do not depend on the
load. benchmarks/_hotpath.py counts them (sys.setprofile); benchmarks/hook_costs.py turns them into µs.
"""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("torch")

from benchmarks._hotpath import count_calls, measure, process_calls

from stepscope.collect import hooks
from stepscope.collect.buffers import STEP_COLS, Buffers

COMPILED = hooks.use_compiled() is not None
"""The compiled hook bodies (collect/_hooks*.c: the loader's __next__, forward pre + post, backward, the
optimizer's step timer with its StepState) are in use: no Python call for them."""
STEP_PY_CALLS_COMPILED = 0.5
"""Budget with the compiled bodies (0.2 at the time of writing: the loader's Python helpers, once a pass at its
first two batches and its end; 1.0 while the model's call slot held a Python function, modelcall.py)."""
STEP_C_CALLS_COMPILED = 0.5
"""The same for C calls (0.2 at the time of writing; 1.0 while the slot function called the compiled forward
timing: C called from C is not seen; 5.0 before the hooks were compiled)."""
PROCESS_PY_CALLS_COMPILED = 0.5
"""Whole process, hooked minus bare, with the compiled bodies (0.0-0.19 at the time of writing: the loader's
per-pass helpers; 1.0-1.2 with a Python slot function, 3.0-3.2 while the model had forward hooks, the three calls
of torch's slow ``Module.__call__`` path)."""
PROCESS_C_CALLS_COMPILED = 0.5
"""The same for C calls (0.0-0.28 at the time of writing, 1.0-1.25 with a Python slot function, 7.0-7.3 with
forward hooks)."""
STEP_PY_CALLS = 9
"""Budget of stepscope Python calls per DataLoader + Linear + SGD step (8.0 at the time of writing: the
loader's __next__, the slot function and the timed call with the model's pre and post, backward, the
optimizer's step timer with the step mark written out, and the new StepState; 39 before issue 20, 15.1 after
its first pass, 8.1 after its second)."""
STEP_C_CALLS = 13
"""Budget of C calls made by stepscope code per step (12.0 at the time of writing; 56 before issue 20,
14.2 after its second pass)."""
PROCESS_PY_CALLS = 10
"""Budget of Python calls per step of the whole process, hooked minus bare, for each issue-20 script (7.0-8.2 at
the time of writing; 8-9 with forward hooks and torch's slow call path)."""
PROCESS_C_CALLS = 14
"""The same for C calls (8.0-12.3 at the time of writing, 13-17 with forward hooks)."""


@pytest.fixture(scope="module")
def counts() -> dict[str, object]:
    return measure(steps=60)


def test_step_calls_within_budget(counts: dict[str, object]) -> None:
    step = counts["step"]
    listing = "\n".join(f"{v:5.1f} {k}" for k, v in step.by_function.most_common())  # type: ignore[attr-defined]
    py, c = (STEP_PY_CALLS_COMPILED, STEP_C_CALLS_COMPILED) if COMPILED else (STEP_PY_CALLS, STEP_C_CALLS)
    assert step.py_calls <= py, listing  # type: ignore[attr-defined]
    assert step.c_calls <= c, listing  # type: ignore[attr-defined]
    # the hooks did run (a budget met by hooks that never fire would prove nothing; the compiled bodies'
    # runs are proved by the phases they record, test_hook_impls.py)
    python_bodies = ("loader.py:__next__", "hooks.py:backward", "modules.py:pre", "modules.py:post", "hooks.py:step",
                     "modelcall.py:call", "modelcall.py:_compiled_call_impl")
    for fn in python_bodies:
        # once a step (the loader's also once per pass, at its end); none with the compiled bodies
        n = step.by_function[f"collect/{fn}"]  # type: ignore[attr-defined]
        assert n == 0 if COMPILED else 1.0 <= n <= 1.1, listing


@pytest.mark.parametrize("script", ["loader48", "linear", "many"])
def test_whole_process_calls_within_budget(script: str) -> None:
    """What the hooks make the process do per step, torch's side included (a module with forward hooks would
    take torch's slow call path): the three step shapes of issue 20, counted hooked minus bare."""
    py, c, marked = process_calls(script, steps=32)
    assert marked == 1.0  # the hooks ran: every counted step was marked (no profile function sees the compiled ones)
    if COMPILED:
        assert py <= PROCESS_PY_CALLS_COMPILED
        assert c <= PROCESS_C_CALLS_COMPILED
    else:
        assert 6.0 <= py <= PROCESS_PY_CALLS  # the hooks ran (at least stepscope's 6 per-step calls), no more
        assert c <= PROCESS_C_CALLS


def test_region_is_three_python_calls(counts: dict[str, object]) -> None:
    """PyRegion: region(), __enter__, __exit__ and nothing else; the compiled region (the default where
    built): no Python call at all (test_region_impls.py counts each implementation)."""
    from stepscope.collect import regions

    region = counts["region"]
    compiled = regions.region is regions.CRegion
    assert region.py_calls == (0.0 if compiled else 3.0)  # type: ignore[attr-defined]
    assert region.c_calls <= 6.0  # type: ignore[attr-defined]


def test_counter_sees_calls() -> None:
    """The counter attributes calls to stepscope's files only, one per call."""
    from stepscope.collect import nesting

    class St:
        data_wait = forward = backward = optimizer = comm = 1

    class S:
        step = St()

    c = count_calls(lambda: nesting.enter(S()), 10)
    assert c.py_calls == 1.0 and c.c_calls == 1.0  # enter() and its perf_counter_ns()
    assert c.by_function == {"collect/nesting.py:enter": 1.0}


def test_flush_takes_whole_step_rows_while_a_thread_appends() -> None:
    """Steps take no lock: a drain running while rows are appended gets each row once, whole."""
    b = Buffers(wall_offset_ns=1000)
    n = 20000

    def writer() -> None:
        for i in range(n):
            b.add_step((i, i, i + 1, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 0, 0))

    t = threading.Thread(target=writer)
    t.start()
    got: list[dict[str, list[object]]] = []
    while t.is_alive():
        got.extend(r["cols"] for r in b.drain() if r["kind"] == "steps")
    t.join()
    got.extend(r["cols"] for r in b.drain() if r["kind"] == "steps")
    assert all(list(cols) == list(STEP_COLS) for cols in got)
    index = [i for cols in got for i in cols["index"]]
    assert index == list(range(n))
    starts = [s for cols in got for s in cols["start_ns"]]
    assert starts == [i + 1000 for i in range(n)]  # converted to wall clock at the drain
    assert all(len(set(map(len, cols.values()))) == 1 for cols in got)  # no half row
    assert all(x is None for cols in got for x in cols["device_ns"])
