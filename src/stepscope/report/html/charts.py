"""The one chart module of every stepscope page (run report, diff, scaling and sweep pages, dashboard).

Python builds a chart *spec* (plain JSON embedded in the page); one script, ``assets/charts.js``, draws
every spec in the browser: x-y charts with the vendored uPlot (``assets/uplot.iife.min.js``, MIT, licence in
``assets/LICENSE-uPlot.txt``), horizontal bars and heat maps as plain HTML. Everything is inlined: a page
stays one offline file.

API (stable; the dashboard builds on it)

``xy_chart(title, x, series, *, x_axis, y_axis, stacked=False, shades=(), rules=(), height=260, chart_id=None)``
    Lines over x. ``series``: ``Series(name, y, color=, dash=, area=, x=, smooth=, spread=, points=)``.
    A series with its own ``x`` is joined with the others on the union of x values and drawn continuous
    (only a ``None`` it holds itself is a gap). ``smooth``: ``None`` decides from the data (a rolling median
    when the values are spiky), ``0`` never, ``n > 1`` a centred rolling median of ``n`` points drawn as the
    line with the raw values faint behind it. ``spread``: ± values shaded around the line (std).
    ``stacked``: stacked areas.
    ``shades``: ``Band(x0, x1, label)`` shaded x intervals; ``rules``: ``Mark(x, label)`` dashed verticals.
``Axis(title, unit="", log=0, min=None, max=None, ticks_at_data=False, labels=None)``
    ``title`` in words (no unit: the chart adds the display unit it picks, "step time (ms)");
    ``log``: 0 linear, 10 or 2 a log axis of that base; ``ticks_at_data``: x ticks at the data's x values;
    ``labels``: x is 0, 1, 2, ... and each integer has a name (commits in order): ticks say the names.
``bar_chart(title, categories, series, *, axis, stacked=False, chart_id=None, name_width=NAME_WIDTH)``
    Horizontal bars, one row per category: ``series`` is ``[Bars(name, values, color=)]``; category names
    are shortened (``shorten_names``: unique, middle ellipsis) with the full name and values on hover.
``heat_map(title, columns, rows, values, *, x_title, y_title, unit="", vmin=None, vmax=None, chart_id=None)``
    ``values[row][col]``; light = low, dark = high, each cell's value on hover.
``shorten_names(names, width)``   unique short forms of long names (kernels, operators).
``words(name)``                   a legend label in words for a raw system-metric column.
``chart_script()`` / ``chart_css()``
    the JS (uPlot + charts.js) and CSS to inline in a page that is not built with ``render_page``; call
    ``window.stepscope.drawAll()`` after inserting figures.

Units (``Axis.unit``): ``ns`` ``ms`` ``s`` (durations and times: ticks in ns/µs/ms/s/min/h, whichever fits),
``bytes`` ``bytes/s`` (B, KiB, MiB, GiB), ``%`` (0–100), ``share`` (0–1 shown as %), ``""`` (a plain
number, k/M/G ticks), ``date`` (x only: seconds since the epoch, ticks at whole minutes / hours / days /
weeks / months in UTC, "2024-03-01" or "2024-03-01 12:00") or any other unit word (``samples/s``, ``W``),
shown in the axis title.

The y range is robust to noise: every point drawn in view (raw values and rolling medians alike) enters
Tukey's far-out fences (Q1 − 3 IQR, Q3 + 3 IQR, the IQR at least 5% of the median; on log axes in log space);
points beyond them are clipped, marked with a triangle at the edge and counted under the legend, whose "show
all" restores the full extent. A linear axis starts at 0 (or below, for negative values).

In the browser every drawn chart offers: round ticks in the chosen unit, axis titles in their own gutter
(sized from the measured tick labels), a legend that hides / shows series, a tooltip with every series'
value, drag-to-zoom on x with double-click or "reset zoom" to restore, gaps (None / NaN) drawn as gaps.
Series longer than ``MAX_POINTS`` are binned (mean per bin; median for smoothed series) before embedding,
so a 100k-step run's page stays small and opens fast.
"""

