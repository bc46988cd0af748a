"""Drift inside an interleaved A/B study: a load ramp across the study cancels in A B / B A pairs; load that follows
a side does not, and the pairs' measured contention shifts widen the interval until it covers again. Seeded
simulations of per-run log step times, with the contention each run's sampler would report."""

from __future__ import annotations

import math

import numpy as np

from stepscope.analyze.diff.drift import drift_widening
from stepscope.analyze.diff.significance import DiffSettings, compare_runs


def _study(rng: np.random.Generator, *, n: int, ratio: float, ramp: float, side_load: float,
           sigma: float = 0.03) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """n pairs in A B / B A order over a study whose load adds ``ramp`` (log) from start to end; the B runs also
    meet ``side_load`` (log) of extra load. Each run's step moves by 0.3-2.2 times what its contention predicts
    (measured range, contention.py); the returned shifts are the predictions B / A."""
    order = [s for i in range(n) for s in (("A", "B") if i % 2 == 0 else ("B", "A"))]
    t = np.linspace(0.0, 1.0, 2 * n)
    pred = {"A": [], "B": []}
    val = {"A": [], "B": []}
    for k, side in enumerate(order):
        load = ramp * t[k] + (side_load if side == "B" else 0.0)
        effect = load * rng.uniform(0.3, 2.2)
        base = math.log(ratio) if side == "B" else 0.0
        val[side].append(math.exp(base + effect + rng.normal(0, sigma)))
        pred[side].append(load)
    shifts = [b - a for a, b in zip(pred["A"], pred["B"], strict=True)]
    return np.asarray(val["A"]), np.asarray(val["B"]), shifts


def _coverage(rng: np.random.Generator, *, ramp: float, side_load: float, widen: bool, trials: int = 600) -> float:
    s = DiffSettings(paired=True)
    hit = 0
    for _ in range(trials):
        a, b, shifts = _study(rng, n=6, ratio=1.1, ramp=ramp, side_load=side_load)
        w = drift_widening(shifts)[2] if widen else 0.0
        ch = compare_runs(a, b, settings=s, widen_log=w)
        assert ch.ci_low is not None and ch.ci_high is not None
        hit += ch.ci_low <= 1.1 <= ch.ci_high
    return hit / trials


def test_a_load_ramp_cancels_in_alternating_pairs() -> None:
    rng = np.random.default_rng(21)
    cov = _coverage(rng, ramp=0.3, side_load=0.0, widen=True)
    assert cov >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / 600), cov


def test_load_that_follows_a_side_widens_the_interval_until_it_covers() -> None:
    rng = np.random.default_rng(22)
    plain = _coverage(rng, ramp=0.1, side_load=0.08, widen=False)
    widened = _coverage(rng, ramp=0.1, side_load=0.08, widen=True)
    assert plain < 0.8, plain  # the paired interval alone misses: the B side's load is read as the change
    assert widened >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / 600), widened


def test_widening_only_beyond_chance() -> None:
    assert drift_widening([0.01, -0.01, 0.012, -0.011])[2] == 0.0
    mean, se, w = drift_widening([0.05, 0.06, 0.055, 0.05])
    assert mean is not None and se is not None and w == 3.0 * (mean - 2 * se) > 0
    assert drift_widening([None, 0.05]) == (0.05, None, 0.0)
