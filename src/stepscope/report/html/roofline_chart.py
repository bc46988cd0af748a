"""The roofline chart of the run report: achieved TFLOP/s against arithmetic intensity (FLOP/byte) on log-log axes,
one point per operator group (operator, input dims, dtype) sized by its GPU time, under the device's memory roof
(TFLOP/s = intensity x TB/s) and its compute roofs (the matrix peak of each precision the points use, and the
vector FP32 peak). Drawn as inline SVG in Python (no script: the hover is each point's <title>), so it prints and
reads offline like the tables. Only with the device's peaks; otherwise one line says why."""

from __future__ import annotations

import math

from stepscope.analyze.trace.roofline import OpRoofline, Roofline
from stepscope.report import format as f
from stepscope.report.html.escape import esc
from stepscope.report.html.page import paragraph

W, H = 720, 380
"""The drawing's own units (the SVG scales to its card's width)."""
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 14, 46
MAX_POINTS = 200
"""Operator groups drawn (largest GPU time first): smaller ones would be dots under the others."""
R_MIN, R_MAX = 3.0, 16.0
CSS = (".ss-roofline{width:100%;max-width:760px;height:auto;display:block;margin:6px 0}"
       ".ss-roofline text{font:11px system-ui,sans-serif;fill:#444}.ss-roofline .roof{stroke-width:1.6;fill:none}"
       ".ss-roofline circle{fill:#3b82f6;fill-opacity:.55;stroke:#1e40af;stroke-width:.8}"
       ".ss-roofline circle.memory{fill:#f59e0b;stroke:#b45309}.ss-roofline circle:hover{fill-opacity:.9}")


def _plotted(r: Roofline) -> list[OpRoofline]:
    ops = [o for o in r.ops if o.tflops and o.intensity and o.tflops > 0 and o.intensity > 0]
    return ops[:MAX_POINTS]


def _compute_roofs(r: Roofline, ops: list[OpRoofline]) -> list[tuple[str, float]]:
    """(label, TFLOP/s per device) of each compute roof: the matrix peak of every precision the points use (a
    dtype without a matrix peak on this device drawn at the vector peak), and the vector FP32 peak."""
    assert r.peaks is not None
    per = r.peaks.devices_per_card
    roofs = {f"{p} matrix": r.peaks.matrix_tflops[p] / per
             for p in sorted({o.precision for o in ops if o.precision}) if p in r.peaks.matrix_tflops}
    roofs["fp32 vector"] = r.peaks.vector_fp32_tflops / per
    merged: dict[float, list[str]] = {}  # roofs of one height drawn once, their names joined (A100: fp32 19.5)
    for label, peak in roofs.items():
        merged.setdefault(peak, []).append(label)
    return sorted(((", ".join(labels), peak) for peak, labels in merged.items()), key=lambda kv: -kv[1])


def why_no_chart(r: Roofline) -> str | None:
    """One line saying why no chart is drawn (None: it is)."""
    if r.peaks is None or not r.memory_tbps:
        return (f"No roofline chart: the device ({r.device or 'not recorded'}) has no known peaks "
                "(stepscope's peak table and the trace's deviceProperties lack it).")
    if not _plotted(r):
        return "No roofline chart: no operator group has a FLOPs and bytes model (see the table's reasons)."
    return None


def _decades(lo: float, hi: float) -> tuple[float, float]:
    return 10.0 ** math.floor(math.log10(lo)), 10.0 ** math.ceil(math.log10(hi))


def _tick(v: float) -> str:
    return f"{v:g}" if 1e-3 <= v < 1e5 else f"1e{round(math.log10(v))}"


