"""JAX + optax observed through the API under `stepscope run` (real JAX on CPU, real store)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import EXAMPLES, PY, load, stepscope_cmd

if importlib.util.find_spec("jax") is None:  # found, not imported (TensorFlow takes seconds)
    pytest.skip("jax is not installed (extras tensorflow, jax)", allow_module_level=True)
if importlib.util.find_spec("optax") is None:  # found, not imported (TensorFlow takes seconds)
    pytest.skip("optax is not installed (extras tensorflow, jax)", allow_module_level=True)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def jax_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    d = tmp_path_factory.mktemp("jax")
    env = {**os.environ, "STEPSCOPE_HOME": str(d / "store")}
    env.pop("STEPSCOPE_DB", None)
    r = subprocess.run(stepscope_cmd("run", "--quiet", "--", PY, str(EXAMPLES / "train_jax.py"), "--epochs", "2",
                                     "--samples", "200", "--batch-size", "32", "--fetch-sleep", "0.05"),
                       capture_output=True, text=True, timeout=300, cwd=d, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return d / "store", load(d / "store")


def test_jax_api_steps_samples_data_wait(jax_run: tuple[Path, Any]) -> None:
    rank = jax_run[1].ranks[0]
    assert rank.stream.step_source == "api"
    steps = rank.steps
    # 200 samples in batches of 32: 6 full + 8, two epochs, one stepscope.steps item each
    assert len(steps) == 14
    assert np.array_equal(steps["samples"], np.array(([32.0] * 6 + [8.0]) * 2))
    # each batch sleeps 50 ms before it is yielded: that is data wait, inside the step
    wait = steps["data_wait_ns"]
    assert np.all(wait >= 0.9 * 50e6), wait
    assert np.all(wait <= steps.duration_ns)


def test_jax_regions_and_loss(jax_run: tuple[Path, Any]) -> None:
    rank = jax_run[1].ranks[0]
    regions = rank.regions
    assert len(regions) == 14 and set(regions.names) == {"train_step"}
    # the region blocks until the jitted step is done: it lies within its step, after the data wait
    steps = rank.steps
    assert np.all(regions["duration_ns"] <= steps.duration_ns - steps["data_wait_ns"])
    losses = [v for c, v in zip(rank.metrics["name_code"], rank.metrics["value"]) if rank.metrics.names[c] == "loss"]
    assert len(losses) == 14 and all(np.isfinite(losses))
    (fw,) = rank.extra["framework"]
    assert fw["name"] == "jax" and fw["jax"] == importlib.metadata.version("jax") and fw["jax_backend"] == "cpu"


def test_show_on_a_jax_run(jax_run: tuple[Path, Any]) -> None:
    env = {**os.environ, "STEPSCOPE_HOME": str(jax_run[0])}
    r = subprocess.run(stepscope_cmd("show", "latest"), capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert "train_step" in r.stdout and "marked by api" in " ".join(r.stdout.split())
