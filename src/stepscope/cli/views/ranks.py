"""`stepscope show RUN --ranks`: per-rank table, POP metrics, stragglers, transfer/sync split, roles."""

from __future__ import annotations

from stepscope.app import RunAnalysis


def show_ranks(ra: RunAnalysis, *, json: bool = False, width: int | None = None) -> int:
    from stepscope.analyze.ranks.ranks import analyze_ranks
    from stepscope.analyze.ranks.roles import analyze_roles

    analysis = analyze_ranks(ra.data, warmup=ra.warmup, traces=ra.traces.tables)
    roles = analyze_roles(ra.data)
    if json:
        from stepscope.cli.common import print_json

        print_json({**analysis.to_dict(), "roles": roles.to_dict()})
        return 0
    from stepscope.report.ranks_terminal import ranks_report
    from stepscope.report.terminal import console

    console(width=width).print(ranks_report(analysis, roles))
    return 0
