"""Per-rank figures summarised across ranks: min / quartiles / max, with the outlying ranks named.

Past :data:`RANK_ROWS_MAX` ranks (:func:`as_distributions`, the one rule), a table of one row per rank,
or one table per rank, stops being readable; views show these distributions instead (``stepscope trace
analyze / kernels / ops``, ``stepscope show RUN --ranks / --traces``). Pure: per-rank results in,
:class:`Distribution` records out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from stepscope.analyze.trace.analysis import TraceAnalysis
from stepscope.analyze.trace.kernels import KernelStats
from stepscope.analyze.trace.multirank import TraceSetAnalysis
from stepscope.analyze.trace.ops import OP_SORT_KEYS

if TYPE_CHECKING:  # a type only: the rank analyses load the run analyses
    from stepscope.analyze.ranks.ranks import RankAnalysis

RANK_ROWS_MAX = 64
"""Up to this many ranks, views list one row per rank; past it, distributions."""


def as_distributions(ranks: int) -> bool:
    """Whether a view of ``ranks`` ranks shows distributions across ranks instead of rows or tables per rank."""
    return ranks > RANK_ROWS_MAX


TUKEY_K = 1.5
"""Outliers lie more than TUKEY_K x IQR below the first quartile or above the third (Tukey's fences)."""
NAMED_OUTLIERS = 5
"""Outlying ranks named per side, the most extreme first (the count says how many there are)."""


@dataclass(frozen=True, slots=True)
class Distribution:
    """One per-rank figure across the ranks that have it.

    unit: ``"ns"``, ``"%"``, ``"/s"`` or ``"calls"``. ranks: how many ranks have the figure (the others: not measured).
    min / q1 / median / q3 / max: quartiles by linear interpolation (NumPy's default). low / high: the
    ranks beyond Tukey's fences, as (rank, value), most extreme first, at most NAMED_OUTLIERS each;
    low_count / high_count: how many ranks lie beyond each fence in all.
    """

    name: str
    unit: str
    ranks: int
    min: float
    q1: float
    median: float
    q3: float
    max: float
    low: tuple[tuple[int, float], ...]
    high: tuple[tuple[int, float], ...]
    low_count: int
    high_count: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "unit": self.unit, "ranks": self.ranks, "min": self.min, "q1": self.q1,
                "median": self.median, "q3": self.q3, "max": self.max, "low_count": self.low_count,
                "high_count": self.high_count, "low": [list(x) for x in self.low], "high": [list(x) for x in self.high]}


def distribution(name: str, unit: str, values: Mapping[int, float | None]) -> Distribution | None:
    """The distribution of ``values`` (rank -> figure, None: not measured); None when no rank has it."""
    pairs = sorted((r, float(v)) for r, v in values.items() if v is not None and np.isfinite(v))
    if not pairs:
        return None
    ranks = np.asarray([r for r, _ in pairs], dtype=np.int64)
    v = np.asarray([x for _, x in pairs], dtype=np.float64)
    q1, med, q3 = (float(x) for x in np.percentile(v, [25, 50, 75]))
    iqr = q3 - q1
    lo_mask, hi_mask = v < q1 - TUKEY_K * iqr, v > q3 + TUKEY_K * iqr
    lo = np.flatnonzero(lo_mask)[np.argsort(v[lo_mask], kind="stable")]
    hi = np.flatnonzero(hi_mask)[np.argsort(-v[hi_mask], kind="stable")]
    return Distribution(name=name, unit=unit, ranks=len(pairs), min=float(v.min()), q1=q1, median=med, q3=q3,
                        max=float(v.max()),
                        low=tuple((int(ranks[i]), float(v[i])) for i in lo[:NAMED_OUTLIERS]),
                        high=tuple((int(ranks[i]), float(v[i])) for i in hi[:NAMED_OUTLIERS]),
                        low_count=int(lo.size), high_count=int(hi.size))


def _collect(items: Sequence[Any], rank: Callable[[Any], int],
             figures: Sequence[tuple[str, str, Callable[[Any], float | None]]]) -> tuple[Distribution, ...]:
    out = (distribution(name, unit, {rank(x): get(x) for x in items}) for name, unit, get in figures)
    return tuple(d for d in out if d is not None)


_TRACE_FIGURES: tuple[tuple[str, str, Callable[[TraceAnalysis], float | None]], ...] = (
    ("median step", "ns", lambda a: a.steps.stat(np.median)),
    ("GPU window", "ns", lambda a: float(a.temporal.window_ns) if a.temporal else None),
    ("GPU compute", "ns", lambda a: float(a.temporal.compute_ns) if a.temporal else None),
    ("GPU communication", "ns", lambda a: float(a.temporal.communication_ns) if a.temporal else None),
    ("GPU idle", "ns", lambda a: float(a.temporal.idle_ns) if a.temporal else None),
    ("GPU idle share", "%", lambda a: a.temporal.to_dict()["idle_pct"] if a.temporal else None),
    ("communication overlapped", "%", lambda a: a.overlap.overlap_pct if a.overlap else None),
)


