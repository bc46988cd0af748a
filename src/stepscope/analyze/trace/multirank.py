"""Many ranks side by side: per-rank summaries, slowest rank, spreads, GPU POP metrics (``combine``).

Pure: it reduces analyses already made. Reading the files and running the per-rank analyses (in this
process, a process pool or on Dask) is :func:`stepscope.executor.traceset.analyze_traceset`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stepscope.analyze.ranks.ranks import PopMetrics, pop_metrics
from stepscope.analyze.trace.analysis import SCHEMA_VERSION, TraceAnalysis


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
    idle time (ns). gpu_pop: POP metrics of the profiled window on the GPU, useful = computation-kernel
    time, runtime = the longest GPU window (as ``show --ranks``' trace POP; None below two ranks with GPU
    work). errors: one line per file that could not be analysed, or whose worker was lost (the others still
    are). notes: one line per file analysed from part of its content (truncated mid-write).
    """

    ranks: tuple[TraceAnalysis, ...]
    slowest_rank: int | None
    step_time: Spread | None
    communication: Spread | None
    idle: Spread | None
    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    gpu_pop: PopMetrics | None = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        def d(v: Any) -> Any:
            return v.to_dict() if v is not None else None
        return {"schema_version": SCHEMA_VERSION, "slowest_rank": self.slowest_rank, "step_time_ns": d(self.step_time),
                "communication_ns": d(self.communication), "idle_ns": d(self.idle), "errors": list(self.errors),
                "warnings": list(self.warnings), "notes": list(self.notes),
                "gpu_pop": asdict(self.gpu_pop) if self.gpu_pop is not None else None,
                "ranks": [r.to_dict() for r in self.ranks]}


def _step_or_window(a: TraceAnalysis) -> float | None:
    return a.steps.stat(np.median) or (float(a.temporal.window_ns) if a.temporal else None)


def combine(analyses: Sequence[TraceAnalysis], errors: Sequence[str] = (),
            notes: Sequence[str] = ()) -> TraceSetAnalysis:
    """Cross-rank figures of already analysed ranks (any order: the result is in rank order)."""
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
        errors=tuple(errors), warnings=tuple(warnings), gpu_pop=_gpu_pop(ranks), notes=tuple(notes))


def _gpu_pop(ranks: Sequence[TraceAnalysis]) -> PopMetrics | None:
    timed = [a.temporal for a in ranks if a.temporal is not None]
    if len(timed) < 2:
        return None
    return pop_metrics([float(t.compute_ns) for t in timed], [float(t.window_ns) for t in timed])
