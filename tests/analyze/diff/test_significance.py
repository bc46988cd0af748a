"""Verdicts from per-step samples: the statistical test, the practical threshold, and what NSC means."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope.analyze.diff import DiffSettings, Verdict, compare_samples


def _steps(median_ms: float, n: int, seed: int, noise: float = 0.05) -> np.ndarray:
    """Step times with multiplicative log-normal noise and a few slow outliers (like real steps)."""
    rng = np.random.default_rng(seed)
    v = median_ms * 1e6 * np.exp(rng.normal(0.0, noise, n))
    v[rng.integers(0, n, n // 20)] *= 3  # stragglers: the median must not care
    return v


def test_same_distribution_is_no_significant_change() -> None:
    ch = compare_samples(_steps(10, 200, 1), _steps(10, 200, 2))
    assert ch.verdict is Verdict.NO_SIGNIFICANT_CHANGE
    assert ch.n_baseline == ch.n_experiment == 200
    assert ch.ci_low is not None and ch.ci_high is not None and ch.ci_low < 1 < ch.ci_high


def test_identical_samples() -> None:
    a = _steps(10, 50, 3)
    ch = compare_samples(a, a.copy())
    assert ch.verdict is Verdict.NO_SIGNIFICANT_CHANGE
    assert ch.delta == 0 and ch.ratio == 1.0 and ch.p_value == pytest.approx(1.0, abs=0.05)


def test_ten_percent_slowdown_is_slower_and_speedup_faster() -> None:
    base, exp = _steps(10, 100, 4), _steps(11, 100, 5)
    ch = compare_samples(base, exp)
    assert ch.verdict is Verdict.SLOWER
    assert ch.ratio == pytest.approx(np.median(exp) / np.median(base))
    assert 1.05 < ch.ci_low < ch.ratio < ch.ci_high < 1.15  # type: ignore[operator]
    assert ch.p_value is not None and ch.p_value < 1e-6
    assert compare_samples(exp, base).verdict is Verdict.FASTER


def test_rates_higher_is_better() -> None:
    slow, fast = 1e9 / _steps(11, 100, 6), 1e9 / _steps(10, 100, 7)
    assert compare_samples(slow, fast, higher_is_better=True).verdict is Verdict.FASTER
    assert compare_samples(fast, slow, higher_is_better=True).verdict is Verdict.SLOWER


def test_tiny_but_certain_change_is_below_the_practical_threshold() -> None:
    # 1% slower with almost no noise over many steps: p is astronomically small, the change is not practical
    base = _steps(10, 2000, 8, noise=0.002)
    exp = base * 1.01
    ch = compare_samples(base, exp)
    assert ch.p_value is not None and ch.p_value < 1e-10
    assert ch.verdict is Verdict.NO_SIGNIFICANT_CHANGE
    assert compare_samples(base, exp, settings=DiffSettings(threshold=0.005)).verdict is Verdict.SLOWER


def test_too_few_steps_says_so() -> None:
    ch = compare_samples([1.0, 2.0, 3.0], [10.0, 20.0, 30.0])
    assert ch.verdict is Verdict.NO_SIGNIFICANT_CHANGE
    assert ch.p_value is None and ch.note is not None and "too few" in ch.note


def test_zero_baseline_uses_floor_and_test() -> None:
    # no data wait before, 1 ms every step after: no ratio, but a real slowdown
    base = np.zeros(40)
    exp = np.full(40, 1e6) + np.arange(40)
    ch = compare_samples(base, exp, statistic="mean", floor=1e5)
    assert ch.ratio is None and ch.verdict is Verdict.SLOWER
    assert compare_samples(base, exp, statistic="mean", floor=2e6).verdict is Verdict.NO_SIGNIFICANT_CHANGE


def test_mean_statistic_interval() -> None:
    base, exp = _steps(2, 80, 9), _steps(2.4, 80, 10)
    ch = compare_samples(base, exp, statistic="mean")
    assert ch.statistic == "mean" and ch.baseline == pytest.approx(float(base.mean()))
    assert ch.verdict is Verdict.SLOWER and ch.ci_low is not None and ch.ci_low > 1.0


def test_settings_describe_the_test() -> None:
    text = DiffSettings(confidence=0.99, threshold=0.05).describe()
    assert "Welch t on log per-run values" in text and "99% interval" in text and "5%" in text
    assert "paired t" in DiffSettings(paired=True).describe()


def test_one_run_a_side_is_inconclusive_within_the_floor() -> None:
    import math

    from stepscope.analyze.diff.significance import compare_runs
    from stepscope.analyze.stats import NoiseFloor

    floor = NoiseFloor(0.05, math.inf, "stated")
    # threshold 2.576 * 0.05 * sqrt(2) = 18.2% in log terms
    near = compare_runs([10.0], [11.5], floor=floor)
    assert near.verdict is Verdict.INCONCLUSIVE and near.method == "noise_floor" and near.ci_low is None
    # the note names the A/B pairs that would tell the 15% seen at this spread
    assert "`stepscope bench --ab --repeat 5 -- ...` would tell a 15.0% change" in (near.note or "")
    far = compare_runs([10.0], [12.2], floor=floor)
    assert far.verdict is Verdict.SLOWER and far.noise_floor == "stated"
    assert compare_runs([10.0], [12.2]).verdict is Verdict.INCONCLUSIVE  # no floor at all
    assert compare_runs([100.0], [82.0], floor=floor, higher_is_better=True).verdict is Verdict.SLOWER


def test_repeats_use_welch_and_pairs_use_the_paired_test() -> None:
    from stepscope.analyze.diff.significance import compare_runs
    from stepscope.analyze.stats import geometric_mean

    base, exp = [10.0, 10.4, 9.8], [11.0, 11.5, 10.7]
    ch = compare_runs(base, exp)
    assert ch.method == "welch_log" and ch.n_baseline == 3
    assert ch.baseline == pytest.approx(geometric_mean(base)) and ch.experiment == pytest.approx(geometric_mean(exp))
    assert ch.verdict is Verdict.SLOWER and ch.ci_low is not None and ch.ci_low > 1
    # drift shared by the pairs: independent test cannot see a 3% change (nor a 2% one: it cannot tell), the
    # paired one can
    drift = [1.0, 1.3, 0.8, 1.15]
    b = [10 * d for d in drift]
    e = [10 * d * r for d, r in zip(drift, (1.03, 1.031, 1.029, 1.03), strict=True)]
    assert compare_runs(b, e).verdict is Verdict.INCONCLUSIVE
    paired = compare_runs(b, e, settings=DiffSettings(paired=True))
    assert paired.method == "paired_log" and paired.verdict is Verdict.SLOWER
    assert paired.ratio == pytest.approx(1.03, abs=1e-3)
