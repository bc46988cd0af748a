"""The CI gate's verdict: is the candidate commit significantly worse than the baseline, beyond a threshold?

For each metric, the candidate's repeats are compared with the baseline's repeats:

- ``worse`` = candidate median / baseline median for costs (step time), the inverse for benefits
  (throughput), so ``worse > 1`` always means a regression;
- its 95% interval is a percentile bootstrap of the ratio of medians (each side resampled alone);
- REGRESSED when ``worse - 1 > threshold`` *and* the interval's lower end is above 1 (the data show a
  slowdown, and it is bigger than what you tolerate); IMPROVED when the interval lies below 1;
  otherwise NO_SIGNIFICANT_CHANGE — which does not prove there is no change, only that these repeats
  cannot show one beyond the noise;
- CANNOT_TELL when either side has fewer than ``min_repeats`` runs with the metric.

With 2 repeats a side the bootstrap interval spans min/max ratios: only a slowdown seen in every pairing
counts. More repeats give narrower intervals.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

import numpy as np

from stepscope.analyze.history import MetricHistory, lower_is_better
from stepscope.analyze.stats import bootstrap_median_ratio_ci


class MetricVerdict(Enum):
    REGRESSED = "regressed"
    IMPROVED = "improved"
    NO_SIGNIFICANT_CHANGE = "no_significant_change"
    CANNOT_TELL = "cannot_tell"


class CheckVerdict(Enum):
    """Overall gate outcome; ``exit_code`` is what `stepscope check` returns."""

    PASS = "pass"
    REGRESSION = "regression"
    CANNOT_TELL = "cannot_tell"

    @property
    def exit_code(self) -> int:
        return {CheckVerdict.PASS: 0, CheckVerdict.REGRESSION: 1, CheckVerdict.CANNOT_TELL: 2}[self]


@dataclass(frozen=True, slots=True)
class MetricCheck:
    """One metric's comparison.

    baseline_median / candidate_median: medians of the repeats (the metric's unit; None when absent).
    worse: the regression ratio (> 1 is worse, see module doc); worse_low / worse_high: its 95% bootstrap interval.
    change: ``worse - 1`` as a fraction (0.10 = 10% worse).
    reason: why the verdict is CANNOT_TELL (empty otherwise).
    """

    metric: str
    lower_is_better: bool
    baseline_n: int
    candidate_n: int
    baseline_median: float | None
    candidate_median: float | None
    worse: float | None
    worse_low: float | None
    worse_high: float | None
    change: float | None
    threshold: float
    verdict: MetricVerdict
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        return d


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The gate: per-metric checks and the overall verdict (REGRESSION if any metric regressed, else
    CANNOT_TELL if any could not be told, else PASS). ``reason`` sums up a CANNOT_TELL."""

    verdict: CheckVerdict
    checks: tuple[MetricCheck, ...]
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict.value, "exit_code": self.verdict.exit_code, "reason": self.reason,
                "checks": [c.to_dict() for c in self.checks]}


def check_metric(metric: str, baseline: Sequence[float | None], candidate: Sequence[float | None], *, threshold: float,
                 min_repeats: int = 2, confidence: float = 0.95) -> MetricCheck:
    """Compare one metric's repeats (see the module doc for the rule)."""
    lib = lower_is_better(metric)
    b = np.asarray([v for v in baseline if v is not None and np.isfinite(v)], dtype="float64")
    c = np.asarray([v for v in candidate if v is not None and np.isfinite(v)], dtype="float64")
    bm = float(np.median(b)) if b.size else None
    cm = float(np.median(c)) if c.size else None
    check = functools.partial(MetricCheck, metric=metric, lower_is_better=lib, baseline_n=int(b.size),
                              candidate_n=int(c.size), baseline_median=bm, candidate_median=cm, threshold=threshold)
    short = [f"{side} has {n} run(s) with {metric}" for side, n in (("the baseline", b.size), ("the candidate", c.size))
             if n < min_repeats]
    if short or bm is None or cm is None or bm == 0 or cm == 0:
        reason = "; ".join(short) + f", need {min_repeats} — repeat with `stepscope bench --repeat N`" if short \
            else f"{metric} is zero on one side"
        return check(worse=None, worse_low=None, worse_high=None, change=None,
                     verdict=MetricVerdict.CANNOT_TELL, reason=reason)
    lo, hi = bootstrap_median_ratio_ci(b, c, confidence=confidence)
    ratio = cm / bm
    if lib:
        worse, wlo, whi = ratio, lo, hi
    else:
        worse, wlo, whi = 1 / ratio, 1 / hi, 1 / lo
    if worse - 1 > threshold and wlo > 1:
        verdict = MetricVerdict.REGRESSED
    elif whi < 1:
        verdict = MetricVerdict.IMPROVED
    else:
        verdict = MetricVerdict.NO_SIGNIFICANT_CHANGE
    return check(worse=worse, worse_low=wlo, worse_high=whi, change=worse - 1, verdict=verdict)


def check_regression(baseline: Mapping[str, Sequence[float | None]], candidate: Mapping[str, Sequence[float | None]],
                     metrics: Sequence[str], *, threshold: float, min_repeats: int = 2) -> CheckResult:
    """The gate over ``metrics``: ``baseline`` / ``candidate`` map metric -> the repeats' values."""
    checks = tuple(check_metric(m, baseline.get(m, ()), candidate.get(m, ()), threshold=threshold,
                                min_repeats=min_repeats) for m in metrics)
    if not checks:
        return CheckResult(CheckVerdict.CANNOT_TELL, (), "no metric to compare")
    if any(c.verdict is MetricVerdict.REGRESSED for c in checks):
        return CheckResult(CheckVerdict.REGRESSION, checks, "")
    untold = [c for c in checks if c.verdict is MetricVerdict.CANNOT_TELL]
    if untold:
        return CheckResult(CheckVerdict.CANNOT_TELL, checks, untold[0].reason)
    return CheckResult(CheckVerdict.PASS, checks, "")


@dataclass(frozen=True, slots=True)
class StepLocation:
    """Where a metric's history steps to worse between the baseline and the candidate.

    last_good / first_bad: commit shas on either side of the step; *_run: their representative runs
    (the run closest to the commit's median), the pair to diff. relative_change: level after / before - 1
    of the fitted segments (the metric's own direction: positive = larger).
    """

    metric: str
    last_good: str
    first_bad: str
    first_bad_subject: str | None
    last_good_run: str
    first_bad_run: str
    relative_change: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def locate_step(history: MetricHistory, *, after: str | None, upto: str | None) -> StepLocation | None:
    """The largest worsening step whose first bad commit lies after the point ``after`` and at or before
    the point ``upto`` (point keys; None = no bound), or None when the history shows none."""
    keys = [p.key for p in history.points]
    lo = keys.index(after) if after in keys else -1
    hi = keys.index(upto) if upto in keys else len(keys) - 1
    best: StepLocation | None = None
    for good, bad, rel in history.steps:
        if not (lo < bad <= hi) or rel is None or (rel > 0) != history.lower_is_better:
            continue
        if best is None or abs(rel) > abs(best.relative_change or 0):
            g, b = history.points[good], history.points[bad]
            best = StepLocation(history.metric, g.commit or g.key, b.commit or b.key, b.subject,
                                g.representative_run, b.representative_run, rel)
    return best
