"""Queue length, memory bandwidth and GPU annotations against HolisticTraceAnalysis on every fixture (goldens
made by tests/traces/golden/make_golden_counters.py, HTA 0.5.0).

HTA keeps only the host events that start before the last ProfilerStep ends and the GPU work those launched
(``Trace._filter_irrelevant_gpu_kernels``); stepscope analyses every recorded event. :func:`hta_kept` applies
HTA's filter to our table, so both analyse the same events. Series are compared as step functions: the value
after all changes at one time (HTA sorts its change rows unstably, so its values between rows of equal time are
arbitrary, and its float µs end times are rounded to 0.25 µs at epoch-sized timestamps).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepscope.analyze.trace.annotations import gpu_annotations
from stepscope.analyze.trace.bandwidth import bandwidth
from stepscope.analyze.trace.queues import HTA_QUEUE_CALLS, queue_lengths
from stepscope.analyze.trace.sets import member
from stepscope.model.events import EventKind, EventTable
from stepscope.traces.kineto import read_trace
from tests.traces.tracebuild import fixture_files

GOLDEN = Path(__file__).resolve().parents[2] / "traces" / "golden"
FILES = fixture_files()
IDS = [f"{p.parent.name}/{p.name}" for p in FILES]


def _golden(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = json.loads((GOLDEN / f"{path.parent.name}__{path.name.split('.')[0]}__counters.json")
                                     .read_text())
    return out


def hta_kept(table: EventTable) -> EventTable:
    """The rows HTA 0.5 keeps with ``include_last_profiler_step=True`` (when the trace has two or more
    ProfilerStep names): host rows starting no later than the last ProfilerStep ends, GPU rows (on a stream,
    with a correlation id) whose correlation id is among those host rows', and every GPU annotation."""
    kind = table["kind"]
    gpu = (np.isin(kind, [EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET, EventKind.SYNC])
           & (table["stream"] >= 0) & (table["correlation"] >= 0))
    step_codes = [i for i, n in enumerate(table.names) if "ProfilerStep" in n]
    if len(step_codes) < 2:
        return table
    steps = ~gpu & np.isin(table["name"], step_codes)
    last_end = int(table.end_ns[steps].max())
    host = ~gpu & (table["ts_ns"] <= last_end)
    keep = host | (gpu & member(table["correlation"], table["correlation"][host]))
    keep |= kind == EventKind.GPU_USER_ANNOTATION  # HTA keeps these whatever their time (seen on v100_1rank)
    kept: EventTable = table.take(keep)
    return kept


def _ties(times: list[float]) -> tuple[int, int]:
    """(rows in groups of equal times, largest group)."""
    _, counts = np.unique(np.asarray(times), return_counts=True)
    tied = counts[counts > 1]
    return int(tied.sum()), int(tied.max()) if tied.size else 0


def _step_at(ts: np.ndarray, v: np.ndarray, at: np.ndarray) -> np.ndarray:
    i = np.searchsorted(ts, at, side="right") - 1
    return np.where(i >= 0, v[np.maximum(i, 0)], 0)


