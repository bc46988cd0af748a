"""Terminal tables of a rank's launch queues, copy bandwidth, memory timeline, kernel sequences and annotations
(renderers only: every figure comes computed in the :class:`TraceAnalysis`)."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from stepscope.analyze.trace.analysis import TraceAnalysis
from stepscope.analyze.trace.annotations import Annotations, has_gpu_work
from stepscope.analyze.trace.bandwidth import Bandwidth
from stepscope.analyze.trace.memory_timeline import MemoryTimeline
from stepscope.analyze.trace.queues import QueueLengths
from stepscope.analyze.trace.sequences import KernelSequences
from stepscope.report.format import duration_ns, nbytes
from stepscope.report.html.names import short_name
from stepscope.report.tables import FitTable

ROWS = 10


def _num(v: float | None, digits: int = 1) -> str:
    return "—" if v is None or v != v else f"{v:,.{digits}f}"


def _table(title: str, headers: list[tuple[str, bool, int]]) -> FitTable:
    t = FitTable(title, title_style=None, show_edge=True)
    for header, numeric, drop in headers:
        t.add_column(header, numeric=numeric, drop=drop)
    return t


def queue_view(q: QueueLengths) -> FitTable:
    t = _table(f"launch queue per stream (pending launches; full at {q.threshold})",
               [("stream", True, 0), ("max", True, 0), ("mean", True, 2), ("time mean", True, 0), ("p50", True, 3),
                ("full", True, 0), ("changes", True, 1)])
    for s in q.streams:
        t.add_row(str(s.stream), f"{s.max:.0f}", _num(s.mean), _num(s.time_mean), f"{s.p50:g}",
                  duration_ns(s.full_ns), f"{s.changes:,}")
    return t


def bandwidth_view(b: Bandwidth) -> FitTable:
    t = _table("copy bandwidth by kind (GB/s = 10^9 B/s)",
               [("kind", False, 0), ("copies", True, 2), ("bytes", True, 1), ("busy", True, 3),
                ("average", True, 0), ("peak", True, 0)])
    for k in b.kinds:
        t.add_row(Text(k.kind), f"{k.items:,}", nbytes(k.bytes) if k.bytes else "—", duration_ns(k.busy_ns),
                  _num(k.average_gbps, 2), _num(k.max if k.count else None, 2))
    return t


def memory_view(m: MemoryTimeline) -> list[RenderableType]:
    t = _table("memory (allocator totals from the trace's allocation records)",
               [("device", False, 0), ("peak allocated", True, 0), ("reserved then", True, 2),
                ("at peak: operator", False, 0), ("top operator", False, 1), ("annotation", False, 3)])
    parts: list[RenderableType] = [t]
    for d in m.devices:
        label = d.device_type if d.device < 0 else f"{d.device_type}:{d.device}"
        t.add_row(label, nbytes(d.peak_bytes), nbytes(d.peak_reserved_bytes), Text(d.peak_owner or "—"),
                  Text(d.peak_top_op or "—"), Text(d.peak_annotation or "—"))
        if d.live_at_peak:
            live = _table(f"{label}: live at the peak by top operator ({nbytes(d.before_bytes)} allocated before "
                          "the trace)", [("operator", False, 0), ("bytes", True, 0), ("allocations", True, 1)])
            for o in d.live_at_peak[:ROWS]:
                live.add_row(Text(o.name), nbytes(o.bytes), f"{o.count:,}")
            parts.append(live)
    return parts


def sequences_view(s: KernelSequences) -> FitTable:
    t = _table(f"most frequent GPU kernel sequences ({s.min_length}–{s.max_length} kernels; fusion candidates)",
               [("sequence", False, 0), ("n", True, 2), ("stream", True, 3), ("count", True, 0), ("total", True, 0)])
    best = sorted(s.sequences, key=lambda x: (-x.count * len(x.names), -x.total_ns))[:ROWS]
    for q in best:
        t.add_row(Text(" → ".join(short_name(n) for n in q.names)), str(len(q.names)), str(q.stream),
                  f"{q.count:,}", duration_ns(q.total_ns))
    return t


def annotations_view(a: Annotations) -> FitTable:
    src = "GPU annotations" if a.on_gpu else "host annotations with the GPU work launched inside"
    t = _table(f"time by annotation ({src})",
               [("annotation", False, 0), ("count", True, 2), ("total", True, 0), ("mean", True, 1),
                *([("GPU work", True, 0)] if has_gpu_work(a) else [])])
    for r in a.rows[:ROWS]:
        cells: list[str | Text] = [Text(r.name), f"{r.count:,}", duration_ns(r.total_ns), duration_ns(r.mean_ns)]
        if has_gpu_work(a):
            cells.append(duration_ns(r.gpu_ns))
        t.add_row(*cells)
    return t


def counters_view(a: TraceAnalysis) -> list[RenderableType]:
    """The tables of the analyses the trace allows (none for a trace without GPU work or records)."""
    parts: list[RenderableType] = []
    if a.queues is not None:
        parts.append(queue_view(a.queues))
        full = [s for s in a.queues.streams if s.full_ns]
        if full:
            parts.append(Text(f"stream {full[0].stream}'s launch queue was full for {duration_ns(full[0].full_ns)}: "
                              "the host waited on launches there", style="yellow"))
    if a.bandwidth is not None:
        parts.append(bandwidth_view(a.bandwidth))
    if a.memory is not None:
        parts += memory_view(a.memory)
    if a.sequences is not None and a.sequences.sequences:
        parts.append(sequences_view(a.sequences))
    if a.annotations is not None and a.annotations.rows:
        parts.append(annotations_view(a.annotations))
    return parts


__all__ = ["annotations_view", "bandwidth_view", "counters_view", "memory_view", "queue_view", "sequences_view"]
