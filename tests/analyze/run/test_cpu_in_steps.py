"""The CPU figures cpu-oversubscription's estimate reads are the measured steps', not the whole run's: start-up
samples before the steps (imports, model building) and samples after them do not enter, each interval weighs by
its length, and a column not sampled or steps no interval overlaps give None."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope.analyze.run.cpusteps import cpu_in_steps
from stepscope.model.tables import SampleTable
from tests.analyze.distdata import T0, rank_data

S = 1_000_000_000


def _samples(at_s: list[float], wait: list[float], proc: list[float] | None = None) -> SampleTable:
    cols = {"run_queue_wait_pct": np.asarray(wait, dtype="float64"),
            "main_thread_cpu_pct": np.asarray([100.0 - w for w in wait], dtype="float64")}
    if proc is not None:
        cols["cpu_process_pct"] = np.asarray(proc, dtype="float64")
    return SampleTable(np.asarray([T0 + int(t * S) for t in at_s], dtype="int64"), cols)


def test_only_the_intervals_of_the_measured_steps_count() -> None:
    # 10 steps of 100 ms from T0 + 0 to T0 + 1 s; warm-up: the first 2 (the span starts at 0.2 s)
    steps = rank_data(0, 1, [100.0] * 10, start_ns=T0).steps
    # start-up interval (-2 s, 0] at 90% wait, then (0, 0.5] at 60% and (0.5, 1.0] at 20%, then (1.0, 3.0] after
    # the steps at 0%
    s = _samples([-2.0, 0.0, 0.5, 1.0, 3.0], [np.nan, 90.0, 60.0, 20.0, 0.0], [np.nan, 50.0, 150.0, 50.0, 10.0])
    got = cpu_in_steps(s, steps, first_step=2)
    assert got is not None
    # (0, 0.5] overlaps the span (0.2, 1.0]; the sample at 1.0 s closes the span's last interval, so (1.0, 3.0]
    # and (-2, 0] are out
    assert got.intervals == 2 and got.seconds == pytest.approx(1.0)
    assert got.run_queue_wait_pct == pytest.approx(40.0)
    assert got.main_thread_pct == pytest.approx(60.0)
    assert got.process_pct == pytest.approx(100.0)
    # a last sample past the span's end (1.4 s) closes an interval that overlaps it: kept, weighted by its length
    late = _samples([0.0, 0.5, 1.4, 3.0], [np.nan, 60.0, 20.0, 0.0], [np.nan, 150.0, 50.0, 10.0])
    late_end = cpu_in_steps(late, steps, first_step=2)
    assert late_end is not None and late_end.intervals == 2 and late_end.seconds == pytest.approx(1.4)
    assert late_end.run_queue_wait_pct == pytest.approx((60 * 0.5 + 20 * 0.9) / 1.4)


def test_unsampled_figures_are_none() -> None:
    steps = rank_data(0, 1, [100.0] * 10, start_ns=T0).steps
    no_proc = cpu_in_steps(_samples([0.0, 0.5, 1.0], [np.nan, 50.0, 50.0]), steps)
    assert no_proc is not None and no_proc.process_pct is None and no_proc.run_queue_wait_pct == pytest.approx(50)
    all_before = _samples([-3.0, -2.0, -1.0], [np.nan, 50.0, 50.0], [np.nan, 1.0, 1.0])
    late = rank_data(0, 1, [100.0] * 10, start_ns=T0 + 10 * S).steps  # steps after the last sample
    assert cpu_in_steps(all_before, late) is None
    assert cpu_in_steps(_samples([0.0, 1.0], [np.nan, 5.0], [np.nan, 1.0]), steps, first_step=10) is None  # no steps
    assert cpu_in_steps(SampleTable(np.empty(0, dtype="int64")), steps) is None
