"""`stepscope show RUN --traces`: the trace engine's analyses of the run's profiled window(s)."""

from __future__ import annotations

import argparse
from pathlib import Path

from stepscope.analyze.summary import RunSummary
from stepscope.cli.common import print_json
from stepscope.errors import UserError
from stepscope.model.tables import RunData


def run_trace_files(data: RunData) -> list[Path]:
    """The run's trace artifacts that exist; a one-line error when it has none (or they were deleted)."""
    from stepscope.app.runtraces import expected_traces

    expected = expected_traces(data)
    files = [Path(data.path) / rel for _, rel in sorted(expected.items()) if (Path(data.path) / rel).is_file()]
    if files:
        return files
    if expected:
        raise UserError(f"run {data.run.id}: its profiled window's trace files are missing "
                        f"({', '.join(sorted(expected.values()))}) — they were deleted; re-record with "
                        "--profile-steps or attach traces with stepscope import")
    raise UserError(f"run {data.run.id} was not profiled — record a window with "
                    "`stepscope run --profile-steps 5 -- ...` or attach traces with `stepscope import RUN traces/`")


def show_traces(data: RunData, summary: RunSummary, args: argparse.Namespace) -> int:
    from stepscope.executor.traceset import analyze_traceset

    result = analyze_traceset([str(p) for p in run_trace_files(data)])
    if args.json:
        print_json(result.to_dict())
        return 0
    from stepscope.report import trace_terminal as view
    from stepscope.report.terminal import console, module_tree_view

    out = console(width=args.width)
    for a in result.ranks:
        out.print(view.summary_view(a))
        if a.kernels.by_component:
            out.print(view.kernel_view(a.kernels.by_component, top=15, title=f"rank {a.rank}: GPU time by component"))
        out.print(view.ops_view(sorted(a.operators, key=lambda o: -o.cpu_total_ns), top=15))
        if a.modules:
            out.print(module_tree_view(a.modules))
    if len(result.ranks) > 1 or result.errors:
        out.print(view.traceset_view(result))
    return 0
