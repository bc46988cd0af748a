"""HTML pages of scaling studies and sweeps, on the shared HTML base (stepscope.report.html).

The scaling page follows the CosmoFlow notebook: per selection (all steps, first epoch, later epochs) a
log-log plot of per-rank and total throughput against world size with dashed ideal lines and a ±1 std
band, and beneath it the efficiency panel (log x, linear y). All plots are the chart module's
(charts.py: log axes, ticks at the world sizes, tooltips, zoom); the sweep page uses its heat map and lines.
Renders only: every number comes from the analysis results.
"""

from __future__ import annotations

from stepscope.analyze.runs.scaling import ScalingAnalysis, ScalingTable
from stepscope.analyze.runs.sweep import SweepAnalysis
from stepscope.report.html import Col, Section, notice, render_page, table
from stepscope.report.html.charts import Axis, Series, heat_map, xy_chart

COLORS = {"local": "#1f77b4", "total": "#ff7f0e", "time": "#2ca02c"}
TITLES = {"all": "All steps after warm-up", "first_epoch": "First epoch", "later_epochs": "Later epochs"}


def _selection(t: ScalingTable, a: ScalingAnalysis) -> Section:
    x = [float(r.world_size) for r in t.rows]
    ranks = Axis("ranks", log=2, ticks_at_data=True)
    tp = xy_chart(f"Throughput — {TITLES.get(t.selection, t.selection)}", x, [
        Series("per-rank throughput", [r.local_throughput_mean for r in t.rows], color=COLORS["local"], smooth=0,
               spread=[r.local_throughput_std for r in t.rows], points=True),
        Series("total throughput", [r.total_throughput_mean for r in t.rows], color=COLORS["total"], smooth=0,
               spread=[r.total_throughput_std for r in t.rows], points=True),
        Series("per-rank ideal", [r.local_ideal for r in t.rows], color=COLORS["local"], dash=True, smooth=0),
        Series("total ideal", [r.total_ideal for r in t.rows], color=COLORS["total"], dash=True, smooth=0),
    ], x_axis=ranks, y_axis=Axis("throughput", "samples/s", log=10), height=300,
        chart_id=f"plot-throughput-{t.selection.replace('_', '-')}")
    eff = xy_chart("Efficiency", x, [
        Series("per-rank efficiency", [r.local_efficiency for r in t.rows], color=COLORS["local"], smooth=0,
               points=True),
        Series("total efficiency", [r.total_efficiency for r in t.rows], color=COLORS["total"], smooth=0, points=True),
        Series("time efficiency", [r.time_efficiency for r in t.rows], color=COLORS["time"], smooth=0, points=True),
        Series("ideal", [1.0 for _ in t.rows], color="#888888", dash=True, smooth=0),
    ], x_axis=ranks, y_axis=Axis("efficiency (1 = ideal)", min=0.0), height=220,
        chart_id=f"plot-efficiency-{t.selection.replace('_', '-')}")
    cols = [Col("world_size", "ranks", "count"), Col("runs", "runs", "count"), Col("samples", "samples", "count"),
            Col("total_time_mean_s", "total time", "s"), Col("total_time_std_s", "± std", "s"),
            Col("local_throughput_mean", "per-rank samples/s"), Col("local_throughput_std", "± std"),
            Col("total_throughput_mean", "total samples/s"), Col("total_throughput_std", "± std"),
            Col("local_efficiency", "per-rank eff."), Col("total_efficiency", "total eff."),
            Col("time_efficiency", "time eff."), Col("speedup", "speedup"), Col("comm_share", "comm", "share")]
    if a.target is not None:
        cols.append(Col("time_to_target_mean_s", f"time to {a.target.metric}={a.target.value:g}", "s"))
    from dataclasses import asdict

    body = tp + eff + table(cols, [asdict(r) for r in t.rows], table_id=f"scaling-{t.selection}")
    return Section(id=t.selection, title=TITLES.get(t.selection, t.selection), body=body,
                   note="Mean over runs (later epochs: over epochs × runs); band ±1 std; dashed: ideal from "
                        f"{a.base_size} rank(s).")


def scaling_page(a: ScalingAnalysis) -> str:
    sections = [_selection(t, a) for t in a.tables]
    if a.warnings:
        sections.insert(0, Section("warnings", "Warnings", "".join(notice(w, "warn") for w in a.warnings)))
    return render_page(f"{a.mode.capitalize()} scaling", sections,
                       subtitle=f"world sizes {', '.join(map(str, a.sizes))} ({a.mode_source} mode)")


def sweep_page(s: SweepAnalysis) -> str:
    sections = []
    if s.heatmap is not None:
        h = s.heatmap
        sections.append(Section("heatmap", "Heat map", heat_map(f"{s.metric}", list(h.col_values), list(h.row_values),
                                                                 [list(r) for r in h.cells], x_title=h.col_param,
                                                                 y_title=h.row_param)))
    if s.lines:
        labels = s.lines[0].x
        numeric = all(_is_number(v) for v in labels)
        x = [float(v) for v in labels] if numeric else list(range(len(labels)))
        sections.append(Section("lines", "Lines", xy_chart(
            f"{s.metric} against {s.params[0]}, one line per {s.params[1]}", x,
            [Series(f"{s.params[1]}={ln.group_value}", list(ln.mean), smooth=0, points=True) for ln in s.lines],
            x_axis=Axis(s.params[0], labels=None if numeric else list(labels)), y_axis=Axis(s.metric))))
    rows = [{**p.values, "runs": p.runs, "failed": p.failed, "mean": p.mean, "std": p.std} for p in s.points]
    cols = [Col(k, k, "text") for k in s.params] + [Col("runs", "runs", "count"), Col("failed", "failed", "count"),
                                                    Col("mean", s.metric), Col("std", "± std")]
    best = (notice("best setting: " + " ".join(f"{k}={v}" for k, v in s.best.values.items()), "info")
            if s.best else "")
    failed = "".join(notice(f"failed: {' '.join(f'{k}={v}' for k, v in p.values.items())} ({', '.join(p.failed_runs)})",
                            "bad") for p in s.points if p.failed)
    sections.insert(0, Section("settings", "Settings", best + failed + table(cols, rows, table_id="sweep")))
    return render_page(f"Sweep of {', '.join(s.params)}", sections, subtitle=f"metric {s.metric}")


def _is_number(v: str) -> bool:
    try:
        float(v)
    except ValueError:
        return False
    return True
