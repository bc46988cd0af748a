"""`stepscope show RUN --traces`: the trace engine's analyses of the run's profiled window(s)."""

from __future__ import annotations

from stepscope.app import RunAnalysis
from stepscope.cli.common import print_json


def show_traces(ra: RunAnalysis, *, json: bool = False, width: int | None = None) -> int:
    files = ra.trace_files  # a one-line error when the run has none
    result = ra.trace_set
    if result is None:
        from stepscope.errors import TraceError

        raise TraceError(ra.trace_notes[0] if len(ra.trace_notes) == 1 else
                         f"none of {len(files)} traces could be read; first: {ra.trace_notes[0]}")
    if json:
        print_json(result.to_dict())
        return 0
    from stepscope.report import trace_terminal as view
    from stepscope.report.terminal import console, module_tree_view

    out = console(width=width)
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
