"""Trend series of both runs (step time and cumulative time over steps), system metrics and logged
metrics (loss...) side by side, so a speed-up that changes the learning shows."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stepscope.analyze.diff.sides import StepSample
from stepscope.analyze.run.system import metric_stats
from stepscope.model.tables import RankData

MAX_POINTS = 600
"""Longer series are thinned evenly (first and last point kept) so reports stay small."""


@dataclass(frozen=True, slots=True)
class Series:
    """One line of a plot: ``x`` and ``y`` of equal length, in ``x_unit`` / ``y_unit``."""

    x: tuple[float, ...]
    y: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class TrendPair:
    """The same quantity for both runs in one plot. ``key``: stable id; ``x_label``/``y_label`` carry the
    units ("step", "time per step (ms)"). A side is None when that run does not have the quantity.
    ``warmup_*``: leading steps excluded from the statistics (marked on step plots; 0 elsewhere)."""

    key: str
    title: str
    x_label: str
    y_label: str
    baseline: Series | None
    experiment: Series | None
    warmup_baseline: int = 0
    warmup_experiment: int = 0


@dataclass(frozen=True, slots=True)
class MetricRow:
    """A sampled system metric or a logged metric of both runs (rank 0).

    System metrics (``kind`` "system"): ``*_mean`` and ``*_peak`` over the run's samples, in the unit of the
    name's suffix (_pct, _bytes, _bps, _w, _j: cumulative counters show their increase as peak).
    Logged metrics (``kind`` "logged"): ``*_mean`` is the last value, ``*_peak`` the minimum (for a loss the
    best) — see ``docs/diff.md``. None: not measured in that run. ``delta_pct`` compares the means.
    """

    kind: str
    name: str
    baseline_mean: float | None
    experiment_mean: float | None
    baseline_peak: float | None
    experiment_peak: float | None
    delta_pct: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _thin(x: np.ndarray, y: np.ndarray) -> Series:
    if x.size > MAX_POINTS:
        keep = np.unique(np.linspace(0, x.size - 1, MAX_POINTS).astype(int))
        x, y = x[keep], y[keep]
    return Series(tuple(float(v) for v in x), tuple(float(v) for v in y))


def step_trends(base: StepSample | None, exp: StepSample | None) -> list[TrendPair]:
    """Step time over steps, and cumulative time over steps (where two runs diverge shows as a kink)."""

    def per_step(s: StepSample | None) -> Series | None:
        return None if s is None or not s.all_duration_ns.size else _thin(s.all_index.astype(float),
                                                                          s.all_duration_ns / 1e6)

    def cumulative(s: StepSample | None) -> Series | None:
        return None if s is None or not s.all_duration_ns.size else _thin(s.all_index.astype(float),
                                                                          np.cumsum(s.all_duration_ns) / 1e9)

    wb = base.warmup if base else 0
    we = exp.warmup if exp else 0
    return [
        TrendPair("cumulative_time", "Cumulative time over steps (rank 0)", "step", "cumulative time (s)",
                  cumulative(base), cumulative(exp), wb, we),
        TrendPair("step_time", "Step time over steps (rank 0)", "step", "step time (ms)",
                  per_step(base), per_step(exp), wb, we),
    ]


def _pct(b: float | None, e: float | None) -> float | None:
    return 100.0 * (e - b) / b if b not in (None, 0) and e is not None else None


def system_diff(base: RankData | None, exp: RankData | None) -> tuple[list[MetricRow], list[TrendPair]]:
    """Mean and peak of every sampled metric of either run, and the series of each over time since the
    rank's first sample (seconds)."""
    sb = {m.name: m for m in metric_stats(base.samples)} if base else {}
    se = {m.name: m for m in metric_stats(exp.samples)} if exp else {}
    rows, trends = [], []
    for name in sorted(set(sb) | set(se)):
        b, e = sb.get(name), se.get(name)
        rows.append(MetricRow("system", name, b.mean if b else None, e.mean if e else None,
                              b.peak if b else None, e.peak if e else None,
                              _pct(b.mean if b else None, e.mean if e else None)))
        trends.append(TrendPair(f"system.{name}", name, "time since first sample (s)", name,
                                _sample_series(base, name), _sample_series(exp, name)))
    return rows, trends


def _sample_series(rank: RankData | None, name: str) -> Series | None:
    if rank is None or name not in rank.samples.columns or not len(rank.samples):
        return None
    t = rank.samples.t_ns.astype("float64")
    v = rank.samples.columns[name]
    ok = np.isfinite(v)
    if not ok.any():
        return None
    return _thin((t[ok] - t[0]) / 1e9, v[ok])


def logged_diff(base: RankData | None, exp: RankData | None) -> tuple[list[MetricRow], list[TrendPair]]:
    """Every logged metric of either run: last and minimum value, and its series over steps."""
    names = sorted(set(base.metrics.names if base else []) | set(exp.metrics.names if exp else []))
    rows, trends = [], []
    for name in names:
        sb, se = _metric_series(base, name), _metric_series(exp, name)
        last_b = sb.y[-1] if sb and sb.y else None
        last_e = se.y[-1] if se and se.y else None
        rows.append(MetricRow("logged", name, last_b, last_e, min(sb.y) if sb and sb.y else None,
                              min(se.y) if se and se.y else None, _pct(last_b, last_e)))
        trends.append(TrendPair(f"logged.{name}", f"{name} over steps", "step", name, sb, se))
    return rows, trends


def _metric_series(rank: RankData | None, name: str) -> Series | None:
    if rank is None:
        return None
    mask = rank.metrics.mask_of(name)
    if not mask.any():
        return None
    return _thin(rank.metrics["step"][mask].astype(float), rank.metrics["value"][mask])
