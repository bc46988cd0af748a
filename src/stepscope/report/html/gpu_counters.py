"""The run report's launch-queue and memory charts, copy bandwidth, kernel sequences and annotation tables for
one rank (renders only: every figure comes computed in the :class:`TraceAnalysis`).

Step functions (queue length, bandwidth, allocator totals) are drawn as steps: each value holds until the
next change, so the chart gets a point just before every change at the old value.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope.analyze.trace.analysis import TraceAnalysis
from stepscope.analyze.trace.annotations import has_gpu_work
from stepscope.analyze.trace.stepseries import decimated
from stepscope.report.format import duration_ns
from stepscope.report.html.charts import Axis, Series, xy_chart
from stepscope.report.html.names import short_name
from stepscope.report.html.page import heading, notice, paragraph
from stepscope.report.html.tables import Col, table

CHART_POINTS = 1_000
"""Changes kept per series before the step corners are added (a peak is never dropped)."""
TOP_ROWS = 20


def _steps(ts_ns: npt.NDArray[Any], v: npt.NDArray[Any], t0: int) -> tuple[list[float], list[float]]:
    """A step function as a polyline: x (ns since ``t0``) and y, with a corner before every change."""
    ts, vals = decimated(ts_ns, v, CHART_POINTS)
    x = np.asarray(ts, dtype=np.float64) - t0
    y = np.asarray(vals, dtype=np.float64)
    if x.size < 2:
        return x.tolist(), y.tolist()
    xs = np.empty(2 * x.size - 1)
    ys = np.empty(2 * x.size - 1)
    xs[0::2], ys[0::2] = x, y
    xs[1::2], ys[1::2] = x[1:] - 1e-3, y[:-1]  # the old value up to just before the change (1 ps: no overlap)
    return xs.tolist(), ys.tolist()


def _t0(a: TraceAnalysis) -> int:
    starts = [int(s.ts_ns[0]) for s in (a.queues.streams if a.queues else ()) if s.ts_ns.size]
    starts += [int(d.ts_ns[0]) for d in (a.memory.devices if a.memory else ()) if d.ts_ns.size]
    starts += [int(k.ts_ns[0]) for k in (a.bandwidth.kinds if a.bandwidth else ()) if k.ts_ns.size]
    return min(starts) if starts else 0


def queue_html(a: TraceAnalysis, t0: int) -> str:
    q = a.queues
    assert q is not None
    series = []
    for s in q.streams:
        x, y = _steps(s.ts_ns, s.length, t0)
        series.append(Series(f"stream {s.stream}", y, x=x, smooth=0))
    chart = xy_chart("Launch queue length per stream (launched, not yet started)", [], series,
                     x_axis=Axis("time since the first change", "ns"), y_axis=Axis("pending launches"),
                     chart_id=f"queue-r{a.rank}")
    cols = [Col("stream", "stream", "count"), Col("max", "max", ""), Col("mean", "mean", "",
            hint="over the changes (HTA's summary)"), Col("time_mean", "time mean", "", hint="over time"),
            Col("p50", "p50", ""), Col("p75", "p75", ""), Col("full", f"full (≥ {q.threshold})", "ns",
            hint="time at or above the CUDA launch-queue depth"), Col("changes", "changes", "count")]
    rows = [{"stream": s.stream, "max": s.max, "mean": s.mean, "time_mean": s.time_mean, "p50": s.p50, "p75": s.p75,
             "full": s.full_ns, "changes": s.changes} for s in q.streams]
    full = [s for s in q.streams if s.full_ns]
    warn = "".join(notice(f"stream {s.stream}'s launch queue was full (≥ {q.threshold} pending) for "
                          f"{duration_ns(s.full_ns)}: the host waited in its launch calls", "warn") for s in full)
    return warn + chart + table(cols, rows, table_id=f"queue-table-r{a.rank}")


def memory_html(a: TraceAnalysis, t0: int) -> str:
    m = a.memory
    assert m is not None
    parts = []
    for d in m.devices:
        label = d.device_type if d.device < 0 else f"{d.device_type}:{d.device}"
        x, y = _steps(d.ts_ns, d.allocated, t0)
        series = [Series("allocated", y, x=x, smooth=0)]
        if d.reserved is not None and d.reserved.any():
            rx, ry = _steps(d.ts_ns, d.reserved, t0)
            series.append(Series("reserved", ry, x=rx, smooth=0, dash=True))
        parts.append(xy_chart(f"Memory over time ({label})", [], series,
                              x_axis=Axis("time since the first change", "ns"), y_axis=Axis("memory", "bytes"),
                              chart_id=f"memory-r{a.rank}-{label}"))
        parts.append(paragraph(
            f"{label}: peak {d.peak_bytes:,} B allocated"
            + (f" ({d.peak_reserved_bytes:,} B reserved)" if d.peak_reserved_bytes is not None else "")
            + f", in {d.peak_owner or 'no operator'}"
            + (f" under {d.peak_top_op}" if d.peak_top_op and d.peak_top_op != d.peak_owner else "")
            + (f" (annotation {d.peak_annotation})" if d.peak_annotation else "")
            + f"; {d.before_bytes:,} B were allocated before the trace began."))
        if d.live_at_peak:
            cols = [Col("name", "top operator that allocated it", "text"), Col("bytes", "live at the peak", "bytes"),
                    Col("count", "allocations", "count")]
            parts.append(table(cols, [o.to_dict() for o in d.live_at_peak], table_id=f"memory-live-r{a.rank}-{label}"))
    return "".join(parts)


def bandwidth_html(a: TraceAnalysis, t0: int) -> str:
    b = a.bandwidth
    assert b is not None
    series = []
    for k in b.kinds:
        x, y = _steps(k.ts_ns, k.gbps, t0)
        series.append(Series(k.kind, y, x=x, smooth=0))
    chart = xy_chart("Copy bandwidth over time by kind", [], series, x_axis=Axis("time since the first change", "ns"),
                     y_axis=Axis("bandwidth", "GB/s"), chart_id=f"bandwidth-r{a.rank}")
    cols = [Col("kind", "kind", "text"), Col("items", "copies", "count"), Col("bytes", "bytes", "bytes"),
            Col("busy_ns", "busy", "ns"), Col("average_gbps", "average", "GB/s", hint="bytes / busy time"),
            Col("mean", "mean", "GB/s", hint="over the changes above zero (HTA's summary)"),
            Col("max", "peak", "GB/s")]
    rows = [{**k.to_dict(), "max": k.max if k.count else None} for k in b.kinds]
    for r in rows:
        r.pop("series", None)
    return chart + table(cols, rows, table_id=f"bandwidth-table-r{a.rank}")


def sequences_html(a: TraceAnalysis) -> str:
    s = a.sequences
    assert s is not None
    best = sorted(s.sequences, key=lambda x: (-x.count * len(x.names), -x.total_ns))[:TOP_ROWS]
    cols = [Col("seq", "sequence (fusion candidate)", "text", title_key="full"), Col("n", "kernels", "count"),
            Col("stream", "stream", "count"), Col("count", "count", "count"), Col("total_ns", "total", "ns"),
            Col("mean_ns", "per occurrence", "ns")]
    rows = [{"seq": " → ".join(short_name(n) for n in q.names), "full": "\n".join(q.names), "n": len(q.names),
             "stream": q.stream, "count": q.count, "total_ns": q.total_ns, "mean_ns": q.mean_ns} for q in best]
    return table(cols, rows, table_id=f"sequences-r{a.rank}",
                 caption=f"windows of {s.min_length}–{s.max_length} consecutive GPU items on one stream, "
                         "overlapping windows counted")


def annotations_html(a: TraceAnalysis) -> str:
    an = a.annotations
    assert an is not None
    cols = [Col("name", "annotation", "text"), Col("count", "count", "count"), Col("total_ns", "total", "ns"),
            Col("mean_ns", "mean", "ns"), Col("min_ns", "min", "ns"), Col("max_ns", "max", "ns")]
    if has_gpu_work(an):
        cols.append(Col("gpu_ns", "GPU work launched inside", "ns"))
    src = ("durations of the annotations on the GPU stream (gpu_user_annotation)" if an.on_gpu else
           "host ranges, with the GPU work launched inside each (nested ranges each count it)" if has_gpu_work(an)
           else "host ranges (the trace has no launched GPU work)")
    return table(cols, [r.to_dict() for r in an.rows[:TOP_ROWS]], table_id=f"annotations-r{a.rank}", caption=src)


def counters_html(a: TraceAnalysis) -> str:
    """The sections this rank's trace allows, each under its heading."""
    t0 = _t0(a)
    parts = []
    if a.queues is not None:
        parts += [heading("Launch queue length"), queue_html(a, t0)]
    if a.memory is not None:
        parts += [heading("Memory over time"), memory_html(a, t0)]
    if a.bandwidth is not None:
        parts += [heading("Copy bandwidth over time"), bandwidth_html(a, t0)]
    if a.sequences is not None and a.sequences.sequences:
        parts += [heading("Frequent kernel sequences"), sequences_html(a)]
    if a.annotations is not None and a.annotations.rows:
        parts += [heading("Time by annotation"), annotations_html(a)]
    return "".join(parts)


__all__ = ["counters_html"]
