"""The timeline of a rank's profiled window in the run report: CPU threads (nesting lanes) and GPU streams on
one canvas, kernels coloured by component, the critical path marked red when one is given; wheel to zoom, drag to
pan, drag on the time axis to zoom to a range, double-click to reset (assets/timeline.js draws it).

Embedded data (one ``<script type="application/json">`` per rank): the levels of
:func:`stepscope.analyze.trace.timeline.level`, coarsest first, finest last:

- ``OVERVIEW_COLUMNS`` columns over the window: the first view, where a report of ~1,000-2,000 px shows each
  column in about a pixel, so it draws what the events would paint at a bounded cost (a few items per pixel
  column and row, whatever the event count);
- ``DETAIL_COLUMNS`` (16 times finer): a zoom of up to 16x stays pixel-exact;
- every event exact: any zoom is exact.

A finer level is embedded only while the rank's share of ``BUDGET_BYTES`` allows; zoomed past the finest
embedded level, merged runs show as runs (their hover says how many events they hold) and the page names the
Perfetto export, which holds every event. Times: starts in units of ``q`` ns (a power of ten giving at most
1e8 units over the window) as deltas within a row; durations of exact events in ns.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from stepscope.analyze.trace.timeline import (
    Level,
    TimelineRows,
    critical_items,
    level,
    merge_close,
    timeline_rows,
)
from stepscope.model.events import EventTable
from stepscope.report import format as f
from stepscope.report.html.escape import esc, json_for_script
from stepscope.report.html.names import short_names

OVERVIEW_COLUMNS = 2_000
DETAIL_COLUMNS = 32_000
BUDGET_BYTES = 400_000
"""Embedded timeline JSON of all ranks together (the whole report stays under 1.5 MB)."""
OVERVIEW_CHOICES = (OVERVIEW_COLUMNS, 1_000, 500)
"""The overview's columns, finest first: a rank whose share of the budget is small gets a coarser one."""
NAME_LIMIT = 100
MAX_CRITICAL_ITEMS = 3_000
"""Critical-path events embedded one by one up to this many; a longer path's close items are joined."""

COMPONENT_COLORS = {
    "gemm": "#2b6cb0", "convolution": "#dd6b20", "attention": "#38a169", "elementwise": "#805ad5",
    "reduction": "#d53f8c", "softmax": "#d69e2e", "optimizer": "#319795", "communication": "#e53e3e",
    "memcpy": "#4c51bf", "memset": "#975a16", "other": "#718096",
}
"""Component colours (the charts' palette); rules of a project that name other components cycle EXTRA_COLORS."""
EXTRA_COLORS = ("#2c7a7b", "#b7791f", "#6b46c1", "#c05621")
HOST_COLORS = {"cpu operator": "#a3bffa", "annotation": "#fbd38d", "runtime call": "#9ae6b4", "python": "#e2e8f0",
               "other host": "#cbd5e0"}


