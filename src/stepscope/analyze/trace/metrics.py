"""The trace figures kept in the SQL index (and so tracked by `history` and `check`)."""

from __future__ import annotations

import math

from stepscope.analyze.trace.multirank import TraceSetAnalysis


def trace_index_metrics(result: TraceSetAnalysis) -> dict[str, float]:
    """Means over the analysed ranks, as fractions 0-1 of the rank's GPU window (temporal) or of its
    summed GPU work (components): ``trace.idle_share``, ``trace.compute_share``, ``trace.comm_share``,
    ``trace.memory_share``, ``trace.component.<name>_share``; and ``trace.step_median_s``, the median
    profiled step. Absent where no rank has the figure (a CPU-only trace has no GPU shares)."""
    acc: dict[str, list[float]] = {}

    def put(name: str, value: float | None) -> None:
        if value is not None and math.isfinite(value):
            acc.setdefault(name, []).append(value)

    for a in result.ranks:
        t = a.temporal
        if t is not None and t.window_ns > 0:
            put("trace.idle_share", t.idle_ns / t.window_ns)
            put("trace.compute_share", t.compute_ns / t.window_ns)
            put("trace.comm_share", t.communication_ns / t.window_ns)
            put("trace.memory_share", t.memory_ns / t.window_ns)
        total = sum(k.sum_ns for k in a.kernels.by_component)
        for k in a.kernels.by_component:
            if total > 0:
                put(f"trace.component.{k.key}_share", k.sum_ns / total)
        med = a.steps.to_dict().get("median_ns")
        put("trace.step_median_s", med / 1e9 if isinstance(med, (int, float)) else None)
    return {k: sum(v) / len(v) for k, v in sorted(acc.items())}
