"""Tables of a run's profiled window(s) for the exports and the notebook API: components, kernels, operators,
modules and the per-rank temporal, idle and overlap breakdowns."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from stepscope.analyze.trace.analysis import TraceAnalysis
from stepscope.report.export.schema import TABLE_SCHEMAS, TRACE_TABLES, conform

Columns = dict[str, list[Any]]


def _rows_to_columns(rows: list[dict[str, Any]], names: Iterable[str]) -> Columns:
    return {n: [r.get(n) for r in rows] for n in names}


def trace_tables(analyses: Iterable[TraceAnalysis] | Any) -> dict[str, Columns]:
    """``components`` and ``kernels`` (rank, key, component, count, sum_ns, mean_ns, min_ns, max_ns, std_ns,
    pct), ``operators`` (rank, name, component, calls, cpu_total_ns, cpu_self_ns, device_self_ns,
    device_total_ns, shapes), ``modules`` (rank, path, depth, calls, cpu_ns, device_ns), ``temporal`` (one
    row per rank with GPU work: TemporalBreakdown), ``idle`` (one row per GPU stream: StreamIdle),
    ``overlap`` (one row per rank with communication kernels: CommOverlap), ``utilization`` (one row per rank
    with GPU work: Utilization) and ``trace_steps`` (one row per ProfilerStep: StepTime, its breakdown as
    ``<category>_ns`` columns; start on the trace's clock); times in ns, from the traces (see docs/traces.md).
    ``analyses``: per-rank TraceAnalysis (or a TraceSetAnalysis, whose ``ranks`` are used)."""
    ranks: Iterable[TraceAnalysis] = analyses.ranks if hasattr(analyses, "ranks") else analyses
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in TRACE_TABLES}
    for a in ranks:
        rows["components"] += [{"rank": a.rank, **k.to_dict()} for k in a.kernels.by_component]
        rows["kernels"] += [{"rank": a.rank, **k.to_dict()} for k in a.kernels.by_kernel]
        rows["operators"] += [{"rank": a.rank, **{**o.to_dict(), "shapes": "; ".join(o.shapes)}} for o in a.operators]
        rows["modules"] += [{"rank": a.rank, **{**m.to_dict(), "path": "/".join(m.path)}} for m in a.modules]
        if a.temporal is not None:
            rows["temporal"].append({"rank": a.rank, **a.temporal.to_dict()})
        if a.idle is not None:
            rows["idle"] += [{"rank": a.rank, **s.to_dict()} for s in a.idle.streams]
        if a.overlap is not None:
            rows["overlap"].append({"rank": a.rank, **a.overlap.to_dict()})
        if a.utilization is not None:
            rows["utilization"].append({"rank": a.rank, **a.utilization.to_dict()})
        rows["trace_steps"] += [{"rank": a.rank, "step": st.step, "start_ns": st.start_ns, "dur_ns": st.dur_ns,
                                 **{f"{c}_ns": v for c, v in st.breakdown_ns.items()}} for st in a.steps.steps]
    return {name: conform(name, _rows_to_columns(r, TABLE_SCHEMAS[name])) for name, r in rows.items()}
