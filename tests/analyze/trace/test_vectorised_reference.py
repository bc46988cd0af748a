"""The vectorised trace analyses against plain Python loops written here, on the real fixtures and on
adversarial synthetic cases (equal timestamps, zero durations, children ending exactly at their parent's
end, deep nesting, interleaved threads, unsorted input, partial overlaps)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest

from stepscope.analyze.trace.gpuview import gpu_view
from stepscope.analyze.trace.kernels import _direction, memory_copies
from stepscope.analyze.trace.nesting import _latest_cover, parents, thread_order
from stepscope.analyze.trace.ops import host_times, operator_table, subtree_sums
from stepscope.analyze.trace.sets import kind_mask, member, unique_inverse
from stepscope.analyze.trace.steps import CATEGORIES, _category_intervals, profiler_steps, step_summary
from stepscope.model.events import EventKind, EventTable
from stepscope.traces.components import ComponentRules
from stepscope.traces.kineto import read_trace
from tests.traces.tracebuild import ev, fixture_files, kernel, launch, write

Ints = np.ndarray


def reference_parents(pid: Ints, tid: Ints, ts: Ints, end: Ints, leaf: Ints | None = None) -> list[int]:
    """The stack walk, thread by thread: events by start, longest first, then by index."""
    n = len(ts)
    out = [-1] * n
    threads: dict[tuple[int, int], list[int]] = {}
    for i in range(n):
        threads.setdefault((int(pid[i]), int(tid[i])), []).append(i)
    for members in threads.values():
        stack: list[int] = []
        for i in sorted(members, key=lambda k: (int(ts[k]), -int(end[k]), k)):
            while stack and int(end[stack[-1]]) <= int(ts[i]):
                stack.pop()
            if stack and int(end[i]) <= int(end[stack[-1]]):
                out[i] = stack[-1]
            if leaf is None or not leaf[i]:
                stack.append(i)
    return out


def check(ts: list[int], end: list[int], pid: list[int] | None = None, tid: list[int] | None = None,
          leaf: list[bool] | None = None) -> list[int]:
    n = len(ts)
    a = [np.asarray(x if x is not None else [0] * n, dtype=np.int64) for x in (pid, tid, ts, end)]
    lf = np.asarray(leaf, dtype=bool) if leaf is not None else None
    want = reference_parents(*a, lf)
    got = parents(*a, leaf=lf).tolist()
    assert got == want, (ts, end, pid, tid, leaf)
    return got


def test_adversarial_nesting_cases() -> None:
    assert check([], []) == []
    assert check([5], [5]) == [-1]
    assert check([0, 0, 0], [10, 10, 10]) == [-1, 0, 1]  # equal bounds: the earlier index encloses the later
    assert check([0, 0, 0], [0, 0, 0]) == [-1, -1, -1]  # zero durations never enclose
    # a zero-length event inside the longer one starting with it; a child ending at its parent's end
    assert check([0, 5, 5], [10, 5, 10]) == [-1, 2, 0]
    assert check([0, 2, 10], [10, 10, 12]) == [-1, 0, -1]  # starts where the parent ends: a sibling
    assert check([0, 2, 3], [10, 12, 4]) == [-1, -1, 1]  # partial overlap: a sibling, whose child it keeps
    assert check([0, 2, 3, 11], [10, 12, 4, 11]) == [-1, -1, 1, 1]
    assert check([3, 0, 2], [4, 10, 12]) == [2, -1, -1]  # unsorted input
    # a leaf is never a parent: the event after it finds the one below
    assert check([0, 1, 2], [10, 9, 3], leaf=[False, True, False]) == [-1, 0, 0]
    # two threads interleaved in time and in index
    assert check([0, 0, 1, 1, 2, 2], [9, 9, 8, 8, 3, 3], pid=[1, 1, 1, 1, 1, 1], tid=[1, 2, 1, 2, 1, 2]) == \
        [-1, -1, 0, 1, 2, 3]
    depth = 300  # deep nesting, then a sibling after the whole tower
    ts = [*range(depth), 2 * depth]
    end = [*(2 * depth - k for k in range(depth)), 2 * depth + 1]
    assert check(ts, end) == [-1, *range(depth - 1), -1]
    assert check(ts[::-1], end[::-1]) == [-1, *range(2, depth + 1), -1]


@pytest.mark.parametrize("seed", range(3))
def test_random_nesting_against_the_reference(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(300):
        n = int(rng.integers(1, 60))
        ts = rng.integers(0, int(rng.integers(1, 30)), n)
        end = ts + rng.integers(0, 12, n) * (rng.random(n) < 0.9)
        pid, tid = rng.integers(0, 2, n), rng.integers(0, 3, n)
        leaf = rng.random(n) < 0.3
        check(ts.tolist(), end.tolist(), pid.tolist(), tid.tolist(), leaf.tolist())
        check(ts.tolist(), end.tolist(), pid.tolist(), tid.tolist())


def test_thread_order_is_the_lexsort() -> None:
    rng = np.random.default_rng(11)
    for _ in range(300):
        n = int(rng.integers(0, 50))
        ts = rng.integers(0, int(rng.integers(1, 10)), n)
        if rng.random() < 0.5:
            ts = np.sort(ts)
        end = ts + rng.integers(0, 4, n)
        pid, tid = rng.integers(0, int(rng.integers(1, 3)), n), rng.integers(0, int(rng.integers(1, 4)), n)
        want = sorted(range(n), key=lambda k: (pid[k], tid[k], ts[k], -end[k], k))
        assert thread_order(pid, tid, ts, end).tolist() == want


def test_latest_cover_against_painting() -> None:
    rng = np.random.default_rng(7)
    for trial in range(200):
        n = int(rng.integers(1, 200))
        start = np.sort(rng.choice(np.arange(1, n + 1), size=int(rng.integers(1, n + 1)), replace=False))
        stop = np.minimum(start + rng.integers(1, n + 1, start.size), n)
        keep = stop > start
        start, stop = start[keep], stop[keep]
        if not start.size:
            continue
        want = [-1] * n
        for a, b in zip(start.tolist(), stop.tolist()):
            for k in range(a, b):
                want[k] = max(want[k], a - 1)
        assert _latest_cover(start, stop, n).tolist() == want, trial


def host_arrays(t: EventTable) -> tuple[Ints, ...]:
    host = np.flatnonzero(np.isin(t["kind"], [EventKind.CPU_OP, EventKind.USER_ANNOTATION, EventKind.RUNTIME,
                                             EventKind.PYTHON_FUNCTION]))
    return t["pid"][host], t["tid"][host], t["ts_ns"][host], t.end_ns[host], t["kind"][host] == EventKind.RUNTIME


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_nesting_and_cpu_self_against_the_reference(path: Path) -> None:
    t = read_trace(path)
    pid, tid, ts, end, leaf = host_arrays(t)
    assert parents(pid, tid, ts, end, leaf=leaf).tolist() == reference_parents(pid, tid, ts, end, leaf)
    h = host_times(t, gpu_view(t))
    par = reference_parents(t["pid"][h.rows], t["tid"][h.rows], t["ts_ns"][h.rows], t.end_ns[h.rows])
    dur = t["dur_ns"][h.rows].tolist()
    child = [0] * len(dur)
    for j, p in enumerate(par):
        if p >= 0:
            child[p] += dur[j]
    assert h.cpu_self_ns.tolist() == [max(d - c, 0) for d, c in zip(dur, child)]


def test_sets_against_numpy() -> None:
    rng = np.random.default_rng(3)
    cases = [np.zeros(0, dtype=np.int64), np.asarray([5]), np.full(7, -2), rng.integers(-5, 5, 500),
             rng.integers(0, 2**62, 300), rng.integers(0, 3, 1000).astype(np.int8)]
    for v in cases:
        u, inv, cnt = unique_inverse(v)
        wu, winv, wcnt = np.unique(v, return_inverse=True, return_counts=True)
        assert u.tolist() == wu.tolist() and inv.tolist() == winv.tolist() and cnt.tolist() == wcnt.tolist()
        for pool in cases:
            assert member(v, pool).tolist() == np.isin(v, pool).tolist()
    kinds = rng.integers(0, len(EventKind), 300).astype(np.int8)
    for sel in [(), (EventKind.KERNEL,), (EventKind.CPU_OP, EventKind.OTHER, EventKind.SYNC)]:
        assert kind_mask(kinds, sel).tolist() == [int(k) in {int(s) for s in sel} for k in kinds.tolist()]


def reference_steps(t: EventTable) -> list[tuple[int, int, dict[str, int]]]:
    """Each step walked piece by piece between consecutive interval bounds; a piece counts in the first
    category with an interval over it."""
    cats = [(s.tolist(), e.tolist()) for s, e in _category_intervals(t, gpu_view(t))]  # sorted, disjoint

    def inside(a: int, b: int, starts: list[int], ends: list[int]) -> bool:
        i = bisect_right(starts, a) - 1
        return i >= 0 and b <= ends[i]

    out = []
    for r in profiler_steps(t).tolist():
        s, e = int(t["ts_ns"][r]), int(t.end_ns[r])
        cuts = {s, e}
        for starts, ends in cats:
            lo, hi = bisect_right(starts, s), bisect_left(ends, e)
            cuts |= {x for x in starts[max(lo - 1, 0):hi + 1] + ends[max(lo - 1, 0):hi + 1] if s < x < e}
        per = dict.fromkeys(CATEGORIES, 0)
        for a, b in pairwise(sorted(cuts)):
            c = next((i for i, iv in enumerate(cats) if inside(a, b, *iv)), len(CATEGORIES) - 1)
            per[CATEGORIES[c]] += b - a
        out.append((s, e - s, per))
    return out


def adversarial_step_trace(path: Path) -> Path:
    """Steps that touch, overlap and nest; events at step bounds, zero-length, spanning several steps."""
    return write(path, [
        ev("user_annotation", "ProfilerStep#1", 100, 50), ev("user_annotation", "ProfilerStep#2", 150, 50),
        ev("user_annotation", "ProfilerStep#3", 180, 60, tid=2), ev("user_annotation", "ProfilerStep#4", 190, 5),
        ev("user_annotation", "ProfilerStep#5", 300, 0),
        ev("cpu_op", "aten::mm", 100, 50), ev("cpu_op", "aten::add", 120, 0), ev("cpu_op", "aten::mm", 140, 60),
        ev("cpu_op", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 145, 20),
        launch(130, 20, 1), launch(150, 0, 2), launch(155, 10, 3),
        kernel("ampere_sgemm_128x64_tn", 135, 30, 1), kernel("ampere_sgemm_128x64_tn", 150, 0, 2),
        kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 160, 40, 3, stream=8),
        ev("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 195, 10, pid=0, tid=7, stream=7, device=0,
           correlation=9, bytes=64),
        ev("gpu_memset", "Memset (Device)", 199, 2, pid=0, tid=7, stream=7, device=0, correlation=10),
    ])


def test_step_breakdown_against_the_reference(tmp_path: Path) -> None:
    tables = [read_trace(adversarial_step_trace(tmp_path / "steps.json"))]
    tables += [read_trace(p) for p in fixture_files() if p.parent.name in ("v100_1rank", "cpu_only", "mi250_1rank")]
    for t in tables:
        got = [(s.start_ns, s.dur_ns, s.breakdown_ns) for s in step_summary(t, gpu_view(t)).steps]
        assert got == reference_steps(t)
        assert got
    first = step_summary(tables[0], gpu_view(tables[0])).steps
    assert [s.step for s in first] == [1, 2, 3, 4, 5]
    assert first[0].breakdown_ns["kernel"] == 15_000  # [135, 150) µs, before the copy and the communication


def test_top_shapes_and_copies_against_loops() -> None:
    rules = ComponentRules.defaults()
    for path in fixture_files():
        t = read_trace(path)
        gpu = gpu_view(t, rules)
        h = host_times(t, gpu)
        ops = h.rows[t["kind"][h.rows] == EventKind.CPU_OP]
        counters: dict[str, Counter[int]] = {}
        for r in ops.tolist():
            c = counters.setdefault(t.names[t["name"][r]], Counter())
            if t["shape"][r] >= 0:
                c[int(t["shape"][r])] += 1
        want = {k: tuple(t.shapes[s] for s, _ in c.most_common(3)) for k, c in counters.items()}
        assert {o.name: o.shapes for o in operator_table(t, h, rules)} == want
        copies: dict[str, list[int]] = {}
        for j, r in enumerate(gpu.rows.tolist()):
            k = int(gpu.kind[j])
            comp = gpu.components[gpu.component[j]]
            if k in (EventKind.MEMCPY, EventKind.MEMSET) or comp in ("memcpy", "memset"):
                c = copies.setdefault(_direction(t.names[t["name"][r]], k), [0, 0])
                c[0] += 1
                c[1] += int(t["dur_ns"][r])
        assert {c.direction: [c.count, c.dur_ns] for c in memory_copies(t, gpu)} == copies


def test_subtree_sums_against_a_children_first_loop() -> None:
    rng = np.random.default_rng(5)
    cases = [np.arange(-1, 2999)]  # a chain 3,000 deep
    for _ in range(300):  # random forests, parents before children, then shuffled
        n = int(rng.integers(0, 80))
        par = np.asarray([int(rng.integers(0, i)) if i and rng.random() < 0.8 else -1 for i in range(n)],
                         dtype=np.int64)
        cases.append(par)
    for par in cases:
        n = par.size
        values = rng.integers(0, 1000, n)
        want = values.copy()
        for i in range(n - 1, -1, -1):
            if par[i] >= 0:
                want[par[i]] += want[i]
        perm = rng.permutation(n)
        at = np.argsort(perm)  # new index of each old one
        shuffled = np.where(par[perm] >= 0, at[np.maximum(par[perm], 0)], -1)
        assert subtree_sums(values[perm], shuffled).tolist() == want[perm].tolist()
