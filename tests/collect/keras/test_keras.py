"""Keras 3 / TensorFlow observed with zero code under `stepscope run` (real TensorFlow on CPU, real store).

TensorFlow takes seconds to import: each observed run is made once per module and shared by its tests."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import EXAMPLES, PY, SCRIPTS, load, stepscope_cmd

if importlib.util.find_spec("tensorflow") is None:  # found, not imported (TensorFlow takes seconds)
    pytest.skip("tensorflow is not installed (extras tensorflow, jax)", allow_module_level=True)
if importlib.util.find_spec("keras") is None:  # found, not imported (TensorFlow takes seconds)
    pytest.skip("keras is not installed (extras tensorflow, jax)", allow_module_level=True)
pytestmark = pytest.mark.slow


def _observe(store: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STEPSCOPE_HOME": str(store)}
    env.pop("STEPSCOPE_DB", None)
    return subprocess.run(stepscope_cmd("run", "--quiet", "--", PY, *argv), capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=env)


@pytest.fixture(scope="module")
def fit_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    d = tmp_path_factory.mktemp("keras_fit")
    r = _observe(d / "store", str(EXAMPLES / "train_keras.py"), "--epochs", "2", "--samples", "1000",
                 "--val-samples", "200", "--batch-size", "32", "--features", "20", "--hidden", "64",
                 "--inter", "2", "--intra", "1", cwd=d)
    assert r.returncode == 0, r.stderr[-3000:]
    return d / "store", load(d / "store")


@pytest.fixture(scope="module")
def loop_run(tmp_path_factory: pytest.TempPathFactory) -> Any:
    d = tmp_path_factory.mktemp("tf_loop")
    r = _observe(d / "store", str(SCRIPTS / "tf_loop.py"), "--epochs", "2", "--samples", "100", "--batch", "16",
                 "--sleep", "0.08", cwd=d)
    assert r.returncode == 0, r.stderr[-3000:]
    return load(d / "store")


def test_fit_steps_epochs_samples(fit_run: tuple[Path, Any]) -> None:
    rank = fit_run[1].ranks[0]
    assert rank.stream.step_source == "keras"
    steps = rank.steps
    train = steps["phase"] == 0
    # 1000 samples in batches of 32: 31 full batches and one of 1000 - 31 * 32 = 8, per epoch, 2 epochs
    assert int(train.sum()) == 64
    expected = np.array(([32.0] * 31 + [8.0]) * 2)
    assert np.array_equal(steps["samples"][train], expected)
    assert list(steps["epoch"][train]) == [0] * 32 + [1] * 32
    assert list(steps["index"][train]) == list(range(64))
    # validation: 200 samples in batches of 32 = 6 full + 8, after each epoch
    val = steps["phase"] == 1
    assert int(val.sum()) == 14
    assert np.array_equal(steps["samples"][val], np.array(([32.0] * 6 + [8.0]) * 2))
    assert list(steps["epoch"][val]) == [0] * 7 + [1] * 7
    # within an epoch, training steps tile time: each starts where the previous ended
    start, end, epoch = steps["start_ns"][train], steps["end_ns"][train], steps["epoch"][train]
    same = epoch[1:] == epoch[:-1]
    assert np.array_equal(start[1:][same], end[:-1][same])
    # arrays through Keras' prefetched pipeline: the fetch is metered (collect/keras/keras_datawait.py) and, but for
    # an epoch's first batch, the batch is ready when the step asks: the wait is a small share of the step
    wait = steps["data_wait_ns"]
    assert np.isfinite(wait).all() and np.all(wait >= 0) and np.all(wait <= steps.duration_ns)
    assert np.median(wait[train]) < 0.2 * np.median(steps.duration_ns[train]), wait
    assert np.all(steps.duration_ns[train] > 0)


def test_fit_model_summary_by_hand(fit_run: tuple[Path, Any]) -> None:
    model = fit_run[1].ranks[0].model
    hidden, logits = 20 * 64 + 64, 64 * 3 + 3
    assert model["name"] == "mlp"
    assert model["total_params"] == model["trainable_params"] == hidden + logits
    assert model["param_bytes"] == (hidden + logits) * 4
    rows = {row["name"]: row for row in model["layers"]}
    assert rows["hidden"]["type"] == "Dense" and rows["hidden"]["params"] == hidden
    assert rows["logits"]["params"] == logits and rows["logits"]["output_shape"] == [None, 3]


def test_fit_framework_record_and_metrics(fit_run: tuple[Path, Any]) -> None:
    rank = fit_run[1].ranks[0]
    (fw,) = rank.extra["framework"]
    assert fw["backend"] == "tensorflow" and fw["keras"] == importlib.metadata.version("keras")
    assert fw["tensorflow"] == importlib.metadata.version("tensorflow-cpu")
    assert fw["inter_op_threads"] == 2 and fw["intra_op_threads"] == 1  # as the script set them
    assert any(d.startswith("CPU:") for d in fw["physical_devices"])
    assert "jax" not in fw  # Keras on TensorFlow: JAX is not the framework even where Keras imports it
    logged = {rank.metrics.names[c] for c in rank.metrics["name_code"]}
    assert {"epoch/loss", "epoch/val_loss", "epoch/accuracy"} <= logged


def test_show_on_a_keras_run(fit_run: tuple[Path, Any]) -> None:
    store = fit_run[0]
    env = {**os.environ, "STEPSCOPE_HOME": str(store)}
    r = subprocess.run(stepscope_cmd("show", "latest"), capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert "marked by keras" in " ".join(r.stdout.split())
    assert "1,539 parameters" in r.stdout
    # issue 16: the run never imported torch (installed here), so its software line names no torch version
    software = next(line for line in r.stdout.splitlines() if line.startswith("software:"))
    assert "torch" not in software, software
    assert rank_software_torch(store) is None


def rank_software_torch(store: Path) -> str | None:
    run = load(store).run
    return run.software.torch or next((st.software.torch for st in run.streams if st.software), None)


def test_tf_function_loop_steps_and_data_wait(loop_run: Any) -> None:
    rank = loop_run.ranks[0]
    assert rank.stream.step_source == "keras_optimizer"
    steps = rank.steps
    # 100 samples in batches of 16: 6 full + 4, two epochs; one apply_gradients per batch
    assert len(steps) == 14
    assert np.array_equal(steps["samples"], np.array(([16.0] * 6 + [4.0]) * 2))
    assert list(steps["epoch"]) == [0] * 7 + [1] * 7
    # every batch sleeps 80 ms in the tf.data map and nothing prefetches it: each step waits that long
    wait = steps["data_wait_ns"]
    assert np.all(wait >= 0.8 * 80e6), wait
    assert np.all(wait <= steps.duration_ns)
    model = rank.model
    assert model["total_params"] == 8 * 4 + 4 + 4 * 1 + 1
    (fw,) = rank.extra["framework"]
    assert fw["backend"] == "tensorflow" and fw["inter_op_threads"] == 0  # TF's default, not set


def test_eager_loop_steps(tmp_path: Path) -> None:
    r = _observe(tmp_path / "store", str(SCRIPTS / "tf_loop.py"), "--epochs", "1", "--samples", "40", "--batch",
                 "8", "--eager", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    steps = load(tmp_path / "store").ranks[0].steps
    assert len(steps) == 5 and np.all(steps["samples"] == 8)
    assert np.isfinite(steps["optimizer_ns"]).all() and np.all(steps["optimizer_ns"] > 0)


def test_no_framework_imported_by_stepscope(tmp_path: Path) -> None:
    r = _observe(tmp_path / "store", str(SCRIPTS / "no_framework.py"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["loaded"] == []  # neither torch, TensorFlow, Keras nor JAX was imported by stepscope
    assert {"tensorflow", "keras"} <= set(out["watchers"])  # the post-import finders wait, nothing more


def test_unknown_keras_version_warns_once_and_training_goes_on(tmp_path: Path) -> None:
    env = {**os.environ, "STEPSCOPE_HOME": str(tmp_path / "store"),
           "PYTHONPATH": os.pathsep.join(p for p in (str(SCRIPTS / "fake_keras2"), os.environ.get("PYTHONPATH"))
                                         if p)}
    r = subprocess.run(stepscope_cmd("run", "--quiet", "--", PY, str(SCRIPTS / "old_keras.py")), capture_output=True,
                       text=True, timeout=120, cwd=tmp_path, env=env)
    assert r.returncode == 0 and "trained" in r.stdout, r.stderr[-3000:]
    rank = load(tmp_path / "store").ranks[0]
    assert len(rank.steps) == 2
    notes = [n for n in rank.notes if "Keras 2.15.0 is not observed" in n]
    assert len(notes) == 1
    assert r.stderr.count("Keras 2.15.0 is not observed") == 1


def test_a_failing_keras_callback_never_breaks_fit(tmp_path: Path) -> None:
    env = {**os.environ, "STEPSCOPE_HOME": str(tmp_path / "store"), "STEPSCOPE_DEBUG_FAULT": "keras"}
    r = subprocess.run(stepscope_cmd("run", "--quiet", "--", PY, str(EXAMPLES / "train_keras.py"), "--epochs", "1",
                                     "--samples", "64", "--val-samples", "16", "--batch-size", "16", "--hidden", "4"),
                       capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-3000:]  # the training finished
    run = load(tmp_path / "store")
    assert run.run.status.value == "completed"
    assert r.stderr.count("the Keras callback failed in train-begin") == 1  # warned once per place


def test_fit_on_a_tf_data_dataset_counts_the_partial_batch(tmp_path: Path) -> None:
    r = _observe(tmp_path / "store", str(EXAMPLES / "train_keras.py"), "--dataset", "--epochs", "2", "--samples", "100",
                 "--val-samples", "40", "--batch-size", "16", "--hidden", "4", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    steps = load(tmp_path / "store").ranks[0].steps
    train, val = steps["phase"] == 0, steps["phase"] == 1
    # .batch(16) without drop_remainder: the batch dimension is not static; 100 = 6 x 16 + 4, 40 = 2 x 16 + 8
    assert np.array_equal(steps["samples"][train], np.array(([16.0] * 6 + [4.0]) * 2))
    assert np.array_equal(steps["samples"][val], np.array(([16.0] * 2 + [8.0]) * 2))
