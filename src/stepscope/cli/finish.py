"""After a launched run: summarise it, index its metrics, print its summary."""

from __future__ import annotations

import sys
from pathlib import Path

from stepscope.analyze.summary import RunSummary, index_metrics, summarize_run
from stepscope.model.tables import RunData
from stepscope.store import Store
from stepscope.store.rundir import read_run


def finish_run(store: Store, run_id: str, *, print_summary: bool = True) -> RunSummary:
    data = read_run(store.run_path(run_id))
    summary = summarize_run(data)
    store.index.upsert_run(data.run, data.path, index_metrics(summary))
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
