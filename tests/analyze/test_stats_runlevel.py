"""Run-level statistics: t quantiles against published table values, and the stated coverage of every interval
checked by simulation (log-normal and heavy-tailed run effects, n = 2..10, thousands of trials)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stepscope.analyze.stats import (
    NoiseFloor,
    noise_floor_ratio,
    paired_log_ratio,
    pooled_noise_floor,
    run_interval,
    t_quantile,
    t_sf,
    welch_log_ratio,
)

# two-sided 95% critical values from a printed t table (Student 1908 / any statistics textbook)
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 5: 2.571, 9: 2.262, 10: 2.228, 30: 2.042}


@pytest.mark.parametrize(("df", "expected"), sorted(T975.items()))
def test_t_quantile_matches_the_table(df: int, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-3)
    assert t_sf(expected, df) == pytest.approx(0.025, abs=1e-4)


def test_t_normal_limit_and_symmetry() -> None:
    assert t_quantile(0.975, math.inf) == pytest.approx(1.95996, abs=1e-4)
    assert t_quantile(0.025, 4) == pytest.approx(-t_quantile(0.975, 4))
    assert t_sf(0.0, 3) == pytest.approx(0.5)


def _run_effects(rng: np.random.Generator, kind: str, size: tuple[int, ...], sigma: float) -> np.ndarray:
    if kind == "lognormal":
        return rng.normal(0.0, sigma, size)
    # heavier tails: Student t with 3 df, scaled to the same standard deviation
    return rng.standard_t(3, size) * sigma / math.sqrt(3.0)


@pytest.mark.parametrize("kind", ["lognormal", "t3"])
@pytest.mark.parametrize("n", [2, 3, 5, 10])
def test_welch_interval_covers_at_its_stated_rate(kind: str, n: int) -> None:
    rng = np.random.default_rng(1000 + n)
    trials, true_ratio = 2000, 1.07
    b = 0.015 * np.exp(_run_effects(rng, kind, (trials, n), 0.06))
    e = 0.015 * true_ratio * np.exp(_run_effects(rng, kind, (trials, n), 0.06))
    hits = 0
    for i in range(trials):
        r = welch_log_ratio(b[i], e[i])
        assert r.ci_low is not None and r.ci_high is not None
        hits += r.ci_low <= true_ratio <= r.ci_high
    coverage = hits / trials
    # stated: at least 93% (binomial SE at 2000 trials is 0.5 points) and at most 99%: Welch's df at n = 2 with
    # heavy tails errs on the safe side (about 98.5%)
    assert 0.93 <= coverage <= 0.99, (kind, n, coverage)


@pytest.mark.parametrize("kind", ["lognormal", "t3"])
@pytest.mark.parametrize("n", [2, 3, 5, 10])
def test_paired_interval_covers_at_its_stated_rate(kind: str, n: int) -> None:
    rng = np.random.default_rng(2000 + n)
    trials, true_ratio = 2000, 0.95
    # a drift shared by both members of a pair (what interleaving cancels) plus independent run noise
    drift = np.exp(_run_effects(rng, kind, (trials, n), 0.20))
    b = 0.012 * drift * np.exp(_run_effects(rng, kind, (trials, n), 0.04))
    e = 0.012 * true_ratio * drift * np.exp(_run_effects(rng, kind, (trials, n), 0.04))
    hits = 0
    for i in range(trials):
        r = paired_log_ratio(b[i], e[i])
        assert r.ci_low is not None and r.ci_high is not None
        hits += r.ci_low <= true_ratio <= r.ci_high
    assert 0.93 <= hits / trials <= 0.985, (kind, n, hits / trials)


def test_a_pooled_spread_gives_the_interval_its_degrees_of_freedom() -> None:
    # two pairs with log ratios ln 0.9 +- 0.02 and a spread pooled from elsewhere: sum of squares 0.016 on 4 df
    # (sd 0.0632); se = 0.0632 / sqrt(2); t(0.975, 4) = 2.776 from the printed table
    b, e = [1.0, 1.0], [0.9 * math.exp(0.02), 0.9 * math.exp(-0.02)]
    r = paired_log_ratio(b, e, pooled=(0.016, 4))
    se = math.sqrt(0.016 / 4 / 2)
    assert r.method == "paired_log_pooled" and r.df == 4
    assert r.ratio == pytest.approx(0.9)
    assert r.ci_low == pytest.approx(0.9 * math.exp(-2.776 * se), rel=1e-3)
    assert r.ci_high == pytest.approx(0.9 * math.exp(2.776 * se), rel=1e-3)


def test_a_pooled_paired_interval_covers_at_its_stated_rate() -> None:
    # four comparisons of two pairs each against one shared baseline run a pair (tune's screen), spread pooled
    # over the four (4 df): each one's 95% interval covers its true ratio about 95% of the time
    rng = np.random.default_rng(11)
    trials, truth = 2000, np.array([0.95, 1.0, 1.1, 0.8])
    hits = 0
    for _ in range(trials):
        drift = np.exp(rng.normal(0, 0.2, 2))
        base = drift * np.exp(rng.normal(0, 0.05, 2))
        cands = [drift * t * np.exp(rng.normal(0, 0.05, 2)) for t in truth]
        d = [np.log(c / base) for c in cands]
        pooled = (float(sum(((x - x.mean()) ** 2).sum() for x in d)), 4)
        for t, c in zip(truth, cands, strict=True):
            r = paired_log_ratio(base, c, pooled=pooled)
            assert r.ci_low is not None and r.ci_high is not None
            hits += r.ci_low <= t <= r.ci_high
    assert 0.93 <= hits / (4 * trials) <= 0.97, hits / (4 * trials)


def test_one_run_a_side_has_no_interval() -> None:
    r = welch_log_ratio([10.0], [11.0, 12.0])
    assert r.method == "single_run" and r.ci_low is None and r.p_value is None
    assert r.ratio == pytest.approx(math.exp(math.log(11 * 12) / 2 - math.log(10)))


def test_noise_floor_false_alarm_rate_by_simulation() -> None:
    # single runs judged against a floor learned from 3 groups of 4 repeats: A/A pairs exceed the 99% threshold
    # about 1% of the time (t with the floor's df accounts for the estimated sigma)
    rng = np.random.default_rng(7)
    sigma, trials, alarms = 0.08, 2000, 0
    for _ in range(trials):
        groups = np.exp(rng.normal(0.0, sigma, (3, 4)))
        floor = pooled_noise_floor(groups)
        assert floor is not None and floor.df == 9 and "learned from 12" in floor.source
        a, b = np.exp(rng.normal(0.0, sigma, 2))
        alarms += noise_floor_ratio(a, b, floor).p_value < 0.01  # type: ignore[operator]
    assert alarms / trials <= 0.02


def test_noise_floor_threshold() -> None:
    floor = NoiseFloor(0.05, math.inf, "stated")
    assert floor.threshold(confidence=0.99) == pytest.approx(2.5758 * 0.05 * math.sqrt(2), rel=1e-3)


@pytest.mark.parametrize("n", [3, 5, 8])
def test_run_interval_covers_the_median_run(n: int) -> None:
    # history's / bench's per-commit interval: of the centre (median of a log-symmetric run distribution)
    rng = np.random.default_rng(n)
    trials, hits = 2000, 0
    for _ in range(trials):
        iv = run_interval(0.02 * np.exp(rng.normal(0.0, 0.05, n)))
        assert iv is not None and iv.kind == "t95"
        hits += iv.low <= 0.02 <= iv.high
    assert 0.93 <= hits / trials <= 0.97


def test_two_runs_give_a_labelled_range() -> None:
    iv = run_interval([3.0, 1.0])
    assert iv is not None and (iv.kind, iv.low, iv.high) == ("min-max", 1.0, 3.0) and "min–max" in iv.label
    one = run_interval([2.0])
    assert one is not None and one.kind == "single"
