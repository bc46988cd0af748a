"""Many ranks side by side: per-rank summaries, slowest rank, spread (``analyze_traceset``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from stepscope.analyze.trace.analysis import SCHEMA_VERSION, TraceAnalysis, analyze_trace
from stepscope.model.events import EventTable
from stepscope.traces.traceset import map_ranks, mark_duplicate_ranks, trace_files


@dataclass(frozen=True, slots=True)
class Spread:
    """min / median / max of one per-rank figure, max - min and (max - min) / median in %."""

    min: float
    median: float
    max: float

    def to_dict(self) -> dict[str, Any]:
        rng = self.max - self.min
        return {"min": self.min, "median": self.median, "max": self.max, "range": rng,
                "range_pct": 100.0 * rng / self.median if self.median else None}


def _spread(values: list[float | None]) -> Spread | None:
    v = np.asarray([x for x in values if x is not None], dtype=np.float64)
    return Spread(float(v.min()), float(np.median(v)), float(v.max())) if v.size else None


@dataclass(frozen=True, slots=True)
class TraceSetAnalysis:
    """Per-rank analyses (rank order) of a set of traces, plus cross-rank figures.

    slowest_rank: highest median step time (or, without steps, the longest GPU window). step_time /
    communication / idle: spread across ranks of the median step time, communication-kernel time and GPU
    idle time (ns). errors: one line per file that could not be analysed (the others still are).
    """

    ranks: tuple[TraceAnalysis, ...]
    slowest_rank: int | None
    step_time: Spread | None
    communication: Spread | None
    idle: Spread | None
    errors: tuple[str, ...]
    warnings: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        def d(v: Any) -> Any:
            return v.to_dict() if v is not None else None
        return {"schema_version": SCHEMA_VERSION, "slowest_rank": self.slowest_rank, "step_time_ns": d(self.step_time),
                "communication_ns": d(self.communication), "idle_ns": d(self.idle), "errors": list(self.errors),
                "warnings": list(self.warnings), "ranks": [r.to_dict() for r in self.ranks]}


def _analyze(table: EventTable) -> TraceAnalysis:
    return analyze_trace(table)


def _step_or_window(a: TraceAnalysis) -> float | None:
    return a.steps.stat(np.median) or (float(a.temporal.window_ns) if a.temporal else None)


def combine(analyses: Sequence[TraceAnalysis], errors: Sequence[str] = ()) -> TraceSetAnalysis:
    """Cross-rank figures of already analysed ranks."""
    ranks = tuple(sorted(analyses, key=lambda a: a.rank))
    keyed = [(a.rank, _step_or_window(a)) for a in ranks]
    timed = [(v, r) for r, v in keyed if v is not None]
    warnings = []
    if len(ranks) > 1 and all(a.overlap is None for a in ranks) and any(a.gpu_events for a in ranks):
        warnings.append(f"{len(ranks)} ranks but no communication kernels on any of them: check the component "
                        "rules (`stepscope trace rules`)")
    return TraceSetAnalysis(
        ranks=ranks, slowest_rank=max(timed)[1] if timed else None,
        step_time=_spread([a.steps.stat(np.median) for a in ranks]),
        communication=_spread([float(a.temporal.communication_ns) if a.temporal else None for a in ranks]),
        idle=_spread([float(a.temporal.idle_ns) if a.temporal else None for a in ranks]),
        errors=tuple(errors), warnings=tuple(warnings))


def analyze_traceset(paths: Sequence[str | Path], *, workers: int | None = None) -> TraceSetAnalysis:
    """Analyse every trace in the given files / folders, one rank at a time (or in ``workers`` processes).

    Raises:
        TraceError: no trace files found, or none of them could be analysed.
    """
    files = trace_files(paths)
    n = workers if workers is not None else min(len(files), max(1, (os.cpu_count() or 1) // 2))
    results = mark_duplicate_ranks(list(map_ranks(files, _analyze, workers=n)))
    good = [r.value for r in results if r.error is None]
    errors = [r.error for r in results if r.error is not None]
    if not good:
        from stepscope.errors import TraceError

        raise TraceError(errors[0] if len(errors) == 1 else f"none of {len(files)} traces could be read; first: "
                         f"{errors[0]}")
    return combine(good, errors)
