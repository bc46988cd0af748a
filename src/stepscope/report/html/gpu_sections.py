"""The GPU and operator section of the run report: every figure of the trace engine's ``TraceAnalysis``
(analyze/trace/analysis.py) per rank, one rank shown at a time behind a rank selector.

Per rank: headline tiles, temporal breakdown, idle time by cause, the per-step breakdown of the profiler
steps, GPU time by component and by kernel (short names, full name on hover), memory copies and their
bandwidth, launch statistics, communication/computation overlap, utilisation estimates, CPU operators
with self and total CPU/GPU time, and the module tree. Renders only: every number comes computed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from stepscope.analyze.advisor import Advice
from stepscope.analyze.trace.analysis import TraceAnalysis
from stepscope.analyze.trace.collectives import CollectiveSet
from stepscope.analyze.trace.critical_path import CriticalPath, critical_path
from stepscope.analyze.trace.critical_path_ranks import cross_rank_path
from stepscope.analyze.trace.steps import CATEGORIES
from stepscope.model.events import EventTable
from stepscope.report import format as f
from stepscope.report.html.charts import Axis, Bars, bar_chart
from stepscope.report.html.collectives import collectives_html
from stepscope.report.html.critical_path import critical_path_html, cross_rank_html
from stepscope.report.html.escape import esc
from stepscope.report.html.gpu_counters import counters_html
from stepscope.report.html.names import short_names
from stepscope.report.html.page import grid, heading, kv_table, notice, paragraph, tiles
from stepscope.report.html.roofline import roofline_html
from stepscope.report.html.roofline_chart import CSS as ROOFLINE_CSS
from stepscope.report.html.roofline_chart import roofline_chart
from stepscope.report.html.tables import Col, table
from stepscope.report.html.timeline import CSS as TIMELINE_CSS
from stepscope.report.html.timeline import rank_budget, timeline_html

TOP_KERNEL_BARS = 15
BAR_LABEL_LIMIT = 46
"""Bar labels are shortened further than table names (the chart leaves them less room)."""
MAX_OPERATOR_ROWS = 200
MAX_KERNEL_ROWS = 300

RANK_JS = """
(function () {
  function show(sel) {
    var g = sel.getAttribute("data-group");
    document.querySelectorAll(".ss-rank-block").forEach(function (b) {
      if (b.getAttribute("data-group") === g) b.hidden = b.getAttribute("data-rank") !== sel.value;
    });
    window.dispatchEvent(new Event("resize"));
  }
  document.querySelectorAll("select.ss-rank-select").forEach(function (sel) {
    sel.addEventListener("change", function () { show(sel); });
    show(sel);
  });
})();
"""
RANK_CSS = (".ss-rankbar{margin:6px 0 10px;font-size:13px}.ss-rankbar select{margin-left:6px;padding:2px 6px}"
            ".ss-rank-block[hidden]{display:none}"
            "#kernels table.ss-table td.text{word-break:normal;overflow-wrap:normal}" + TIMELINE_CSS + ROOFLINE_CSS)


def pct(v: float | None) -> str:
    """A percentage (0-100) as the report writes it."""
    return f.DASH if v is None else f"{v:.1f}%"


def rank_selector(group: str, ranks: Sequence[int], label: str = "rank") -> str:
    """A <select> switching the ``rank_block``s of ``group`` (the first rank shown at load)."""
    opts = "".join(f'<option value="{r}">rank {r}</option>' for r in ranks)
    return (f'<div class="ss-rankbar"><label>{esc(label)}<select class="ss-rank-select" data-group="{esc(group)}" '
            f'id="rank-select-{esc(group)}">{opts}</select></label></div>')


def rank_block(group: str, rank: int, body: str, *, first: bool) -> str:
    hidden = "" if first else " hidden"
    return f'<div class="ss-rank-block" data-group="{esc(group)}" data-rank="{rank}"{hidden}>{body}</div>'


def per_rank(group: str, blocks: Mapping[int, str]) -> str:
    """Blocks of several ranks behind one selector; a single rank's block alone."""
    ranks = sorted(blocks)
    if len(ranks) == 1:
        return blocks[ranks[0]]
    return rank_selector(group, ranks) + "".join(rank_block(group, r, blocks[r], first=i == 0)
                                                 for i, r in enumerate(ranks))


