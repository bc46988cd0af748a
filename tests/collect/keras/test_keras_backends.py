"""Keras 3 ``fit`` on the JAX and PyTorch backends marks steps as on the TensorFlow backend (zero code, real
frameworks on CPU)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import EXAMPLES, PY, load, stepscope_cmd

if importlib.util.find_spec("keras") is None:  # found, not imported (TensorFlow takes seconds)
    pytest.skip("keras is not installed (extras tensorflow, jax)", allow_module_level=True)
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_fit_on_other_backends(tmp_path: Path, backend: str) -> None:
    if importlib.util.find_spec(backend) is None:
        pytest.skip(f"{backend} is not installed")
    env = {**os.environ, "STEPSCOPE_HOME": str(tmp_path / "store"), "KERAS_BACKEND": backend}
    env.pop("STEPSCOPE_DB", None)
    r = subprocess.run(stepscope_cmd("run", "--quiet", "--", PY, str(EXAMPLES / "train_keras.py"), "--epochs", "2",
                                     "--samples", "100", "--val-samples", "40", "--batch-size", "16",
                                     "--features", "6", "--hidden", "8"),
                       capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    rank = load(tmp_path / "store").ranks[0]
    assert rank.stream.step_source == "keras"
    steps = rank.steps
    train, val = steps["phase"] == 0, steps["phase"] == 1
    # 100 samples in batches of 16: 6 full + 4; 40 validation samples: 2 full + 8; two epochs
    assert np.array_equal(steps["samples"][train], np.array(([16.0] * 6 + [4.0]) * 2))
    assert np.array_equal(steps["samples"][val], np.array(([16.0] * 2 + [8.0]) * 2))
    assert list(steps["epoch"][train]) == [0] * 7 + [1] * 7
    assert rank.model["total_params"] == 6 * 8 + 8 + 8 * 3 + 3
    (fw,) = rank.extra["framework"]
    assert fw["backend"] == backend and "tensorflow" not in fw
    assert (fw.get("jax_backend") == "cpu") == (backend == "jax")
