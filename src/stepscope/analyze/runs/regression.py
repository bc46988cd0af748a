"""The CI gate's verdict: is the candidate commit significantly worse than the baseline, beyond a threshold?

The run is the unit of evidence: each metric is compared on one value per run (the candidate's repeats
against the baseline window's runs, which pools the runs of several earlier commits):

- ``worse`` = ratio of geometric means candidate / baseline for costs (step time), the inverse for benefits
  (throughput), so ``worse > 1`` always means a regression;
- its interval is Welch's t interval on log per-run values at ``confidence`` (two-sided; default 0.98, so the
  one-sided "is it worse?" question is asked at 1%: over a series of 30 checks of unchanged code fewer than
  one in four series sees any false failure even before the threshold filters, and with it far fewer);
  coverage is checked by simulation (tests/analyze/test_stats_runlevel.py);
- the verdict is `stepscope diff`'s on the same values (``significance.pair_verdict``, one rule for every view
  of a pair) in the gate's words: REGRESSED when the interval lies above 1 *and* ``worse - 1`` reaches the
  threshold (the data show a slowdown bigger than what you tolerate); IMPROVED when it lies below 1 and the
  improvement reaches the threshold; otherwise NO_SIGNIFICANT_CHANGE — which does not prove there is no change,
  only that these repeats cannot show one beyond the noise (``mde`` says the smallest change they detect with
  80% power);
- CANNOT_TELL when either side has fewer than ``min_repeats`` (default 3; at least 2: one run has no interval)
  runs with the metric, and when neither a regression of the threshold's size nor an improvement is shown but the
  MDE (80% power at the gate's level) exceeds the threshold: PASS means "a
  regression of the tolerated size would have been seen", so repeats too noisy to see one cannot pass. The
  reason names the MDE, each side's run-to-run spread and the runs a side that would decide at that spread.

Only the gated metrics (step time by default) can fail the gate; the other metrics shown get their own verdicts.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

import numpy as np

from stepscope.analyze.diff.significance import Verdict, pair_verdict
from stepscope.analyze.run.quality import Quality
from stepscope.analyze.runs.history import MetricHistory, lower_is_better
from stepscope.analyze.stats import (
    MAX_REPEATS_NEEDED,
    BetweenCommits,
    clustered_log_ratio,
    geometric_mean,
    repeats_needed,
    welch_log_ratio,
)


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

    baseline_median / candidate_median: geometric means of the per-run values (the tested numbers; the metric's
        unit; None when absent). The field names are kept for JSON compatibility.
    worse: the regression ratio (> 1 is worse, see module doc); worse_low / worse_high: its Welch t interval at
        ``confidence``. change: ``worse - 1`` as a fraction (0.10 = 10% worse).
    mde: smallest relative change these repeats detect with 80% power (None without an interval).
    gated: whether this metric can fail the gate (others are reported only).
    against: what the candidate was compared with ("window" of earlier commits, or "creep": an older anchor).
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
    confidence: float = 0.98
    mde: float | None = None
    gated: bool = True
    against: str = "window"

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


GATE_WORDS = {Verdict.SLOWER: MetricVerdict.REGRESSED, Verdict.FASTER: MetricVerdict.IMPROVED,
              Verdict.NO_SIGNIFICANT_CHANGE: MetricVerdict.NO_SIGNIFICANT_CHANGE,
              Verdict.INCONCLUSIVE: MetricVerdict.CANNOT_TELL}
"""`diff`'s verdict (``significance.pair_verdict``) in the gate's words: slower is a regression whatever the metric."""

GATE_CONFIDENCE = 0.98
"""Two-sided level of the gate's interval: a regression must be shown at one-sided 1%."""


