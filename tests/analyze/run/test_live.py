"""The live figures and straggler rule of `stepscope top` (analyze/run/live.py) on hand-built ranks with exact
timings: A/A jitter is never flagged, a rank 40% slower in useful time is, the waiting ranks' comm time is
left out, a rank behind in steps at the same moment is (a flush apart is not), and too few steps decide nothing."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from stepscope.analyze.run.live import live_state
from stepscope.model.tables import StepTable
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


def test_a_flush_apart_is_not_behind() -> None:
    # equal ranks of 30 ms steps; rank 1's last flush came 2 s (66 steps) before rank 0's: what has been read
    # differs by 66 of 150 steps (the count rule flagged this in an A/A job), but at the end of rank 1's last
    # recorded step rank 0 had ended as many steps
    ranks = [rank_data(0, 2, [30.0] * 150), rank_data(1, 2, [30.0] * 84)]
    state = live_state(run_data(ranks), now_ns=NOW)
    assert state.stragglers == ()
    assert [r.steps for r in state.ranks] == [150, 84]


def test_a_rank_behind_in_steps_is_flagged() -> None:
    # rank 2 steps every 100 ms, the others every 60 ms (no collective holds them together): by the end of
    # rank 2's 20th step (2.0 s) the others had ended 33 steps (33 * 60 ms = 1.98 s): 13 behind, 39%
    ranks = [rank_data(r, 3, [60.0] * 40) for r in range(2)] + [rank_data(2, 3, [100.0] * 20)]
    state = live_state(run_data(ranks), now_ns=NOW)
    assert state.stragglers == (2,)
    assert state.ranks[2].straggler == "behind: 20/40"
    assert state.ranks[2].since_last_step_s == pytest.approx((NOW - (T0 + 20 * 100 * MS)) / 1e9)


def test_a_rank_whose_records_stop_is_behind() -> None:
    # rank 2 stopped after 20 steps of 100 ms (2 s); the others went on to 200 (20 s): 18 s > the 10 s stall
    ranks = [rank_data(r, 3, [100.0] * 200) for r in range(2)] + [rank_data(2, 3, [100.0] * 20)]
    assert live_state(run_data(ranks), now_ns=NOW).ranks[2].straggler == "behind: 20/200"
    # 9 s apart is within the stall allowance (a flush or two late): nothing
    ranks = [rank_data(r, 3, [100.0] * 110) for r in range(2)] + [rank_data(2, 3, [100.0] * 20)]
    assert live_state(run_data(ranks), now_ns=NOW).stragglers == ()


def test_a_rank_with_no_step_is_behind_once_the_others_step_longer_than_a_stall() -> None:
    none = replace(rank_data(2, 3, [100.0], complete=False), steps=StepTable.empty())  # started, no step yet
    late = [rank_data(r, 3, [100.0] * 120) for r in range(2)] + [none]
    assert live_state(run_data(late), now_ns=NOW).ranks[2].straggler == "behind: 0/120"
    early = [rank_data(r, 3, [100.0] * 60) for r in range(2)] + [none]
    assert live_state(run_data(early), now_ns=NOW).stragglers == ()
