"""Page layout: one self-contained HTML document (CSS and JS inlined), sections with a sticky nav."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from stepscope.report.html.charts import chart_css, chart_script
from stepscope.report.html.escape import esc


@dataclass(frozen=True, slots=True)
class Section:
    """One titled block of a page. ``body`` is trusted HTML built with this package's helpers (every user
    string in it already escaped); ``id`` is the anchor the nav links to."""

    id: str
    title: str
    body: str
    note: str | None = None
    """A short plain-text line under the title (how the numbers were measured); escaped here."""


@cache
def asset(name: str) -> str:
    """The text of a bundled asset (``stepscope.css``, ``stepscope.js``)."""
    return resources.files("stepscope.report.html").joinpath("assets", name).read_text(encoding="utf-8")


def render_page(title: str, sections: Sequence[Section], *, subtitle: str = "", badge: str | None = None,
                footer: str = "", extra_css: str = "", extra_js: str = "", badge_class: str | None = None) -> str:
    """The whole document. ``title``, ``subtitle``, ``badge`` and ``footer`` are plain text (escaped here);
    ``badge`` also picks the badge's colour class (completed / failed / incomplete / running) unless
    ``badge_class`` names another (``verdict-faster``, ``verdict-slower``, ``verdict-no-change``,
    ``verdict-inconclusive``). ``extra_css`` / ``extra_js`` are trusted page-specific assets appended after
    the base ones. The charts' script (uPlot and charts.js) and CSS are always inlined."""
    nav = "".join(f'<a href="#{esc(s.id)}">{esc(s.title)}</a>' for s in sections)
    body = "".join(
        f'<section class="ss-section" id="{esc(s.id)}"><h2>{esc(s.title)}</h2>'
        + (f'<p class="ss-note">{esc(s.note)}</p>' if s.note else "") + s.body + "</section>"
        for s in sections
    )
    badge_html = f' <span class="ss-badge {esc(badge_class or badge)}">{esc(badge)}</span>' if badge else ""
    js = chart_script() + "\n" + asset("stepscope.js") + "\n" + extra_js
    if 'class="ss-timeline"' in body:  # the timeline's script only where a page draws one
        js += "\n" + asset("timeline.js")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">"
        f"<title>{esc(title)}</title><style>{chart_css()}{asset('stepscope.css')}{extra_css}</style></head><body>"
        f'<header class="ss-head"><h1>{esc(title)}{badge_html}</h1>'
        + (f'<div class="ss-sub">{esc(subtitle)}</div>' if subtitle else "")
        + f'</header><nav class="ss-nav">{nav}</nav><main>{body}</main>'
        + (f'<footer class="ss-foot">{esc(footer)}</footer>' if footer else "")
        + f"<script>{_script_safe(js)}</script></body></html>\n"
    )


def _script_safe(js: str) -> str:
    """Bundled JS must not contain a closing script tag; fail loudly if an asset ever does."""
    if "</script" in js.lower():
        raise ValueError("inline JS contains '</script'")
    return js


def tiles(items: Sequence[tuple[str, str, str | None]]) -> str:
    """Headline numbers: (label, formatted value, hint or None) each, all plain text."""
    return '<div class="ss-tiles">' + "".join(
        f'<div class="ss-tile"><div class="l">{esc(label)}</div><div class="v">{esc(value)}</div>'
        + (f'<div class="h">{esc(hint)}</div>' if hint else "") + "</div>"
        for label, value, hint in items
    ) + "</div>"


def kv_table(pairs: Sequence[tuple[str, object]]) -> str:
    """A two-column key/value table; keys and values plain text."""
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in pairs)
    return f'<table class="ss-kv">{rows}</table>'


def notice(message: str, level: str = "info") -> str:
    """A highlighted message box; ``level`` is info, warn or bad."""
    return f'<div class="ss-notice {esc(level)}">{esc(message)}</div>'


def heading(text: str) -> str:
    return f"<h3>{esc(text)}</h3>"


def paragraph(text: str, css_class: str = "ss-note") -> str:
    return f'<p class="{esc(css_class)}">{esc(text)}</p>'


def details(summary: str, body: str, *, open_: bool = False) -> str:
    """A collapsible block: ``summary`` plain text, ``body`` trusted HTML."""
    return f"<details{' open' if open_ else ''}><summary>{esc(summary)}</summary>{body}</details>"


def grid(*blocks: str) -> str:
    """Blocks side by side on wide screens, stacked on narrow ones."""
    return '<div class="ss-grid2">' + "".join(f"<div>{b}</div>" for b in blocks) + "</div>"