def check_metric(metric: str, baseline: Sequence[float | None], candidate: Sequence[float | None], *, threshold: float,
                 min_repeats: int = 3, confidence: float = GATE_CONFIDENCE, gated: bool = True,
                 against: str = "window", between: BetweenCommits | None = None,
                 baseline_commits: Sequence[str] | None = None) -> MetricCheck:
    """Compare one metric's per-run values (see the module doc for the rule). ``between`` (with
    ``baseline_commits``, the commit of each baseline value): the history's between-commit variance, so that the
    runs of a commit count as one cluster (``stats.clustered_log_ratio``)."""
    lib = lower_is_better(metric)
    keep = [v is not None and bool(np.isfinite(v)) for v in baseline]
    commits = [k for k, ok in zip(baseline_commits, keep, strict=True) if ok] if baseline_commits is not None \
        and len(baseline_commits) == len(baseline) else None
    b = np.asarray([v for v in baseline if v is not None and np.isfinite(v)], dtype="float64")
    c = np.asarray([v for v in candidate if v is not None and np.isfinite(v)], dtype="float64")
    bm = geometric_mean(b) if b.size and (b > 0).all() else (float(np.median(b)) if b.size else None)
    cm = geometric_mean(c) if c.size and (c > 0).all() else (float(np.median(c)) if c.size else None)
    check = functools.partial(MetricCheck, metric=metric, lower_is_better=lib, baseline_n=int(b.size),
                              candidate_n=int(c.size), baseline_median=bm, candidate_median=cm, threshold=threshold,
                              confidence=confidence, gated=gated, against=against)
    need = max(min_repeats, 2)  # one run has no spread of its own: no interval, whatever --min-repeats allows
    short = [f"{side} has {n} run(s) with {metric}" for side, n in (("the baseline", b.size), ("the candidate", c.size))
             if n < need]
    if short or bm is None or cm is None or not (b > 0).all() or not (c > 0).all():
        reason = "; ".join(short) + f", need {need} — repeat with `stepscope bench --repeat N`" if short \
            else f"{metric} is zero on a run"
        return check(worse=None, worse_low=None, worse_high=None, change=None,
                     verdict=MetricVerdict.CANNOT_TELL, reason=reason)
    t = clustered_log_ratio(b, commits, c, between, confidence=confidence) if between is not None \
        and commits is not None else welch_log_ratio(b, c, confidence=confidence)
    assert t.ci_low is not None and t.ci_high is not None
    if lib:
        worse, wlo, whi = t.ratio, t.ci_low, t.ci_high
    else:
        worse, wlo, whi = 1 / t.ratio, 1 / t.ci_high, 1 / t.ci_low
    # the verdict of `stepscope diff` on these values (one rule for every view of a pair), in the gate's words
    verdict = GATE_WORDS[pair_verdict(t, threshold, higher_is_better=not lib)]
    reason = blind_reason(metric, b, c, t.mde or math.nan, threshold, confidence) \
        if verdict is MetricVerdict.CANNOT_TELL else ""
    return check(worse=worse, worse_low=wlo, worse_high=whi, change=worse - 1, verdict=verdict, mde=t.mde,
                 reason=reason)


def blind_reason(metric: str, base: np.ndarray, cand: np.ndarray, mde: float, threshold: float,
                 confidence: float) -> str:
    """Why a comparison cannot tell: its MDE against the tolerance, the run-to-run spread of each side, and the
    runs a side that would detect the tolerated change at that spread."""
    sb = float(np.log(base).std(ddof=1)) if base.size >= 2 else math.nan
    sc = float(np.log(cand).std(ddof=1)) if cand.size >= 2 else math.nan
    pooled = math.sqrt((sb**2 + sc**2) / 2) if math.isfinite(sb) and math.isfinite(sc) else max(sb, sc)
    need = repeats_needed(pooled, threshold, confidence=confidence)
    more = f"{need} runs a side" if need < MAX_REPEATS_NEEDED else f"more than {MAX_REPEATS_NEEDED} runs a side"
    return (f"{metric}: MDE {mde:.0%} exceeds the tolerated {threshold:.0%} — these runs would likely miss a "
            f"regression of that size (run-to-run spread {pooled:.1%}: baseline {sb:.1%} over {base.size} runs, "
            f"candidate {sc:.1%} over {cand.size}); {more} would decide at this spread — repeat with "
            f"`stepscope bench --repeat {min(need, MAX_REPEATS_NEEDED)}` on a quieter host, or raise --max-regression")


