"""A run's tables as plain columns (name -> list), ready for any table format."""

from __future__ import annotations

from typing import Any

import numpy as np

from stepscope.analyze.run.hostprof import stack_table
from stepscope.analyze.run.steps import step_roles
from stepscope.analyze.run.summary import RunSummary, step_exclusions
from stepscope.model.tables import RunData
from stepscope.report.export.schema import TRACE_TABLES, conform, empty

Columns = dict[str, list[Any]]


def _clean(values: Any) -> list[Any]:
    arr = np.asarray(values)
    if arr.dtype.kind == "f":
        return [None if not np.isfinite(v) else float(v) for v in arr.tolist()]
    out: list[Any] = arr.tolist()
    return out


def run_tables(data: RunData, summary: RunSummary) -> dict[str, Columns]:
    """Tables: steps, regions (instances), region_stats, samples, metrics, comm, system_stats, ranks, each with
    the columns declared in report/export/schema.py, and the trace tables (schema.TRACE_TABLES) with no rows.

    Every per-rank table has a ``rank`` column first; times are ns (Unix epoch for timestamps).
    """
    parts: dict[str, list[tuple[int, Columns]]] = {k: [] for k in ("steps", "regions", "samples", "metrics", "comm")}

    def extend(table: str, rank: int, cols: Columns) -> None:
        parts[table].append((rank, cols))

    warmup = {rs.rank: rs.steps.warmup_steps for rs in summary.ranks}
    for r in data.ranks:
        rank = r.stream.rank
        st = {k: _clean(v) for k, v in r.steps.cols.items()}
        st["duration_ns"] = _clean(r.steps.duration_ns)
        st["phase"] = ["validation" if p == 1 else "train" for p in r.steps["phase"].tolist()]
        # the summary's own warm-up and exclusions: role == "measured" are exactly the steps its figures count
        st["role"] = step_roles(r.steps, warmup.get(rank, 0), step_exclusions(r))
        extend("steps", rank, st)
        reg = {"path": r.regions.column_strings(),
               **{k: _clean(v) for k, v in r.regions.cols.items() if k != "path_code"}}
        extend("regions", rank, reg)
        smp = {"t_ns": _clean(r.samples.t_ns), **{k: _clean(v) for k, v in r.samples.columns.items()}}
        extend("samples", rank, smp)
        met = {"name": r.metrics.column_strings(),
               **{k: _clean(v) for k, v in r.metrics.cols.items() if k != "name_code"}}
        extend("metrics", rank, met)
        com = {"op": r.comm.column_strings(), **{k: _clean(v) for k, v in r.comm.cols.items() if k != "op_code"}}
        extend("comm", rank, com)
    out = {name: _stack(p) for name, p in parts.items()}
    out["region_stats"] = _region_stats(summary)
    out["system_stats"] = _system_stats(summary)
    out["ranks"] = _ranks(summary)
    out = {name: conform(name, cols) for name, cols in out.items()}
    out.update({name: empty(name) for name in TRACE_TABLES})  # filled by trace_tables() when a window was profiled
    if (stacks := stack_table(data))["rank"]:  # sampled stacks (--sample-stacks), see analyze/run/hostprof.py
        out["stacks"] = stacks
    return out


def _stack(parts: list[tuple[int, Columns]]) -> Columns:
    """Rows of every rank under one header (the union of their columns; None where a rank lacks one)."""
    names: list[str] = ["rank"]
    for _, cols in parts:
        names += [c for c in cols if c not in names]
    out: Columns = {c: [] for c in names}
    for rank, cols in parts:
        n = len(next(iter(cols.values()))) if cols else 0
        out["rank"] += [rank] * n
        for c in names[1:]:
            out[c] += cols.get(c, [None] * n)
    return out


def _region_stats(summary: RunSummary) -> Columns:
    cols: Columns = {k: [] for k in ("rank", "path", "count", "total_ns", "mean_ns", "p50_ns", "p95_ns", "std_ns",
                                     "min_ns", "max_ns", "share_of_steps")}
    for r in summary.ranks:
        for s in r.regions:
            d = s.time
            for k, v in (("rank", r.rank), ("path", s.path), ("count", d.count), ("total_ns", d.total),
                         ("mean_ns", d.mean), ("p50_ns", d.p50), ("p95_ns", d.p95), ("std_ns", d.std),
                         ("min_ns", d.min), ("max_ns", d.max), ("share_of_steps", s.share_of_steps)):
                cols[k].append(v)
    return cols


def _system_stats(summary: RunSummary) -> Columns:
    cols: Columns = {k: [] for k in ("rank", "metric", "mean", "peak", "min", "last", "samples")}
    for r in summary.ranks:
        for m in r.system:
            for k, v in (("rank", r.rank), ("metric", m.name), ("mean", m.mean), ("peak", m.peak), ("min", m.min),
                         ("last", m.last), ("samples", m.samples)):
                cols[k].append(v)
    return cols


def _ranks(summary: RunSummary) -> Columns:
    cols: Columns = {k: [] for k in ("rank", "role", "host", "steps", "warmup_steps", "step_time_p50_ns",
                                     "step_time_p95_ns", "samples_per_s", "data_wait_share", "peak_rss_bytes",
                                     "complete")}
    for r in summary.ranks:
        st = r.steps
        for k, v in (("rank", r.rank), ("role", r.role), ("host", r.host), ("steps", st.steps),
                     ("warmup_steps", st.warmup_steps),
                     ("step_time_p50_ns", st.step_time.p50 if st.step_time else None),
                     ("step_time_p95_ns", st.step_time.p95 if st.step_time else None),
                     ("samples_per_s", st.samples_per_s), ("data_wait_share", st.data_wait_share),
                     ("peak_rss_bytes", r.peak_rss_bytes), ("complete", r.complete)):
            cols[k].append(v)
    return cols