def style_colors(styles: Sequence[str]) -> list[str]:
    extra = iter(EXTRA_COLORS * (1 + len(styles) // len(EXTRA_COLORS)))
    return [COMPONENT_COLORS.get(s) or HOST_COLORS.get(s) or next(extra) for s in styles]


def quantum(window_ns: int) -> int:
    """Start-time unit: the smallest power of ten of ns giving at most 1e8 units over the window."""
    return int(10 ** max(0, math.ceil(math.log10(max(window_ns, 1) / 1e8))))


def _deltas(values: np.ndarray[Any, Any], at: np.ndarray[Any, Any]) -> list[int]:
    """Differences from the previous value of the same row (the first of a row: the value)."""
    v = values.astype(np.int64)
    d = np.diff(v, prepend=0)
    firsts = at[:-1][at[:-1] < at[1:]]
    d[firsts] = v[firsts]
    return d.tolist()  # type: ignore[no-any-return]


def encode_level(lv: Level, q: int, name_index: Mapping[int, int]) -> dict[str, Any]:
    names = np.asarray([name_index[int(n)] for n in lv.exact_name.tolist()], dtype=np.int64)
    return {"cols": lv.columns, "xAt": lv.exact_at.tolist(), "xs": _deltas(lv.exact_ts // q, lv.exact_at),
            "xd": lv.exact_dur.tolist(), "xk": lv.exact_style.tolist(), "xn": names.tolist(),
            "rAt": lv.runs_at.tolist(), "rc": _deltas(lv.run_col, lv.runs_at), "rl": lv.run_len.tolist(),
            "rk": lv.run_style.tolist(), "rb": lv.run_busy.tolist(), "rn": lv.run_count.tolist()}


def timeline_spec(tl: TimelineRows, table: EventTable, *, budget: int,
                  critical: Sequence[int] | None = None) -> dict[str, Any] | None:
    """The JSON a rank's timeline embeds: the overview level (coarser where ``budget`` asks), then finer levels
    while within ``budget``; None when not even the coarsest overview fits."""
    q = quantum(tl.window_ns)
    levels: list[Level] = [level(tl, cols) for cols in OVERVIEW_CHOICES]
    if levels[0].run_col.size:
        for cols in (DETAIL_COLUMNS, 0):
            levels.append(level(tl, cols))
            if not levels[-1].run_col.size:
                break
    used = sorted({int(n) for lv in levels for n in lv.exact_name.tolist()})
    shorts = short_names([table.names[n] for n in used], NAME_LIMIT)
    index = {n: i for i, n in enumerate(used)}
    spec: dict[str, Any] = {
        "rank": tl.rank, "t0": tl.start_ns, "span": tl.window_ns, "q": q,
        "rows": [{"label": r.label, "kind": r.kind, "lane": r.lane} for r in tl.rows],
        "styles": list(tl.styles), "colors": style_colors(tl.styles), "components": tl.components,
        "names": shorts, "levels": [], "hiddenThreads": tl.hidden_threads, "complete": False, "critical": None,
    }
    if critical is not None:
        row, start, dur = critical_items(tl, critical)
        drawn = int(row.size)
        for cols in (256_000, 64_000, DETAIL_COLUMNS, 8_000, OVERVIEW_COLUMNS):
            if row.size <= MAX_CRITICAL_ITEMS:
                break  # a long path: items of a row closer than the finest column that fits are joined
            row, start, dur = merge_close(row, start, dur, tl.window_ns / cols)
        spec["critical"] = {"row": row.tolist(), "s": (start // q).tolist(), "d": dur.tolist(), "events": drawn}
    size = len(json_for_script(spec))
    n = len(OVERVIEW_CHOICES)
    for lv in levels[:n]:  # the finest overview that fits
        enc = encode_level(lv, q, index)
        cost = len(json_for_script(enc))
        if size + cost <= budget:
            spec["levels"].append(enc)
            size += cost
            break
    else:
        return None
    for lv in levels[n:]:  # then finer levels while they fit
        enc = encode_level(lv, q, index)
        cost = len(json_for_script(enc))
        if size + cost > budget:
            break
        spec["levels"].append(enc)
        size += cost
    spec["complete"] = spec["levels"][-1]["cols"] == 0 or not spec["levels"][-1]["rk"]
    return spec


def path_rows(table: EventTable) -> Sequence[int] | None:
    """The rows of the rank's critical path (analyze/trace/critical_path.py), None where it has none."""
    from stepscope.analyze.trace.critical_path import critical_path

    cp = critical_path(table)
    return None if cp is None else cp.event_rows.tolist()


def timeline_html(table: EventTable, *, budget: int, critical: Sequence[int] | None = None) -> str:
    """A rank's timeline figure (canvas, legend, embedded data), or a line saying why there is none."""
    tl = timeline_rows(table)
    if not tl.rows or tl.window_ns <= 0:
        return '<p class="ss-note">No timed events in this trace: no timeline.</p>'
    spec = timeline_spec(tl, table, budget=budget, critical=critical)
    if spec is None:
        return ('<p class="ss-note">Timeline left out: even its coarsest view exceeds this rank\'s share of the '
                f'report\'s size budget ({f.nbytes(budget)}); stepscope export --format perfetto holds every '
                'event.</p>')
    legend = "".join(f'<span class="ss-tl-key"><i style="background:{c}"></i>{esc(s)}</span>'
                     for s, c in zip(spec["styles"], spec["colors"], strict=True)
                     if s in _shown(tl))
    crit = ('<label class="ss-tl-crit"><input type="checkbox" checked> critical path '
            f'({spec["critical"]["events"]:,} events marked red)</label>') if spec["critical"] else ""
    levels = ", ".join("every event" if lv["cols"] == 0 else f"{lv['cols']:,} columns" for lv in spec["levels"])
    note = (f"window {f.duration_ns(tl.window_ns)}; embedded: {levels}"
            + ("" if spec["complete"] else " — zoomed further, merged runs stay merged (stepscope export "
               "--format perfetto holds every event)")
            + (f"; {tl.hidden_threads} quieter threads not shown" if tl.hidden_threads else ""))
    ident = f"timeline-r{tl.rank}"
    return (f'<figure class="ss-timeline" id="{esc(ident)}"><figcaption>Timeline of the profiled window '
            '<span class="ss-note">wheel: zoom · drag: pan · drag on the time axis: zoom to a range · '
            'double-click: reset</span></figcaption>'
            f'<div class="ss-tl-bar"><button type="button" class="ss-tl-reset">reset zoom</button>{crit}'
            f'<span class="ss-tl-range"></span></div>'
            '<div class="ss-tl-wrap"><canvas class="ss-tl-canvas"></canvas><div class="ss-tl-tip" hidden></div></div>'
            f'<div class="ss-tl-legend">{legend}</div><p class="ss-note">{esc(note)}</p>'
            f'<script type="application/json" class="ss-tl-data">{json_for_script(spec)}</script></figure>')


def _shown(tl: TimelineRows) -> set[str]:
    return {tl.styles[int(s)] for s in np.unique(tl.events.style).tolist()}


def rank_budget(ranks: int) -> int:
    """Each rank's share of BUDGET_BYTES."""
    return BUDGET_BYTES // max(1, ranks)


CSS = (".ss-timeline{margin:8px 0 14px}.ss-timeline figcaption{font-weight:600;margin-bottom:4px}"
       ".ss-timeline figcaption .ss-note{font-weight:400;margin-left:8px}"
       ".ss-tl-bar{display:flex;gap:12px;align-items:center;font-size:12px;margin:2px 0 4px}"
       ".ss-tl-wrap{position:relative;width:100%;border:1px solid #e2e8f0}"
       ".ss-tl-canvas{display:block;width:100%;cursor:grab}"
       ".ss-tl-tip{position:absolute;pointer-events:none;background:#1a202c;color:#fff;font-size:12px;"
       "padding:4px 6px;border-radius:3px;max-width:520px;white-space:pre-wrap;z-index:5}"
       ".ss-tl-legend{display:flex;flex-wrap:wrap;gap:4px 12px;font-size:12px;margin-top:4px}"
       ".ss-tl-key i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px}")
