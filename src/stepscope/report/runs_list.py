"""The `stepscope ls` table, fitted to the terminal: run ids and status words are never cut.

At a narrow width the run name is shortened first (ellipsis, down to ``NAME_MIN`` characters), then whole
columns are left out, least useful first (``DROP_ORDER``), and a note says which; ids, status, steps and
step time always stay. Every other cell is one line (no wrapping), so numbers are never split."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from stepscope.report.terminal import STATUS_STYLE

COLUMNS = ("id", "name", "status", "started", "duration", "ranks", "steps", "step p50", "samples/s", "commit")
LEFT = ("id", "name", "status", "started", "commit")
DROP_ORDER = ("commit", "ranks", "started", "samples/s", "duration")
"""Columns left out, in this order, when the table does not fit."""
NAME_MIN = 8


@dataclass(frozen=True, slots=True)
class RunLine:
    """One run's cells as text (already formatted)."""

    id: str
    name: str
    status: str
    started: str
    duration: str
    ranks: str
    steps: str
    step_p50: str
    samples_per_s: str
    commit: str

    def cell(self, column: str) -> str:
        return str(getattr(self, {"step p50": "step_p50", "samples/s": "samples_per_s"}.get(column, column)))


def fit_columns(lines: Sequence[RunLine], width: int) -> tuple[list[str], int]:
    """The columns shown at ``width`` and the name column's width (see the module docstring)."""
    natural = {c: max([cell_len(c), *(cell_len(ln.cell(c)) for ln in lines)]) for c in COLUMNS}
    shown = list(COLUMNS)

    def total(name_w: int) -> int:
        return sum(name_w if c == "name" else natural[c] for c in shown) + 3 * (len(shown) - 1)

    for drop in (None, *DROP_ORDER):
        if drop is not None:
            shown.remove(drop)
        spare = width - total(0)
        if spare >= min(natural["name"], NAME_MIN):
            return shown, min(natural["name"], spare)
    return shown, max(1, min(natural["name"], width - total(0)))


def runs_view(lines: Sequence[RunLine], *, width: int) -> RenderableType:
    """The runs table for a terminal ``width`` columns wide."""
    shown, name_w = fit_columns(lines, width)
    t = Table(show_edge=False, pad_edge=False)
    for c in shown:
        t.add_column(c, justify="left" if c in LEFT else "right", no_wrap=True,
                     overflow="ellipsis",
                     width=name_w if c == "name" else None, min_width=None if c == "name" else cell_len(c))
    for ln in lines:
        t.add_row(*(Text(ln.cell(c), style=STATUS_STYLE.get(ln.status, "")) if c == "status" else Text(ln.cell(c))
                    for c in shown))
    hidden = [c for c in COLUMNS if c not in shown]
    if not hidden:
        return t
    return Group(t, Text(f"(not shown at {width} columns: {', '.join(hidden)} — widen the terminal or use --json)",
                         style="dim"))
