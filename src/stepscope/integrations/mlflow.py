"""MLflow: `stepscope run --mlflow -- python train.py` (or ``STEPSCOPE_MLFLOW=1``).

Logging happens once, after the run, from the store (in the launcher's finish step, cli/finish.py),
never live from the training process: the training loop pays nothing, a slow or unreachable tracking
server cannot stall or break training, every figure is the one stepscope's own report shows (warm-up
excluded, steps counted once), and a run can be logged again later from the store.

Which MLflow run: the one the training script had active (``mlflow.start_run``, Lightning's
MLFlowLogger, transformers' MLflowCallback; the in-process probe collect/torch/mlflowrun.py records its id
and tracking URI), else ``MLFLOW_RUN_ID``, else a new run in ``MLFLOW_EXPERIMENT_NAME`` /
``MLFLOW_EXPERIMENT_ID`` (default experiment otherwise), named like the stepscope run, whose status
and times follow the stepscope run. The tracking URI is MLflow's usual one (``MLFLOW_TRACKING_URI``).

What is logged: the run's parameters and tags (plus ``stepscope.run_id``, ``stepscope.status``, git
commit and host as tags); per-step metrics of rank 0 with their step index (``stepscope/step_time_s``,
``stepscope/samples_per_s``, ``stepscope/tokens_per_s``, ``stepscope/data_wait_s``, validation steps as
``stepscope/val_step_time_s``), the user's metrics under their own names (unless the script logged
itself into the same run), system samples as ``system/<column>`` by sample number, the summary
figures (the index metrics, e.g. ``stepscope.step_time_median_s``, ``stepscope.mfu``) without a step;
artifacts under ``stepscope/``: ``summary.json``, ``steps.json`` (the step table), ``report.html``
(when the HTML report renders) and the run's artifacts folder (traces, memory snapshots). The MLflow
run id and tracking URI are stored back into the stepscope run (manifest ``extra``: ``mlflow_run_id``,
``mlflow_tracking_uri``).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from stepscope.app import RunAnalysis
from stepscope.errors import UserError
from stepscope.model.run import RunStatus
from stepscope.model.tables import RunData

MISSING = "--mlflow needs MLflow, which is not installed — pip install 'stepscope[mlflow]'"
BATCH = 1000
"""MLflow's log_batch limits: 1000 metrics, 100 params, 100 tags per call."""
STATUS = {RunStatus.COMPLETED: "FINISHED", RunStatus.FAILED: "FAILED", RunStatus.INCOMPLETE: "KILLED",
          RunStatus.RUNNING: "RUNNING"}


def require_mlflow() -> None:
    """Fail before the training starts when --mlflow cannot work."""
    try:
        import mlflow  # noqa: F401
    except ImportError:
        raise UserError(MISSING) from None


def log_run(ra: RunAnalysis) -> tuple[str, str]:
    """Log a stored run to MLflow; returns (MLflow run id, tracking URI). Raises on MLflow errors.

    Every figure comes from the run's RunAnalysis: the metrics are its ``index_metrics`` (those the store's
    index, the dashboard and `stepscope show` use), the report is the `stepscope report` page."""
    data = ra.data
    from mlflow.tracking import MlflowClient

    probe = next((rec for r in data.ranks for rec in r.extra.get("mlflow_run", [])), None)
    uri = (probe or {}).get("tracking_uri") or os.environ.get("MLFLOW_TRACKING_URI") or None
    client = MlflowClient(tracking_uri=uri)
    uri = client.tracking_uri if hasattr(client, "tracking_uri") else (uri or "")
    run_id = (probe or {}).get("run_id") or os.environ.get("MLFLOW_RUN_ID")
    created = run_id is None
    if run_id is None:
        run_id = client.create_run(_experiment_id(client), start_time=data.run.start_ns // 1_000_000,
                                   run_name=data.run.name).info.run_id
    _log_values(client, run_id, data, ra.index_metrics, user_metrics=probe is None)
    _log_artifacts(client, run_id, ra)
    if created:
        end = data.run.end_ns // 1_000_000 if data.run.end_ns else None
        client.set_terminated(run_id, status=STATUS[data.run.status], end_time=end)
    return str(run_id), str(uri)


def _experiment_id(client: Any) -> str:
    exp_id = os.environ.get("MLFLOW_EXPERIMENT_ID")
    if exp_id:
        return exp_id
    name = os.environ.get("MLFLOW_EXPERIMENT_NAME")
    if not name:
        return "0"
    exp = client.get_experiment_by_name(name)
    return str(exp.experiment_id if exp is not None else client.create_experiment(name))


