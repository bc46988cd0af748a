"""`stepscope show RUN --ranks`: per-rank table, POP metrics, stragglers, transfer/sync split, roles."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from stepscope.analyze.summary import RunSummary
from stepscope.model.tables import RunData

_TRACE = re.compile(r"^artifacts/traces/rank(\d+)\.json(\.gz)?$")


def load_traces(data: RunData) -> dict[int, Any]:
    """rank -> EventTable of the profiler window's traces stored in the run (unreadable ones skipped)."""
    from stepscope.errors import TraceError
    from stepscope.traces.kineto import read_trace

    out: dict[int, Any] = {}
    for rel in data.artifacts:
        m = _TRACE.match(rel)
        if m:
            try:
                out[int(m.group(1))] = read_trace(Path(data.path) / rel, rank=int(m.group(1)))
            except (TraceError, OSError, ValueError):
                continue
    return out


def show_ranks(data: RunData, summary: RunSummary, args: argparse.Namespace) -> int:
    from stepscope.analyze.ranks import analyze_ranks
    from stepscope.analyze.roles import analyze_roles

    analysis = analyze_ranks(data, warmup=getattr(args, "warmup_steps", None), traces=load_traces(data))
    roles = analyze_roles(data)
    if getattr(args, "json", False):
        from stepscope.cli.common import print_json

        print_json({**analysis.to_dict(), "roles": roles.to_dict()})
        return 0
    from stepscope.report.ranks_terminal import ranks_report
    from stepscope.report.terminal import console

    console(width=getattr(args, "width", None)).print(ranks_report(analysis, roles))
    return 0
