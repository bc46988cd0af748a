"""Robust statistics and step statistics on hand-built data with hand-computed answers."""

from __future__ import annotations

import math

import numpy as np

from stepscope.analyze.run.steps import step_stats, warmup_steps
from stepscope.analyze.stats import distribution, mann_whitney_u, median_ci
from stepscope.model.tables import StepTable


def test_distribution_by_hand():
    d = distribution([1.0, 2.0, 3.0, 4.0, float("nan")])
    assert d is not None
    assert (d.count, d.mean, d.min, d.max, d.total) == (4, 2.5, 1.0, 4.0, 10.0)
    assert math.isclose(d.std, math.sqrt(((1.5**2) * 2 + (0.5**2) * 2) / 3))
    assert d.p50 == 2.5 and math.isclose(d.p95, 3.85)
    assert distribution([float("nan")]) is None


def test_mann_whitney_separated_and_identical_samples():
    # fully separated samples of 10: U = 0; z = (50 - 0.5) / sqrt(10*10*21/12) = 3.742; p = erfc(z/sqrt2)
    p = mann_whitney_u(np.arange(10.0), np.arange(10.0) + 100)
    assert math.isclose(p, math.erfc((50 - 0.5) / math.sqrt(100 * 21 / 12) / math.sqrt(2)), rel_tol=1e-9)
    assert p < 0.001
    assert mann_whitney_u(np.ones(10), np.ones(10)) == 1.0


def test_median_ci_contains_the_median():
    lo, hi = median_ci(np.arange(101.0))
    assert lo < 50 < hi and hi - lo < 30


def test_warmup_rule():
    flat = np.full(50, 10.0)
    assert warmup_steps(flat) == 5  # 10% of 50
    assert warmup_steps(np.full(200, 10.0)) == 10  # capped at 10
    assert warmup_steps(np.full(2, 10.0)) == 0
    slow_start = np.concatenate([[500.0] * 8, np.full(40, 10.0)])
    assert warmup_steps(slow_start) == 8  # extended over the slow compilation steps
    assert warmup_steps(flat, override=3) == 3


def _steps(durations, samples=8.0, wait=None):
    n = len(durations)
    end = np.cumsum(durations).astype("int64")
    start = np.concatenate([[0], end[:-1]])
    cols = {"index": np.arange(n), "start_ns": start, "end_ns": end, "samples": np.full(n, samples)}
    if wait is not None:
        cols["data_wait_ns"] = np.asarray(wait, dtype=float)
    return StepTable.from_batches([{k: list(v) for k, v in cols.items()}])


def test_step_stats_throughput_and_phases():
    # 20 steps of 10 ms, the first 2 are warm-up (10%); 8 samples each; 2.5 ms data wait each
    st = step_stats(_steps([10_000_000] * 20, wait=[2_500_000] * 20))
    assert st.warmup_steps == 2 and st.measured_steps == 18
    assert st.step_time.p50 == 10_000_000
    assert math.isclose(st.samples_per_s, 8 / 0.010)
    assert math.isclose(st.steps_per_s, 100.0)
    assert math.isclose(st.data_wait_share, 0.25)
    assert math.isclose(st.other.share, 0.75)
    phases = {p.phase: p for p in st.phases}
    assert phases["forward"].mean_ns is None  # not measured: None, not zero


def test_step_stats_excludes_profiled_window():
    durations = [10_000_000] * 30
    durations[10:13] = [50_000_000] * 3
    st = step_stats(_steps(durations), exclude=((10, 12),))
    assert st.step_time.max == 10_000_000 and st.measured_steps == 30 - 3 - 3
