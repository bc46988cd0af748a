"""The gate passes only what it could have seen: PASS means a regression of the tolerated size would have been
detected (80% power at the gate's one-sided 1%); otherwise CANNOT_TELL with the MDE, the spread and the repeats
that would decide. Checked against numbers computed here from the t distribution, and by seeded simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stepscope.analyze.runs.regression import CheckVerdict, MetricVerdict, check_metric, check_regression
from stepscope.analyze.stats import repeats_needed, t_quantile


def test_noisy_repeats_cannot_tell_with_mde_and_repeats_needed() -> None:
    # the case: 3 runs a side at ~30% spread, a 5% tolerance: the interval is far wider than 5%
    base, cand = [1.0, 1.3, 0.8], [1.1, 0.9, 1.4]
    c = check_metric("step_time_median_s", base, cand, threshold=0.05)
    assert c.verdict is MetricVerdict.CANNOT_TELL
    assert c.mde is not None and c.mde > 0.05
    assert f"{c.mde:.0%}" in c.reason and "5%" in c.reason
    sigma = math.sqrt((np.var(np.log(base), ddof=1) + np.var(np.log(cand), ddof=1)) / 2)
    need = repeats_needed(sigma, 0.05, confidence=0.98)
    assert f"{need} runs a side" in c.reason and f"{sigma:.1%}" in c.reason
    r = check_regression({"step_time_median_s": base}, {"step_time_median_s": cand}, ["step_time_median_s"],
                         threshold=0.05)
    assert r.verdict is CheckVerdict.CANNOT_TELL and r.verdict.exit_code == 2 and "MDE" in r.reason


def test_quiet_repeats_still_pass() -> None:
    c = check_metric("step_time_median_s", [1.0, 1.002, 0.998, 1.001], [1.001, 0.999, 1.0], threshold=0.05)
    assert c.verdict is MetricVerdict.NO_SIGNIFICANT_CHANGE and c.mde is not None and c.mde <= 0.05


def test_repeats_needed_matches_the_t_formula() -> None:
    # independent sides: (t_.99 + t_.8) at 2n - 2 df times sigma * sqrt(2 / n) just within ln(1.05)
    sigma, eff = 0.03, 0.05
    n = repeats_needed(sigma, eff, confidence=0.98)

    def mde(k: int) -> float:
        df = 2 * k - 2
        return (t_quantile(0.99, df) + t_quantile(0.8, df)) * sigma * math.sqrt(2 / k)

    assert mde(n) <= math.log1p(eff) < mde(n - 1)
    # pairs: one-sample t on n log ratios with spread sigma
    p = repeats_needed(sigma, eff, confidence=0.95, paired=True)
    assert (t_quantile(0.975, p - 1) + t_quantile(0.8, p - 1)) * sigma / math.sqrt(p) <= math.log1p(eff)
    assert (t_quantile(0.975, p - 2) + t_quantile(0.8, p - 2)) * sigma / math.sqrt(p - 1) > math.log1p(eff)


def test_a_threshold_step_is_never_passed_at_any_spread() -> None:
    """Seeded simulation (the issue's case): a 20% step, 5% tolerated, 9 baseline runs and 3 candidate runs at
    run spreads 1-30%: found or CANNOT_TELL, PASS in at most 1% of 400 checks a spread (before, PASS was the
    usual answer at 15% and 30%)."""
    rng = np.random.default_rng(7)
    for sigma in (0.01, 0.05, 0.15, 0.30):
        passed = 0
        for _ in range(400):
            b = np.exp(rng.normal(0, sigma, 9))
            c = 1.2 * np.exp(rng.normal(0, sigma, 3))
            v = check_metric("step_time_median_s", b, c, threshold=0.05).verdict
            passed += v is MetricVerdict.NO_SIGNIFICANT_CHANGE
        assert passed <= 4, (sigma, passed)


@pytest.mark.parametrize("sigma", [0.01, 0.05, 0.2])
def test_unchanged_code_fails_at_most_one_percent(sigma: float) -> None:
    rng = np.random.default_rng(11)
    fails = sum(check_metric("step_time_median_s", np.exp(rng.normal(0, sigma, 9)), np.exp(rng.normal(0, sigma, 3)),
                             threshold=0.05).verdict is MetricVerdict.REGRESSED for _ in range(2000))
    assert fails <= 0.01 * 2000 + 3 * math.sqrt(0.01 * 0.99 * 2000), fails


def _series(rng: np.random.Generator, tau: float, sigma: float, step: float = 0.0) -> tuple[list, np.ndarray,
                                                                                          np.ndarray]:
    """24 commits of 3 runs each: a commit's runs share its level (spread ``tau``) beside their own spread
    ``sigma``; history = commits 0-22 (the window is 20-22), candidate = commit 23, ``step`` slower."""
    levels = rng.normal(0, tau, 24)
    runs = [np.exp(lv + rng.normal(0, sigma, 3)) for lv in levels]
    return runs[:23], np.concatenate(runs[20:23]), runs[23] * (1 + step)


WINDOW_KEYS = [str(j) for j in range(3) for _ in range(3)]


def test_between_commit_variance_is_recovered() -> None:
    from stepscope.analyze.stats import between_commits

    rng = np.random.default_rng(1)
    est = [between_commits(_series(rng, 0.03, 0.02)[0]) for _ in range(300)]
    tau2 = float(np.mean([e.tau2_log for e in est if e is not None]))
    assert 0.02**2 < tau2 < 0.04**2, math.sqrt(tau2)
    assert between_commits([[1.0, 1.01], [1.1], [1.0], [1.05], [1.0]]) is None  # too few commits to tell


@pytest.mark.parametrize("tau", [0.0, 0.01, 0.02, 0.03])
def test_commits_as_clusters_keep_false_failures_at_one_percent(tau: float) -> None:
    """Run spread 2%, between-commit spread 0-3%, 600 checks of unchanged code a setting: with the between-commit
    component the gate fails at most 1% (+ 3 binomial sd); treating the window's 9 runs as independent failed 2.2%
    at 2% and 7.1% at 3% (the issue's 2.7%)."""
    from stepscope.analyze.stats import between_commits

    rng = np.random.default_rng(int(tau * 1000) + 5)
    fails = plain = 0
    for _ in range(600):
        hist, b, c = _series(rng, tau, 0.02)
        check = check_metric("step_time_median_s", b, c, threshold=0.05, between=between_commits(hist),
                             baseline_commits=WINDOW_KEYS)
        fails += check.verdict is MetricVerdict.REGRESSED
        plain += check_metric("step_time_median_s", b, c, threshold=0.05).verdict is MetricVerdict.REGRESSED
    assert fails <= 6 + 3 * math.sqrt(600 * 0.01 * 0.99), (tau, fails, plain)
    if tau >= 0.03:
        assert plain > 18, plain  # the clusters matter here: without them the gate cries wolf
