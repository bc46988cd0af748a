"""``TraceSet``: per-rank profiler traces (files or a folder) for a notebook, and ``load_traces``."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from stepscope.errors import TraceError
from stepscope.notebook.html import traces_overview
from stepscope.notebook.traceframes import TraceFrames

if TYPE_CHECKING:
    from stepscope.analyze.trace.analysis import TraceAnalysis
    from stepscope.model.events import EventTable


class TraceSet(TraceFrames):
    """Traces read once (one EventTable per rank, ``event_tables``), each analysed once by the trace engine
    (``trace_analyses``: the figures ``stepscope trace analyze`` prints). ``problems``: one line per file that
    could not be read, or that repeats a rank; the other ranks are still analysed."""

    def __init__(self, tables: dict[int, EventTable], problems: Sequence[str] = ()) -> None:
        self.tables = dict(sorted(tables.items()))
        self.problems = tuple(problems)

    @property
    def event_tables(self) -> dict[int, EventTable]:
        return self.tables

    @cached_property
    def trace_analyses(self) -> dict[int, TraceAnalysis]:
        from stepscope.analyze.trace.analysis import analyze_trace

        return {rank: analyze_trace(t) for rank, t in self.tables.items()}

    def rank_analyses(self) -> dict[int, TraceAnalysis]:
        return self.trace_analyses

    @property
    def ranks(self) -> list[int]:
        return list(self.tables)

    def _repr_html_(self) -> str:
        return traces_overview([self.trace_analyses[r] for r in self.tables], self.problems)

    def __repr__(self) -> str:
        return f"<TraceSet ranks {self.ranks}{f', {len(self.problems)} problem(s)' if self.problems else ''}>"


def load_traces(*paths: str | Path) -> TraceSet:
    """Read the traces in ``paths`` (trace files, or folders of ``.json`` / ``.json.gz`` traces) as
    ``stepscope trace analyze`` does: a file's rank from its ``distributedInfo``, else its name, else its
    position. Raises a one-line TraceError when no file is found or none can be read."""
    from stepscope.traces.kineto import read_trace
    from stepscope.traces.traceset import trace_files

    files = trace_files(paths or (".",))
    tables: dict[int, EventTable] = {}
    seen: dict[int, Path] = {}
    problems: list[str] = []
    for i, f in enumerate(files):
        try:
            table = read_trace(f, rank=i if len(files) > 1 else None)
        except TraceError as e:
            problems.append(str(e))
            continue
        rank = table.meta.rank
        if rank in seen:
            problems.append(f"{f}: rank {rank} already read from {seen[rank]} — keep one trace per rank in the folder")
            continue
        seen[rank] = f
        tables[rank] = table
    if not tables:
        raise TraceError(problems[0] if len(problems) == 1 else
                         f"none of {len(files)} traces could be read; first: {problems[0]}")
    return TraceSet(tables, problems)
