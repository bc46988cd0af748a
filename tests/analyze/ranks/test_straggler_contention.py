"""Stragglers on an oversubscribed host: a rank that only waited for a CPU more than its twin is not called a
straggler but left unresolved; a rank really slower is still named, loaded host or not.

The runs in tests/data/runs/ranks_contention are real `stepscope run -- torchrun` jobs of
tests/scripts/dist_steps.py (16 steps of a 10 ms sleep, gloo all_reduce) on a 2-core machine; "one hog" ran
beside a `while True: pass` process. ``aa_one_hog`` is a balanced job the earlier rule called a straggler
(rank 1, 4.3% of the step, p = 0.005); the ``delay`` runs sleep rank 1 (or rank 3 of 4) longer each step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepscope.analyze.ranks.ranks import CONTENTION_FACTOR, analyze_ranks, find_stragglers
from stepscope.store.rundir import read_run
from tests.analyze.distdata import rank_data, run_data

RUNS = Path(__file__).resolve().parents[2] / "data" / "runs" / "ranks_contention"


def _wait_share_by_hand(rank_file: Path, first: int, last: int) -> float:
    """The share of the window's sampling intervals spent waiting for a CPU, read from the raw records."""
    steps: dict[str, list[float]] = {"index": [], "start_ns": [], "end_ns": []}
    t: list[float] = []
    wait: list[float] = []
    for line in rank_file.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("kind") == "steps":
            for k in steps:
                steps[k] += rec["cols"][k]
        elif rec.get("kind") == "samples":
            t += rec["cols"]["t_ns"]
            wait += [np.nan if w is None else w for w in rec["cols"].get("run_queue_wait_pct", [None] * len(
                rec["cols"]["t_ns"]))]
    idx = np.asarray(steps["index"])
    sel = (idx >= first) & (idx <= last)
    t0, t1 = min(np.asarray(steps["start_ns"])[sel]), max(np.asarray(steps["end_ns"])[sel])
    waited = wall = 0.0
    for k in range(1, len(t)):  # sample k closes the interval (t[k-1], t[k]]
        if t[k] > t0 and t[k - 1] < t1 and np.isfinite(wait[k]):
            waited += wait[k] / 100 * (t[k] - t[k - 1])
            wall += t[k] - t[k - 1]
    return waited / wall


def _in_window(steps: Any, window: tuple[int, int]) -> Any:
    return steps.take((steps["index"] >= window[0]) & (steps["index"] <= window[1]))


def test_balanced_run_on_a_loaded_host_is_unresolved_not_a_straggler() -> None:
    data = read_run(RUNS / "aa_one_hog")
    a = analyze_ranks(data)
    assert a.window is not None
    assert a.stragglers == ()
    assert [s.rank for s in a.unresolved] == [1] and a.balanced is None
    # the failure the rule answers: per-step noise alone calls rank 1 slower
    window = {r.stream.rank: _in_window(r.steps, a.window) for r in data.ranks}
    useful = {k: (st.duration_ns - st["comm_ns"]).astype("float64") for k, st in window.items()}
    med = float(np.median(np.concatenate([st.duration_ns for st in window.values()])))
    alone = find_stragglers(useful, med)
    assert [s.rank for s in alone.stragglers] == [1] and alone.stragglers[0].p_value < 0.01
    assert alone.stragglers[0].excess_share == pytest.approx(a.unresolved[0].excess_share)
    # each rank's wait share, recomputed from the rank files; the verdict uses the largest
    shares = [_wait_share_by_hand(RUNS / "aa_one_hog" / "ranks" / f"rank-0000{r}.jsonl", *a.window) for r in (0, 1)]
    assert [r.cpu_wait_share for r in a.ranks] == pytest.approx(shares)
    assert a.cpu_wait_share == pytest.approx(max(shares))
    assert a.unresolved[0].excess_share <= CONTENTION_FACTOR * max(shares)


@pytest.mark.parametrize(("run", "rank", "share"), [("delay1ms_quiet", 1, (0.05, 0.12)),
                                                     ("delay30ms_4rank_one_hog", 3, (0.5, 0.8))])
def test_slower_rank_is_named_quiet_host_or_loaded(run: str, rank: int, share: tuple[float, float]) -> None:
    a = analyze_ranks(read_run(RUNS / run))
    assert [s.rank for s in a.stragglers] == [rank] and a.unresolved == ()
    assert share[0] < a.stragglers[0].excess_share < share[1]
    assert a.cpu_wait_share is not None and a.stragglers[0].excess_share > CONTENTION_FACTOR * a.cpu_wait_share
    assert a.balanced is False


def test_small_real_delay_beside_a_hog_is_unresolved() -> None:
    # 1 ms more sleep a step on rank 1 is named on a quiet host (above); beside a hog the host's contention
    # is as large as it, so the verdict waits for a quieter run
    a = analyze_ranks(read_run(RUNS / "delay1ms_one_hog"))
    assert a.stragglers == () and [s.rank for s in a.unresolved] == [1] and a.balanced is None


def test_threshold_by_hand() -> None:
    # rank 1 is 6 ms (6% of a 100 ms step) slower every step than ranks 0 and 2
    def run(wait_pct: float | None):  # type: ignore[no-untyped-def]
        comm = (10.0, 4.0, 10.0)
        return run_data([rank_data(r, 3, [100.0] * 12, comm_ms=[comm[r]] * 12, cpu_wait_pct=wait_pct)
                         for r in range(3)])

    assert [s.rank for s in analyze_ranks(run(None)).stragglers] == [1]  # not sampled: the earlier rule
    quiet = analyze_ranks(run(3.0))  # 6% > 1.5 x 3%
    assert [s.rank for s in quiet.stragglers] == [1] and quiet.cpu_wait_share == pytest.approx(0.03)
    loaded = analyze_ranks(run(4.0))  # 6% <= 1.5 x 4%
    assert loaded.stragglers == () and [s.rank for s in loaded.unresolved] == [1]
    assert loaded.unresolved[0].excess_share == pytest.approx(0.06)
    assert loaded.to_dict()["unresolved"][0]["rank"] == 1
