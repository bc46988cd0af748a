"""Tracked metrics across commits: one point per commit (its repeats pooled), relative to a baseline.

Input is one :class:`RunPoint` per stored run (the index row plus its summary metrics); the CLI builds
them from the store. Runs outside a git work tree form one "no commit" point, reported apart and never
placed on the commit axis. Runs from a dirty tree form their own point, flagged ``dirty``: they are not
the commit's code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from stepscope.analyze.runs.stepdetect import StepFit, detect_steps
from stepscope.analyze.stats import run_interval

NO_COMMIT = "(no commit)"

LOWER_IS_BETTER_PREFIXES = ("step_time", "step_cpu_time", "process_cpu_time", "data_wait", "peak_", "energy",
                            "duration", "region.", "phase.", "idle", "comm", "memcpy", "trace.")
"""Metric names starting with these are costs (lower is better); others (samples_per_s, tokens_per_s,
metric.accuracy, ...) are benefits. ``metric.loss`` style user metrics containing "loss" or "error" are costs."""


MAX_FIT_POINTS = 400
"""Step detection looks at the newest this-many clean commits (the exact fit is quadratic in points)."""


class Order(Enum):
    """How points are placed: COMMIT orders by commit time (then first run); DATE by first run start."""

    COMMIT = "commit"
    DATE = "date"


def lower_is_better(metric: str) -> bool:
    """Whether a smaller value of ``metric`` is an improvement (see LOWER_IS_BETTER_PREFIXES)."""
    if metric.startswith("metric."):
        return any(w in metric for w in ("loss", "error", "err", "perplexity", "time"))
    return metric.startswith(LOWER_IS_BETTER_PREFIXES)


@dataclass(frozen=True, slots=True)
class RunPoint:
    """One stored run as history sees it (index fields; times in Unix seconds)."""

    run_id: str
    name: str
    status: str
    start_s: float
    commit: str | None
    branch: str | None
    dirty: bool
    commit_time_s: float | None
    subject: str | None
    group: str | None
    metrics: dict[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CommitPoint:
    """One commit's value of a metric.

    key: commit sha (``+dirty`` appended for a dirty tree; NO_COMMIT outside git).
    values: the metric of each repeat (completed runs with the metric), in run start order.
    run_ids: the runs behind ``values``, same order.
    median: median of ``values`` (the metric's unit). ci_low / ci_high: with 3 or more repeats, the 95% t interval
        (on logs) of the centre of the runs' distribution — the geometric mean, equal to the median for a
        log-symmetric spread; its coverage is checked by simulation (tests/analyze/test_stats_runlevel.py). With 2
        repeats it is the min–max range (no coverage claimed; ``interval`` says so), with 1 the value itself.
    interval: what ci_low / ci_high are: "t95", "min-max" or "single" (reports label it).
    relative / rel_low / rel_high: median and interval divided by the baseline point's median (None when there
        is no baseline or it is 0).
    representative_run: the run whose value is closest to the median (what a click opens).
    time_s: commit time (COMMIT order, falling back to the first run's start) or first run start (DATE order).
    """

    key: str
    commit: str | None
    subject: str | None
    branch: str | None
    dirty: bool
    commit_time_s: float | None
    time_s: float
    run_ids: tuple[str, ...]
    values: tuple[float, ...]
    median: float
    ci_low: float
    ci_high: float
    relative: float | None
    rel_low: float | None
    rel_high: float | None
    representative_run: str
    interval: str = "t95"

    @property
    def interval_label(self) -> str:
        return {"t95": "95% CI", "min-max": "min–max (2 runs)", "single": "one run"}.get(self.interval, self.interval)

    @property
    def runs_ref(self) -> str:
        """The point's runs as one diff side (`stepscope diff a,b,c d,e,f`): a commit is compared as its group of
        runs, never through one representative run."""
        return ",".join(self.run_ids) or self.representative_run

    @property
    def short(self) -> str:
        return NO_COMMIT if self.commit is None else self.commit[:10] + ("+dirty" if self.dirty else "")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["short"] = self.short
        return d


@dataclass(frozen=True, slots=True)
class MetricHistory:
    """A metric across commits.

    points: commit points in order (no-commit runs excluded; see ``no_commit``).
    no_commit: the point pooling runs made outside a git work tree, or None.
    baseline: key of the baseline point (relative = 1.0 there), or None when none was found.
    fit: step detection over the medians of the newest MAX_FIT_POINTS clean (non-dirty) points; ``steps``
        indexes ``points``.
    steps: (last good point index, first point after the step, relative change) for each detected step.
    lower_is_better: the metric's direction.
    """

    metric: str
    order: Order
    points: tuple[CommitPoint, ...]
    no_commit: CommitPoint | None
    baseline: str | None
    fit: StepFit | None
    steps: tuple[tuple[int, int, float | None], ...]
    lower_is_better: bool

    def to_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "order": self.order.value, "baseline": self.baseline,
                "lower_is_better": self.lower_is_better, "points": [p.to_dict() for p in self.points],
                "no_commit": self.no_commit.to_dict() if self.no_commit else None,
                "steps": [{"last_good": a, "first_bad": b, "relative_change": r} for a, b, r in self.steps]}


def _key(r: RunPoint) -> str:
    if r.commit is None:
        return NO_COMMIT
    return r.commit + ("+dirty" if r.dirty else "")


def _point(key: str, runs: list[tuple[RunPoint, float]], order: Order) -> CommitPoint:
    runs = sorted(runs, key=lambda t: t[0].start_s)
    vals = np.array([v for _, v in runs], dtype="float64")
    med = float(np.median(vals))
    iv = run_interval(vals) if bool((vals > 0).all()) else None  # logs need positive values
    lo, hi, kind = (iv.low, iv.high, iv.kind) if iv is not None else \
        (float(vals.min()), float(vals.max()), "min-max" if vals.size > 1 else "single")
    if kind == "t95" and not (lo <= med <= hi):  # a skewed trio: widen to hold the median it is printed with
        lo, hi = min(lo, med), max(hi, med)
    first = runs[0][0]
    rep = min(runs, key=lambda t: abs(t[1] - med))[0].run_id
    t = first.commit_time_s if (order is Order.COMMIT and first.commit_time_s is not None) else first.start_s
    return CommitPoint(key=key, commit=first.commit, subject=first.subject, branch=first.branch,
                       dirty=first.dirty, commit_time_s=first.commit_time_s, time_s=t,
                       run_ids=tuple(r.run_id for r, _ in runs), values=tuple(float(v) for v in vals),
                       median=med, ci_low=lo, ci_high=hi, relative=None, rel_low=None, rel_high=None,
                       representative_run=rep, interval=kind)


def _relative(p: CommitPoint, base: float | None) -> CommitPoint:
    if base is None or base == 0 or not math.isfinite(base):
        return p
    from dataclasses import replace

    return replace(p, relative=p.median / base, rel_low=p.ci_low / base, rel_high=p.ci_high / base)


def commit_points(runs: Sequence[RunPoint], metric: str, *, order: Order = Order.COMMIT,
                  completed_only: bool = True) -> tuple[list[CommitPoint], CommitPoint | None]:
    """Group runs with the metric into points (ordered) and the no-commit point."""
    groups: dict[str, list[tuple[RunPoint, float]]] = {}
    for r in runs:
        v = r.metrics.get(metric)
        if v is None or not math.isfinite(v) or (completed_only and r.status != "completed"):
            continue
        groups.setdefault(_key(r), []).append((r, float(v)))
    no_commit = _point(NO_COMMIT, groups.pop(NO_COMMIT), order) if NO_COMMIT in groups else None
    points = [_point(k, v, order) for k, v in groups.items()]
    points.sort(key=lambda p: (p.time_s, min(r.start_s for r, _ in groups[p.key]), p.dirty))
    return points, no_commit


def metric_history(runs: Sequence[RunPoint], metric: str, *, order: Order = Order.COMMIT,
                   baseline: str | None = None, min_step_size: int = 2) -> MetricHistory:
    """The history of ``metric``.

    Args:
        runs: every run to consider (already filtered by name / branch / date by the caller).
        baseline: a point key or commit sha (prefix allowed) to divide by; None = the first clean point.
        min_step_size: fewest commits on either side of a detected step.
    """
    points, no_commit = commit_points(runs, metric, order=order)
    base_point = find_point(points, baseline) if baseline else next((p for p in points if not p.dirty), None)
    base_val = base_point.median if base_point else None
    points = [_relative(p, base_val) for p in points]
    if no_commit is not None:
        no_commit = _relative(no_commit, base_val)
    clean = [i for i, p in enumerate(points) if not p.dirty][-MAX_FIT_POINTS:]
    fit = detect_steps([points[i].median for i in clean], min_size=min_step_size) if clean else None
    steps = tuple((clean[s.index - 1], clean[s.index], s.relative_change) for s in fit.steps) if fit else ()
    return MetricHistory(metric=metric, order=order, points=tuple(points), no_commit=no_commit,
                         baseline=base_point.key if base_point else None, fit=fit, steps=steps,
                         lower_is_better=lower_is_better(metric))


def find_point(points: Sequence[CommitPoint], ref: str) -> CommitPoint | None:
    """The clean point whose key or commit equals or starts with ``ref`` (a dirty one if only that exists)."""
    hits = [p for p in points if p.key == ref or (p.commit is not None and p.commit.startswith(ref))]
    clean = [p for p in hits if not p.dirty]
    found = clean or hits
    return found[0] if found else None


def tracked_metrics(runs: Sequence[RunPoint], *, min_share: float = 0.05) -> list[str]:
    """The metrics worth a history line: headline figures, regions holding at least ``min_share`` of the
    step, user metrics, and trace component shares, in a stable order (only those some run has)."""
    present: set[str] = set()
    region_share: dict[str, float] = {}
    for r in runs:
        for k, v in r.metrics.items():
            if v is None:
                continue
            present.add(k)
            if k.startswith("region.") and k.endswith(".share"):
                region_share[k[:-len(".share")]] = max(region_share.get(k[:-len(".share")], 0.0), v)
    head = [m for m in ("step_time_median_s", "samples_per_s", "tokens_per_s", "data_wait_share", "gpu_util_pct",
                        "peak_rss_bytes", "peak_gpu_mem_bytes", "energy_per_step_j") if m in present]
    regions = sorted(k + ".p50_s" for k, s in region_share.items() if s >= min_share and k + ".p50_s" in present)
    others = sorted(m for m in present if m.startswith(("metric.", "trace.")) and not m.endswith("_count"))
    zero = {m for m in head if all((r.metrics.get(m) or 0.0) == 0.0 for r in runs)}
    return [m for m in head if m not in zero] + regions + others


def pooled(runs: Sequence[RunPoint], metric: str, *, key: str = "all") -> CommitPoint | None:
    """All completed runs' values of ``metric`` as one point (a benchmark's repeats), or None if none has it."""
    vals = [(r, float(v)) for r in runs if r.status == "completed"
            and (v := r.metrics.get(metric)) is not None and math.isfinite(v)]
    return _point(key, vals, Order.DATE) if vals else None
