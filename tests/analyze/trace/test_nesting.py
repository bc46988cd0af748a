"""nesting.parents (NumPy) against the stack walk that defines it; subtree sums against a loop."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope.analyze.trace.gpuview import gpu_view
from stepscope.analyze.trace.nesting import parents, parents_walk
from stepscope.analyze.trace.ops import host_times, subtree_sums
from stepscope.model.events import EventKind
from stepscope.traces.kineto import read_trace
from tests.traces.tracebuild import fixture_files


def _nested(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    ivs: list[tuple[int, int]] = []

    def gen(lo: int, hi: int, depth: int) -> None:
        t = lo
        while t < hi and len(ivs) < n:
            if rng.random() < 0.3:
                t += int(rng.integers(0, 3))
                continue
            d = min(int(rng.integers(0, max(1, hi - t) + 1)), hi - t)
            ivs.append((t, t + d))
            if depth < 5 and d > 1:
                gen(t, t + d, depth + 1)
            t += d + int(rng.integers(0, 2))

    gen(0, 200, 0)
    perm = rng.permutation(len(ivs))
    arr = np.asarray(ivs, dtype=np.int64).reshape(-1, 2)[perm]
    return arr[:, 0].copy(), arr[:, 1].copy()


@pytest.mark.parametrize("seed", range(4))
def test_random_events_match_the_walk(seed: int) -> None:
    rng = np.random.default_rng(seed)
    walked = 0
    for trial in range(400):
        if trial % 2:  # properly nested, zero-length events and equal bounds included; leaves may overlap
            ts, end = _nested(rng, int(rng.integers(1, 60)))
        else:  # anything: partial overlaps everywhere
            n = int(rng.integers(0, 40))
            ts = rng.integers(0, 20, n)
            end = ts + rng.integers(0, 8, n)
        n = ts.size
        pid, tid = rng.integers(0, 2, n), rng.integers(0, 3, n)
        leaf = rng.random(n) < 0.25 if trial % 3 else None
        if leaf is not None and trial % 2:
            end = end + np.where(leaf, rng.integers(0, 3, n), 0)
        want = parents_walk(pid, tid, ts, end, leaf)
        assert np.array_equal(parents(pid, tid, ts, end, leaf), want), (trial, ts, end, leaf)
        walked += int((want >= 0).sum())
    assert walked > 1000  # the cases do nest


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_host_events_match_the_walk(path) -> None:  # type: ignore[no-untyped-def]
    t = read_trace(path)
    host = np.flatnonzero(np.isin(t["kind"], [EventKind.CPU_OP, EventKind.USER_ANNOTATION, EventKind.RUNTIME,
                                             EventKind.PYTHON_FUNCTION]))
    leaf = t["kind"][host] == EventKind.RUNTIME
    args = (t["pid"][host], t["tid"][host], t["ts_ns"][host], t.end_ns[host])
    assert np.array_equal(parents(*args, leaf=leaf), parents_walk(*args, leaf=leaf))


def test_subtree_sums_match_a_child_first_loop() -> None:
    for path in fixture_files():
        t = read_trace(path)
        h = host_times(t, gpu_view(t))
        want = h.device_self_ns.copy()
        ts, end = t["ts_ns"][h.rows], t.end_ns[h.rows]
        for j in np.lexsort((-end, ts))[::-1].tolist():  # the former loop: children before parents
            if h.parent[j] >= 0:
                want[h.parent[j]] += want[j]
        assert np.array_equal(h.device_total_ns, want)
        assert np.array_equal(subtree_sums(h.device_self_ns, h.parent), want)
