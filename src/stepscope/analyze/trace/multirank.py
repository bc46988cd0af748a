"""Many ranks side by side: per-rank summaries, slowest rank, spreads, GPU POP metrics (``combine``).

Pure: it reduces analyses already made. Reading the files and running the per-rank analyses (in this
process, a process pool or on Dask) is :func:`stepscope.executor.traceset.analyze_traceset`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from stepscope.analyze.trace.analysis import SCHEMA_VERSION, TraceAnalysis
from stepscope.analyze.trace.collectives import CollectiveSet, match_collectives

if TYPE_CHECKING:  # the POP metrics load the run analyses: imported when a set of ranks is combined
    from stepscope.analyze.ranks.ranks import PopMetrics
    from stepscope.analyze.trace.critical_path_ranks import CrossRankPath


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

    slowest_rank: highest median step time (or, without steps, the longest GPU window); None when that exceeds
    the ranks' median by no more than noise (:func:`slowest_beyond_noise`). step_time /
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
    collectives: CollectiveSet | None = None
    """Collectives matched across the ranks: skew, transfer, bandwidths (None: no rank has collective kernels)."""
    critical_path: CrossRankPath | None = None
    """The longest rank's critical path through collectives: whom it waited for (None below two paths)."""

    def to_dict(self) -> dict[str, Any]:
        def d(v: Any) -> Any:
            return v.to_dict() if v is not None else None
        return {"schema_version": SCHEMA_VERSION, "slowest_rank": self.slowest_rank, "step_time_ns": d(self.step_time),
                "communication_ns": d(self.communication), "idle_ns": d(self.idle), "errors": list(self.errors),
                "warnings": list(self.warnings), "notes": list(self.notes),
                "gpu_pop": asdict(self.gpu_pop) if self.gpu_pop is not None else None,
                "collectives": d(self.collectives), "critical_path": d(self.critical_path),
                "ranks": [r.to_dict() for r in self.ranks]}


SLOWEST_NOISE = 0.02
"""A rank is named slowest only when its figure exceeds the ranks' median by more than this share (2%), or by
more than the typical rank's step-to-step scatter where that is larger: below it, which rank is "slowest" is
chance (64 identical ranks used to name rank 63)."""


def _step_or_window(a: TraceAnalysis) -> float | None:
    return a.steps.stat(np.median) or (float(a.temporal.window_ns) if a.temporal else None)


def _scatter(a: TraceAnalysis) -> float | None:
    """Median absolute deviation of a rank's step times over their median (None below three steps)."""
    d = np.asarray([s.dur_ns for s in a.steps.steps], dtype=np.float64)
    if d.size < 3 or not np.median(d) > 0:
        return None
    m = float(np.median(d))
    return float(np.median(np.abs(d - m))) / m


def slowest_beyond_noise(ranks: Sequence[TraceAnalysis]) -> int | None:
    """The rank with the highest median step (else GPU window), if it stands out from the others beyond noise."""
    timed = [(v, a.rank) for a in ranks if (v := _step_or_window(a)) is not None]
    if len(timed) < 2:
        return timed[0][1] if timed else None
    values = np.asarray([v for v, _ in timed])
    mid = float(np.median(values))
    top, rank = max(timed)
    scatters = [x for a in ranks if (x := _scatter(a)) is not None]
    noise = max(SLOWEST_NOISE, float(np.median(scatters)) if scatters else 0.0)
    return rank if top > mid * (1 + noise) else None


def combine(analyses: Sequence[TraceAnalysis], errors: Sequence[str] = (),
            notes: Sequence[str] = ()) -> TraceSetAnalysis:
    """Cross-rank figures of already analysed ranks (any order: the result is in rank order)."""
    ranks = tuple(sorted(analyses, key=lambda a: a.rank))
    warnings = []
    if len(ranks) > 1 and all(a.overlap is None for a in ranks) and any(a.gpu_events for a in ranks):
        warnings.append(f"{len(ranks)} ranks but no communication kernels on any of them: check the component "
                        "rules (`stepscope trace rules`)")
    return TraceSetAnalysis(
        ranks=ranks, slowest_rank=slowest_beyond_noise(ranks),
        step_time=_spread([a.steps.stat(np.median) for a in ranks]),
        communication=_spread([float(a.temporal.communication_ns) if a.temporal else None for a in ranks]),
        idle=_spread([float(a.temporal.idle_ns) if a.temporal else None for a in ranks]),
        errors=tuple(errors), warnings=tuple(warnings), gpu_pop=_gpu_pop(ranks), notes=tuple(notes),
        collectives=_collectives(ranks),
        critical_path=_cross_rank_path(ranks))


def _cross_rank_path(ranks: Sequence[TraceAnalysis]) -> CrossRankPath | None:
    """Whom the longest path waited for (None below two ranks with a path: the module is not loaded then)."""
    if sum(a.critical_path is not None for a in ranks) < 2:
        return None
    from stepscope.analyze.trace.critical_path_ranks import cross_rank_path

    return cross_rank_path({a.rank: a.critical_path for a in ranks})


def _collectives(ranks: Sequence[TraceAnalysis]) -> CollectiveSet | None:
    if not any(a.collectives for a in ranks):
        return None
    worlds = [a.world_size for a in ranks if a.world_size]
    return match_collectives({a.rank: a.collectives for a in ranks}, world_size=max(worlds) if worlds else None)


def _gpu_pop(ranks: Sequence[TraceAnalysis]) -> PopMetrics | None:
    timed = [a.temporal for a in ranks if a.temporal is not None]
    if len(timed) < 2:
        return None
    from stepscope.analyze.ranks.ranks import pop_metrics

    return pop_metrics([float(t.compute_ns) for t in timed], [float(t.window_ns) for t in timed])
