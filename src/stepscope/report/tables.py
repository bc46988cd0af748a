"""The one table of every terminal report: numbers and units are never cut nor wrapped.

``FitTable`` takes rich's Table calls (``add_column``, ``add_row``) and decides, at the width it is rendered at:

- a numeric column (right-justified, or ``numeric=True``) is as wide as its widest cell and never wraps;
- a text column (names) shortens first: each name loses its middle to an ellipsis, the shortened names of a
  column stay unique; with ``wide`` (``--wide``) names are shown whole, folded over lines where needed;
- a prose column (a verdict with its evidence, a command) wraps between words, never inside one: it is at
  least as wide as its longest word;
- where even the shortest names leave no room, optional columns (``drop`` > 0, highest first) are left out
  with a line saying which, and a table still too wide is printed as one block per row ("header: value"),
  so no number is ever cut.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rich import box as rich_box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, JustifyMethod, RenderableType
from rich.table import Table
from rich.text import Text

ELLIPSIS = "…"
NAME_MIN = 10
"""Cells a name column keeps at least when shortened."""

WIDE = False
"""Names whole (``--wide``): set by the CLI for the whole process."""


def set_wide(wide: bool) -> None:
    global WIDE
    WIDE = wide


class Words(Text):
    """A text cell in a numeric column (a device name among figures): it does not set the column's width and
    shortens like a name where it does not fit."""


@dataclass(slots=True)
class FitColumn:
    header: str
    numeric: bool
    drop: int = 0
    style: str | None = None
    prose: bool = False
    justify: JustifyMethod = "left"


class FitTable:
    """A rich-Table-like builder rendered by the rule of this module (see the module docstring). Takes rich
    Table's keyword arguments; those about layout (justification, padding, expansion) are the rule's."""

    def __init__(self, title: str | None = None, *, title_style: str | None = "bold", show_edge: bool = False,
                 box: rich_box.Box | None = rich_box.HEAVY_HEAD, caption: str | None = None, show_header: bool = True,
                 wide: bool | None = None, **_layout: Any) -> None:
        self.title, self.title_style, self.show_edge, self.box = title, title_style, show_edge, box
        self.caption, self.show_header = caption, show_header
        self.wide = wide
        """None: the process-wide ``--wide`` setting."""
        self.columns: list[FitColumn] = []
        self.rows: list[list[Text]] = []

    def add_column(self, header: str = "", *, justify: JustifyMethod | None = None, numeric: bool | None = None,
                   drop: int = 0, style: str | None = None, prose: bool = False, **_ignored: Any) -> None:
        """A column: numeric where ``numeric`` says so, else where it is right-justified (numbers are) and not
        ``prose`` (wrapped between words)."""
        num = (justify == "right" and not prose) if numeric is None else numeric
        side: JustifyMethod = justify or ("right" if num else "left")  # a number column may keep its ids left-justified
        self.columns.append(FitColumn(header, num, drop, style, prose and not num, side))

    def add_row(self, *cells: RenderableType | None) -> None:
        self.rows.append([_text(c) for c in cells])

    @property
    def row_count(self) -> int:
        return len(self.rows)

    # -- rendering ---------------------------------------------------------------------------------------------
    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[RenderableType]:
        width = options.max_width
        wide = WIDE if self.wide is None else self.wide
        keep = list(range(len(self.columns)))
        for level in [0, *sorted({c.drop for c in self.columns if c.drop}, reverse=True)]:
            if level:
                keep = [i for i in keep if self.columns[i].drop != level]
            widths = self._fit(keep, width, wide)
            if widths is not None:
                yield self._table(keep, widths, wide)
                hidden = [c.header for i, c in enumerate(self.columns) if i not in keep]
                if hidden:
                    yield Text(f"(not shown at {width} columns: {', '.join(hidden)} — widen the terminal, or "
                               "--json)", style="dim")
                return
        yield from self._blocks()

    def _natural(self, i: int) -> int:
        numeric = self.columns[i].numeric
        return max([cell_len(self.columns[i].header), *(r[i].cell_len for r in self.rows if i < len(r)
                                                        and not (numeric and isinstance(r[i], Words)))], default=0)

    def _longest_word(self, i: int) -> int:
        words = [w for r in self.rows if i < len(r) for w in r[i].plain.split()] + self.columns[i].header.split()
        return max((cell_len(w) for w in words), default=0)

    def _overhead(self, n: int) -> int:
        sep = 3 if self.box is not None else 2  # " │ " between columns (padding 1 each side), or two spaces
        return sep * max(0, n - 1) + (4 if self.show_edge and self.box is not None else 0)

    def _fit(self, keep: list[int], width: int, wide: bool) -> dict[int, int] | None:
        """Column widths that fit ``width`` with every number whole, or None."""
        nums = {i: self._natural(i) for i in keep if self.columns[i].numeric}
        texts = {i: self._natural(i) for i in keep if not self.columns[i].numeric}
        budget = width - self._overhead(len(keep)) - sum(nums.values())
        floor = {i: self._longest_word(i) if self.columns[i].prose else
                 min(n, max(NAME_MIN, cell_len(self.columns[i].header))) for i, n in texts.items()}
        if budget < sum(floor.values()):
            return None
        out = dict(nums)
        if sum(texts.values()) <= budget:
            return out | texts
        # shrink the widest names first, never below their floor
        got = dict(texts)
        while sum(got.values()) > budget:
            i = max(got, key=lambda k: got[k] - floor[k])
            if got[i] <= floor[i]:
                return None
            got[i] -= 1
        return out | got

    def _table(self, keep: list[int], widths: dict[int, int], wide: bool) -> Table:
        t = Table(title=self.title, title_justify="left", title_style=self.title_style or "", show_edge=self.show_edge,
                  pad_edge=self.show_edge, box=self.box, show_header=self.show_header, caption=self.caption,
                  caption_justify="left", expand=False)
        for i in keep:
            c = self.columns[i]
            if c.numeric:
                t.add_column(c.header, justify=c.justify, no_wrap=True, overflow="fold", min_width=widths[i],
                             max_width=widths[i], style=c.style)
            elif c.prose:
                t.add_column(c.header, justify="left", no_wrap=False, overflow="fold", min_width=widths[i],
                             max_width=widths[i], style=c.style)
            else:
                t.add_column(c.header, justify="left", no_wrap=not wide, overflow="fold" if wide else "ellipsis",
                             min_width=widths[i] if not wide else None, max_width=widths[i], style=c.style)
        shortened = {i: unique_short([r[i].plain for r in self.rows], widths[i]) for i in keep
                     if not self.columns[i].numeric and not self.columns[i].prose and not wide}
        for n, r in enumerate(self.rows):
            cells = []
            for i in keep:
                cell = r[i] if i < len(r) else Text("")
                if i in shortened and shortened[i][n] != cell.plain:
                    cell = Text(shortened[i][n], style=cell.style)
                elif isinstance(cell, Words) and cell.cell_len > widths[i]:
                    cell = Text(shorten(cell.plain, widths[i]), style=cell.style)
                cells.append(cell)
            t.add_row(*cells)
        return t

    def _blocks(self) -> Iterator[RenderableType]:
        """Too narrow for any table: one block per row, each value on a line of its own, whole."""
        if self.title:
            yield Text(self.title, style=self.title_style or "")
        for r in self.rows:
            first = True
            for c, cell in zip(self.columns, r, strict=False):
                line = Text("" if first else "  ")
                if c.header and not first:
                    line.append(f"{c.header}: ", style="dim")
                line.append_text(cell)
                line.no_wrap = c.numeric
                yield line
                first = False
        if self.caption:
            yield Text(self.caption, style="dim")


def _text(cell: RenderableType | None) -> Text:
    if cell is None:
        return Text("")
    if isinstance(cell, Text):
        return cell
    if isinstance(cell, str):  # rich markup, as rich's Table reads a string cell
        try:
            return Text.from_markup(cell)
        except Exception:  # not markup after all (a name with brackets)
            return Text(cell)
    return Text(str(cell))


def shorten(name: str, width: int, head: int | None = None) -> str:
    """``name`` in ``width`` cells: its start and end around an ellipsis (``head`` cells of the start)."""
    if cell_len(name) <= width:
        return name
    if width <= 1:
        return ELLIPSIS[:width]
    room = width - 1
    h = (room + 1) // 2 if head is None else max(0, min(head, room))
    tail = room - h
    return name[:h] + ELLIPSIS + (name[-tail:] if tail else "")


def unique_short(names: Sequence[str], width: int) -> list[str]:
    """Each name in ``width`` cells, distinct names staying distinct where any split of start and end tells
    them apart (the middle goes first, then more of the start or of the end)."""
    out: list[str] = []
    used: dict[str, str] = {}
    for name in names:
        if cell_len(name) <= width:
            out.append(name)
            used.setdefault(name, name)
            continue
        room = width - 1
        heads = sorted(range(room + 1), key=lambda h: abs(h - (room + 1) // 2))
        pick = shorten(name, width)
        for h in heads:
            cand = shorten(name, width, h)
            if used.get(cand, name) == name:
                pick = cand
                break
        used.setdefault(pick, name)
        out.append(pick)
    return out
