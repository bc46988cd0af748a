"""The live figures and straggler rule of `stepscope top` (analyze/run/live.py) on hand-built ranks with exact
timings: A/A jitter is never flagged, a rank 40% slower in useful time is, the waiting ranks' comm time is
left out, a rank behind in steps is, and too few steps decide nothing."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope.analyze.run.live import live_state
from tests.analyze.distdata import MS, T0, rank_data, run_data

NOW = T0 + 10**12


def test_a_a_jitter_flags_no_rank() -> None:
    rng = np.random.default_rng(7)
    ranks = [rank_data(r, 4, list(100 + rng.uniform(-20, 20, 30)), comm_ms=list(rng.uniform(0, 10, 30)))
             for r in range(4)]  # +-20% jitter per step, up to 10 ms of comm
    state = live_state(run_data(ranks), now_ns=NOW)
    assert state.stragglers == ()
    assert [r.steps for r in state.ranks] == [30] * 4


def test_a_slow_rank_is_flagged_by_useful_time_not_step_time() -> None:
    # every step lasts 140 ms on every rank (synchronous); ranks 0-2 compute 100 ms and wait 40 ms in comm,
    # rank 3 computes 140 ms and waits 0: equal step times, useful times 100 vs 140 (1.4x)
    fast = [rank_data(r, 4, [140.0] * 12, comm_ms=[40.0] * 12) for r in range(3)]
    slow = rank_data(3, 4, [140.0] * 12, comm_ms=[0.0] * 12)
    state = live_state(run_data([*fast, slow]), now_ns=NOW)
    assert state.stragglers == (3,)
    assert state.ranks[3].recent_useful_median_ns == pytest.approx(140 * MS)
    assert state.ranks[0].recent_useful_median_ns == pytest.approx(100 * MS)
    assert state.ranks[3].straggler is not None and state.ranks[3].straggler == "slow: +40 ms 1.4x"


def test_only_the_recent_steps_count() -> None:
    # rank 1 was slow long ago (steps 0-19 at 2x), then like the others: not flagged now
    ranks = [rank_data(0, 2, [100.0] * 40, comm_ms=[0.0] * 40),
             rank_data(1, 2, [200.0] * 20 + [100.0] * 20, comm_ms=[0.0] * 40)]
    state = live_state(run_data(ranks), now_ns=NOW)
    assert state.stragglers == ()
    assert state.recent_steps == 10
    assert state.recent_step_median_ns == pytest.approx(100 * MS)
    assert state.recent_steps_per_s == pytest.approx(10.0)  # 10 steps of 100 ms


def test_below_the_thresholds_nothing_is_flagged() -> None:
    # 25% slower (under 1.3x) is not flagged; 4 steps (under N = 5) decide nothing even at 3x
    mild = [rank_data(0, 2, [100.0] * 12, comm_ms=[0.0] * 12), rank_data(1, 2, [125.0] * 12, comm_ms=[0.0] * 12)]
    assert live_state(run_data(mild), now_ns=NOW).stragglers == ()
    early = [rank_data(0, 2, [100.0] * 4), rank_data(1, 2, [300.0] * 4)]
    assert live_state(run_data(early), now_ns=NOW).stragglers == ()


def test_a_rank_behind_in_steps_is_flagged() -> None:
    ranks = [rank_data(r, 3, [100.0] * 40) for r in range(2)] + [rank_data(2, 3, [100.0] * 20)]
    state = live_state(run_data(ranks), now_ns=NOW)
    assert state.stragglers == (2,)
    assert state.ranks[2].straggler == "behind: 20/40"
    assert state.ranks[2].since_last_step_s == pytest.approx((NOW - (T0 + 20 * 100 * MS)) / 1e9)