def gpu_section(analyses: Mapping[int, TraceAnalysis], problems: Sequence[str], advice: Advice,
                tables: Mapping[int, EventTable] | None = None,
                critical: Mapping[int, Sequence[int]] | None = None,
                collectives: CollectiveSet | None = None,
                paths: Mapping[int, CriticalPath | None] | None = None) -> str:
    """``tables``: each rank's events, for its timeline (none drawn without); ``critical``: each rank's
    critical-path event indices (rows of its table), marked on the timeline (else its analysis's path);
    ``collectives``: the ranks' collectives matched across ranks (RunAnalysis.trace_set); ``paths``: each rank's
    critical path computed once by the caller (RunAnalysis.critical_paths) — without them, computed here."""
    parts = [notice(p, "warn") for p in problems]
    if not analyses:
        no_steps = any("no training step was seen" in n for n in advice.notes)
        parts.append(paragraph("No profiled window, and no training step was seen: a window records steps, so "
                               "mark them first (stepscope.step() or stepscope.steps(loader))." if no_steps else
                               "No profiled window in this run: record one with stepscope run --profile-steps N "
                               "to see kernels, operators, GPU idle time and overlap."))
        return "".join(parts)
    # each rank's critical path: its analysis's, else computed here once (opt-in in analyze_trace) for the
    # timeline's marks, the path's table and whom the longest rank waited for
    if paths is None:
        paths = {r: a.critical_path if a.critical_path is not None else critical_path(tables[r])
                 for r, a in analyses.items() if tables and r in tables}
    if len(analyses) > 1:
        parts.append(heading("Ranks compared"))
        parts.append(ranks_table(analyses))
        cross = cross_rank_path({**{r: a.critical_path for r, a in analyses.items()}, **paths})
        if cross is not None:
            parts.append(cross_rank_html(cross))
        if collectives is not None:
            parts.append(heading("Collectives across ranks"))
            parts.append(collectives_html(collectives))
    budget = rank_budget(len(analyses))
    lines = {r: timeline_html(tables[r], budget=budget,
                              critical=critical[r] if critical is not None and r in critical else
                              None if cp is None else cp.event_rows.tolist())
             for r, cp in paths.items() if tables and r in tables}
    parts.append(per_rank("gpu", {r: rank_html(a, lines.get(r, ""), paths.get(r, a.critical_path))
                                  for r, a in analyses.items()}))
    return "".join(parts)


def ranks_table(analyses: Mapping[int, TraceAnalysis]) -> str:
    cols = [Col("rank", "rank"), Col("steps", "profiled steps", "count"), Col("median", "median step", "ns"),
            Col("idle", "GPU idle", "%"), Col("compute", "compute", "%"), Col("comm", "communication", "ns"),
            Col("overlap", "comm. overlapped", "%")]
    rows = []
    for r, a in sorted(analyses.items()):
        tp = a.temporal.to_dict() if a.temporal else {}
        rows.append({"rank": r, "steps": len(a.steps.steps), "median": a.steps.to_dict()["median_ns"],
                     "idle": tp.get("idle_pct"), "compute": tp.get("compute_pct"),
                     "comm": tp.get("communication_ns"), "overlap": a.overlap.overlap_pct if a.overlap else None})
    return table(cols, rows, table_id="gpu-ranks")


def rank_html(a: TraceAnalysis, timeline: str = "", path: CriticalPath | None = None) -> str:
    r = a.rank
    n_steps = len(a.steps.steps)
    parts = [heading(f"Rank {r}: {n_steps} profiled step(s), {a.events:,} trace events, "
                     f"{a.gpu_events:,} GPU work items")]
    parts += [notice(w, "warn") for w in a.warnings]
    parts.append(tiles(headline_tiles(a)))
    parts.append(timeline)
    if path is not None:
        parts.append(heading("Critical path"))
        parts.append(critical_path_html(path, r))
    if a.temporal is not None:
        parts.append(heading("Temporal breakdown"))
        parts.append(grid(temporal_table(a), temporal_chart(a)))
    if a.idle is not None:
        parts.append(heading("GPU idle time by cause"))
        parts.append(idle_table(a))
    parts.append(heading("Time per profiler step"))
    parts.append(steps_html(a))
    if a.kernels.by_kernel:
        parts.append(heading("GPU time by component"))
        parts.append(component_table(a))
        parts.append(heading("GPU time by kernel"))
        parts.append(kernels_html(a))
    if a.copies:
        parts.append(heading("Memory copies and sets"))
        parts.append(copies_table(a))
    if a.launches is not None:
        parts.append(heading("Kernel launches"))
        parts.append(launches_html(a))
    parts.append(counters_html(a))  # launch queues, memory, copy bandwidth, kernel sequences, annotations
    if a.overlap is not None or a.utilization is not None:
        parts.append(heading("Overlap and utilisation"))
        parts.append(overlap_utilization_html(a))
    parts.append(heading("CPU operators"))
    parts.append(operators_table(a))
    if a.roofline is not None and a.roofline.ops:
        parts.append(heading("Operators on the roofline"))
        parts.append(roofline_html(a.roofline, a.rank))
        parts.append(roofline_chart(a.roofline, a.rank))
    parts.append(heading("Module tree"))
    parts.append(modules_table(a))
    return "".join(parts)


