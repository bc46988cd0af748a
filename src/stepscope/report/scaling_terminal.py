"""Terminal rendering of scaling studies and sweeps. Renders only: every number comes computed."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from stepscope.analyze.runs.scaling import ScalingAnalysis, ScalingTable
from stepscope.analyze.runs.sweep import SweepAnalysis
from stepscope.report import format as f
from stepscope.report.tables import FitTable

TITLES = {"all": "all steps after warm-up", "first_epoch": "first epoch", "later_epochs": "later epochs"}


def _table(title: str, *cols: str) -> FitTable:
    t = FitTable(title=title or None, title_justify="left", title_style="bold", show_edge=False, pad_edge=False)
    for c in cols:
        t.add_column(c, justify="right", no_wrap=True)
    return t


def _pm(mean: float | None, std: float | None) -> str:
    if mean is None:
        return f.DASH
    if not std:
        return f.number(mean, 4)
    return f"{f.number(mean, 4)}±{f.number(std, 2)}"


def _eff(v: float | None) -> str:
    if v is None:
        return f.DASH
    style = "green" if v >= 0.9 else "yellow" if v >= 0.7 else "red"
    return f"[{style}]{v:.2f}[/]"


def scaling_table(t: ScalingTable, a: ScalingAnalysis) -> RenderableType:
    cols = ["ranks", "runs", "samples", "time s", "local/s", "total/s", "local ideal", "total ideal", "local eff",
            "total eff", "time eff", "speedup", "comm"]
    if a.target is not None:
        cols.append(f"to {a.target.metric} s")
    tab = _table(f"{a.mode} scaling — {TITLES.get(t.selection, t.selection)} (mean±std over "
                 f"{'epochs × runs' if t.selection == 'later_epochs' else 'runs'}; samples/s)", *cols)
    for r in t.rows:
        row = [str(r.world_size), str(r.runs), f.number(r.samples), _pm(r.total_time_mean_s, r.total_time_std_s),
               _pm(r.local_throughput_mean, r.local_throughput_std),
               _pm(r.total_throughput_mean, r.total_throughput_std),
               f.number(r.local_ideal, 4), f.number(r.total_ideal, 4), _eff(r.local_efficiency),
               _eff(r.total_efficiency), _eff(r.time_efficiency), f.number(r.speedup, 3), f.share(r.comm_share)]
        if a.target is not None:
            row.append(f"{_pm(r.time_to_target_mean_s, r.time_to_target_std_s)} ({r.target_reached}/{r.runs} runs)")
        tab.add_row(*row)
    return tab


def scaling_report(a: ScalingAnalysis) -> RenderableType:
    head = Text()
    head.append(f"{a.mode} scaling", style="bold")
    head.append(f" ({a.mode_source}), world sizes {', '.join(map(str, a.sizes))}; ideal from {a.base_size} rank(s)")
    if a.target is not None:
        head.append(f"; target {a.target.metric} = {a.target.value:g}")
    parts: list[RenderableType] = [head]
    for t in a.tables:
        parts += [Text(), scaling_table(t, a)]
    for w in a.warnings:
        parts.append(Text(f"warning: {w}", style="yellow"))
    return Group(*parts)


def sweep_report(s: SweepAnalysis) -> RenderableType:
    parts: list[RenderableType] = [Text(f"Sweep: {s.metric} per setting (mean ± std over repeats)", style="bold")]
    t = _table("", *s.params, "runs", "failed", s.metric)
    for p in s.points:
        label = [p.values[k] for k in s.params]
        t.add_row(*label, str(p.runs), str(p.failed), _pm(p.mean, p.std))
    parts.append(t)
    if s.heatmap is not None:
        h = s.heatmap
        head = Text(f"Heat map of {s.metric}: {h.row_param} (rows) × {h.col_param} (columns)", style="bold")
        hm = _table("", h.row_param, *h.col_values)
        for rv, row in zip(h.row_values, h.cells, strict=True):
            hm.add_row(rv, *[f.number(v, 4) if v is not None else f.DASH for v in row])
        parts += [Text(), head, hm]
    if s.best is not None:
        kv = " ".join(f"{k}={v}" for k, v in s.best.values.items())
        parts.append(Text(f"best setting: {kv} — {s.metric} {f.number(s.best.mean, 4)} "
                          f"({'higher' if s.higher_is_better else 'lower'} is better)", style="bold green"))
    for p in s.points:
        if p.failed:
            kv = " ".join(f"{k}={v}" for k, v in p.values.items())
            parts.append(Text(f"failed: {kv} — {p.failed} of {p.runs + p.failed} run(s) "
                              f"({', '.join(p.failed_runs)})", style="red"))
    return Group(*parts)