def _log_values(client: Any, run_id: str, data: RunData, figures: dict[str, float], *, user_metrics: bool) -> None:
    from mlflow.entities import Metric, Param, RunTag

    run = data.run
    params = [Param(k[:250], str(v)[:6000]) for k, v in sorted(run.params.items())]
    tags = {**run.tags, "stepscope.run_id": run.id, "stepscope.status": run.status.value,
            "stepscope.command": " ".join(run.command)[:5000], "stepscope.host": run.host.hostname}
    if run.git:
        tags["mlflow.source.git.commit"] = run.git.commit
    metrics = [Metric(f"stepscope.{k}", v, int(time.time() * 1000), 0) for k, v in figures.items()]
    if data.ranks:
        metrics += step_metrics(data, user_metrics=user_metrics)
    for i in range(0, max(len(params), 1), 100):
        client.log_batch(run_id, params=params[i:i + 100])
    tag_list = [RunTag(k, str(v)[:5000]) for k, v in sorted(tags.items())]
    for i in range(0, len(tag_list), 100):
        client.log_batch(run_id, tags=tag_list[i:i + 100])
    for i in range(0, len(metrics), BATCH):
        client.log_batch(run_id, metrics=metrics[i:i + BATCH])


def step_metrics(data: RunData, *, user_metrics: bool = True) -> list[Any]:
    """Rank 0's per-step, user and system metrics as MLflow Metric entities (step = stepscope's index)."""
    from mlflow.entities import Metric

    r = data.ranks[0]
    out: list[Any] = []

    def put(key: str, value: float, t_ns: int, step: int) -> None:
        if math.isfinite(value):
            out.append(Metric(key, float(value), int(t_ns // 1_000_000), int(step)))

    st = r.steps
    dur = st.duration_ns
    for i in range(len(st)):
        idx, end, d = int(st["index"][i]), int(st["end_ns"][i]), float(dur[i])
        if st["phase"][i] != 0:
            put("stepscope/val_step_time_s", d * 1e-9, end, idx)
            continue
        put("stepscope/step_time_s", d * 1e-9, end, idx)
        if d > 0:
            put("stepscope/samples_per_s", float(st["samples"][i]) / (d * 1e-9), end, idx)
            put("stepscope/tokens_per_s", float(st["tokens"][i]) / (d * 1e-9), end, idx)
        put("stepscope/data_wait_s", float(st["data_wait_ns"][i]) * 1e-9, end, idx)
    m = r.metrics
    if user_metrics:
        for i in range(len(m)):
            put(m.names[int(m["name_code"][i])], float(m["value"][i]), int(m["t_ns"][i]), int(m["step"][i]))
    samples = r.samples
    for name, col in samples.columns.items():
        for j in range(len(col)):
            put(f"system/{name}", float(col[j]), int(samples.t_ns[j]), j)
    return out


def _log_artifacts(client: Any, run_id: str, ra: RunAnalysis) -> None:
    data = ra.data
    client.log_dict(run_id, ra.summary.to_dict(), "stepscope/summary.json")
    if data.ranks:
        client.log_dict(run_id, {"schema": "stepscope.steps/1", "rank": data.ranks[0].stream.rank,
                                 "rows": _json_rows(data.ranks[0].steps.to_pylist())}, "stepscope/steps.json")
    html = _report_html(ra)
    if html is not None:
        client.log_text(run_id, html, "stepscope/report.html")
    art = Path(data.path) / "artifacts"
    if art.is_dir() and any(art.iterdir()):
        client.log_artifacts(run_id, str(art), "stepscope/artifacts")


def _json_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()} for row in rows]


def _report_html(ra: RunAnalysis) -> str | None:
    try:
        from stepscope.report.html.run_report import render_run_report
    except ImportError:
        return None
    try:
        return render_run_report(ra)
    except Exception:
        return None


def store_link(run_dir: Path, mlflow_run_id: str, tracking_uri: str) -> None:
    """Keep the MLflow run id in the stepscope run's manifest (``extra``)."""
    from stepscope.store.rundir import read_run_manifest, write_manifest

    run, _ = read_run_manifest(run_dir)
    write_manifest(run_dir, replace(run, extra={**run.extra, "mlflow_run_id": mlflow_run_id,
                                                "mlflow_tracking_uri": tracking_uri}))