from __future__ import annotations

import hashlib
import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope.report.html.escape import esc, json_for_script, json_script

Values = Sequence[float | None] | npt.NDArray[Any]
"""A series' values: a sequence or a NumPy array (None / NaN = gap)."""

MAX_POINTS = 4000
"""Longer series are binned to this many points before they are embedded."""
NAME_WIDTH = 60
"""Characters a bar's category name keeps (the full name is on hover)."""
SPIKE_RATIO = 4.0
"""Auto smoothing: a series is spiky when its 99th percentile exceeds this many times its median."""


@dataclass(frozen=True, slots=True)
class Series:
    """One named series of an x-y chart. ``name`` is the legend label, in words."""

    name: str
    y: Values
    color: str | None = None
    dash: bool = False
    area: bool = False
    """Fill under the line (non-stacked charts)."""
    x: Values | None = None
    """This series' own x values (else the chart's)."""
    smooth: int | None = None
    """Rolling-median window: None = decide from the data, 0 = never, n > 1 = n points."""
    spread: Values | None = None
    """± values shaded around the line (a standard deviation)."""
    points: bool = False
    """Mark each point (few points, such as world sizes)."""


@dataclass(frozen=True, slots=True)
class Band:
    """A shaded x interval (warm-up steps, the profiled window) with an optional label."""

    x0: float
    x1: float
    label: str = ""
    color: str | None = None


@dataclass(frozen=True, slots=True)
class Mark:
    """A dashed vertical line at ``x`` (an epoch boundary, a step) with an optional label."""

    x: float
    label: str = ""
    color: str | None = None


@dataclass(frozen=True, slots=True)
class Axis:
    """An axis: ``title`` in words, ``unit`` (see the module docstring), ``log`` base (0 = linear)."""

    title: str
    unit: str = ""
    log: int = 0
    min: float | None = None
    max: float | None = None
    ticks_at_data: bool = False
    labels: Sequence[str] | None = None
    """x only: a name for each integer x 0, 1, 2, ... (commits in order); ticks at those integers, each
    labelled once, spaced so labels never touch."""


@dataclass(frozen=True, slots=True)
class Bars:
    """One series of a bar chart: a value per category."""

    name: str
    values: Values
    color: str | None = None


def _floats(v: Values) -> npt.NDArray[np.float64]:
    return np.array([np.nan if a is None else a for a in v], dtype=np.float64) if not isinstance(v, np.ndarray) \
        else v.astype(np.float64)


def _json_list(a: npt.NDArray[np.float64]) -> list[float | None]:
    # Python floats from tolist(): math.isfinite is ten times np.isfinite on a scalar
    return [None if not math.isfinite(v) else (int(v) if v.is_integer() and abs(v) < 2**53 else v)
            for v in a.astype(np.float64, copy=False).tolist()]