def roofline_chart(r: Roofline, rank: int) -> str:
    """The chart (an <svg> with id ``roofline-chart-r{rank}``), or a paragraph saying why there is none."""
    why = why_no_chart(r)
    if why is not None:
        return paragraph(why)
    ops = _plotted(r)
    mem = float(r.memory_tbps or 0.0)
    roofs = _compute_roofs(r, ops)
    top = roofs[0][1]
    x_lo, x_hi = _decades(min(min(o.intensity or 1.0 for o in ops), roofs[-1][1] / mem) / 2,
                          max(max(o.intensity or 1.0 for o in ops), top / mem) * 2)
    y_lo, y_hi = _decades(min(o.tflops or 1.0 for o in ops) / 2, top * 1.5)
    pw, ph = W - LEFT - RIGHT, H - TOP - BOTTOM

    def sx(v: float) -> float:
        return LEFT + pw * (math.log10(v) - math.log10(x_lo)) / (math.log10(x_hi) - math.log10(x_lo))

    def sy(v: float) -> float:
        return TOP + ph * (1 - (math.log10(v) - math.log10(y_lo)) / (math.log10(y_hi) - math.log10(y_lo)))

    out = [f'<svg id="roofline-chart-r{rank}" class="ss-roofline" viewBox="0 0 {W} {H}" role="img" '
           f'aria-label="roofline: achieved TFLOP/s against FLOP per byte, log-log">',
           f'<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#ccc"/>']
    for axis, lo, hi in (("x", x_lo, x_hi), ("y", y_lo, y_hi)):
        for e in range(round(math.log10(lo)), round(math.log10(hi)) + 1):
            v = 10.0 ** e
            if axis == "x":
                anchor = "end" if v >= x_hi else "start" if v <= x_lo else "middle"  # the ends stay inside
                out.append(f'<line x1="{sx(v):.1f}" x2="{sx(v):.1f}" y1="{TOP}" y2="{TOP + ph}" stroke="#eee"/>'
                           f'<text class="tick-x" x="{sx(v):.1f}" y="{TOP + ph + 14}" '
                           f'text-anchor="{anchor}">{_tick(v)}</text>')
            else:
                out.append(f'<line x1="{LEFT}" x2="{LEFT + pw}" y1="{sy(v):.1f}" y2="{sy(v):.1f}" stroke="#eee"/>'
                           f'<text class="tick-y" x="{LEFT - 5}" y="{sy(v) + 4:.1f}" '
                           f'text-anchor="end">{_tick(v)}</text>')
    out.append(f'<text x="{LEFT + pw / 2}" y="{H - 8}" text-anchor="middle">arithmetic intensity (FLOP/byte)</text>'
               f'<text transform="translate(14 {TOP + ph / 2}) rotate(-90)" text-anchor="middle">'
               "achieved TFLOP/s</text>")
    colors = ["#dc2626", "#7c3aed", "#059669", "#0891b2", "#6b7280"]
    label_y = -1e9
    for i, (label, peak) in enumerate(roofs):  # each roof: memory slope up to its ridge, then flat
        ridge = peak / mem
        x0 = max(x_lo, y_lo / mem)
        pts = [(x0, x0 * mem), (ridge, peak), (x_hi, peak)] if ridge > x0 else [(x_lo, peak), (x_hi, peak)]
        d = " ".join(f"{sx(a):.1f},{sy(b):.1f}" for a, b in pts)
        label_y = max(sy(peak) - 4, label_y + 14)  # above its roof, or under the label above when close
        out.append(f'<polyline class="roof" points="{d}" stroke="{colors[i % len(colors)]}">'
                   f"<title>{esc(label)} peak {peak:g} TFLOP/s; memory {mem:g} TB/s; ridge {ridge:.3g} FLOP/byte"
                   f"</title></polyline>"
                   f'<text class="roof-label" x="{LEFT + pw - 4}" y="{label_y:.1f}" text-anchor="end" '
                   f'fill="{colors[i % len(colors)]}">{esc(label)} {peak:g} TFLOP/s</text>')
    biggest = max(o.gpu_ns for o in ops) or 1
    for o in reversed(ops):  # the largest drawn last, on top
        rad = R_MIN + (R_MAX - R_MIN) * math.sqrt(o.gpu_ns / biggest)
        tip = (f"{o.name} {o.input_dims} {o.precision or ''}\n{o.tflops:.3g} TFLOP/s at {o.intensity:.3g} "
               f"FLOP/byte; {o.calls:,} calls, GPU {f.duration_ns(o.gpu_ns)}; {o.bound or 'bound unknown'}")
        out.append(f'<circle class="{esc(o.bound or "")}" cx="{sx(o.intensity or 1.0):.1f}" '
                   f'cy="{sy(o.tflops or 1.0):.1f}" r="{rad:.1f}"><title>{esc(tip)}</title></circle>')
    out.append("</svg>")
    more = len([o for o in r.ops if o.tflops and o.intensity]) - len(ops)
    return "".join(out) + paragraph(
        f"{len(ops)} operator groups (operator, input dims, dtype), area by GPU time; orange: memory-bound, blue: "
        f"compute-bound; memory roof {mem:g} TB/s; hover a point for its operator and shape"
        + (f"; {more} smaller groups not drawn" if more > 0 else "") + ".")