def headline_tiles(a: TraceAnalysis) -> list[tuple[str, str, str | None]]:
    out: list[tuple[str, str, str | None]] = [
        ("median profiler step", f.duration_ns(a.steps.to_dict()["median_ns"]), f"{len(a.steps.steps)} step(s)")]
    if a.temporal is not None:
        tp = a.temporal.to_dict()
        out += [("GPU window", f.duration_ns(a.temporal.window_ns), "first to last GPU work"),
                ("GPU idle", pct(tp["idle_pct"]), f.duration_ns(a.temporal.idle_ns))]
    if a.utilization is not None:
        out += [("est. SM efficiency", pct(a.utilization.sm_efficiency_pct), "from grid and SM count"),
                ("est. achieved occupancy", pct(a.utilization.achieved_occupancy_pct), "kernel-time weighted")]
    if a.overlap is not None:
        out.append(("communication overlapped", pct(a.overlap.overlap_pct),
                    f"of {f.duration_ns(a.overlap.communication_ns)}"))
    if a.launches is not None:
        out.append(("launch delay p50", f.duration_ns(a.launches.delay_p50_ns),
                    f"p95 {f.duration_ns(a.launches.delay_p95_ns)}"))
    return out


TEMPORAL_ROWS = (("compute", "computation"), ("non_compute", "communication and memory not under computation"),
                 ("idle", "idle"), ("communication", "communication (all, may overlap computation)"),
                 ("memory", "memory copies and sets (all)"), ("busy", "busy (any GPU work)"))


def temporal_table(a: TraceAnalysis) -> str:
    assert a.temporal is not None
    tp = a.temporal.to_dict()
    rows = [{"what": label, "time": tp[f"{k}_ns"], "pct": tp[f"{k}_pct"]} for k, label in TEMPORAL_ROWS]
    rows.append({"what": "window", "time": tp["window_ns"], "pct": 100.0})
    return table([Col("what", "GPU time", "text"), Col("time", "time", "ns"), Col("pct", "% of window", "%")], rows,
                 table_id=f"temporal-r{a.rank}",
                 caption="unions of GPU work intervals, all streams merged; compute + non-compute + idle = window")


def temporal_chart(a: TraceAnalysis) -> str:
    assert a.temporal is not None
    t = a.temporal
    return bar_chart("GPU window: where the time goes", ["window"],
                     [Bars("computation", [t.compute_ns]),
                      Bars("communication / memory not hidden", [t.non_compute_ns]), Bars("idle", [t.idle_ns])],
                     axis=Axis("time", "ns"), stacked=True, chart_id=f"plot-temporal-r{a.rank}")


def idle_table(a: TraceAnalysis) -> str:
    assert a.idle is not None
    cols = [Col("stream", "stream", "text"),
            Col("host", "host wait", "ns", hint="the next item's launch call started after the previous item ended"),
            Col("kernel", "kernel wait", "ns", hint="other gaps shorter than the threshold (launch overhead)"),
            Col("other", "other", "ns"), Col("idle", "idle total", "ns")]
    rows = [{"stream": str(s.stream), "host": s.host_wait_ns, "kernel": s.kernel_wait_ns, "other": s.other_ns,
             "idle": s.idle_ns} for s in a.idle.streams]
    d = a.idle.to_dict()["totals"]
    n = len(a.idle.streams)  # per-stream gaps added up: with several streams the sum can exceed the window
    rows.append({"stream": f"sum over {n} stream{'s' if n != 1 else ''}", "host": d["host_wait_ns"],
                 "kernel": d["kernel_wait_ns"],
                 "other": d["other_ns"], "idle": d["idle_ns"]})
    return table(cols, rows, table_id=f"idle-r{a.rank}",
                 caption=f"gaps between consecutive GPU work items per stream; kernel wait: gaps under "
                         f"{f.duration_ns(a.idle.threshold_ns)} not caused by the host")


