"""HTML pages of scaling studies and sweeps, on the shared HTML base (stepscope.report.html).

The scaling page follows the CosmoFlow notebook: per selection (all steps, first epoch, later epochs) a
log-log plot of per-rank and total throughput against world size with dashed ideal lines and a ±1 std
band, and beneath it the efficiency panel (log x, linear y). Those plots are drawn here as inline SVG
(the base's chart renderer has linear axes only); the sweep page uses the base's heat map and lines.
Renders only: every number comes from the analysis results.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from stepscope.analyze.scaling import ScalingAnalysis, ScalingTable
from stepscope.analyze.sweep import SweepAnalysis
from stepscope.report.html import Col, Section, Series, esc, heatmap, line_chart, notice, render_page, table

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 640, 300, 70, 150, 16, 40
COLORS = {"local": "#1f77b4", "total": "#ff7f0e", "time": "#2ca02c"}
TITLES = {"all": "All steps after warm-up", "first_epoch": "First epoch", "later_epochs": "Later epochs"}


def _ticks_log(lo: float, hi: float) -> list[float]:
    out = []
    for e in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10.0**e
            if lo / 1.0001 <= v <= hi * 1.0001:
                out.append(v)
    return out or [lo, hi]


def _fmt(v: float) -> str:
    return f"{v:.3g}" if v < 1e4 else f"{v:.2e}"


def svg_plot(title: str, x: Sequence[float], lines: Sequence[tuple[str, str, Sequence[float | None], bool,
             Sequence[float | None] | None]], *, ylabel: str, log_y: bool, height: int = H) -> str:
    """An SVG line plot with log x (world size). lines: (name, colour, y, dashed, std or None)."""
    ys = [v for _, _, y, _, s in lines for i, v in enumerate(y) if v is not None and v > 0]
    for _, _, y, _, s in lines:
        if s:
            ys += [v + (d or 0.0) for v, d in zip(y, s, strict=True) if v is not None]
    if not ys or not x:
        return ""
    x_lo, x_hi = min(x), max(x) if max(x) > min(x) else min(x) * 2
    y_lo, y_hi = (min(ys) / 1.3, max(ys) * 1.3) if log_y else (0.0, max(1.25, math.ceil(max(ys) * 4) / 4))
    h = height

    def px(v: float) -> float:
        return PAD_L + (math.log(v) - math.log(x_lo)) / (math.log(x_hi) - math.log(x_lo)) * (W - PAD_L - PAD_R)

    def py(v: float) -> float:
        f = ((math.log(v) - math.log(y_lo)) / (math.log(y_hi) - math.log(y_lo)) if log_y
             else (v - y_lo) / (y_hi - y_lo))
        return h - PAD_B - f * (h - PAD_T - PAD_B)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {h}" width="{W}" height="{h}" '
             f'role="img" aria-label="{esc(title)}" font-size="11" font-family="sans-serif">']
    y_ticks = _ticks_log(y_lo, y_hi) if log_y else [i * 0.25 for i in range(int(y_hi / 0.25) + 1)]
    for t in y_ticks:
        parts.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{py(t):.1f}" y2="{py(t):.1f}" stroke="#ddd"/>'
                     f'<text x="{PAD_L - 4}" y="{py(t) + 4:.1f}" text-anchor="end">{_fmt(t)}</text>')
    for t in x:
        parts.append(f'<line x1="{px(t):.1f}" x2="{px(t):.1f}" y1="{PAD_T}" y2="{h - PAD_B}" stroke="#eee"/>'
                     f'<text x="{px(t):.1f}" y="{h - PAD_B + 14}" text-anchor="middle">{t:g}</text>')
    parts.append(f'<text x="{(PAD_L + W - PAD_R) / 2}" y="{h - 6}" text-anchor="middle">ranks (log)</text>'
                 f'<text x="14" y="{(PAD_T + h - PAD_B) / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {(PAD_T + h - PAD_B) / 2})">{esc(ylabel)}</text>')
    for k, (name, color, y, dashed, std) in enumerate(lines):
        pts = [(xv, yv) for xv, yv in zip(x, y, strict=True) if yv is not None and (yv > 0 or not log_y)]
        if std is not None:
            band = [(xv, yv, s or 0.0) for xv, yv, s in zip(x, y, std, strict=True) if yv is not None]
            upper = [f"{px(a):.1f},{py(b + s):.1f}" for a, b, s in band]
            lower = [f"{px(a):.1f},{py(max(b - s, y_lo if log_y else 0.0) or y_lo):.1f}" for a, b, s in reversed(band)]
            parts.append(f'<polygon points="{" ".join(upper + lower)}" fill="{color}" fill-opacity="0.2" '
                         'stroke="none"/>')
        path = " ".join(f"{px(a):.1f},{py(b):.1f}" for a, b in pts)
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        parts.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"{dash}/>')
        if not dashed:
            parts += [f'<circle cx="{px(a):.1f}" cy="{py(b):.1f}" r="3.5" fill="{color}"><title>{esc(name)}: '
                      f'{_fmt(b)} at {a:g} ranks</title></circle>' for a, b in pts]
        ly = PAD_T + 14 + 16 * k
        parts.append(f'<line x1="{W - PAD_R + 10}" x2="{W - PAD_R + 34}" y1="{ly - 4}" y2="{ly - 4}" '
                     f'stroke="{color}" stroke-width="2"{dash}/><text x="{W - PAD_R + 38}" y="{ly}">{esc(name)}</text>')
    parts.append("</svg>")
    return f'<figure class="ss-svg"><figcaption>{esc(title)}</figcaption>{"".join(parts)}</figure>'


def _selection(t: ScalingTable, a: ScalingAnalysis) -> Section:
    x = [float(r.world_size) for r in t.rows]
    tp = svg_plot(f"Throughput — {TITLES.get(t.selection, t.selection)}", x, [
        ("per-rank throughput", COLORS["local"], [r.local_throughput_mean for r in t.rows], False,
         [r.local_throughput_std for r in t.rows]),
        ("total throughput", COLORS["total"], [r.total_throughput_mean for r in t.rows], False,
         [r.total_throughput_std for r in t.rows]),
        ("per-rank ideal", COLORS["local"], [r.local_ideal for r in t.rows], True, None),
        ("total ideal", COLORS["total"], [r.total_ideal for r in t.rows], True, None),
    ], ylabel="samples/s (log)", log_y=True)
    eff = svg_plot("Efficiency", x, [
        ("per-rank efficiency", COLORS["local"], [r.local_efficiency for r in t.rows], False, None),
        ("total efficiency", COLORS["total"], [r.total_efficiency for r in t.rows], False, None),
        ("time efficiency", COLORS["time"], [r.time_efficiency for r in t.rows], False, None),
        ("ideal", "#888", [1.0 for _ in t.rows], True, None),
    ], ylabel="efficiency", log_y=False, height=220)
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
    css = "figure.ss-svg{margin:0 0 1em 0} figure.ss-svg svg{max-width:100%;height:auto;background:#fff}"
    return render_page(f"{a.mode.capitalize()} scaling", sections,
                       subtitle=f"world sizes {', '.join(map(str, a.sizes))} ({a.mode_source} mode)", extra_css=css)


def sweep_page(s: SweepAnalysis) -> str:
    sections = []
    if s.heatmap is not None:
        h = s.heatmap
        sections.append(Section("heatmap", "Heat map", heatmap(f"{s.metric}", list(h.col_values), list(h.row_values),
                                                                [list(r) for r in h.cells], xlabel=h.col_param,
                                                                ylabel=h.row_param)))
    if s.lines:
        labels = s.lines[0].x
        numeric = all(_is_number(v) for v in labels)
        x = [float(v) for v in labels] if numeric else list(range(len(labels)))
        sections.append(Section("lines", "Lines", line_chart(
            f"{s.metric} against {s.params[0]}" + ("" if numeric else f" (x: {', '.join(labels)})")
            + f", one line per {s.params[1]}", x,
            [Series(f"{s.params[1]}={ln.group_value}", list(ln.mean)) for ln in s.lines], xlabel=s.params[0],
            ylabel=s.metric)))
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
