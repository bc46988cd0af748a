"""`stepscope show RUN --traces`: the trace engine's analyses of the run's profiled window(s)."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Group, RenderableType

from stepscope.analyze.trace.multirank import TraceSetAnalysis
from stepscope.analyze.trace.rankdist import (
    Distribution,
    as_distributions,
    kernel_distributions,
    operator_distributions,
    traceset_distributions,
)
from stepscope.app import RunAnalysis
from stepscope.cli.common import print_json

TOP = 15
"""Rows of the kernel and operator tables."""
NAME_CHARS = 60
"""Kernel and operator names in distribution tables are cut to this (templated kernel names run to
hundreds of characters and would squeeze the figures out of the table)."""


def shortened(dists: tuple[Distribution, ...]) -> tuple[Distribution, ...]:
    """The distributions with names past NAME_CHARS cut, ending in an ellipsis."""
    return tuple(d if len(d.name) <= NAME_CHARS else replace(d, name=d.name[:NAME_CHARS - 1] + "…") for d in dists)


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
    if as_distributions(len(result.ranks)):
        out.print(traces_distribution_view(result))
        return 0
    for a in result.ranks:
        out.print(view.summary_view(a))  # with its GPU time by component (printed once)
        out.print(view.ops_view(sorted(a.operators, key=lambda o: -o.cpu_total_ns), top=TOP))
        if a.modules:
            out.print(module_tree_view(a.modules))
    if len(result.ranks) > 1 or result.errors:
        out.print(view.traceset_view(result))
    return 0


def traces_distribution_view(s: TraceSetAnalysis) -> RenderableType:
    """Past RANK_ROWS_MAX ranks: the per-rank figures, GPU time by component and the operators' CPU time as
    distributions across ranks, instead of one set of tables per rank."""
    from stepscope.report.ranks_terminal import distribution_table, traceset_distribution_view

    n = len(s.ranks)
    return Group(
        traceset_distribution_view(s, traceset_distributions(s)),
        distribution_table(f"{n} ranks: GPU time by component across ranks",
                           shortened(kernel_distributions(s, by="component", top=TOP))),
        distribution_table(f"{n} ranks: operators' CPU total across ranks (top {TOP} by total)",
                           shortened(operator_distributions(s, sort="cpu_total", top=TOP))))
