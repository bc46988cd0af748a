"""After a launched run: summarise it, index its metrics, print its summary."""

from __future__ import annotations

import sys

from stepscope.analyze.summary import RunSummary, index_metrics, summarize_run
from stepscope.store import Store
from stepscope.store.rundir import read_run


def finish_run(store: Store, run_id: str, *, print_summary: bool = True) -> RunSummary:
    data = read_run(store.run_path(run_id))
    summary = summarize_run(data)
    store.index.upsert_run(data.run, data.path, index_metrics(summary))
    if print_summary:
        from stepscope.report.terminal import console, short_report

        out = console(file=sys.stderr)
        out.print()
        out.rule("stepscope")
        out.print(short_report(summary))
    return summary
