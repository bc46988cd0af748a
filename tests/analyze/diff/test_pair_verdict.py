"""One verdict per pair: `check`'s metric verdict (also the regressions page's) and `diff`'s run-level verdict
come from one decision on the same per-run values, so at the same level and threshold they never disagree."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope.analyze.diff.significance import DiffSettings, Verdict, compare_runs
from stepscope.analyze.runs.regression import MetricVerdict, check_metric

AS_DIFF = {MetricVerdict.REGRESSED: Verdict.SLOWER, MetricVerdict.IMPROVED: Verdict.FASTER,
           MetricVerdict.NO_SIGNIFICANT_CHANGE: Verdict.NO_SIGNIFICANT_CHANGE,
           MetricVerdict.CANNOT_TELL: Verdict.INCONCLUSIVE}


def sides(shift: float, sigma: float, n: int, seed: int) -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(seed)
    base = 0.1 * np.exp(rng.normal(0.0, sigma, n))
    exp = 0.1 * (1 + shift) * np.exp(rng.normal(0.0, sigma, n))
    return base.tolist(), exp.tolist()


@pytest.mark.parametrize("threshold", [0.02, 0.05])
def test_check_and_diff_agree_on_every_pair(threshold: float) -> None:
    """Small and large shifts, quiet and noisy runs (600 pairs): among them significant changes smaller than the
    threshold, which the two rules used to call differently (check: IMPROVED or CANNOT_TELL; diff: no change)."""
    settings = DiffSettings(confidence=0.98, threshold=threshold)
    seen: set[Verdict] = set()
    for seed in range(100):
        for shift in (-0.2, -0.015, 0.0, 0.015, 0.03, 0.2):
            sigma = (0.002, 0.01, 0.05)[seed % 3]
            b, e = sides(shift, sigma, 3 + seed % 4, seed)
            gate = check_metric("step_time_median_s", b, e, threshold=threshold, confidence=0.98)
            run = compare_runs(b, e, settings=settings)
            assert AS_DIFF[gate.verdict] is run.verdict, (shift, sigma, b, e, gate, run)
            if gate.worse is not None:  # the same interval, in check's "worse" direction
                assert gate.worse_low == pytest.approx(run.ci_low) and gate.worse_high == pytest.approx(run.ci_high)
            seen.add(run.verdict)
    assert seen == set(Verdict)


def test_throughput_is_judged_in_speed_terms() -> None:
    """A throughput 20% lower is a regression for check and SLOWER for diff."""
    b, e = sides(-0.2, 0.005, 4, 1)
    gate = check_metric("samples_per_s", b, e, threshold=0.05, confidence=0.98)
    run = compare_runs(b, e, settings=DiffSettings(confidence=0.98, threshold=0.05), higher_is_better=True)
    assert gate.verdict is MetricVerdict.REGRESSED and run.verdict is Verdict.SLOWER


def test_one_run_a_side_cannot_tell_even_when_min_repeats_allows_it() -> None:
    """`check --min-repeats 1` with one run on a side: no interval, so "cannot tell" with the reason (it raised)."""
    gate = check_metric("step_time_median_s", [0.1], [0.2, 0.21], threshold=0.05, min_repeats=1)
    assert gate.verdict is MetricVerdict.CANNOT_TELL
    assert "the baseline has 1 run(s)" in gate.reason and "need 2" in gate.reason
