"""`stepscope run --profile-steps N` on JAX and Keras (TensorFlow backend) runs: the framework's own profiler
around the chosen steps, its profile converted and read by `show --traces` / `trace analyze`."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepscope.collect.keras.fwprofile import STEP_ANNOTATION
from stepscope.traces import xla
from tests.conftest import EXAMPLES, PY, SCRIPTS, load, stepscope_cmd

if importlib.util.find_spec("jax") is None:
    pytest.skip("jax is not installed (extras tensorflow, jax)", allow_module_level=True)
pytestmark = pytest.mark.slow
SLEEP_NS = 20_000_000


def _run(d: Path, *cmd: str, opts: tuple[str, ...]) -> tuple[Path, Any]:
    env = {**os.environ, "STEPSCOPE_HOME": str(d / "store")}
    env.pop("STEPSCOPE_DB", None)
    r = subprocess.run(stepscope_cmd("run", "--quiet", *opts, "--", PY, *cmd), capture_output=True, text=True,
                       timeout=300, cwd=d, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return d / "store", load(d / "store")


def _trace_steps(store: Path, run: Any) -> dict[str, Any]:
    env = {**os.environ, "STEPSCOPE_HOME": str(store)}
    env.pop("STEPSCOPE_DB", None)
    r = subprocess.run(stepscope_cmd("show", run.run.id, "--traces", "--json"), capture_output=True, text=True,
                       timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    data: dict[str, Any] = json.loads(r.stdout)
    return data


def test_step_annotation_names_agree() -> None:
    assert STEP_ANNOTATION == xla.STEP_ANNOTATION


def test_jax_profile_window(tmp_path: Path) -> None:
    store, data = _run(tmp_path, str(SCRIPTS / "jax_profiled.py"), "12",
                       opts=("--profile-steps", "3", "--profile-skip", "2"))
    rank = data.ranks[0]
    assert len(rank.steps) == 12
    (win,) = rank.extra["profile_window"]
    # skip 2, wait 1 (traced from step 3), warm-up 1: steps 4..6 kept
    assert (win["first_step"], win["last_step"], win["traced_first_step"]) == (4, 6, 3)
    assert win["framework"] == "jax" and win["trace"] == "artifacts/traces/rank0.trace.json.gz"
    assert (Path(data.path) / win["trace"]).is_file()
    out = _trace_steps(store, data)
    (r0,) = out["ranks"]
    steps = r0["steps"]["steps"]
    assert [s["step"] for s in steps] == [4, 5, 6]
    wall = dict(zip(rank.steps["index"].tolist(), rank.steps.duration_ns.tolist(), strict=True))
    for s in steps:
        assert s["dur_ns"] >= SLEEP_NS
        # the annotation spans the step between the same two boundaries stepscope timed
        assert abs(s["dur_ns"] - wall[s["step"]]) <= 0.25 * wall[s["step"]] + 1e6
    assert r0["gpu_events"] >= 3  # the XLA ops of the three steps, executed on the CPU


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="tensorflow is not installed")
def test_keras_tensorflow_profile_window(tmp_path: Path) -> None:
    store, data = _run(tmp_path, str(EXAMPLES / "train_keras.py"), "--epochs", "1", "--samples", "320",
                       opts=("--profile-steps", "2", "--profile-skip", "3"))
    rank = data.ranks[0]
    assert int((rank.steps["phase"] == 0).sum()) == 10  # 320 samples in batches of 32
    (win,) = rank.extra["profile_window"]
    assert (win["first_step"], win["last_step"], win["framework"]) == (5, 6, "tensorflow")
    out = _trace_steps(store, data)
    (r0,) = out["ranks"]
    assert [s["step"] for s in r0["steps"]["steps"]] == [5, 6]
    components = {k["component"] for k in r0["kernels"]["by_component"]}
    assert "gemm" in components  # the Dense layers' MatMul ops
    assert np.isfinite(r0["steps"]["median_ns"])


def test_run_ending_inside_the_jax_window_keeps_the_profile(tmp_path: Path) -> None:
    store, data = _run(tmp_path, str(SCRIPTS / "jax_profiled.py"), "6",
                       opts=("--profile-steps", "5", "--profile-skip", "1"))
    rank = data.ranks[0]
    assert len(rank.steps) == 6
    (win,) = rank.extra["profile_window"]
    assert win["first_step"] == 3 and win["carried_step"] is None  # stopped at exit, not at a boundary
    out = _trace_steps(store, data)
    # steps 3, 4 and 5 ran inside the window; the annotation opened when the loop asked for a 7th item is dropped
    assert [s["step"] for s in out["ranks"][0]["steps"]["steps"]] == [3, 4, 5]
    assert "ended after 6 steps, before its profiler window (steps 3-7) was complete" in " ".join(rank.notes)
