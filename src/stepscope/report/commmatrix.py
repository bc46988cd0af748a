"""Terminal rendering of the communication matrix (analyze/ranks/commmatrix.py)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from stepscope.analyze.ranks.commmatrix import CommMatrix
from stepscope.report import format as f
from stepscope.report.tables import FitTable

MAX_COLUMNS = 16
"""Wider matrices show only the busiest pairs."""


def _matrix(title: str, m: CommMatrix, values: tuple[tuple[float, ...], ...], fmt: object) -> FitTable:
    t = FitTable(title=title, title_justify="left", title_style="bold", show_edge=False, pad_edge=False)
    t.add_column("from \\ to", numeric=True)  # rank ids whole
    for r in m.ranks:
        t.add_column(str(r), justify="right", no_wrap=True)
    for i, r in enumerate(m.ranks):
        t.add_row(str(r), *("·" if i == j else fmt(v) for j, v in enumerate(values[i])))  # type: ignore[operator]
    return t


def comm_matrix_view(m: CommMatrix) -> RenderableType:
    parts: list[RenderableType] = [Text(f"{len(m.ranks)} ranks, {f.nbytes(m.total_bytes)} attributed", style="bold")]
    if len(m.ranks) <= MAX_COLUMNS:
        parts.append(_matrix("Bytes (row sends to column)", m, m.bytes, f.nbytes))
        parts.append(_matrix("Time in calls (row's time, with column)", m, m.time_ns, f.duration_ns))
    pairs = FitTable(title="Busiest pairs", title_justify="left", title_style="bold", show_edge=False, pad_edge=False)
    for c in ("pair", "bytes", "point-to-point", "collective", "time", "calls"):
        pairs.add_column(c, justify="left" if c == "pair" else "right", numeric=True)
    for p in m.busiest:
        pairs.add_row(f"{p.src} → {p.dst}", f.nbytes(p.bytes), f.nbytes(p.p2p_bytes), f.nbytes(p.collective_bytes),
                      f.duration_ns(p.time_ns), f"{p.calls:,}")
    parts.append(pairs)
    if m.unattributed_bytes:
        parts.append(Text(f"{f.nbytes(m.unattributed_bytes)} of collectives could not be attributed to ranks",
                          style="yellow"))
    parts.append(Text(f"convention: {m.convention}", style="dim"))
    for n in m.notes:
        parts.append(Text(f"note: {n}", style="yellow"))
    return Group(*parts)