def steps_html(a: TraceAnalysis) -> str:
    if not a.steps.steps:
        return paragraph("No ProfilerStep#N annotation in this trace: no per-step breakdown.")
    steps = a.steps.steps
    cats = [c for c in CATEGORIES if any(s.breakdown_ns[c] for s in steps)]
    chart = bar_chart("Profiler step time by category (stacked)", [f"step {s.step}" for s in steps],
                      [Bars(c, [s.breakdown_ns[c] for s in steps]) for c in cats], axis=Axis("time", "ns"),
                      stacked=True, chart_id=f"plot-steps-r{a.rank}")
    cols = [Col("step", "step"), Col("dur", "step time", "ns")] + [Col(c, c, "ns") for c in CATEGORIES]
    rows = [{"step": s.step, "dur": s.dur_ns, **s.breakdown_ns} for s in steps]
    tab = table(cols, rows, table_id=f"steps-r{a.rank}",
                caption="each instant of a step counted once, in the first category active then (kernel, memcpy, "
                        "memset, communication, runtime, dataloader, cpu, other); the categories add up to the step")
    return chart + tab


def _kernel_cols(first: Col, *, component: bool = True) -> list[Col]:
    return [first, *([Col("component", "component", "text")] if component else []), Col("count", "count", "count"),
            Col("sum", "total", "ns"), Col("mean", "mean", "ns"), Col("min", "min", "ns"), Col("max", "max", "ns"),
            Col("std", "std", "ns"), Col("pct", "% of GPU time", "%")]


def component_table(a: TraceAnalysis) -> str:
    rows = [{"name": s.key, "component": s.component, "count": s.count, "sum": s.sum_ns, "mean": s.mean_ns,
             "min": s.min_ns, "max": s.max_ns, "std": s.std_ns, "pct": s.pct} for s in a.kernels.by_component]
    return table(_kernel_cols(Col("name", "component", "text"), component=False), rows,
                 table_id=f"components-r{a.rank}",
                 caption=f"summed duration of GPU work items; all GPU work: {f.duration_ns(a.kernels.total_ns)}")


def kernels_html(a: TraceAnalysis) -> str:
    ks = a.kernels.by_kernel[:MAX_KERNEL_ROWS]
    shorts = short_names([k.key for k in ks])
    top = list(range(min(TOP_KERNEL_BARS, len(ks))))
    labels = short_names([ks[i].key for i in top], BAR_LABEL_LIMIT)
    chart = bar_chart(f"Top {len(top)} kernels by total time", labels,
                      [Bars("total time", [ks[i].sum_ns for i in top])], axis=Axis("total time", "ns"),
                      chart_id=f"plot-kernels-r{a.rank}")
    rows = [{"name": shorts[i], "full": k.key, "component": k.component, "count": k.count, "sum": k.sum_ns,
             "mean": k.mean_ns, "min": k.min_ns, "max": k.max_ns, "std": k.std_ns, "pct": k.pct}
            for i, k in enumerate(ks)]
    more = len(a.kernels.by_kernel) - len(ks)
    tab = table(_kernel_cols(Col("name", "kernel", "text", title_key="full")), rows, table_id=f"kernels-r{a.rank}",
                caption="names shortened (hover for the full name); "
                        + (f"{more} smaller kernels not listed (stepscope trace kernels shows all)" if more
                           else f"{len(ks)} distinct kernels"))
    return chart + tab


def copies_table(a: TraceAnalysis) -> str:
    cols = [Col("direction", "direction", "text"), Col("count", "count", "count"), Col("dur", "time", "ns"),
            Col("bytes", "bytes", "bytes"), Col("bw", "bandwidth", "GB/s", hint="bytes / summed duration")]
    rows = [{"direction": c.direction, "count": c.count, "dur": c.dur_ns, "bytes": c.bytes, "bw": c.bandwidth_gbps}
            for c in a.copies]
    return table(cols, rows, table_id=f"copies-r{a.rank}",
                 caption="achieved bandwidth over the items with a recorded size (GB/s = bytes per ns)")


