"""What the faster reader and host nesting must keep: flow columns equal to the raw events' flows, the stack
walk equal to a plain reference stack, launched-call membership equal to ``np.isin``."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from stepscope.analyze.trace.nesting import parents_walk
from stepscope.analyze.trace.sets import member
from stepscope.traces.kineto import read_raw_events, read_trace
from tests.traces.tracebuild import fixture_files

_FLOW_CATS = {"ac2g", "async_cpu_to_gpu"}


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_flow_columns_are_the_raw_flow_events(path: Path) -> None:
    raw = [e for e in read_raw_events(path) if e.get("ph") in ("s", "f") and e.get("cat") in _FLOW_CATS]
    flows = read_trace(path).flows
    if not raw:
        assert not flows or not flows["id"].size
        return
    want = sorted((int(e["id"]), e["ph"] == "s", int(e["pid"]), int(e["tid"]), round(Fraction(e["ts"]) * 1000))
                  for e in raw)
    got = sorted(zip(flows["id"].tolist(), flows["is_start"].tolist(), flows["pid"].tolist(),
                     flows["tid"].tolist(), flows["ts_ns"].tolist()))
    assert len(got) == len(want)
    assert [g[:4] for g in got] == [w[:4] for w in want]
    assert max(abs(g[4] - w[4]) for g, w in zip(got, want)) <= 1  # float µs -> ns, exact to the nanosecond


def _reference_walk(pid: list[int], tid: list[int], ts: list[int], end: list[int], leaf: list[bool]) -> list[int]:
    """The definition, event by event: sort by (pid, tid, ts, -end, index); per thread, pop what ended by the
    start, the top encloses the event if it ends no later; non-leaf events are pushed."""
    n = len(ts)
    order = sorted(range(n), key=lambda i: (pid[i], tid[i], ts[i], -end[i], i))
    out = [-1] * n
    stack: list[int] = []
    thread: tuple[int, int] | None = None
    for i in order:
        if (pid[i], tid[i]) != thread:
            stack, thread = [], (pid[i], tid[i])
        while stack and end[stack[-1]] <= ts[i]:
            stack.pop()
        if stack and end[i] <= end[stack[-1]]:
            out[i] = stack[-1]
        if not leaf[i]:
            stack.append(i)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_walk_is_the_reference_stack(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 400
    ts = rng.integers(0, 300, n)
    end = ts + rng.integers(0, 60, n)  # random intervals: nested, partly overlapping, zero-length, equal
    pid, tid = rng.integers(0, 2, n), rng.integers(0, 3, n)
    leaf = rng.random(n) < 0.2
    got = parents_walk(pid, tid, ts, end, leaf).tolist()
    assert got == _reference_walk(pid.tolist(), tid.tolist(), ts.tolist(), end.tolist(), leaf.tolist())
    assert sum(p >= 0 for p in got) > n // 4  # the case has nesting to find


def test_member_is_isin() -> None:
    rng = np.random.default_rng(3)
    values, pool = rng.integers(-5, 50, 1000), rng.integers(0, 40, 30)
    assert np.array_equal(member(values, pool), np.isin(values, pool))
    assert not member(values, pool[:0]).any()
