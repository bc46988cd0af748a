"""Sweeps: one metric over a grid of parameter settings (with repeats), a heat map, lines, the best setting.

Input: one :class:`SweepRun` per launched run (its parameter values, status and index metrics). Per
setting: mean and sample std (ddof=1; 0 for one run) of the metric over its completed runs; failed runs
are counted and named, never averaged. Heat map: mean per (row value, column value) of two parameters;
with more parameters, each cell holds the best setting's mean over the others (the cell says what is
reachable). Lines: the metric against one parameter, one line per value of another (best over the
rest). Best setting: the highest mean for throughputs (names ending ``_per_s``, or ``higher_is_better``),
else the lowest (times, shares).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

SWEEP_SCHEMA = "stepscope.sweep/1"


@dataclass(frozen=True, slots=True)
class SweepRun:
    run_id: str
    values: dict[str, str]
    status: str
    metrics: dict[str, float | None]


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One setting: completed runs and their metric mean / std; failed (non-completed) runs by id."""

    values: dict[str, str]
    runs: int
    failed: int
    mean: float | None
    std: float | None
    run_ids: tuple[str, ...]
    failed_runs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Heatmap:
    row_param: str
    col_param: str
    row_values: tuple[str, ...]
    col_values: tuple[str, ...]
    cells: tuple[tuple[float | None, ...], ...]
    """cells[i][j]: metric at row_values[i], col_values[j] (best over other parameters); None: no data."""


@dataclass(frozen=True, slots=True)
class Line:
    group_value: str
    x: tuple[str, ...]
    mean: tuple[float | None, ...]
    std: tuple[float | None, ...]


@dataclass(frozen=True, slots=True)
class SweepAnalysis:
    """A sweep's result. ``params``: names in grid order; ``grid``: their values in the order given."""

    metric: str
    higher_is_better: bool
    params: tuple[str, ...]
    grid: dict[str, tuple[str, ...]]
    points: tuple[SweepPoint, ...]
    best: SweepPoint | None
    heatmap: Heatmap | None
    lines: tuple[Line, ...]
    """The metric against params[0], one line per value of params[1] (none with a single parameter)."""
    failed: tuple[str, ...]
    """Run ids that did not complete."""

    def to_dict(self) -> dict[str, Any]:
        from stepscope.analyze.run.summary import _clean

        return {"schema": SWEEP_SCHEMA, **_clean(asdict(self))}


def higher_is_better(metric: str) -> bool:
    return metric.endswith("_per_s") or metric.endswith("_efficiency") or metric.endswith("mfu")


def _pick(values: list[float], higher: bool) -> float | None:
    return (max(values) if higher else min(values)) if values else None


def _points(runs: Sequence[SweepRun], params: tuple[str, ...], grid: dict[str, tuple[str, ...]],
            metric: str) -> list[SweepPoint]:
    import itertools

    out = []
    for combo in itertools.product(*(grid[p] for p in params)):
        values = dict(zip(params, combo, strict=True))
        mine = [r for r in runs if all(r.values.get(k) == v for k, v in values.items())]
        ok = [r for r in mine if r.status == "completed"]
        bad = [r for r in mine if r.status != "completed"]
        vals = [float(v) for r in ok if (v := r.metrics.get(metric)) is not None and math.isfinite(v)]
        out.append(SweepPoint(values=values, runs=len(ok), failed=len(bad),
                              mean=float(np.mean(vals)) if vals else None,
                              std=(float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0) if vals else None,
                              run_ids=tuple(r.run_id for r in ok), failed_runs=tuple(r.run_id for r in bad)))
    return out


def heatmap(points: Sequence[SweepPoint], grid: dict[str, tuple[str, ...]], row: str, col: str,
            higher: bool) -> Heatmap:
    cells = []
    for rv in grid[row]:
        line = []
        for cv in grid[col]:
            vals = [p.mean for p in points if p.values[row] == rv and p.values[col] == cv and p.mean is not None]
            line.append(_pick(vals, higher))
        cells.append(tuple(line))
    return Heatmap(row, col, grid[row], grid[col], tuple(cells))


def lines(points: Sequence[SweepPoint], grid: dict[str, tuple[str, ...]], x: str, group: str,
          higher: bool) -> tuple[Line, ...]:
    out = []
    for gv in grid[group]:
        means, stds = [], []
        for xv in grid[x]:
            cand = [p for p in points if p.values[x] == xv and p.values[group] == gv and p.mean is not None]
            best = (max if higher else min)(cand, key=lambda p: p.mean) if cand else None  # type: ignore[arg-type,return-value]
            means.append(best.mean if best else None)
            stds.append(best.std if best else None)
        out.append(Line(gv, grid[x], tuple(means), tuple(stds)))
    return tuple(out)


def analyze_sweep(runs: Sequence[SweepRun], grid: dict[str, Sequence[str]], *, metric: str = "samples_per_s",
                  higher: bool | None = None, heat: tuple[str, str] | None = None) -> SweepAnalysis:
    """The sweep's table, heat map (``heat`` = (row, column) parameters; default the first two), lines and
    best setting (module docstring)."""
    g = {k: tuple(str(v) for v in vals) for k, vals in grid.items()}
    params = tuple(g)
    hib = higher_is_better(metric) if higher is None else higher
    points = _points(runs, params, g, metric)
    scored = [p for p in points if p.mean is not None]
    best = (max if hib else min)(scored, key=lambda p: p.mean) if scored else None  # type: ignore[arg-type,return-value]
    hm = None
    if heat is None and len(params) >= 2:
        heat = (params[0], params[1])
    if heat is not None:
        hm = heatmap(points, g, heat[0], heat[1], hib)
    ln = lines(points, g, params[0], params[1], hib) if len(params) >= 2 else ()
    failed = tuple(r.run_id for r in runs if r.status != "completed")
    return SweepAnalysis(metric=metric, higher_is_better=hib, params=params, grid=g, points=tuple(points), best=best,
                         heatmap=hm, lines=ln, failed=failed)