def launches_html(a: TraceAnalysis) -> str:
    ls = a.launches
    assert ls is not None
    rows: list[tuple[str, Any]] = [
        ("GPU work items", f"{ls.items:,} ({ls.matched:,} paired with their launch call)"),
        ("launch calls", f"{ls.launches:,} ({ls.graph_launches:,} graph launches of {ls.graph_items:,} items)"),
        ("launch call CPU time", f"p50 {f.duration_ns(ls.launch_p50_ns)} · p95 {f.duration_ns(ls.launch_p95_ns)}"),
        ("GPU item duration", f"p50 {f.duration_ns(ls.gpu_p50_ns)} · p95 {f.duration_ns(ls.gpu_p95_ns)}"),
        ("launch delay (item start − call end)",
         f"p50 {f.duration_ns(ls.delay_p50_ns)} · p95 {f.duration_ns(ls.delay_p95_ns)}"),
        ("launch-bound items (shorter than their launch)",
         f"{ls.short_items:,} ({pct(ls.short_item_gpu_pct)} of GPU work time)"),
        (f"calls longer than {f.duration_ns(ls.launch_threshold_ns)}", f"{ls.long_launches:,}"),
        (f"items kept waiting over {f.duration_ns(ls.delay_threshold_ns)}", f"{ls.long_delays:,}"),
    ]
    return f'<div id="launches-r{a.rank}">{kv_table(rows)}</div>'


def overlap_utilization_html(a: TraceAnalysis) -> str:
    rows: list[tuple[str, Any]] = []
    if a.overlap is not None:
        o = a.overlap.to_dict()
        rows += [("communication", f.duration_ns(o["communication_ns"])),
                 ("computation", f.duration_ns(o["computation_ns"])),
                 ("communication under computation", f"{f.duration_ns(o['overlap_ns'])} ({pct(o['overlap_pct'])})"),
                 ("exposed communication", f.duration_ns(o["exposed_ns"]))]
    if a.utilization is not None:
        u = a.utilization
        rows += [("GPU utilisation (busy / window)", pct(u.utilization_pct)),
                 ("est. SM efficiency", pct(u.sm_efficiency_pct)),
                 ("est. achieved occupancy", pct(u.achieved_occupancy_pct)),
                 ("kernel time with launch data for the estimates", pct(u.covered_kernel_pct))]
    return (f'<div id="overlap-r{a.rank}">{kv_table(rows)}</div>'
            + paragraph("SM efficiency: Σ kernel time × min(blocks per SM, 1) / window; occupancy: the profiler's "
                        "estimated achieved occupancy weighted by kernel time; both absent when the trace lacks "
                        "launch data."))


def operators_table(a: TraceAnalysis) -> str:
    if not a.operators:
        return paragraph("No CPU operator in this trace.")
    ops = a.operators[:MAX_OPERATOR_ROWS]
    shorts = short_names([o.name for o in ops])
    cols = [Col("name", "operator", "text", title_key="full"), Col("component", "component", "text"),
            Col("calls", "calls", "count"), Col("cpu_total", "CPU total", "ns"), Col("cpu_self", "CPU self", "ns"),
            Col("dev_total", "GPU total", "ns"), Col("dev_self", "GPU self", "ns"),
            Col("shapes", "input shapes (most frequent)", "text")]
    rows = [{"name": shorts[i], "full": o.name, "component": o.component, "calls": o.calls,
             "cpu_total": o.cpu_total_ns, "cpu_self": o.cpu_self_ns, "dev_total": o.device_total_ns,
             "dev_self": o.device_self_ns, "shapes": o.shapes[0] if o.shapes else None} for i, o in enumerate(ops)]
    more = len(a.operators) - len(ops)
    return table(cols, rows, table_id=f"ops-r{a.rank}",
                 caption="self: minus nested host events (CPU) / GPU work launched directly (GPU); total: including "
                         "nested operators" + (f"; {more} smaller operators not listed" if more else ""))


def modules_table(a: TraceAnalysis) -> str:
    if not a.modules:
        return paragraph("No nn.Module events in this trace (record with torch.profiler with_stack=True, or "
                         "stepscope run --profile-steps with module hooks).")
    cols = [Col("name", "module", "text"), Col("calls", "calls", "count"), Col("cpu", "CPU time", "ns"),
            Col("dev", "GPU time", "ns")]
    rows = [{"_id": "/".join(m.path), "_depth": len(m.path) - 1, "name": m.path[-1], "calls": m.calls,
             "cpu": m.cpu_ns, "dev": m.device_ns} for m in a.modules]
    return table(cols, rows, table_id=f"modules-r{a.rank}", tree=True)
