"""`--mlflow`: remember the MLflow run the training script had active, so that stepscope's figures are
logged into that run after the training (integrations/mlflow.py) instead of into a new one.

At session close, when the script imported mlflow: ``mlflow.active_run()`` or, for a run already ended,
``mlflow.last_active_run()``; recorded as ``{"kind": "mlflow_run", "run_id", "tracking_uri"}``. Costs
nothing during training.
"""

from __future__ import annotations

import sys

from stepscope.collect.core.session import Session


def install_mlflow_probe(session: Session) -> None:
    if not session.options.mlflow:
        return

    def probe() -> None:
        mlflow = sys.modules.get("mlflow")
        if mlflow is None or not session.active:
            return
        try:
            run = mlflow.active_run() or mlflow.last_active_run()
            if run is not None:
                session.record("mlflow_run", run_id=run.info.run_id, tracking_uri=str(mlflow.get_tracking_uri()))
        except Exception as e:
            session.warn_once("mlflow-probe", f"could not read the script's MLflow run ({e})")

    session.closers.append(probe)