def check_regression(baseline: Mapping[str, Sequence[float | None]], candidate: Mapping[str, Sequence[float | None]],
                     metrics: Sequence[str], *, threshold: float, min_repeats: int = 3,
                     gated: Sequence[str] | None = None, creep: Mapping[str, Sequence[float | None]] | None = None,
                     confidence: float = GATE_CONFIDENCE, between: Mapping[str, BetweenCommits] | None = None,
                     baseline_commits: Sequence[str] | None = None,
                     creep_commits: Sequence[str] | None = None) -> CheckResult:
    """The gate over ``metrics``: ``baseline`` / ``candidate`` map metric -> the per-run values.

    ``gated``: the metrics that can fail the gate (default: all of ``metrics``); the others are reported with
    their own verdicts. ``creep``: per-run values of an older anchor commit; a gated metric worse than it beyond
    the threshold fails the gate too (gradual creep that no single commit-to-commit check shows)."""
    gate = set(metrics if gated is None else gated)
    btw = between or {}
    checks = [check_metric(m, baseline.get(m, ()), candidate.get(m, ()), threshold=threshold,
                           min_repeats=min_repeats, confidence=confidence, gated=m in gate, between=btw.get(m),
                           baseline_commits=baseline_commits) for m in metrics]
    if creep is not None:
        checks += [check_metric(m, creep.get(m, ()), candidate.get(m, ()), threshold=threshold,
                                min_repeats=min_repeats, confidence=confidence, gated=True, against="creep",
                                between=btw.get(m), baseline_commits=creep_commits)
                   for m in metrics if m in gate and creep.get(m)]
    if not checks:
        return CheckResult(CheckVerdict.CANNOT_TELL, (), "no metric to compare")
    if any(c.verdict is MetricVerdict.REGRESSED and c.gated for c in checks):
        return CheckResult(CheckVerdict.REGRESSION, tuple(checks), "")
    untold = [c for c in checks if c.verdict is MetricVerdict.CANNOT_TELL and c.gated and c.against == "window"]
    if untold:
        return CheckResult(CheckVerdict.CANNOT_TELL, tuple(checks), untold[0].reason)
    return CheckResult(CheckVerdict.PASS, tuple(checks), "")


@dataclass(frozen=True, slots=True)
class StepLocation:
    """Where a metric's history steps to worse between the baseline and the candidate.

    last_good / first_bad: commit shas on either side of the step; *_run: their runs joined by commas (a diff
    side: `stepscope diff LAST_GOOD_RUN FIRST_BAD_RUN` compares the two commits' groups). relative_change: level
    after / before - 1 of the fitted segments (the metric's own direction: positive = larger).
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
                                g.runs_ref, b.runs_ref, rel)
    return best


def name_commit(history: MetricHistory, *, after: str | None, upto: str | None) -> StepLocation | None:
    """When the detector finds no step but the gate failed: the worsening between consecutive points in
    (``after``, ``upto``] that is largest (the commit a bisection would start from), or None without points."""
    keys = [p.key for p in history.points]
    if upto not in keys:
        return None
    lo = keys.index(after) if after in keys else 0
    hi = keys.index(upto)
    best: tuple[float, int] | None = None
    for i in range(max(lo + 1, 1), hi + 1):
        a, b = history.points[i - 1].median, history.points[i].median
        if a <= 0:
            continue
        worse = b / a - 1 if history.lower_is_better else a / b - 1
        if best is None or worse > best[0]:
            best = (worse, i)
    if best is None:
        return None
    good, bad = history.points[best[1] - 1], history.points[best[1]]
    return StepLocation(history.metric, good.commit or good.key, bad.commit or bad.key, bad.subject,
                        good.runs_ref, bad.runs_ref,
                        bad.median / good.median - 1 if good.median else None)


@dataclass(frozen=True, slots=True)
class GateOutcome:
    """What `stepscope check` decided: the checks, the baseline window's commits, the creep anchor, the commit
    named (``step``), and the candidate runs' measurement quality (shown first)."""

    result: CheckResult
    baseline: str
    baseline_commits: tuple[str, ...]
    candidate: str
    creep_anchor: str | None
    step: StepLocation | None
    quality: tuple[tuple[str, Quality], ...]
    baseline_label: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.result.to_dict(), "schema": "stepscope.check/2", "baseline": self.baseline,
                "baseline_commits": list(self.baseline_commits), "candidate": self.candidate,
                "creep_anchor": self.creep_anchor, "step": self.step.to_dict() if self.step else None,
                "quality": [{"run_id": rid, **q.to_dict()} for rid, q in self.quality]}
