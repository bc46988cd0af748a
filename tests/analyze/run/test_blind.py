"""Loud when blind: a process that imported a training framework but recorded no step leaves a stream with what
stepscope found (framework, version, hooks installed and refused), and the run summary warns with it and the one
thing to do. Real scripts under `stepscope run` (TensorFlow, JAX, mpi4py, a stand-in Keras 2), real store."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from stepscope.analyze.run.summary import summarize_run
from tests.conftest import PY, SCRIPTS, load, stepscope_cmd

pytestmark = pytest.mark.slow
GENERIC = "no torch.optim optimizer stepped"


def _observe(tmp: Path, source: str, env: dict[str, str] | None = None) -> tuple[str, Any]:
    """The script's stdout under `stepscope run`, and the stored run."""
    script = tmp / "script.py"
    script.write_text(textwrap.dedent(source))
    run_env = {**os.environ, "STEPSCOPE_HOME": str(tmp / "store"), **(env or {})}
    run_env.pop("STEPSCOPE_DB", None)
    r = subprocess.run(stepscope_cmd("run", "--quiet", "--", PY, str(script)), capture_output=True, text=True,
                       timeout=300, cwd=tmp, env=run_env)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout, load(tmp / "store")


def _bare(tmp: Path, env: dict[str, str] | None = None) -> str:
    r = subprocess.run([PY, str(tmp / "script.py")], capture_output=True, text=True, timeout=300, cwd=tmp,
                       env={**os.environ, **(env or {})})
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


TF_BY_HAND = """\
    import tensorflow as tf

    w = tf.Variable([[0.5], [-0.25]])
    x = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    y = tf.constant([[1.0], [2.0], [3.0]])
    for _ in range(5):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((x @ w - y) ** 2)
        w.assign_sub(0.01 * tape.gradient(loss, w))
    print(f"{float(loss):.6f}")
"""


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None, reason="tensorflow is not installed")
def test_a_tensorflow_loop_without_an_optimizer_is_named_with_its_hooks(tmp_path: Path) -> None:
    out, data = _observe(tmp_path, TF_BY_HAND)
    assert out == _bare(tmp_path)  # the user's output as without stepscope
    (rank,) = data.ranks
    assert len(rank.steps) == 0 and rank.stream.complete
    notes = {rec["framework"]: rec for rec in rank.extra["hooks"]}
    assert notes["tensorflow"]["installed"] == ["tf.data", "tf.function"] and notes["tensorflow"]["refused"] == {}
    warnings = summarize_run(data).warnings
    tf_version = importlib.metadata.version("tensorflow-cpu")
    keras_version = importlib.metadata.version("keras")
    blind = [w for w in warnings if "no training step was seen" in w]
    assert len(blind) == 1, warnings
    # TensorFlow imports Keras (for tf.keras), whose hooks go in too: both are named, TensorFlow first
    assert blind[0].startswith(f"tensorflow {tf_version} (hooks installed: tf.data, tf.function; refused: none), "
                               f"keras {keras_version} (hooks installed: fit, optimizer, models; refused: none)")
    assert "were imported but no training step was seen" in blind[0]
    assert "stepscope.step()" in blind[0] and "Keras optimizer" in blind[0]
    assert not [w for w in warnings if GENERIC in w or "no process of the command" in w], warnings


JAX_BY_HAND = """\
    import jax
    import jax.numpy as jnp

    w = jnp.array([0.5, -0.25])
    x = jnp.array([[1.0, 2.0], [3.0, 4.0]])
    y = jnp.array([1.0, 2.0])
    loss = lambda w: jnp.mean((x @ w - y) ** 2)
    for _ in range(5):
        w = w - 0.01 * jax.grad(loss)(w)
    print(f"{float(loss(w)):.6f}")
"""


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_a_jax_loop_says_jax_has_no_step_to_hook(tmp_path: Path) -> None:
    out, data = _observe(tmp_path, JAX_BY_HAND)
    assert out == _bare(tmp_path)
    (rank,) = data.ranks
    assert len(rank.steps) == 0
    (blind,) = [w for w in summarize_run(data).warnings if "no training step was seen" in w]
    assert blind.startswith(f"jax {importlib.metadata.version('jax')} was imported but no training step was seen "
                            "(hooks installed: none; refused: none)"), blind
    assert "stepscope.step()" in blind and "stepscope.steps(" in blind


