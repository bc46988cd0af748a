"""Rich renderables for trace-analysis results. Renderers only render: every figure comes computed."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from stepscope.analyze.trace.analysis import TraceAnalysis
from stepscope.analyze.trace.kernels import KernelStats
from stepscope.analyze.trace.multirank import TraceSetAnalysis
from stepscope.analyze.trace.ops import OpStats
from stepscope.traces.components import ComponentRules, Explanation


def _us(ns: float | None) -> str:
    return "—" if ns is None else f"{ns / 1e3:,.1f}"


def _pct(p: float | None) -> str:
    return "—" if p is None else f"{p:.1f}%"


def summary_view(a: TraceAnalysis) -> RenderableType:
    t = Table(title=f"rank {a.rank} — {a.path}", show_header=True, title_justify="left")
    t.add_column("figure")
    t.add_column("µs", justify="right")
    t.add_column("%", justify="right")
    if a.temporal:
        tp = a.temporal.to_dict()
        for k in ("idle", "compute", "non_compute", "communication", "memory"):
            t.add_row(f"GPU {k.replace('_', '-')}", _us(tp[f"{k}_ns"]), _pct(tp[f"{k}_pct"]))
        t.add_row("GPU window", _us(a.temporal.window_ns), "100.0%")
    if a.idle:
        for k in ("host_wait_ns", "kernel_wait_ns", "other_ns"):
            t.add_row(f"idle: {k[:-3].replace('_', ' ')}", _us(a.idle.total(k)), "")
    if a.overlap:
        t.add_row("communication overlapped", _us(a.overlap.overlap_ns), _pct(a.overlap.overlap_pct))
    if a.utilization:
        u = a.utilization
        t.add_row("GPU utilisation / est. SM efficiency / occupancy", "",
                  f"{_pct(u.utilization_pct)} / {_pct(u.sm_efficiency_pct)} / {_pct(u.achieved_occupancy_pct)}")
    if a.steps.steps:
        t.add_row(f"median step ({len(a.steps.steps)} steps)", _us(a.steps.stat(_median)), "")
    parts: list[RenderableType] = [t, kernel_view(a.kernels.by_component, top=20, title="GPU time by component")]
    parts += [Text(f"warning: {w}", style="yellow") for w in a.warnings]
    return Group(*parts)


def _median(x: object) -> float:
    import numpy as np

    return float(np.median(x))  # type: ignore[call-overload]


def kernel_view(rows: Iterable[KernelStats], *, top: int, title: str) -> Table:
    t = Table(title=title, title_justify="left")
    for col, just in (("name", "left"), ("component", "left"), ("count", "right"), ("sum µs", "right"),
                      ("mean µs", "right"), ("min µs", "right"), ("max µs", "right"), ("std µs", "right"),
                      ("%", "right")):
        t.add_column(col, justify=just, overflow="fold")  # type: ignore[arg-type]
    for s in list(rows)[:top]:
        t.add_row(Text(s.key), s.component, f"{s.count:,}", _us(s.sum_ns), _us(s.mean_ns), _us(s.min_ns),
                  _us(s.max_ns), _us(s.std_ns), _pct(s.pct))
    return t


def ops_view(rows: Iterable[OpStats], *, top: int) -> Table:
    t = Table(title="CPU operators", title_justify="left")
    for col in ("operator", "component", "calls", "CPU total µs", "CPU self µs", "GPU total µs", "GPU self µs",
                "input shapes"):
        t.add_column(col, justify="left" if col in ("operator", "component", "input shapes") else "right",
                     overflow="fold")
    for o in list(rows)[:top]:
        t.add_row(Text(o.name), o.component, f"{o.calls:,}", _us(o.cpu_total_ns), _us(o.cpu_self_ns),
                  _us(o.device_total_ns), _us(o.device_self_ns), Text(", ".join(o.shapes[:2])))
    return t


def traceset_view(s: TraceSetAnalysis) -> RenderableType:
    t = Table(title="ranks side by side", title_justify="left")
    for col in ("rank", "median step µs", "GPU idle %", "compute %", "comm µs", "overlap %"):
        t.add_column(col, justify="right")
    for a in s.ranks:
        tp = a.temporal.to_dict() if a.temporal else {}
        t.add_row(str(a.rank) + (" (slowest)" if a.rank == s.slowest_rank and len(s.ranks) > 1 else ""),
                  _us(a.steps.stat(_median)), _pct(tp.get("idle_pct")), _pct(tp.get("compute_pct")),
                  _us(tp.get("communication_ns")), _pct(a.overlap.overlap_pct if a.overlap else None))
    parts: list[RenderableType] = [t]
    parts += [Text(f"error: {e}", style="red") for e in s.errors]
    parts += [Text(f"warning: {w}", style="yellow") for w in s.warnings]
    return Group(*parts)


def rules_view(rules: ComponentRules) -> Table:
    t = Table(title="component rules (first match wins)", title_justify="left")
    for col in ("#", "component", "pattern", "source"):
        t.add_column(col, overflow="fold")
    for i, r in enumerate(rules.rules):
        t.add_row(str(i), r.component, Text(r.pattern), r.source)
    return t


def explain_view(e: Explanation) -> Text:
    if e.rule is None:
        return Text(f"{e.name!r} -> other (no rule matched)")
    return Text(f"{e.name!r} -> {e.component} (rule #{e.rule_index}: {e.rule.pattern!r}, {e.rule.source})")
