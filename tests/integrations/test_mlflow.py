"""`stepscope run --mlflow`: a real MLflow SQLite store in tmp_path, read back through MLflow's own client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import PY, SCRIPTS, installed_or_skip, load

installed_or_skip("mlflow")
TINY = str(SCRIPTS / "tiny_train.py")


def _client(uri: str):  # type: ignore[no-untyped-def]
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _artifacts(client, run_id: str, path: str) -> set[str]:  # type: ignore[no-untyped-def]
    return {a.path for a in client.list_artifacts(run_id, path)}


@pytest.mark.slow
def test_new_mlflow_run_gets_params_tags_step_metrics_and_reports(cli, store: Path, tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    res = cli("run", "--quiet", "--mlflow", "--sample-interval", "0.2", "--param", "lr=0.1", "--tag", "team=perf",
              "--", PY, TINY, "--steps", "10", "--step-sleep", "0.05",  # long enough for system samples
              env={"MLFLOW_TRACKING_URI": uri, "MLFLOW_EXPERIMENT_NAME": "ss"})
    assert res.rc == 0, res
    data = load(store)
    client = _client(uri)
    exp = client.get_experiment_by_name("ss")
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1
    mr = runs[0]
    assert data.run.extra["mlflow_run_id"] == mr.info.run_id and data.run.extra["mlflow_tracking_uri"] == uri
    assert mr.info.status == "FINISHED" and mr.info.run_name == "tiny_train"
    assert mr.data.params == {"lr": "0.1"}
    assert mr.data.tags["team"] == "perf" and mr.data.tags["stepscope.run_id"] == data.run.id
    assert mr.data.tags["stepscope.status"] == "completed"
    hist = client.get_metric_history(mr.info.run_id, "stepscope/step_time_s")
    steps = data.ranks[0].steps
    assert [m.step for m in sorted(hist, key=lambda m: m.step)] == list(range(10))
    want = {int(i): float(d) * 1e-9 for i, d in zip(steps["index"], steps.duration_ns)}
    assert all(m.value == pytest.approx(want[m.step]) for m in hist)
    samples = client.get_metric_history(mr.info.run_id, "stepscope/samples_per_s")
    assert all(m.value == pytest.approx(8 / want[m.step]) for m in samples)
    assert mr.data.metrics["stepscope.steps"] == 10
    assert client.get_metric_history(mr.info.run_id, "system/rss_bytes")  # system samples
    arts = _artifacts(client, mr.info.run_id, "stepscope")
    assert {"stepscope/summary.json", "stepscope/steps.json"} <= arts
    local = Path(client.download_artifacts(mr.info.run_id, "stepscope/summary.json", str(tmp_path)))
    doc = json.loads(local.read_text())
    assert doc["schema"] == "stepscope.summary/1" and doc["run"]["id"] == data.run.id


@pytest.mark.slow
def test_joins_the_run_the_script_started(cli, store: Path, tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    script = tmp_path / "with_mlflow.py"
    script.write_text(
        "import runpy, sys\nimport mlflow\n"
        "with mlflow.start_run(run_name='user-run'):\n"
        "    mlflow.log_param('from_script', 'yes')\n"
        f"    sys.argv = [{TINY!r}, '--steps', '6']\n"
        f"    sys.path.insert(0, {str(Path(TINY).parent)!r})  # as `python tiny_train.py` would\n"
        f"    runpy.run_path({TINY!r}, run_name='__main__')\n")
    res = cli("run", "--quiet", "--mlflow", "--sample-interval", "0", "--", PY, str(script),
              env={"MLFLOW_TRACKING_URI": uri})
    assert res.rc == 0, res
    data = load(store)
    runs = _client(uri).search_runs(["0"])
    assert len(runs) == 1  # no second run: stepscope logged into the script's
    mr = runs[0]
    assert mr.info.run_name == "user-run" and mr.data.params["from_script"] == "yes"
    assert mr.data.tags["stepscope.run_id"] == data.run.id and data.run.extra["mlflow_run_id"] == mr.info.run_id
    assert len(_client(uri).get_metric_history(mr.info.run_id, "stepscope/step_time_s")) == 6


def test_without_mlflow_installed_one_line_names_the_extra(cli, tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    (fake / "mlflow").mkdir(parents=True)
    (fake / "mlflow" / "__init__.py").write_text("raise ImportError('No module named mlflow')\n")
    res = cli("run", "--mlflow", "--", PY, TINY, env={"PYTHONPATH": str(fake)})
    assert res.rc == 2, res
    lines = [ln for ln in res.err.strip().splitlines() if ln]
    assert len(lines) == 1 and "pip install 'stepscope[mlflow]'" in lines[0] and "Traceback" not in res.err
