"""The critical path of a rank in the run report's GPU section: its length, its time by kind and the names with
the most time on it (the timeline marks its events). Renders only."""

from __future__ import annotations

from stepscope.analyze.trace.critical_path import CriticalPath
from stepscope.analyze.trace.critical_path_ranks import CrossRankPath
from stepscope.report import format as f
from stepscope.report.html.names import short_names
from stepscope.report.html.page import notice, paragraph
from stepscope.report.html.tables import Col, table

KIND_LABELS = {"cpu": "CPU", "gpu_compute": "GPU compute", "gpu_memory": "GPU memcpy / memset",
               "gpu_communication": "GPU communication", "kernel_gap": "gap between kernels on a stream",
               "launch_delay": "launch delay (call start to kernel start)"}


def critical_path_html(cp: CriticalPath, rank: int) -> str:
    length = cp.length_ns or 1
    lead = paragraph(f"The longest chain of dependent work in the trace (HolisticTraceAnalysis' definition): "
                     f"{f.duration_ns(cp.length_ns)} over {cp.event_rows.size:,} events. Shortening anything off "
                     "this chain cannot shorten the trace.")
    kinds = [{"kind": KIND_LABELS.get(k, k), "time": ns, "pct": 100.0 * ns / length}
             for k, ns in sorted(cp.breakdown_ns.items(), key=lambda kv: -kv[1]) if ns]
    by_kind = table([Col("kind", "on the path", "text"), Col("time", "time", "ns"), Col("pct", "of the path", "%")],
                    kinds, table_id=f"cp-kinds-{rank}")
    shorts = short_names([t.name for t in cp.top])
    items = [{"name": shorts[i], "full": t.name, "kind": KIND_LABELS.get(t.kind, t.kind), "count": t.count,
              "time": t.time_ns, "pct": 100.0 * t.time_ns / length} for i, t in enumerate(cp.top)]
    top = table([Col("name", "name", "text", title_key="full"), Col("kind", "as", "text"),
                 Col("count", "edges", "count"), Col("time", "time on the path", "ns"),
                 Col("pct", "of the path", "%")], items, table_id=f"cp-top-{rank}")
    ops = ""
    if cp.operators:
        names = short_names([o.name for o in cp.operators])
        ops = table([Col("name", "operator (with the GPU work it launched)", "text", title_key="full"),
                     Col("time", "time on the path", "ns"), Col("pct", "of the path", "%")],
                    [{"name": names[i], "full": o.name, "time": o.time_ns, "pct": 100.0 * o.time_ns / length}
                     for i, o in enumerate(cp.operators)], table_id=f"cp-ops-{rank}")
    return lead + by_kind + top + ops + "".join(notice(n, "warn") for n in cp.notes)


def cross_rank_html(c: CrossRankPath) -> str:
    """Whom the rank with the longest critical path waited for at the collectives on its path."""
    head = (f"Critical path across ranks: rank {c.slowest_rank} has the longest "
            f"({f.duration_ns(c.lengths[c.slowest_rank])}), with {c.collectives_on_path:,} collective kernels on it.")
    if not c.clocks_aligned:
        return paragraph(head) + notice(f"No waits given: in {c.clock_breaks} of the matched collectives a rank "
                                        "started after this rank's kernel had ended, so the ranks' clocks disagree.",
                                        "warn")
    if not c.waits:
        return paragraph(head + " It waited for no other rank at them.")
    rows = [{"text": w.text(), "wait": w.wait_ns, "path": w.on_path_ns} for w in c.waits]
    return paragraph(head) + table([Col("text", "wait", "text"), Col("wait", "waited", "ns"),
                                    Col("path", "kernel's time on the path", "ns")], rows,
                                   table_id="cp-cross-ranks")
