"""Sortable, filterable tables with optional collapsible tree rows.

Cells are formatted here (report/format.py) and carry their raw value in ``data-v`` so a click on a header
sorts numbers as numbers.

Whole at any width: number cells, and text cells that hold a number with its unit, a run id or a
status / verdict word, never wrap (``ss-nowrap``); other text wraps between words, and a long name also at
its separators (after ``_ : > , . / ( -``, before ``<``: a ``<wbr>`` each), never inside a word. Headers wrap
between words. A table wider than its card scrolls sideways inside it with its first column held in place
(stepscope.css).

Tree tables: each row dict has ``_id`` (a '/'-joined path) and ``_depth``; the first column is indented and
gets a ▾/▸ toggle when the row has children; sorting keeps children under their parent.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stepscope.report import format as f
from stepscope.report.html.escape import esc

FORMATS: dict[str, Callable[[Any], str]] = {
    "ns": f.duration_ns,
    "bytes": f.nbytes,
    "bytes/s": lambda v: f.DASH if v is None else f.nbytes(v) + "/s",
    "share": f.share,
    "%": lambda v: f.DASH if v is None or not math.isfinite(v) else f"{v:.1f}%",
    "GB/s": lambda v: f.DASH if v is None or not math.isfinite(v) else f"{v:,.1f} GB/s",
    "count": lambda v: f.DASH if v is None else f"{int(v):,}",
    "": f.number,
}


@dataclass(frozen=True, slots=True)
class Col:
    """A column: ``key`` in the row dicts, header ``label``, and ``unit``: one of FORMATS' keys (number
    columns, right-aligned, sorted numerically) or ``text`` (left-aligned, sorted as text)."""

    key: str
    label: str
    unit: str = ""
    hint: str | None = None
    """Header tooltip (plain text)."""
    title_key: str | None = None
    """Text columns: the row's value under this key becomes the cell's hover text (a full name behind a
    shortened one)."""


WHOLE = re.compile(r"[-+−±~≈<>]?\s*\d[\d,.]*(?:e[-+]?\d+)?(?:\s?[%×x]|\s[A-Za-zµ]+(?:/[A-Za-z]+)?)?"
                   r"(?:\s*[→/–-]\s*[-+−]?\d[\d,.]*(?:\s?[%×]|\s[A-Za-zµ]+(?:/[A-Za-z]+)?)?)?"
                   r"|[0-9a-z]{6,12}(?:\+dirty)?"
                   r"|completed|failed|running|incomplete|faster|slower|no change|inconclusive|cannot tell"
                   r"|regression|improvement|no significant change|not significant|—")
"""Text kept on one line: a number with its unit (or two, "27 / 27", "1.2 → 3.4 ms"), an id, a status word."""
_SEPARATOR = re.compile(r"(?<=[_:>,./(\-])(?=[^\s_:<>,./(\-])|(?<=[^\s_:<>,./(\-])(?=<)")
LONG_TOKEN = 16
"""Text longer than this may wrap after a separator inside a name."""


def breakable(text: str) -> str:
    """``text`` escaped, with a ``<wbr>`` at each separator of a long name so that a narrow column wraps it
    there, never inside a word ("vectorized_<wbr>elementwise_<wbr>kernel<wbr><4>")."""
    if len(text) <= LONG_TOKEN:
        return esc(text)
    return "<wbr>".join(esc(p) for p in _SEPARATOR.split(text))


def _text_cell(text: str, tip: str) -> str:
    if WHOLE.fullmatch(text.strip()):
        return f'<td class="text ss-nowrap"{tip}>{esc(text)}</td>'
    return f'<td class="text"{tip}>{breakable(text)}</td>'


def _cell(col: Col, value: Any, title: Any = None) -> str:
    if col.unit == "text":
        tip = f' title="{esc(title)}"' if title is not None and title != value else ""
        return _text_cell(str(value) if value is not None else f.DASH, tip)
    num = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    shown = FORMATS.get(col.unit, f.number)(num) if num is not None else f.DASH
    sort = "" if num is None or not math.isfinite(num) else repr(float(num))
    return f'<td data-v="{sort}">{esc(shown)}</td>'


def table(columns: Sequence[Col], rows: Sequence[Mapping[str, Any]], *, table_id: str | None = None,
          filter_box: bool | None = None, tree: bool = False, caption: str | None = None) -> str:
    """The table's HTML. ``filter_box`` (default: more than 15 rows) adds a text filter above it. Without
    ``table_id`` the id is a hash of the content, so output stays deterministic."""
    heads = "".join(
        f'<th class="{"text" if c.unit == "text" else "num"}"' + (f' title="{esc(c.hint)}"' if c.hint else "")
        + f">{esc(c.label)}</th>" for c in columns
    )
    ids = {str(r.get("_id")) for r in rows} if tree else set()
    body = []
    for r in rows:
        cells = [_cell(c, r.get(c.key), r.get(c.title_key) if c.title_key else None) for c in columns]
        attrs = ""
        if tree:
            rid = str(r.get("_id", ""))
            parent = rid.rsplit("/", 1)[0] if "/" in rid else ""
            has_kids = any(i.startswith(rid + "/") for i in ids)
            toggle = ('<button class="ss-toggle" type="button">▾</button>' if has_kids
                      else '<span class="ss-toggle"></span>')
            pad = 14 * int(r.get("_depth", 0))
            name = r.get(columns[0].key)
            first = breakable("" if name is None else str(name))
            tkey = columns[0].title_key
            tip = f' title="{esc(r.get(tkey))}"' if tkey and r.get(tkey) is not None else ""
            cells[0] = f'<td class="text"{tip} style="padding-left:{pad + 6}px">{toggle}{first}</td>'
            attrs = f' data-id="{esc(rid)}" data-parent="{esc(parent)}"'
        body.append(f"<tr{attrs}>{''.join(cells)}</tr>")
    tid = table_id or "ss-t" + hashlib.sha1((heads + "".join(body)).encode()).hexdigest()[:10]
    show_filter = len(rows) > 15 if filter_box is None else filter_box
    top = (f'<input class="ss-filter" type="search" placeholder="filter rows" data-table="{esc(tid)}">'
           if show_filter else "")
    cap = f'<p class="ss-note">{esc(caption)}</p>' if caption else ""
    tree_attr = " data-tree" if tree else ""
    return (f'{top}<div class="ss-tablewrap"><table class="ss-table" id="{esc(tid)}"{tree_attr}>'
            f"<thead><tr>{heads}</tr></thead><tbody>{''.join(body)}</tbody></table></div>{cap}")
