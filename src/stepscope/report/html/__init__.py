"""The HTML base shared by every stepscope page (run report, diff page, dashboard, scaling page, flame
graph): one self-contained HTML string per page, CSS and JS inlined, no network, every user string
escaped, data embedded as safe JSON, charts drawn by the one chart module (charts.py; in the browser
assets/charts.js with the vendored uPlot, MIT, assets/LICENSE-uPlot.txt).

API (import from ``stepscope.report.html``):

Escaping and data
    ``esc(value) -> str``                       HTML-escape any value (None -> "").
    ``json_for_script(data) -> str``            JSON safe inside <script>: sorted keys, NaN -> null,
                                                ``< > &`` U+2028 U+2029 as \\uXXXX escapes.
    ``json_script(data, element_id=, css_class=) -> str``
                                                a ``<script type="application/json">`` element; read
                                                it in JS with ``JSON.parse(el.textContent)``.
Page layout
    ``Section(id, title, body, note=None)``     a titled block; ``body`` is trusted HTML built from the
                                                helpers here; ``note`` a plain-text line under the title.
    ``render_page(title, sections, subtitle=, badge=, footer=, extra_css=, extra_js=) -> str``
                                                the whole document (header, sticky nav of sections,
                                                inlined assets, a strict CSP that blocks any network
                                                load). ``badge``: completed/failed/incomplete/running.
    ``tiles([(label, value, hint|None)])``      headline-number cards.
    ``kv_table([(key, value)])``, ``notice(msg, level="info"|"warn"|"bad")``, ``heading(text)``,
    ``paragraph(text)``, ``details(summary, body_html, open_=False)``, ``grid(*blocks_html)``.
Charts: ``stepscope.report.html.charts`` (``xy_chart``, ``bar_chart``, ``heat_map``, ``Axis``, ``Series``,
``Bars``, ``Band``, ``Mark``; see its docstring). Each returns a <figure class="ss-plot"> with its spec as JSON,
drawn on load by charts.js: round ticks in human units, axis titles with the unit, legend in words, tooltips,
drag-to-zoom with reset, gaps as gaps, a rolling median under spiky per-step series.
Tables
    ``Col(key, label, unit="", hint=None)``      unit: ns, bytes, bytes/s, share, %, count, "" or text.
    ``table(columns, rows, table_id=, filter_box=None, tree=False, caption=None) -> str``
                                                click a header to sort (numbers by raw value); a filter
                                                box above tables of more than 15 rows; ``tree=True``:
                                                rows carry ``_id`` ('/'-joined path) and ``_depth``,
                                                children collapse under a ▾/▸ toggle and stay under
                                                their parent when sorted.

Page-specific JS can call ``window.stepscope.drawAll()`` after inserting new ``figure.ss-plot``
elements, ``window.stepscope.initTables()`` after inserting tables, and ``window.stepscope.fmt(v, unit)``;
``window.stepscope.charts[figure id]`` is each drawn x-y chart's uPlot instance.
A page that needs its own script passes it as ``extra_js`` (it must not contain ``</script``).
"""

from typing import TYPE_CHECKING

from stepscope.analyze._entrypoints import lazy_exports

if TYPE_CHECKING:
    from stepscope.report.html.escape import esc, json_for_script, json_script
    from stepscope.report.html.page import (
        Section,
        details,
        grid,
        heading,
        kv_table,
        notice,
        paragraph,
        render_page,
        tiles,
    )
    from stepscope.report.html.tables import Col, table

_ENTRY_POINTS = {
    "esc": "escape", "json_for_script": "escape", "json_script": "escape",
    "Section": "page", "details": "page", "grid": "page", "heading": "page", "kv_table": "page", "notice": "page",
    "paragraph": "page", "render_page": "page", "tiles": "page", "Col": "tables", "table": "tables",
}
"""Each name is loaded on first use: a terminal view that only needs ``names`` (short kernel names) does not load
the page, chart and table renderers (``stepscope trace analyze`` start-up)."""

__all__ = [
    "Col", "Section", "details", "esc", "grid", "heading", "json_for_script", "json_script", "kv_table", "notice",
    "paragraph", "render_page", "table", "tiles",
]

__getattr__ = lazy_exports(__name__, _ENTRY_POINTS)
