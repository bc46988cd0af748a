"""After a launched run: summarise it, index its metrics, print its summary."""

from __future__ import annotations

import sys
from pathlib import Path

from stepscope.analyze.summary import RunSummary, index_metrics, summarize_run
from stepscope.errors import StepscopeError
from stepscope.model.tables import RunData
from stepscope.store import Store
from stepscope.store.rundir import read_run


def run_index_metrics(data: RunData, summary: RunSummary) -> dict[str, float]:
    """Everything the index keeps for a run: the summary's figures plus, for a profiled run, its traces'."""
    metrics = index_metrics(summary)
    from stepscope.cli.views.traces import run_trace_files
    from stepscope.errors import UserError

    try:
        files = run_trace_files(data)
    except UserError:
        return metrics
    from stepscope.analyze.trace.metrics import trace_index_metrics
    from stepscope.executor.traceset import analyze_traceset

    try:
        metrics.update(trace_index_metrics(analyze_traceset([str(f) for f in files])))
    except UserError as e:  # a damaged trace must not lose the run's other figures
        print(f"stepscope: {e}", file=sys.stderr)
    return metrics


def finish_run(store: Store, run_id: str, *, print_summary: bool = True) -> RunSummary:
    data = read_run(store.run_path(run_id))
    summary = summarize_run(data)
    try:
        store.index.upsert_run(data.run, data.path, run_index_metrics(data, summary))
    except Exception as e:  # the run is on disk: a locked or unwritable index must not lose its summary
        why = str(e) if isinstance(e, StepscopeError) else f"{type(e).__name__}: {e}"
        print(f"stepscope: warning: could not index the run's figures ({why}); `stepscope store reindex` adds "
              "them", file=sys.stderr)
    if data.run.options.get("mlflow"):
        log_to_mlflow(data, summary)
    if print_summary:
        from stepscope.report.terminal import console, short_report

        out = console(file=sys.stderr)
        out.print()
        out.rule("stepscope")
        out.print(short_report(summary))
    return summary


def log_to_mlflow(data: RunData, summary: RunSummary) -> None:
    """`--mlflow`: log the stored run (integrations/mlflow.py); a failure is one line, never the exit code."""
    from stepscope.integrations.mlflow import MISSING, log_run, store_link

    try:
        mlflow_id, uri = log_run(data, summary)
        store_link(Path(data.path), mlflow_id, uri)
    except ImportError:
        print("stepscope: " + MISSING, file=sys.stderr)
    except Exception as e:
        print(f"stepscope: could not log the run to MLflow ({type(e).__name__}: {e}) — it stays in the store; "
              "check MLFLOW_TRACKING_URI", file=sys.stderr)
