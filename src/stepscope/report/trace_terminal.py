"""Rich renderables for trace-analysis results. Renderers only render: every figure comes computed."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.text import Text

from stepscope.analyze.trace.analysis import TraceAnalysis
from stepscope.analyze.trace.kernels import KernelStats
from stepscope.analyze.trace.multirank import TraceSetAnalysis
from stepscope.analyze.trace.ops import OpStats
from stepscope.report.format import duration_ns
from stepscope.report.tables import FitTable
from stepscope.report.trace_counters_terminal import counters_view
from stepscope.traces.components import ComponentRules, Explanation

if TYPE_CHECKING:  # loaded with the critical path (trace analyze --critical-path)
    from stepscope.analyze.trace.critical_path import CriticalPath
    from stepscope.analyze.trace.critical_path_ranks import CrossRankPath


@dataclass(frozen=True, slots=True)
class Col:
    """A column of a :class:`NumericTable`: ``numeric`` cells never wrap nor shorten (right-aligned); ``drop`` > 0
    is the order in which it is left out when the table does not fit (highest first), 0 never."""

    header: str
    numeric: bool = True
    drop: int = 0


class NumericTable(FitTable):
    """A trace table by report/tables.py's rule: numbers whole, names shortened first, then optional columns
    left out (highest ``drop`` first) with a line saying which."""

    def __init__(self, title: str, cols: Sequence[Col], rows: Sequence[Sequence[str | Text]]) -> None:
        super().__init__(title, title_style=None, show_edge=True)
        for c in cols:
            self.add_column(c.header, numeric=c.numeric, drop=c.drop)
        for r in rows:
            self.add_row(*r)


def _us(ns: float | None) -> str:
    """A duration in the unit the HTML report uses for it (ns, µs, ms, s, min)."""
    return duration_ns(ns)


def _pct(p: float | None) -> str:
    return "—" if p is None else f"{p:.1f}%"


def summary_view(a: TraceAnalysis) -> RenderableType:
    t = FitTable(f"rank {a.rank} — {a.path}", title_style=None, show_edge=True)
    t.add_column("figure", prose=True)  # figures' names wrap between words, never shortened
    t.add_column("time", justify="right")
    t.add_column("%", justify="right")
    if a.temporal:
        tp = a.temporal.to_dict()
        for k in ("idle", "compute", "non_compute", "communication", "memory"):
            t.add_row(f"GPU {k.replace('_', '-')}", _us(tp[f"{k}_ns"]), _pct(tp[f"{k}_pct"]))
        t.add_row("GPU window", _us(a.temporal.window_ns), "100.0%")
    if a.idle:
        # per-stream gaps added up: with several streams this can exceed the GPU window, so the label says so
        n = len(a.idle.streams)
        over = f" (sum over {n} streams)" if n > 1 else ""
        for k in ("host_wait_ns", "kernel_wait_ns", "other_ns"):
            t.add_row(f"idle: {k[:-3].replace('_', ' ')}{over}", _us(a.idle.total(k)), "")
    if a.overlap:
        t.add_row("communication overlapped", _us(a.overlap.overlap_ns), _pct(a.overlap.overlap_pct))
    if a.utilization:
        u = a.utilization
        t.add_row("GPU utilisation / est. SM efficiency / occupancy", "",
                  f"{_pct(u.utilization_pct)} / {_pct(u.sm_efficiency_pct)} / {_pct(u.achieved_occupancy_pct)}")
    if a.steps.steps:
        t.add_row(f"median step ({len(a.steps.steps)} steps)", _us(a.steps.stat(_median)), "")
    parts: list[RenderableType] = [t]
    if a.kernels.by_component:  # a CPU-only trace: no empty table (its warning says why)
        parts.append(kernel_view(a.kernels.by_component, top=20, title="GPU time by component"))
    if a.critical_path is not None:
        parts.append(critical_path_view(a.critical_path))
    parts += counters_view(a)  # queues, bandwidth, memory, kernel sequences, annotations
    parts += [Text(f"warning: {w}", style="yellow") for w in a.warnings]
    return Group(*parts)


CRITICAL_TOP = 5


def critical_path_view(cp: CriticalPath, *, top: int = CRITICAL_TOP) -> RenderableType:
    """Length, time by kind and the names with the most time on the path (HTA's critical path)."""
    from stepscope.report.html.names import short_name  # here: the html package's __init__ loads its renderers

    within = f" in a {_us(cp.window_ns[1] - cp.window_ns[0])} window" if cp.window_ns else ""
    t = FitTable(f"critical path{within}: {_us(cp.length_ns)} ({cp.event_rows.size:,} events)", title_style=None,
                 show_edge=True)
    t.add_column("on the path", prose=True)
    t.add_column("time", justify="right")
    t.add_column("%", justify="right")
    length = cp.length_ns or 1
    for kind, ns in sorted(cp.breakdown_ns.items(), key=lambda kv: -kv[1]):
        if ns:
            t.add_row(PATH_KINDS.get(kind, kind), _us(ns), _pct(100.0 * ns / length))
    for item in cp.top[:top]:
        t.add_row(Text(f"  {short_name(item.name)} ({PATH_KINDS.get(item.kind, item.kind)})"), _us(item.time_ns),
                  _pct(100.0 * item.time_ns / length))
    if cp.operators:
        t.add_row(Text("operators, with the GPU work they launched"), "", "")
        for op in cp.operators[:top]:
            t.add_row(Text(f"  {short_name(op.name)}"), _us(op.time_ns), _pct(100.0 * op.time_ns / length))
    parts: list[RenderableType] = [t]
    parts += [Text(f"note: {n}", style="yellow") for n in cp.notes]
    return Group(*parts)


PATH_KINDS = {"cpu": "CPU", "gpu_compute": "GPU compute", "gpu_memory": "GPU memcpy/memset",
              "gpu_communication": "GPU communication", "kernel_gap": "gap between kernels",
              "launch_delay": "launch delay"}


def cross_rank_view(c: CrossRankPath) -> RenderableType:
    """Whom the rank with the longest critical path waited for, one line per collective (longest first)."""
    head = (f"critical path across ranks: rank {c.slowest_rank} is the longest ({_us(c.lengths[c.slowest_rank])}); "
            f"{c.collectives_on_path} collective kernels on its path")
    lines = [Text(head)]
    lines += [Text(f"  {w.text()}") for w in c.waits]
    if not c.clocks_aligned:
        lines.append(Text(f"  no waits given: in {c.clock_breaks} of the matched collectives a rank started after "
                          "this rank's kernel had ended — the ranks' clocks disagree", style="yellow"))
    elif not c.waits and c.collectives_on_path:
        lines.append(Text("  it waited for no other rank at them (it arrived last or with the others)"))
    if c.unmatched:
        lines.append(Text(f"  {c.unmatched} of them not found in the other ranks' traces", style="yellow"))
    return Group(*lines)


def _median(x: object) -> float:
    import numpy as np

    return float(np.median(x))  # type: ignore[call-overload]


def kernel_view(rows: Iterable[KernelStats], *, top: int, title: str) -> NumericTable:
    cols = [Col("name", numeric=False), Col("component", numeric=False, drop=5), Col("count", drop=2),
            Col("sum"), Col("mean", drop=1), Col("min", drop=3), Col("max", drop=3),
            Col("std", drop=4), Col("%")]
    body: list[list[str | Text]] = [
        [Text(s.key), s.component, f"{s.count:,}", _us(s.sum_ns), _us(s.mean_ns), _us(s.min_ns), _us(s.max_ns),
         _us(s.std_ns), _pct(s.pct)] for s in list(rows)[:top]]
    if all(str(r[0]) == r[1] for r in body):  # rows by component (or none): the name is the component
        cols, body = cols[:1] + cols[2:], [r[:1] + r[2:] for r in body]
    return NumericTable(title, cols, body)


def ops_view(rows: Iterable[OpStats], *, top: int) -> NumericTable:
    cols = [Col("operator", numeric=False), Col("component", numeric=False, drop=5), Col("calls", drop=1),
            Col("CPU total"), Col("CPU self", drop=2), Col("GPU total"), Col("GPU self", drop=2),
            Col("input shapes", numeric=False, drop=6)]
    body: list[list[str | Text]] = [[Text(o.name), o.component, f"{o.calls:,}", _us(o.cpu_total_ns), _us(o.cpu_self_ns),
             _us(o.device_total_ns), _us(o.device_self_ns), Text(", ".join(o.shapes[:2]))] for o in list(rows)[:top]]
    return NumericTable("CPU operators", cols, body)


def traceset_view(s: TraceSetAnalysis) -> RenderableType:
    t = FitTable("ranks side by side", title_style=None, show_edge=True)
    for col in ("rank", "median step", "GPU idle %", "compute %", "comm", "overlap %"):
        t.add_column(col, justify="right")
    for a in s.ranks:
        tp = a.temporal.to_dict() if a.temporal else {}
        t.add_row(str(a.rank) + (" (slowest)" if a.rank == s.slowest_rank and len(s.ranks) > 1 else ""),
                  _us(a.steps.stat(_median)), _pct(tp.get("idle_pct")), _pct(tp.get("compute_pct")),
                  _us(tp.get("communication_ns")), _pct(a.overlap.overlap_pct if a.overlap else None))
    parts: list[RenderableType] = [t]
    if s.critical_path is not None:
        parts.append(cross_rank_view(s.critical_path))
    parts += [Text(f"error: {e}", style="red") for e in s.errors]
    parts += [Text(f"warning: {w}", style="yellow") for w in s.warnings]
    return Group(*parts)


def rules_view(rules: ComponentRules) -> FitTable:
    t = FitTable("component rules (first match wins)", title_style=None, show_edge=True)
    for col in ("#", "component", "pattern", "source"):
        t.add_column(col, justify="right" if col == "#" else "left", prose=col == "pattern")
    for i, r in enumerate(rules.rules):
        t.add_row(str(i), r.component, Text(r.pattern), r.source)
    return t


_PART_LABEL = {"name": "the kernel's name", "namespace": "the kernel's namespaces", "whole": "the whole name"}


def explain_view(e: Explanation) -> Text:
    """The verdict, then the signature with the part the rules saw underlined (template arguments and parameters
    are never matched)."""
    if e.rule is None:
        head = Text(f"{e.name!r} -> other (no rule matched {_PART_LABEL[e.part]}: {e.matched!r})")
    else:
        head = Text(f"{e.name!r} -> {e.component} (rule #{e.rule_index}: {e.rule.pattern!r}, {e.rule.source}; "
                    f"matched {_PART_LABEL[e.part]}: {e.matched!r})")
    if e.part == "whole":
        return head
    shown = Text("\n  ") + Text(e.name)
    a, b = e.span
    shown.stylize("bold underline", 3 + a, 3 + b)
    return head + shown
