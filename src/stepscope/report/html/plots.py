"""The plot functions older callers use, kept with their signatures and drawn by the one chart module
(report/html/charts.py, uPlot in the browser). New code should call charts.py directly:
``line_chart`` -> ``charts.xy_chart`` (an ``Axis`` per axis), ``bar_chart`` -> ``charts.bar_chart``
(``Bars`` series), ``heatmap`` -> ``charts.heat_map``.

Units (``xunit`` / ``yunit`` / ``unit``): see charts.py. ``xlabel`` / ``ylabel`` are axis titles in words; the
chart appends the display unit it picks ("step time (ms)").
"""

from __future__ import annotations

from collections.abc import Sequence

from stepscope.report.html import charts
from stepscope.report.html.charts import Axis, Band, Bars, Mark, Series, Values

__all__ = ["Band", "Mark", "Series", "Values", "bar_chart", "heatmap", "line_chart"]


def line_chart(title: str, x: Values, series: Sequence[Series], *, xlabel: str, ylabel: str,
               xunit: str = "", yunit: str = "", stacked: bool = False, bands: Sequence[Band] = (),
               marks: Sequence[Mark] = (), ymin: float | None = None, ymax: float | None = None,
               height: int = 260, plot_id: str | None = None) -> str:
    """Lines (or stacked areas when ``stacked``) of several series over shared x values."""
    return charts.xy_chart(title, x, series, x_axis=Axis(xlabel, xunit), y_axis=Axis(ylabel, yunit, min=ymin, max=ymax),
                           stacked=stacked, shades=bands, rules=marks, height=height, chart_id=plot_id)


def bar_chart(title: str, categories: Sequence[str], series: Sequence[tuple[str, Values]], *,
              ylabel: str, yunit: str = "", stacked: bool = False, plot_id: str | None = None) -> str:
    """Horizontal bars, one row per category; several series side by side or ``stacked``."""
    return charts.bar_chart(title, categories, [Bars(n, v) for n, v in series], axis=Axis(ylabel, yunit),
                            stacked=stacked, chart_id=plot_id)


def heatmap(title: str, xlabels: Sequence[str], ylabels: Sequence[str], values: Sequence[Values], *,
            xlabel: str, ylabel: str, unit: str = "", vmin: float | None = None, vmax: float | None = None,
            plot_id: str | None = None) -> str:
    """A matrix: ``values[row][col]`` with rows named by ``ylabels``; light = low, dark = high."""
    return charts.heat_map(title, xlabels, ylabels, values, x_title=xlabel, y_title=ylabel, unit=unit, vmin=vmin,
                           vmax=vmax, chart_id=plot_id)
