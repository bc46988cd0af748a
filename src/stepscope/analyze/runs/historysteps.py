"""Each detected step of a metric's history, confirmed (or not) by the CI gate's run-level test.

The step fit (:func:`stepscope.analyze.runs.stepdetect.detect_steps`, run by :func:`metric_history`) says *where* a
series of per-commit medians changes level. Whether the change is real is asked as `stepscope check` asks it:
:func:`stepscope.analyze.runs.regression.check_metric` on one value per run, the runs of the ``window`` clean commits
just before the step (inside the segment before it) against those of the ``window`` clean commits from the first
changed one on (inside the segment after it). No second statistic is involved.

A step is listed as

- REGRESSION when the check says REGRESSED: the Welch interval (at the gate's 98%) of the worsening lies above 1
  *and* the worsening exceeds ``threshold`` (5% by default, `check --max-regression`'s default);
- IMPROVEMENT when the check says IMPROVED *and* the improvement exceeds the same threshold (the gate has no
  threshold for improvements, since it never fails on one; a page listing them needs one, or a step that the
  fit placed on noise could be listed as a small improvement);
- NOT_CONFIRMED otherwise (no significant change beyond the threshold, or too few runs: ``check.reason``).

What it cannot say: the window sides are chosen where the fit saw a change, so the test is asked after looking
(the threshold, not the interval, is what keeps unchanged code off the list: see
tests/analyze/test_historysteps.py for the A/A rate). A step not listed may still be a change below the
threshold or below what these repeats resolve (``check.mde``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from stepscope.analyze.runs.history import CommitPoint, MetricHistory
from stepscope.analyze.runs.regression import MetricCheck, MetricVerdict, check_metric

THRESHOLD = 0.05
"""Smallest relative change listed as a regression or improvement (`stepscope check`'s default 5%)."""

WINDOW = 3
"""Commits on each side of a step whose runs are compared (`stepscope check --window`'s default)."""

MIN_REPEATS = 3
"""Fewest runs a side for a verdict (`stepscope check --min-repeats`'s default)."""


class StepKind(Enum):
    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    NOT_CONFIRMED = "not_confirmed"


@dataclass(frozen=True, slots=True)
class HistoryStep:
    """One detected step and its run-level check.

    metric: the metric's name. last_good / first_bad: indexes into the history's points on either side of the
        step. commit / subject / time_s: the first changed commit (``time_s`` as the history orders it, Unix s).
    last_good_run / first_bad_run: the runs of those two points joined by commas (the pair of groups whose diff
        explains it).
    fitted_change: the step fit's level after / before - 1 (the metric's own direction), None when before is 0.
    before_commits / after_commits: the point keys whose runs were compared, oldest first.
    check: the gate's comparison of those runs (``worse`` > 1 is worse whatever the metric's direction).
    kind: see the module docstring.
    """

    metric: str
    lower_is_better: bool
    last_good: int
    first_bad: int
    commit: str | None
    short: str
    subject: str | None
    time_s: float
    last_good_run: str
    first_bad_run: str
    fitted_change: float | None
    before_commits: tuple[str, ...]
    after_commits: tuple[str, ...]
    check: MetricCheck
    kind: StepKind

    @property
    def change(self) -> tuple[float, float, float] | None:
        """(after / before - 1, interval low, interval high) of the runs' geometric means, in the metric's own
        direction (positive = the metric grew), at the check's confidence; None without an interval."""
        c = self.check
        if c.worse is None or c.worse_low is None or c.worse_high is None:
            return None
        if self.lower_is_better:
            return c.worse - 1, c.worse_low - 1, c.worse_high - 1
        return 1 / c.worse - 1, 1 / c.worse_high - 1, 1 / c.worse_low - 1

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "lower_is_better": self.lower_is_better, "last_good": self.last_good,
                "first_bad": self.first_bad, "commit": self.commit, "subject": self.subject, "time_s": self.time_s,
                "last_good_run": self.last_good_run, "first_bad_run": self.first_bad_run,
                "fitted_change": self.fitted_change, "before_commits": list(self.before_commits),
                "after_commits": list(self.after_commits), "check": self.check.to_dict(), "kind": self.kind.value,
                "change": list(self.change) if self.change else None}


def _kind(check: MetricCheck, threshold: float) -> StepKind:
    if check.verdict is MetricVerdict.REGRESSED:
        return StepKind.REGRESSION
    if check.verdict is MetricVerdict.IMPROVED and check.worse is not None and 1 / check.worse - 1 > threshold:
        return StepKind.IMPROVEMENT
    return StepKind.NOT_CONFIRMED


def _sides(points: tuple[CommitPoint, ...], lo: int, good: int, bad: int, hi: int, window: int
           ) -> tuple[list[CommitPoint], list[CommitPoint]]:
    """The ``window`` clean points ending at ``good`` (not before ``lo``) and starting at ``bad`` (before ``hi``)."""
    before = [p for p in points[lo:good + 1] if not p.dirty][-window:]
    after = [p for p in points[bad:hi] if not p.dirty][:window]
    return before, after


def history_steps(history: MetricHistory, *, threshold: float = THRESHOLD, window: int = WINDOW,
                  min_repeats: int = MIN_REPEATS) -> tuple[HistoryStep, ...]:
    """Every step of ``history.steps`` with its run-level check, oldest first (see the module docstring)."""
    if window < 1:
        raise ValueError(f"history_steps: window must be at least 1 commit, got {window}")
    out: list[HistoryStep] = []
    steps = history.steps
    for k, (good, bad, rel) in enumerate(steps):
        lo = steps[k - 1][1] if k > 0 else 0
        hi = steps[k + 1][0] + 1 if k + 1 < len(steps) else len(history.points)
        before, after = _sides(history.points, lo, good, bad, hi, window)
        check = check_metric(history.metric, [v for p in before for v in p.values],
                             [v for p in after for v in p.values], threshold=threshold, min_repeats=min_repeats)
        g, b = history.points[good], history.points[bad]
        out.append(HistoryStep(metric=history.metric, lower_is_better=history.lower_is_better, last_good=good,
                               first_bad=bad, commit=b.commit, short=b.short, subject=b.subject, time_s=b.time_s,
                               last_good_run=g.runs_ref, first_bad_run=b.runs_ref,
                               fitted_change=rel, before_commits=tuple(p.key for p in before),
                               after_commits=tuple(p.key for p in after), check=check, kind=_kind(check, threshold)))
    return tuple(out)
