"""Repeats too noisy to show a change of the threshold's size are "inconclusive" (cannot tell), not "no significant
change", and say which repeats would tell; seeded simulations of A/A and of a 20% step (never "no change")."""

from __future__ import annotations

import math

import numpy as np
import pytest

from stepscope.analyze.diff.significance import DiffSettings, Verdict, compare_runs
from stepscope.analyze.stats import repeats_needed


def test_noisy_repeats_cannot_tell_and_name_the_runs_needed() -> None:
    b, e = [1.0, 1.3, 0.8], [1.1, 0.9, 1.4]
    ch = compare_runs(b, e, settings=DiffSettings(threshold=0.05))
    assert ch.verdict is Verdict.INCONCLUSIVE and ch.mde is not None and ch.mde > 0.05
    sigma = math.sqrt((np.var(np.log(b), ddof=1) + np.var(np.log(e), ddof=1)) / 2)
    n = repeats_needed(sigma, 0.05, confidence=0.95)
    assert ch.note is not None and f"MDE {ch.mde:.1%}" in ch.note and f"`stepscope bench --repeat {n}`" in ch.note
    assert f"{sigma:.1%}" in ch.note


def test_noisy_pairs_name_the_pairs_needed() -> None:
    b, e = [1.0, 1.0, 1.0, 1.0], [1.1, 0.85, 1.2, 0.95]
    ch = compare_runs(b, e, settings=DiffSettings(threshold=0.05, paired=True))
    assert ch.verdict is Verdict.INCONCLUSIVE and ch.method == "paired_log"
    sd = float(np.log(np.asarray(e)).std(ddof=1))
    n = repeats_needed(sd, 0.05, confidence=0.95, paired=True)
    assert ch.note is not None and f"`stepscope bench --ab --repeat {n}`" in ch.note


def test_repeats_that_could_see_the_threshold_say_no_change() -> None:
    ch = compare_runs([1.0, 1.001, 0.999, 1.0005], [1.0002, 0.9995, 1.0008], settings=DiffSettings(threshold=0.02))
    assert ch.verdict is Verdict.NO_SIGNIFICANT_CHANGE and ch.mde is not None and ch.mde <= 0.02


@pytest.mark.parametrize("sigma", [0.01, 0.05, 0.15, 0.3])
def test_aa_and_a_20pct_step_by_simulation(sigma: float) -> None:
    """5 interleaved pairs a study, 500 studies a spread, 5% threshold: A/A is called faster or slower in at most
    2.5% + 3 binomial sd (each direction is the 95% interval's 2.5%), and a 20% step is never "no significant
    change" in more than 1%: it is found, or the pairs cannot tell."""
    rng = np.random.default_rng(3)
    s = DiffSettings(threshold=0.05, paired=True)
    called = missed = 0
    for _ in range(500):
        base = np.exp(rng.normal(0, sigma, 5))
        aa = compare_runs(base, base * np.exp(rng.normal(0, sigma, 5)), settings=s)
        called += aa.verdict in (Verdict.FASTER, Verdict.SLOWER)
        step = compare_runs(base, 1.2 * base * np.exp(rng.normal(0, sigma, 5)), settings=s)
        missed += step.verdict is Verdict.NO_SIGNIFICANT_CHANGE
    assert called <= 0.05 * 500 + 3 * math.sqrt(0.05 * 0.95 * 500), called
    assert missed <= 5, missed
