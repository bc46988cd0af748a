"""How often does `bench --ab` call an A/A study faster or slower, and how often does it find a real change?
Simulated interleaved studies decided by the real code path: the pair order of `cli.bench.ab_order` and the verdict
of `significance.compare_runs` (paired, through `pair_verdict`), at bench's confidence and threshold.

Each run's log value = level drift at its position in the run order + run noise (+ the change on B, + an order
effect on the second run of each pair). Noise settings (per-run sigma; a pair's log ratio spreads sqrt(2) times
more):

- ``gauss2``: Gaussian, 2%;  ``gauss20``: Gaussian, 20% (a saturated host's wall clock: the threshold screens
  nothing, only the interval's level decides);
- ``t2``: Student t with 2 df, scale 2% (heavy tails);
- ``hog``: 2% Gaussian, and in 1 pair of 10 one side (at random) met a hog: x U(0.6, 1.8);
- ``ramp``: 2% Gaussian on a load ramp of +30% over the study;  ``order``: 2% Gaussian, and a pair's second run
  is 5% slower (a warm cache the first run filled, or a periodic neighbour).

Prints, per setting and number of pairs, A/A false verdicts (faster or slower) of ``--trials`` studies and the
share of +10% studies called slower, for the old confidence (0.95) and bench's (``BENCH_CONFIDENCE``).

    python benchmarks/ab_coverage.py [--trials 1000] [--pairs 3,5,10] [--threshold 2]

``--sequential MIN:MAX`` checks the sequential pairs of `advise --verify` and `tune` (analyze/diff/sequential.py)
instead: each study runs up to MAX pairs, the verdict is looked at on the planned looks at each look's level and
the study stops once decided. Prints A/A false verdicts, A/A "no change" answers, +10% studies found slower and
the mean pairs spent, for the corrected looks and, as a control, for the same looks each at the overall level.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from stepscope.analyze.diff.sequential import Looks
from stepscope.analyze.diff.significance import BENCH_CONFIDENCE, DiffSettings, Verdict, compare_runs
from stepscope.cli.bench import ab_order

Noise = Callable[[np.random.Generator, int], np.ndarray]
"""(rng, runs) -> per-run log noise in run order."""


def _gauss(sigma: float) -> Noise:
    return lambda rng, k: rng.normal(0.0, sigma, k)


def _t2(rng: np.random.Generator, k: int) -> np.ndarray:
    return 0.02 * rng.standard_t(2, k)


def _hog(rng: np.random.Generator, k: int) -> np.ndarray:
    x = rng.normal(0.0, 0.02, k)
    for pair in range(k // 2):
        if rng.random() < 0.1:
            x[2 * pair + int(rng.integers(2))] += np.log(rng.uniform(0.6, 1.8))
    return x


def _ramp(rng: np.random.Generator, k: int) -> np.ndarray:
    out: np.ndarray = rng.normal(0.0, 0.02, k) + np.log1p(0.3) * np.arange(k) / max(k - 1, 1)
    return out


def _order(rng: np.random.Generator, k: int) -> np.ndarray:
    out: np.ndarray = rng.normal(0.0, 0.02, k) + np.log1p(0.05) * (np.arange(k) % 2)
    return out


SETTINGS: dict[str, Noise] = {"gauss2": _gauss(0.02), "gauss20": _gauss(0.20), "t2": _t2, "hog": _hog,
                              "ramp": _ramp, "order": _order}


@dataclass(frozen=True, slots=True)
class Count:
    setting: str
    pairs: int
    confidence: float
    aa_false: int
    found: int
    trials: int


def study(rng: np.random.Generator, noise: Noise, pairs: int, change: float) -> tuple[list[float], list[float]]:
    """One interleaved study: the per-run values of A and B, pair i = (a[i], b[i])."""
    order = ab_order(pairs)
    x = noise(rng, len(order))
    a, b = [0.0] * pairs, [0.0] * pairs
    for pos, (pair, side) in enumerate(order):
        if side == "A":
            a[pair] = 0.01 * float(np.exp(x[pos]))
        else:
            b[pair] = 0.01 * (1.0 + change) * float(np.exp(x[pos]))
    return a, b


def count(setting: str, pairs: int, confidence: float, trials: int, threshold: float, seed: int = 0) -> Count:
    settings = DiffSettings(paired=True, confidence=confidence, threshold=threshold)
    noise = SETTINGS[setting]
    rng = np.random.default_rng(seed)
    false = found = 0
    for _ in range(trials):
        a, b = study(rng, noise, pairs, 0.0)
        false += compare_runs(a, b, settings=settings).verdict in (Verdict.FASTER, Verdict.SLOWER)
        a, b = study(rng, noise, pairs, 0.10)
        found += compare_runs(a, b, settings=settings).verdict is Verdict.SLOWER
    return Count(setting, pairs, confidence, false, found, trials)


@dataclass(frozen=True, slots=True)
class SeqCount:
    setting: str
    looks: str
    level: float
    aa_false: int
    aa_no_change: int
    found: int
    mean_pairs_aa: float
    mean_pairs_found: float
    trials: int


def sequential(a: list[float], b: list[float], looks: Looks, level: float, threshold: float) -> tuple[Verdict, int]:
    """The verdict of a sequential study on the first pairs of ``a``/``b`` and the pairs it spent: the same stop
    rule as verify and tune (``Looks.stop``), every look at ``level``."""
    settings = DiffSettings(paired=True, confidence=level, threshold=threshold)
    verdict = Verdict.INCONCLUSIVE
    for n in looks.at:
        verdict = compare_runs(a[:n], b[:n], settings=settings).verdict
        if looks.stop(n, verdict):
            return verdict, n
    return verdict, looks.max_pairs


def sequential_count(setting: str, looks: Looks, trials: int, threshold: float, *, corrected: bool = True,
                     seed: int = 0, change: bool = True) -> SeqCount:
    """A/A and +10% sequential studies of ``setting``; ``corrected``: each look at ``looks.look_confidence`` (as
    verify and tune do), else at the overall level (the control that shows why the correction is needed);
    ``change``: the +10% studies too (off: A/A only)."""
    level = looks.look_confidence if corrected else looks.confidence
    noise = SETTINGS[setting]
    rng = np.random.default_rng(seed)
    false = same = found = spent_aa = spent_found = 0
    for _ in range(trials):
        v, n = sequential(*study(rng, noise, looks.max_pairs, 0.0), looks, level, threshold)
        false += v in (Verdict.FASTER, Verdict.SLOWER)
        same += v is Verdict.NO_SIGNIFICANT_CHANGE
        spent_aa += n
        if not change:
            continue
        v, n = sequential(*study(rng, noise, looks.max_pairs, 0.10), looks, level, threshold)
        found += v is Verdict.SLOWER
        spent_found += n
    return SeqCount(setting, ",".join(map(str, looks.at)), level, false, same, found, spent_aa / trials,
                    spent_found / trials, trials)


def main_sequential(spec: str, trials: int, threshold: float, as_json: bool) -> None:
    lo, _, hi = spec.partition(":")
    looks = Looks(int(lo), int(hi))
    rows = [sequential_count(s, looks, trials, threshold, corrected=c) for s in SETTINGS for c in (True, False)]
    if as_json:
        print(json.dumps([r.__dict__ for r in rows], indent=1))
        return
    print(f"{'setting':8} {'looks':>10} {'level':>7} {'A/A false':>10} {'A/A same':>9} {'+10% found':>11} "
          f"{'pairs A/A':>10} {'pairs +10%':>11}   (of {trials})")
    for r in rows:
        print(f"{r.setting:8} {r.looks:>10} {r.level:7.4f} {r.aa_false:10d} {r.aa_no_change:9d} {r.found:11d} "
              f"{r.mean_pairs_aa:10.1f} {r.mean_pairs_found:11.1f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=1000)
    p.add_argument("--pairs", default="3,5,10")
    p.add_argument("--threshold", type=float, default=2.0, help="in %% (default: 2, bench's)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--sequential", metavar="MIN:MAX", help="check sequential pairs of MIN to MAX pairs instead")
    a = p.parse_args()
    if a.sequential:
        main_sequential(a.sequential, a.trials, a.threshold / 100, a.json)
        return
    rows = [count(s, n, c, a.trials, a.threshold / 100) for s in SETTINGS for n in map(int, a.pairs.split(","))
            for c in (0.95, BENCH_CONFIDENCE)]
    if a.json:
        print(json.dumps([r.__dict__ for r in rows], indent=1))
        return
    print(f"{'setting':8} {'pairs':>5} {'conf':>5} {'A/A false':>10} {'+10% found':>11}   (of {a.trials})")
    for r in rows:
        print(f"{r.setting:8} {r.pairs:5d} {r.confidence:5.2f} {r.aa_false:10d} {r.found:11d}")


if __name__ == "__main__":
    main()