def _hta_step(rows: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    """HTA's rows as a step function: per distinct time, the value after every row at that time."""
    t = np.asarray([r[0] for r in rows])
    v = np.asarray([r[1] for r in rows], dtype=np.float64)
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    last = np.r_[t[1:] != t[:-1], True]
    return t[last], v[last]


def _compare_steps(hta_rows: list[list[float]], ts_ns: np.ndarray, values: np.ndarray, *, rel: float) -> None:
    """Both step functions agree halfway between consecutive HTA change times more than 1 µs apart."""
    ht, hv = _hta_step(hta_rows)
    hv = np.where(np.abs(hv) < 1e-6, 0.0, hv)  # HTA's float residues after the last copy of a kind ends
    gaps = np.flatnonzero(np.diff(ht) > 1.0)
    at = (ht[gaps] + ht[gaps + 1]) / 2
    ours = _step_at(ts_ns / 1e3, values.astype(np.float64), at)
    theirs = hv[gaps]
    np.testing.assert_allclose(ours, theirs, rtol=rel, atol=1e-6)
    assert abs(ts_ns[0] / 1e3 - ht[0]) < 0.5 and abs(ts_ns[-1] / 1e3 - ht[-1]) < 0.5


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_queue_length_matches_hta(path: Path) -> None:
    gold = _golden(path)
    table = hta_kept(read_trace(path))
    q = queue_lengths(table, calls=HTA_QUEUE_CALLS, max_points=None)
    if not gold["queue_summary"]:
        assert q is None
        return
    assert q is not None
    assert [str(s.stream) for s in q.streams] == sorted(gold["queue_summary"], key=int)
    for s in q.streams:
        rows, h = gold["queue_series"][str(s.stream)], gold["queue_summary"][str(s.stream)]
        _compare_steps(rows, s.ts_ns, s.length, rel=0)
        assert s.changes == h["count"]
        tied, biggest = _ties([r[0] for r in rows])
        if not tied:  # the same rows in the same order: HTA's figures exactly
            for ours, theirs in (("mean", "mean"), ("std", "std"), ("min", "min"), ("p25", "25%"),
                                 ("p50", "50%"), ("p75", "75%"), ("max", "max")):
                assert getattr(s, ours) == pytest.approx(h[theirs], rel=1e-12, abs=1e-12), ours
        else:  # values between rows of equal time depend on the order: each moves by at most the group size
            assert abs(s.mean - h["mean"]) <= tied * biggest / h["count"]
            for ours, theirs in (("min", "min"), ("p25", "25%"), ("p50", "50%"), ("p75", "75%"), ("max", "max")):
                assert abs(getattr(s, ours) - h[theirs]) <= biggest, ours


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_time_blocked_on_full_queue_matches_hta(path: Path) -> None:
    gold = _golden(path)
    table = hta_kept(read_trace(path))
    exercised = 0
    for key, hta in gold["blocked"].items():
        stream, limit = (int(x) for x in key.split("@"))
        q = queue_lengths(table, threshold=limit, calls=HTA_QUEUE_CALLS, max_points=None)
        assert q is not None
        s = next(x for x in q.streams if x.stream == stream)
        expected_us = 0.0 if hta is None else hta[0]
        assert abs(s.full_ns / 1e3 - expected_us) <= 0.01 * max(1, len(s.ts_ns)), key
        exercised += expected_us > 0
    if gold["blocked"] and path.parent.name != "mi250_1rank":
        assert exercised  # the small thresholds make HTA's figure non-zero somewhere on every GPU trace


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_memory_bandwidth_matches_hta(path: Path) -> None:
    gold = _golden(path)
    table = hta_kept(read_trace(path))
    bw = bandwidth(table, max_points=None)
    if not gold["membw_summary"]:
        # no copy with a bandwidth: HTA draws a series of zeros (its default for a missing arg), we leave the
        # copies out as not measured
        assert all(r[1] == 0 for rows in gold["membw_series"].values() for r in rows)
        assert bw is None or not any(k.count for k in bw.kinds)
        return
    assert bw is not None
    assert bw.from_bytes == 0  # every fixture copy carries Kineto's bandwidth arg
    assert sorted(k.kind for k in bw.kinds) == sorted(gold["membw_series"])
    for k in bw.kinds:
        rows = gold["membw_series"][k.kind]
        _compare_steps(rows, k.ts_ns, k.gbps, rel=1e-9)
        h = gold["membw_summary"].get(k.kind)
        if h is None:  # every value zero: HTA's summary leaves the kind out
            assert k.count == 0
            continue
        clean = np.asarray([r[1] for r in rows])
        residues = int(((clean > 0) & (clean < 1e-6)).sum())
        tied, _ = _ties([r[0] for r in rows])
        if not residues and not tied:  # HTA's own summary, figure for figure
            for ours, theirs in (("mean", "mean"), ("std", "std"), ("min", "min"), ("p25", "25%"),
                                 ("p50", "50%"), ("p75", "75%"), ("max", "max")):
                assert getattr(k, ours) == pytest.approx(h[theirs], rel=1e-9, abs=1e-9), ours
            assert k.count == h["count"]
        else:  # HTA counts its float residues (and arbitrary tie values) as points above zero
            assert abs(k.count - (h["count"] - residues)) <= tied
            assert k.max <= h["max"] * (1 + 1e-9)


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_gpu_annotations_match_hta(path: Path) -> None:
    gold = _golden(path)["annotations"]
    ann = gpu_annotations(hta_kept(read_trace(path)))
    if gold is None:
        assert ann is None or not ann.on_gpu
        return
    assert ann is not None and ann.on_gpu
    ours = {a.name: a for a in ann.rows}
    assert sorted(ours) == sorted(gold)
    for name, h in gold.items():
        a = ours[name]
        assert a.total_ns / 1e3 == pytest.approx(h["sum (us)"], abs=0.001 * a.count)
        assert a.max_ns / 1e3 == pytest.approx(h["max (us)"], abs=0.001)
        assert a.min_ns / 1e3 == pytest.approx(h["min (us)"], abs=0.001)


def test_cut_series_keep_peaks_and_summaries() -> None:
    """A result keeps about ``max_points`` points of a long series: its largest and smallest values, first and last
    points stay, and every summary (computed from all changes) is the same as with every point kept."""
    path = next(p for p in FILES if p.parent.name == "v100_1rank")
    table = read_trace(path)
    full = queue_lengths(table, max_points=None)
    cut = queue_lengths(table, max_points=300)
    assert full is not None and cut is not None
    (f,), (c,) = full.streams, cut.streams
    assert f.points == c.points == f.ts_ns.size > 10_000 and c.ts_ns.size <= 301
    assert (c.length.max(), c.length.min()) == (f.length.max(), f.length.min()) == (1022, 0)
    assert (c.ts_ns[0], c.ts_ns[-1]) == (f.ts_ns[0], f.ts_ns[-1]) and np.isin(c.ts_ns, f.ts_ns).all()
    assert (c.mean, c.time_mean, c.full_ns, c.max, c.p50) == (f.mean, f.time_mean, f.full_ns, f.max, f.p50)
    bw_full, bw_cut = bandwidth(table, max_points=None), bandwidth(table, max_points=30)
    assert bw_full is not None and bw_cut is not None
    for a, b in zip(bw_full.kinds, bw_cut.kinds, strict=True):
        assert b.gbps.max() == a.gbps.max() and b.ts_ns.size <= 31 < a.ts_ns.size and a.points == b.points
