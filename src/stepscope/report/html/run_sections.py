"""Sections of the HTML run report after speed: time, system, memory, kernels (gpu_sections.py), model,
user metrics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from stepscope.analyze.advisor import Advice
from stepscope.analyze.run.summary import RunSummary
from stepscope.analyze.trace.analysis import TraceAnalysis
from stepscope.model.events import EventTable
from stepscope.model.tables import RunData
from stepscope.report import format as f
from stepscope.report.html.charts import Axis, Mark, Series, xy_chart
from stepscope.report.html.gpu_sections import gpu_section
from stepscope.report.html.page import grid, heading, paragraph
from stepscope.report.html.tables import Col, table

SYSTEM_PLOTS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    # title, y label, unit, column names (gpu columns are expanded per device)
    ("CPU", "CPU", "%", ("cpu_process_pct", "cpu_system_pct")),
    ("Memory", "memory", "bytes", ("rss_bytes", "mem_system_used_bytes")),
    ("GPU utilisation", "utilisation", "%", ("gpu{i}_util_pct",)),
    ("GPU memory", "memory", "bytes", ("gpu{i}_mem_used_bytes",)),
    ("Power", "power", "W", ("gpu{i}_power_w",)),
    ("Disk I/O", "throughput", "bytes/s", ("disk_read_bps", "disk_write_bps")),
    ("Network I/O", "throughput", "bytes/s", ("net_recv_bps", "net_sent_bps")),
)


def time_section(s: RunSummary) -> str:
    if not s.ranks:
        return paragraph("No process was observed.")
    r = s.ranks[0]
    parts = [heading("Time per step by phase" + (f" (rank {r.rank})" if len(s.ranks) > 1 else ""))]
    rows = [{"phase": p.phase.replace("_", " "), "mean": p.mean_ns, "share": p.share}
            for p in (*r.steps.phases, r.steps.other) if p.mean_ns is not None]
    parts.append(table([Col("phase", "phase", "text"), Col("mean", "mean per step", "ns"),
                        Col("share", "% of step", "share")], rows, table_id="phases",
                       caption=f"timing: {'CUDA events' if r.timing == 'cuda_events' else 'CPU wall clock'}; "
                               f"steps marked by {r.step_source or '—'}"))
    parts.append(heading("Regions"))
    if not r.regions:
        parts.append(paragraph("No region was recorded (stepscope.region(...) or module hooks)."))
        return "".join(parts)
    cols = [Col("name", "region", "text"), Col("count", "count", "count"), Col("total", "total", "ns"),
            Col("mean", "mean", "ns"), Col("p50", "p50", "ns"), Col("p95", "p95", "ns"),
            Col("share", "% of step", "share", hint="time inside measured steps / measured step time")]
    rows = [{"_id": g.path, "_depth": g.depth, "name": g.name, "count": g.time.count, "total": g.time.total,
             "mean": g.time.mean, "p50": g.time.p50, "p95": g.time.p95, "share": g.share_of_steps} for g in r.regions]
    parts.append(table(cols, rows, table_id="regions", tree=True))
    return "".join(parts)


def _epoch_marks(data: RunData, t0: int) -> list[Mark]:
    if not data.ranks:
        return []
    st = data.ranks[0].steps
    ep = st["epoch"]
    if not len(ep) or ep.max() <= 0:
        return []
    starts = np.flatnonzero(np.diff(ep) != 0) + 1
    return [Mark(float((st["start_ns"][i] - t0) / 1e9), f"epoch {int(ep[i])}") for i in starts[:50]]


def system_section(data: RunData, s: RunSummary) -> str:
    if not data.ranks or not len(data.ranks[0].samples):
        return paragraph("No system samples were recorded.")
    smp = data.ranks[0].samples
    t0 = int(smp.t_ns[0])
    x = (smp.t_ns - t0) / 1e9
    marks = _epoch_marks(data, t0)
    gpus = smp.gpu_indices()
    plots = []
    for title, ylabel, unit, names in SYSTEM_PLOTS:
        cols = [n.format(i=i) for n in names for i in (gpus if "{i}" in n else [0])]
        series = [Series(c, smp.columns[c]) for c in cols if c in smp.columns and np.isfinite(smp.columns[c]).any()]
        if series:
            plots.append(xy_chart(title, x, series, x_axis=Axis("time since the run started", "s"),
                                  y_axis=Axis(ylabel, unit), rules=marks, height=200,
                                  chart_id=f"plot-sys-{title.lower().replace(' ', '-').replace('/', '')}"))
    note = paragraph(f"Rank {data.ranks[0].stream.rank}'s process and host, sampled every "
                     f"{data.run.options.get('sample_interval_s', '?')} s; dashed lines mark epochs.")
    return note + grid(*plots) if plots else paragraph("No system metric was readable.")


def memory_section(s: RunSummary, traces: Mapping[int, EventTable]) -> str:
    rows = []
    for r in s.ranks:
        rows.append({"rank": r.rank, "device": "process RSS", "peak": r.peak_rss_bytes})
        rows += [{"rank": r.rank, "device": dev, "peak": v} for dev, v in sorted(r.peak_gpu_mem_bytes.items())]
    out = table([Col("rank", "rank"), Col("device", "memory", "text"), Col("peak", "peak", "bytes")], rows,
                table_id="memory",
                caption="cuda:N = allocator's reserved peak per step; gpuN = NVML used (all processes)")
    for r in s.ranks:
        if r.memory_ops:
            out += heading(f"Rank {r.rank}: operators that allocate most (profiled window)")
            out += table([Col("name", "operator", "text"), Col("calls", "calls"),
                          Col("self_cpu_bytes", "self CPU", "bytes"), Col("cpu_bytes", "CPU incl. children", "bytes"),
                          Col("self_device_bytes", "self GPU", "bytes"),
                          Col("device_bytes", "GPU incl. children", "bytes")],
                         [o.to_dict() for o in r.memory_ops], table_id=f"memops{r.rank}",
                         caption="net bytes allocated over the window (frees count negative), torch.profiler")
    if traces and not any(r.memory_ops for r in s.ranks):
        out += paragraph("Allocations by operator need a window recorded with --profile-memory.")
    return out


def kernels_section(advice: Advice, analyses: Mapping[int, TraceAnalysis], problems: Sequence[str],
                    tables: Mapping[int, EventTable] | None = None) -> str:
    """The GPU and operator section (gpu_sections.py): every trace-engine figure per rank (with each rank's
    timeline when its events are given), or why there is none."""
    return gpu_section(analyses, problems, advice, tables)


def model_section(s: RunSummary) -> str:
    if not s.models:
        return paragraph("No model summary was recorded (the model's forward was never observed).")
    parts = []
    cols = [Col("name", "layer", "text"), Col("type", "type", "text"), Col("shape", "output shape", "text"),
            Col("params", "parameters", "count"), Col("bytes", "bytes", "bytes")]
    for i, m in enumerate(s.models):
        parts.append(heading(f"{m['name']}: {m['total_params']:,} parameters ({m['trainable_params']:,} trainable), "
                             f"{f.nbytes(m['param_bytes'])} of parameters, {f.nbytes(m['buffer_bytes'])} of buffers"))
        rows = []
        for row in m["layers"]:
            rows.append({"_id": row["name"].replace(".", "/"), "_depth": row["depth"], "name": row["name"],
                         "type": row["type"], "shape": str(row["output_shape"] or "—"), "params": row["params"],
                         "bytes": row["param_bytes"] + row["buffer_bytes"]})
        parts.append(table(cols, rows, table_id=f"model-{i}", tree=True))
    return "".join(parts)


def metrics_section(data: RunData) -> str:
    if not data.ranks or not len(data.ranks[0].metrics):
        return paragraph("No metric was logged (stepscope.log(loss=...) or a Lightning / Hugging Face callback).")
    mt = data.ranks[0].metrics
    t0 = int(data.ranks[0].stream.start_ns)
    plots = []
    for code, name in enumerate(mt.names):
        m = mt["name_code"] == code
        if not m.any():
            continue
        steps, vals, t = mt["step"][m].astype(float), mt["value"][m], (mt["t_ns"][m] - t0) / 1e9
        plots.append(xy_chart(f"{name} by step", steps, [Series(name, vals)], x_axis=Axis("step"),
                              y_axis=Axis(name), height=200, chart_id=f"plot-metric-step-{code}"))
        plots.append(xy_chart(f"{name} over time", t, [Series(name, vals)],
                              x_axis=Axis("time since the run started", "s"), y_axis=Axis(name), height=200,
                              chart_id=f"plot-metric-time-{code}"))
    return grid(*plots)
