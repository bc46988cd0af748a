"""`--metric step_time_mean` must not call A/A studies faster or slower more than 1 time in 100 either, although a
run's mean moves with its few slow steps: simulated interleaved studies of runs whose steps stall at random (a busy
host: 1 step in 5 waits Exp(25 ms) more on top of a 10 ms step), each run's value taken by the real per-run code
(``run_values``, the steps the median uses) and decided by `bench --ab`'s settings (``compare_runs``, paired)."""

from __future__ import annotations

import numpy as np

from stepscope.analyze.diff.metric import METRICS
from stepscope.analyze.diff.runlevel import run_values
from stepscope.analyze.diff.significance import Verdict, compare_runs
from stepscope.cli.bench import ab_order, ab_settings
from tests.analyze.diff.test_ab_coverage import MAX_FALSE, TRIALS, bench_args
from tests.analyze.distdata import rank_data, run_data

MEAN = METRICS["step_time_mean"]
PAIRS, STEPS = 5, 30


def _run(rng: np.random.Generator, slow_every_5th_ms: float) -> float:
    """One simulated run's mean step time (ns) as `diff` tests it: a run-level drift, per-step jitter, random
    stalls, and (for a real change) ``slow_every_5th_ms`` more on every 5th step."""
    level = 10.0 * np.exp(rng.normal(0.0, 0.02))
    steps = level * np.exp(rng.normal(0.0, 0.01, STEPS))
    steps += np.where(rng.random(STEPS) < 0.2, rng.exponential(25.0, STEPS), 0.0)
    steps[::5] += slow_every_5th_ms
    value = getattr(run_values(run_data([rank_data(0, 1, steps.tolist())])), MEAN.attr)
    assert value is not None
    return float(value)


def _study(rng: np.random.Generator, slow_a_ms: float, pairs: int = PAIRS) -> tuple[list[float], list[float]]:
    a, b = [0.0] * pairs, [0.0] * pairs
    for pair, side in ab_order(pairs):  # bench's run order
        if side == "A":
            a[pair] = _run(rng, slow_a_ms)
        else:
            b[pair] = _run(rng, 0.0)
    return a, b


def test_the_mean_calls_at_most_one_aa_study_in_100() -> None:
    s = ab_settings(bench_args("--metric", MEAN.name), MEAN.name)
    assert s.metric == MEAN.name
    loose = ab_settings(bench_args("--metric", MEAN.name, "--confidence", "0.8"), MEAN.name)
    rng = np.random.default_rng(11)
    studies = [_study(rng, 0.0) for _ in range(TRIALS)]
    false = sum(compare_runs(a, b, settings=s).verdict in (Verdict.FASTER, Verdict.SLOWER) for a, b in studies)
    assert false <= MAX_FALSE, false
    # the control: the same studies decided at 80% call far more of them different, so the bound can fail
    loose_false = sum(compare_runs(a, b, settings=loose).verdict in (Verdict.FASTER, Verdict.SLOWER)
                      for a, b in studies)
    assert loose_false > MAX_FALSE, loose_false


def test_the_mean_finds_slow_steps_on_a_busy_host() -> None:
    """A has 50 ms more on every 5th step (slow_fifth.py's change: +10 ms on a 15 ms mean with the stalls, which
    spread a pair's log ratio by about 0.2): decided on the mean, 10 pairs call B faster in at least 9 studies of 10
    (5 pairs: about 7 in 10; the price of the mean on a busy host is pairs)."""
    s = ab_settings(bench_args("--metric", MEAN.name), MEAN.name)
    rng = np.random.default_rng(5)
    found = sum(compare_runs(a, b, settings=s).verdict is Verdict.FASTER
                for a, b in (_study(rng, 50.0, pairs=10) for _ in range(100)))
    assert found >= 90, found
