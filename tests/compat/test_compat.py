"""The compatibility suite: one reference script per framework, observed as a user runs it (`stepscope run`, zero
code; JAX through the API), its stored counts checked exactly against figures computed here from the script's
arguments: steps, epochs, samples per step, validation steps and parameters.

It runs in whatever environment runs pytest: the pinned one in the normal suite, and each version set of
`benchmarks/compat.py` (`make compat`), which builds one virtual environment per set and runs this module in it.
A framework that is not installed there is skipped (the torch-only sets skip TensorFlow and JAX)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import itertools
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import PY, load, stepscope_cmd

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parent


def _require(*modules: str) -> None:
    for module in modules:
        if importlib.util.find_spec(module) is None:  # found, not imported: TensorFlow takes seconds
            pytest.skip(f"{module} is not installed in this environment")


def _batches(samples: int, batch: int) -> list[float]:
    """Samples of each batch of a loader over SAMPLES items in batches of BATCH, the last one partial."""
    full, rest = divmod(samples, batch)
    return [float(batch)] * full + ([float(rest)] if rest else [])


def _plain(script: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPSCOPE")}
    return subprocess.run([PY, str(HERE / script), *args], capture_output=True, text=True, timeout=300, cwd=cwd,
                          env=env)


def _observed(script: str, args: list[str], tmp: Path) -> tuple[subprocess.CompletedProcess[str], Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPSCOPE")}
    env["STEPSCOPE_HOME"] = str(tmp / "store")
    proc = subprocess.run(stepscope_cmd("run", "--quiet", "--sample-interval", "0.2", "--", PY, str(HERE / script),
                                        *args), capture_output=True, text=True, timeout=300, cwd=tmp, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = load(tmp / "store")
    assert data.run.status.value == "completed" and data.run.exit_code == 0
    assert len(data.ranks) == 1
    return proc, data


def _dense_params(*widths: int) -> int:
    """Weights and biases of a stack of dense layers of these widths (input first)."""
    return sum(a * b + b for a, b in itertools.pairwise(widths))


def test_torch_loop_counts_exactly(tmp_path: Path) -> None:
    _require("torch")
    epochs, samples, batch, val_samples, val_batch, features, hidden = 3, 200, 32, 50, 16, 12, 24
    args = [f"--{k}={v}" for k, v in (("epochs", epochs), ("samples", samples), ("batch", batch),
                                       ("val-samples", val_samples), ("val-batch", val_batch),
                                       ("features", features), ("hidden", hidden))]
    proc, data = _observed("torch_ref.py", args, tmp_path)
    rank = data.ranks[0]
    assert rank.stream.step_source == "optimizer"
    steps = rank.steps
    train, val = steps["phase"] == 0, steps["phase"] == 1
    per_epoch = _batches(samples, batch)  # 6 x 32 + 8
    assert list(steps["samples"][train]) == per_epoch * epochs
    assert list(steps["epoch"][train]) == [e for e in range(epochs) for _ in per_epoch]
    assert list(steps["index"][train]) == list(range(len(per_epoch) * epochs))
    val_per_epoch = _batches(val_samples, val_batch)  # 3 x 16 + 2, an eval-mode forward each
    assert list(steps["samples"][val]) == val_per_epoch * epochs
    assert int(train.sum() + val.sum()) == len(steps)
    model = rank.model
    assert model is not None
    assert model["total_params"] == model["trainable_params"] == _dense_params(features, hidden, 3)
    # the version the run says it ran with is the one installed here (torch.__version__ carries the build's local
    # label, e.g. 2.1.2+cu121, which the package index's version 2.1.2 may not)
    torch_version = data.run.software.torch or next(s.software.torch for s in data.run.streams if s.software)
    assert torch_version is not None
    assert torch_version.split("+")[0] == importlib.metadata.version("torch").split("+")[0]
    # the user's output is the same as without stepscope, to the last bit of every loss
    bare = _plain("torch_ref.py", args, tmp_path)
    assert bare.returncode == 0, bare.stderr[-3000:]
    assert proc.stdout == bare.stdout and proc.stdout.count("\n") == epochs
    assert proc.stderr == bare.stderr, proc.stderr[-3000:]


def test_keras_fit_counts_exactly(tmp_path: Path) -> None:
    _require("tensorflow", "keras")
    epochs, samples, batch, val_samples, features, hidden = 2, 150, 32, 40, 10, 16
    args = [f"--{k}={v}" for k, v in (("epochs", epochs), ("samples", samples), ("batch", batch),
                                       ("val-samples", val_samples), ("features", features), ("hidden", hidden))]
    _, data = _observed("keras_fit_ref.py", args, tmp_path)
    rank = data.ranks[0]
    assert rank.stream.step_source == "keras"
    steps = rank.steps
    train, val = steps["phase"] == 0, steps["phase"] == 1
    per_epoch = _batches(samples, batch)  # 4 x 32 + 22
    assert list(steps["samples"][train]) == per_epoch * epochs
    assert list(steps["epoch"][train]) == [e for e in range(epochs) for _ in per_epoch]
    val_per_epoch = _batches(val_samples, batch)  # fit's validation batch is the training one: 32 + 8
    assert list(steps["samples"][val]) == val_per_epoch * epochs
    assert list(steps["epoch"][val]) == [e for e in range(epochs) for _ in val_per_epoch]
    assert int(train.sum() + val.sum()) == len(steps)
    model = rank.model
    assert model is not None and model["name"] == "compat"
    assert model["total_params"] == model["trainable_params"] == _dense_params(features, hidden, 2)
    (fw,) = rank.extra["framework"]
    assert fw["keras"] == importlib.metadata.version("keras")


def test_tf_gradient_tape_loop_counts_exactly(tmp_path: Path) -> None:
    _require("tensorflow", "keras")
    epochs, samples, batch, features, hidden = 2, 100, 16, 8, 4
    args = [f"--{k}={v}" for k, v in (("epochs", epochs), ("samples", samples), ("batch", batch),
                                       ("features", features), ("hidden", hidden))]
    _, data = _observed("tf_tape_ref.py", args, tmp_path)
    rank = data.ranks[0]
    assert rank.stream.step_source == "keras_optimizer"
    steps = rank.steps
    per_epoch = _batches(samples, batch)  # 6 x 16 + 4: one apply_gradients per batch
    assert list(steps["samples"]) == per_epoch * epochs
    assert list(steps["epoch"]) == [e for e in range(epochs) for _ in per_epoch]
    assert list(steps["phase"]) == [0] * len(per_epoch) * epochs
    model = rank.model
    assert model is not None
    assert model["total_params"] == model["trainable_params"] == _dense_params(features, hidden, 1)


def test_jax_api_counts_exactly(tmp_path: Path) -> None:
    _require("jax", "optax")
    epochs, samples, batch, features, hidden = 2, 200, 32, 16, 32
    args = [f"--{k}={v}" for k, v in (("epochs", epochs), ("samples", samples), ("batch", batch),
                                       ("features", features), ("hidden", hidden))]
    _, data = _observed("jax_ref.py", args, tmp_path)
    rank = data.ranks[0]
    assert rank.stream.step_source == "api"
    steps = rank.steps
    per_epoch = _batches(samples, batch)  # 6 x 32 + 8, one stepscope.steps item each
    n = len(per_epoch) * epochs
    assert list(steps["samples"]) == per_epoch * epochs
    assert list(steps["index"]) == list(range(n))
    assert np.all(steps.duration_ns > 0)
    # one train_step region and one logged loss per step
    regions = rank.regions
    assert len(regions) == n and set(regions.names) == {"train_step"}
    logged = [rank.metrics.names[c] for c in rank.metrics["name_code"]]
    assert logged.count("loss") == n
    (fw,) = rank.extra["framework"]
    assert fw["jax"] == importlib.metadata.version("jax")