def traceset_distributions(s: TraceSetAnalysis) -> tuple[Distribution, ...]:
    """Each rank's trace figures across the set (median profiled step, GPU window / compute / communication /
    idle time, idle share of the window, share of communication overlapped by compute)."""
    return _collect(s.ranks, lambda a: a.rank, _TRACE_FIGURES)


_RANK_FIGURES: tuple[tuple[str, str, Callable[[Any], float | None]], ...] = (
    ("step", "ns", lambda r: r.step_ns), ("useful", "ns", lambda r: r.useful_ns),
    ("compute", "ns", lambda r: r.compute_ns), ("data wait", "ns", lambda r: r.data_wait_ns),
    ("comm", "ns", lambda r: r.comm_ns),
    ("comm share", "%", lambda r: None if r.comm_share is None else 100.0 * r.comm_share),
    ("transfer", "ns", lambda r: r.transfer_ns), ("sync", "ns", lambda r: r.sync_ns),
    ("samples/s", "/s", lambda r: r.samples_per_s),
    ("CPU wait", "%", lambda r: None if r.cpu_wait_share is None else 100.0 * r.cpu_wait_share),
)


def rank_time_distributions(a: RankAnalysis) -> tuple[Distribution, ...]:
    """Each rank's mean per-step times (``show --ranks``' columns) across the ranks."""
    return _collect(a.ranks, lambda r: r.rank, _RANK_FIGURES)


def trace_rank_distributions(a: RankAnalysis) -> tuple[Distribution, ...]:
    """The profiled window on the GPU per rank (``show --ranks``' trace table) across the ranks."""
    figures: tuple[tuple[str, str, Callable[[Any], float | None]], ...] = (
        ("window", "ns", lambda t: float(t.window_ns)), ("compute", "ns", lambda t: float(t.compute_ns)),
        ("communication", "ns", lambda t: float(t.communication_ns)), ("idle", "ns", lambda t: float(t.idle_ns)))
    return _collect(a.trace_ranks, lambda t: t.rank, figures)


KernelGrouping = Literal["component", "kernel"]


def kernel_distributions(s: TraceSetAnalysis, *, by: KernelGrouping = "component",
                         top: int = 30) -> tuple[Distribution, ...]:
    """GPU time (ns, summed over the profiled window) of each component or kernel name, across the ranks.

    A rank whose trace has no work of that key counts 0 ns (its trace was read: the key took no time there).
    The ``top`` keys of largest GPU time summed over all ranks, largest first; the distribution's name is
    the key.
    """
    def stats(a: TraceAnalysis) -> tuple[KernelStats, ...]:
        return a.kernels.by_component if by == "component" else a.kernels.by_kernel
    per_rank = [(a.rank, {k.key: float(k.sum_ns) for k in stats(a)}) for a in s.ranks]
    return _keyed(per_rank, "ns", top)


def operator_distributions(s: TraceSetAnalysis, *, sort: str = "device_total",
                           top: int = 30) -> tuple[Distribution, ...]:
    """One operator figure (``sort``: one of :data:`~stepscope.analyze.trace.ops.OP_SORT_KEYS`) of each
    operator name, across the ranks; ns, or calls for ``"calls"``. A rank that never ran the operator counts
    0. The ``top`` names of largest figure summed over all ranks, largest first.

    Raises:
        ValueError: ``sort`` is not one of OP_SORT_KEYS.
    """
    if sort not in OP_SORT_KEYS:
        raise ValueError(f"sort {sort!r}: expected one of {', '.join(OP_SORT_KEYS)}")
    attr = "calls" if sort == "calls" else f"{sort}_ns"
    per_rank = [(a.rank, {o.name: float(getattr(o, attr)) for o in a.operators}) for a in s.ranks]
    return _keyed(per_rank, "calls" if sort == "calls" else "ns", top)


def _keyed(per_rank: Sequence[tuple[int, Mapping[str, float]]], unit: str, top: int) -> tuple[Distribution, ...]:
    totals: dict[str, float] = {}
    for _, values in per_rank:
        for key, v in values.items():
            totals[key] = totals.get(key, 0.0) + v
    keys = sorted(totals, key=lambda k: (-totals[k], k))[:top]
    out = (distribution(key, unit, {rank: values.get(key, 0.0) for rank, values in per_rank}) for key in keys)
    return tuple(d for d in out if d is not None)
