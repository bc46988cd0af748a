"""Plot primitives: each returns a ``<figure class="ss-plot">`` holding its spec as embedded JSON; the
inlined renderer (assets/stepscope.js) draws it as SVG with axes, units, legend and hover tooltips.

Units (``xunit`` / ``yunit`` / ``unit``) pick the tick and tooltip format: ``ns``, ``s``, ``ms``, ``bytes``,
``bytes/s``, ``%`` (values 0-100), ``share`` (values 0-1 shown as %), ``""`` (plain number), or any other
string, appended to the number (``samples/s``, ``W``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy.typing as npt

from stepscope.report.html.escape import esc, json_script

Values = Sequence[float | None] | npt.NDArray[Any]
"""A series' values: a sequence or a NumPy array (None / NaN = gap)."""


@dataclass(frozen=True, slots=True)
class Series:
    """One named series: ``y`` values (None / NaN = gap), optional CSS colour, dashed line."""

    name: str
    y: Values
    color: str | None = None
    dash: bool = False
    area: bool = False
    """Fill under the line (non-stacked charts)."""


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


def _figure(spec: dict[str, Any], title: str, plot_id: str | None) -> str:
    ident = f' id="{esc(plot_id)}"' if plot_id else ""
    return (f'<figure class="ss-plot" data-kind="{esc(spec["kind"])}"{ident}><figcaption>{esc(title)}</figcaption>'
            f'{json_script(spec, css_class="ss-spec")}</figure>')


def line_chart(title: str, x: Values, series: Sequence[Series], *, xlabel: str, ylabel: str,
               xunit: str = "", yunit: str = "", stacked: bool = False, bands: Sequence[Band] = (),
               marks: Sequence[Mark] = (), ymin: float | None = None, ymax: float | None = None,
               height: int = 260, plot_id: str | None = None) -> str:
    """Lines (or stacked areas when ``stacked``) of several series over shared x values."""
    spec = {
        "kind": "line", "x": list(x), "xlabel": xlabel, "ylabel": ylabel, "xunit": xunit, "yunit": yunit,
        "stacked": stacked, "height": height, "ymin": ymin, "ymax": ymax,
        "series": [{"name": s.name, "y": list(s.y), "color": s.color, "dash": s.dash, "area": s.area} for s in series],
        "bands": [{"x0": b.x0, "x1": b.x1, "label": b.label, "color": b.color} for b in bands],
        "marks": [{"x": m.x, "label": m.label, "color": m.color} for m in marks],
    }
    return _figure(spec, title, plot_id)


def bar_chart(title: str, categories: Sequence[str], series: Sequence[tuple[str, Values]], *,
              ylabel: str, yunit: str = "", stacked: bool = False, plot_id: str | None = None) -> str:
    """Horizontal bars, one row per category; several series side by side or ``stacked``."""
    spec = {"kind": "bar", "categories": list(categories), "ylabel": ylabel, "yunit": yunit, "stacked": stacked,
            "series": [{"name": n, "values": list(v)} for n, v in series]}
    return _figure(spec, title, plot_id)


def heatmap(title: str, xlabels: Sequence[str], ylabels: Sequence[str], values: Sequence[Values], *,
            xlabel: str, ylabel: str, unit: str = "", vmin: float | None = None, vmax: float | None = None,
            plot_id: str | None = None) -> str:
    """A matrix: ``values[row][col]`` with rows named by ``ylabels``; light = low, dark = high."""
    spec = {"kind": "heatmap", "xlabels": list(xlabels), "ylabels": list(ylabels),
            "values": [list(r) for r in values], "xlabel": xlabel, "ylabel": ylabel, "unit": unit,
            "vmin": vmin, "vmax": vmax}
    return _figure(spec, title, plot_id)