def test_a_refused_keras_names_its_reason(tmp_path: Path) -> None:
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(SCRIPTS / "fake_keras2"), os.environ.get("PYTHONPATH"))
                                         if p)}
    out, data = _observe(tmp_path, "import keras\nprint(keras.__version__)\n", env)
    assert out == "2.15.0\n"
    assert len(data.ranks) == 1
    (blind,) = [w for w in summarize_run(data).warnings if "no training step was seen" in w]
    assert blind.startswith("keras 2.15.0 was imported but no training step was seen (hooks installed: none; "
                            "refused: keras: Keras 2.15.0 is not observed (stepscope knows Keras 3)"), blind


def test_a_process_that_imports_no_framework_writes_nothing(tmp_path: Path) -> None:
    out, data = _observe(tmp_path, "import json\nprint(json.dumps([1, 2]))\n")
    assert out == "[1, 2]\n"
    assert data.ranks == ()
    (warning,) = summarize_run(data).warnings
    assert warning.startswith("no process of the command was observed training")


MPI_NO_STEPS = """\
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    total = 0
    for i in range(3):
        total += comm.allreduce(i)
    print(total)
"""


@pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None, reason="mpi4py is not installed")
def test_the_no_step_warning_names_mpi4py_not_torch_optim(tmp_path: Path) -> None:
    out, data = _observe(tmp_path, MPI_NO_STEPS)
    assert out == "3\n"
    assert len(data.ranks) == 1 and len(data.ranks[0].steps) == 0
    warnings = summarize_run(data).warnings
    assert not [w for w in warnings if "torch" in w], warnings
    assert [w for w in warnings if "mpi4py" in w and "stepscope.step()" in w], warnings


SPAWNED_CHILD_IMPORTS_KERAS = """\
    import multiprocessing as mp


    def child():
        import keras

        assert keras.__version__ == "2.15.0"


    if __name__ == "__main__":
        p = mp.get_context("spawn").Process(target=child)
        p.start()
        p.join()
        print(p.exitcode)
"""


def test_a_multiprocessing_child_that_only_imports_a_framework_writes_nothing(tmp_path: Path) -> None:
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(SCRIPTS / "fake_keras2"), os.environ.get("PYTHONPATH"))
                                         if p)}
    out, data = _observe(tmp_path, SPAWNED_CHILD_IMPORTS_KERAS, env)
    assert out == "0\n"
    assert data.ranks == ()  # a worker or pool process is not a blind trainer


PARENT_OF_A_TRAINER = """\
    import subprocess
    import sys

    import keras

    child = "import stepscope\\nfor _ in stepscope.steps(range(3)):\\n    pass\\n"
    print(subprocess.run([sys.executable, "-c", child]).returncode, keras.__version__)
"""


def test_a_parent_whose_child_trained_is_not_a_blind_stream(tmp_path: Path) -> None:
    # a launcher-like parent imports the framework and lets a child train (torch.multiprocessing.spawn, a
    # subprocess): the run has the trainer's stream only, not a second, empty "rank 0"
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(SCRIPTS / "fake_keras2"), os.environ.get("PYTHONPATH"))
                                         if p)}
    out, data = _observe(tmp_path, PARENT_OF_A_TRAINER, env)
    assert out == "0 2.15.0\n"
    (rank,) = data.ranks
    assert len(rank.steps) == 3
    assert not [w for w in summarize_run(data).warnings if "no training step was seen" in w]