def auto_window(y: npt.NDArray[np.float64]) -> int:
    """The rolling-median window for spiky values (0 when the values are not spiky or too few)."""
    fin = np.abs(y[np.isfinite(y)])
    if len(fin) < 40:
        return 0
    med = float(np.median(fin))
    if med <= 0 or float(np.percentile(fin, 99)) <= SPIKE_RATIO * med:
        return 0
    w = max(5, min(51, len(fin) // 25))
    return w | 1


def _bin(x: npt.NDArray[np.float64], ys: list[npt.NDArray[np.float64]], medians: list[bool],
         n: int) -> tuple[npt.NDArray[np.float64], list[npt.NDArray[np.float64]], int]:
    """x and every y reduced to at most ``n`` points (consecutive bins of equal count): mean x, mean y (median
    where asked), NaN when a bin holds no value. Returns the bin size too."""
    size = int(np.ceil(len(x) / n))
    if size <= 1:
        return x, ys, 1
    pad = (-len(x)) % size

    def fold(a: npt.NDArray[np.float64], median: bool) -> npt.NDArray[np.float64]:
        m = np.concatenate([a, np.full(pad, np.nan)]).reshape(-1, size)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN bin is NaN: a gap
            return np.asarray(np.nanmedian(m, axis=1) if median else np.nanmean(m, axis=1), dtype=np.float64)

    return fold(x, False), [fold(y, med) for y, med in zip(ys, medians, strict=True)], size


def _chart_id(spec: dict[str, Any], title: str) -> str:
    return "chart-" + hashlib.sha1((title + json_for_script(spec)).encode()).hexdigest()[:10]


def figure(spec: dict[str, Any], title: str, chart_id: str | None) -> str:
    """The ``<figure class="ss-plot">`` element holding ``spec``; charts.js draws it on load."""
    ident = chart_id or _chart_id(spec, title)
    return (f'<figure class="ss-plot" data-kind="{esc(spec["kind"])}" id="{esc(ident)}"><figcaption>{esc(title)}'
            f'</figcaption>{json_script(spec, css_class="ss-spec")}</figure>')


def _axis(a: Axis) -> dict[str, Any]:
    return {"title": a.title, "unit": a.unit, "log": a.log, "min": a.min, "max": a.max,
            "ticksAtData": a.ticks_at_data, "labels": list(a.labels) if a.labels is not None else None}


def xy_chart(title: str, x: Values, series: Sequence[Series], *, x_axis: Axis, y_axis: Axis, stacked: bool = False,
             shades: Sequence[Band] = (), rules: Sequence[Mark] = (), height: int = 260,
             chart_id: str | None = None) -> str:
    """Lines (or stacked areas) over x; see the module docstring."""
    xs = _floats(x)
    ys = [_floats(s.y) for s in series]
    windows = [0 if stacked else (auto_window(y) if s.smooth is None else s.smooth)
               for s, y in zip(series, ys, strict=True)]
    own = any(s.x is not None for s in series)
    binned = 1
    if not own and len(xs) > MAX_POINTS:
        spreads = [_floats(s.spread) if s.spread is not None else None for s in series]
        xs, ys, binned = _bin(xs, ys, [w > 1 for w in windows], MAX_POINTS)
        sp_b = [_bin(_floats(x), [sp], [False], MAX_POINTS)[1][0] if sp is not None else None for sp in spreads]
        windows = [max(3, (w // binned) | 1) if w > 1 else 0 for w in windows]
    else:
        sp_b = [_floats(s.spread) if s.spread is not None else None for s in series]
    out = []
    for s, y, w, sp in zip(series, ys, windows, sp_b, strict=True):
        d: dict[str, Any] = {"label": words(s.name), "y": _json_list(y), "color": s.color, "dash": s.dash,
                             "area": s.area, "smooth": w, "points": s.points}
        if s.x is not None:
            d["x"] = _json_list(_floats(s.x))
        if sp is not None:
            d["spread"] = _json_list(sp)
        out.append(d)
    spec: dict[str, Any] = {
        "kind": "xy", "x": _json_list(xs), "xAxis": _axis(x_axis), "yAxis": _axis(y_axis), "stacked": stacked,
        "height": height, "series": out, "binned": binned,
        "shades": [{"x0": b.x0, "x1": b.x1, "label": b.label, "color": b.color} for b in shades],
        "rules": [{"x": m.x, "label": m.label, "color": m.color} for m in rules],
    }
    return figure(spec, title, chart_id)


def bar_chart(title: str, categories: Sequence[str], series: Sequence[Bars], *, axis: Axis, stacked: bool = False,
              chart_id: str | None = None, name_width: int = NAME_WIDTH) -> str:
    """Horizontal bars, one row per category (shortened name, full name and values on hover)."""
    cats = [str(c) for c in categories]
    spec = {"kind": "bars", "categories": cats, "labels": shorten_names(cats, name_width), "axis": _axis(axis),
            "stacked": stacked,
            "series": [{"label": words(b.name), "values": _json_list(_floats(b.values)), "color": b.color}
                       for b in series]}
    return figure(spec, title, chart_id)


def heat_map(title: str, columns: Sequence[str], rows: Sequence[str], values: Sequence[Values], *, x_title: str,
             y_title: str, unit: str = "", vmin: float | None = None, vmax: float | None = None,
             chart_id: str | None = None) -> str:
    """A matrix ``values[row][col]`` with named rows and columns; light = low, dark = high."""
    spec = {"kind": "heatmap", "xlabels": [str(c) for c in columns], "ylabels": [str(r) for r in rows],
            "values": [_json_list(_floats(r)) for r in values], "xlabel": x_title, "ylabel": y_title, "unit": unit,
            "vmin": vmin, "vmax": vmax}
    return figure(spec, title, chart_id)


_WORDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^cpu_process_pct$"), "CPU, this process"),
    (re.compile(r"^cpu_system_pct$"), "CPU, whole machine"),
    (re.compile(r"^rss_bytes$"), "resident memory, this process"),
    (re.compile(r"^mem_system_used_bytes$"), "memory used, whole machine"),
    (re.compile(r"^mem_system_total_bytes$"), "memory installed, whole machine"),
    (re.compile(r"^threads$"), "threads, this process"),
    (re.compile(r"^gpu(\d+)_util_pct$"), "GPU {0} utilisation"),
    (re.compile(r"^gpu(\d+)_mem_used_bytes$"), "GPU {0} memory used"),
    (re.compile(r"^gpu(\d+)_power_w$"), "GPU {0} power"),
    (re.compile(r"^gpu(\d+)_temp_c$"), "GPU {0} temperature"),
    (re.compile(r"^disk_read_bps$"), "disk read"),
    (re.compile(r"^disk_write_bps$"), "disk write"),
    (re.compile(r"^net_recv_bps$"), "network received"),
    (re.compile(r"^net_sent_bps$"), "network sent"),
)


def words(name: str) -> str:
    """A legend label in words for a raw system-metric column name (``cpu_process_pct`` -> "CPU, this
    process"); any other name unchanged. The unit is on the axis title."""
    for pat, label in _WORDS:
        m = pat.match(name)
        if m:
            return label.format(*m.groups())
    return name


@cache
def _asset(name: str) -> str:
    return resources.files("stepscope.report.html").joinpath("assets", name).read_text(encoding="utf-8")


UPLOT_BANNER = "/*! https://github.com/leeoniya/uPlot (v1.6.32) */"
"""The vendored file's first line; inlined as a banner without a URL (a page names no network address)."""


def chart_script() -> str:
    """The JS that draws charts: the vendored uPlot, then charts.js."""
    uplot = _asset("uplot.iife.min.js")
    if not uplot.startswith(UPLOT_BANNER):
        raise ValueError("assets/uplot.iife.min.js is not the vendored uPlot 1.6.32")
    banner = "/* uPlot 1.6.32 by Leon Sorokin, MIT licence (assets/LICENSE-uPlot.txt) */"
    return banner + uplot[len(UPLOT_BANNER):] + "\n" + _asset("charts.js")


def chart_css() -> str:
    """The charts' CSS: uPlot's stylesheet, then charts.css (axis labels, legend, bars, heat maps, tooltip)."""
    return _asset("uplot.min.css") + "\n" + _asset("charts.css")


def shorten_names(names: Sequence[str], width: int = NAME_WIDTH) -> list[str]:
    """Short forms of ``names`` (at most ``width`` characters, all different): the pages' one shortening
    rule, :func:`stepscope.report.html.names.short_names`."""
    from stepscope.report.html.names import short_names

    return short_names(names, max(12, width))
