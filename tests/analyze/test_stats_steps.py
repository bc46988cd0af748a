"""Robust statistics and step statistics on hand-built data with hand-computed answers."""

from __future__ import annotations

import math

import numpy as np

from stepscope.analyze.run.steps import share_lower_bound, step_stats, warmup_steps
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


def test_data_wait_share_lower_bound_by_hand():
    # 3 steps of 10, 10, 20 ms waiting 1, 3, 8 ms: share 12/40 = 0.3; residuals w - 0.3 d = -2, 0, 2 (sd 2);
    # se = 2 / sqrt(3) / (40/3) = 0.0866; t(0.95, 2 df) = 2.919986 -> 0.3 - 0.25289 = 0.04711
    low = share_lower_bound(np.array([1.0, 3.0, 8.0]), np.array([10.0, 10.0, 20.0]))
    assert low is not None and math.isclose(low, 0.3 - 2.919986 * 2 / math.sqrt(3) / (40 / 3), rel_tol=1e-5)
    assert share_lower_bound(np.array([1.0, 1.0]), np.array([2.0, 2.0])) is None  # under 3 steps
    # a constant share has no spread: the bound is the share (the step_stats run above: 0.25)
    st = step_stats(_steps([10_000_000] * 20, wait=[2_500_000] * 20))
    assert st.data_wait_share_low is not None and math.isclose(st.data_wait_share_low, 0.25)


def test_data_wait_share_lower_bound_covers_at_its_stated_rate():
    # seeded simulation: steady, bursty (1 step in 5 waits long: a DataLoader whose workers fall behind) and
    # preempted (1 in 10 gets a long wait) waits; the true share is known; the one-sided 95% bound must lie
    # below it in at least 94% of 2,000 runs at each size (binomial sd at 95%: 0.5%)
    rng = np.random.default_rng(11)
    for n in (8, 13, 40):
        for kind, true in (("steady", 1.0 / 9.0), ("bursty", 1.04 / 9.04), ("preempted", 1.1 / 9.1)):
            covered = 0
            for _ in range(2000):
                if kind == "steady":
                    w = rng.gamma(4.0, 0.25, n)
                elif kind == "bursty":
                    w = np.where(rng.random(n) < 0.2, rng.gamma(4.0, 1.25, n), 0.05)
                else:
                    w = 0.3 + np.where(rng.random(n) < 0.1, rng.exponential(8.0, n), 0.0)
                low = share_lower_bound(w, rng.normal(8.0, 0.3, n) + w)
                covered += low is not None and low <= true
            assert covered / 2000 >= 0.94, (n, kind, covered / 2000)
