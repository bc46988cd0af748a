"""After a launched run: summarise it, index its metrics, print its summary."""

from __future__ import annotations

import sys
from pathlib import Path

from stepscope.analyze.run.summary import RunSummary
from stepscope.app import RunAnalysis
from stepscope.errors import StepscopeError
from stepscope.store import Store
from stepscope.store.rundir import read_run


def finish_run(store: Store, run_id: str, *, print_summary: bool = True) -> RunSummary:
    ra = RunAnalysis(read_run(store.run_path(run_id)))
    data, summary = ra.data, ra.summary
    try:
        store.index.upsert_run(data.run, data.path, ra.index_metrics)
    except Exception as e:  # the run is on disk: a locked or unwritable index must not lose its summary
        why = str(e) if isinstance(e, StepscopeError) else f"{type(e).__name__}: {e}"
        print(f"stepscope: warning: could not index the run's figures ({why}); `stepscope store reindex` adds "
              "them", file=sys.stderr)
    ra.print_notes()  # a damaged trace loses only its own figures
    if data.run.options.get("mlflow"):
        log_to_mlflow(ra)
    if print_summary:
        from stepscope.report.terminal import console, short_report

        out = console(file=sys.stderr)
        out.print()
        out.rule("stepscope")
        out.print(short_report(summary, quality=ra.quality))
    return summary


def log_to_mlflow(ra: RunAnalysis) -> None:
    """`--mlflow`: log the stored run (integrations/mlflow.py); a failure is one line, never the exit code."""
    from stepscope.integrations.mlflow import MISSING, log_run, store_link

    try:
        mlflow_id, uri = log_run(ra)
        store_link(Path(ra.data.path), mlflow_id, uri)
    except ImportError:
        print("stepscope: " + MISSING, file=sys.stderr)
    except Exception as e:
        print(f"stepscope: could not log the run to MLflow ({type(e).__name__}: {e}) — it stays in the store; "
              "check MLFLOW_TRACKING_URI", file=sys.stderr)
