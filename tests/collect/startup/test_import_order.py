"""TensorFlow, Keras, ``tf.keras`` and JAX observed whatever the order of their imports (real TensorFlow, Keras and
JAX on CPU under `stepscope run`, real store).

Each script is written here with the exact import lines of the style it stands for: keras-io's examples
(``import numpy as np`` / ``from tensorflow import keras`` / ``from tensorflow.keras import layers``, as
examples/vision/mnist_convnet.py), tensorflow.org's tutorials (``import tensorflow as tf`` then ``tf.keras...``),
a ``GradientTape`` loop with every import inside a function, and JAX imported before Keras. Counts are derived
by hand from the data sizes, not read back from stepscope."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import PY, load, stepscope_cmd

if importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("keras") is None:
    pytest.skip("tensorflow or keras is not installed (extras tensorflow, jax)", allow_module_level=True)
pytestmark = pytest.mark.slow

MNIST_CONVNET_PARAMS = (3 * 3 * 1 * 32 + 32) + (3 * 3 * 32 * 64 + 64) + (5 * 5 * 64 * 10 + 10)
"""keras-io's mnist_convnet on 28x28x1 images: two 3x3 convolutions (32, 64 filters), each followed by a 2x2 max
pool (28 -> 26 -> 13 -> 11 -> 5), then a 10-way dense layer on the 5 x 5 x 64 flattened maps: 34,826."""


def _observe(tmp: Path, source: str, env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess[str],
                                                                                Any]:
    script = tmp / "train.py"
    script.write_text(textwrap.dedent(source))
    run_env = {**os.environ, "STEPSCOPE_HOME": str(tmp / "store"), **(env or {})}
    run_env.pop("STEPSCOPE_DB", None)
    r = subprocess.run(stepscope_cmd("run", "--quiet", "--", PY, str(script)), capture_output=True, text=True,
                       timeout=300, cwd=tmp, env=run_env)
    assert r.returncode == 0, r.stderr[-3000:]
    return r, load(tmp / "store")


KERAS_IO = """\
    import numpy as np
    from tensorflow import keras
    from tensorflow.keras import layers

    num_classes = 10
    input_shape = (28, 28, 1)
    rng = np.random.default_rng(0)
    x_train = rng.random((256, 28, 28, 1), dtype=np.float32)
    y_train = keras.utils.to_categorical(rng.integers(0, num_classes, 256), num_classes)
    model = keras.Sequential(
        [
            keras.Input(shape=input_shape),
            layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Conv2D(64, kernel_size=(3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Flatten(),
            layers.Dropout(0.5),
            layers.Dense(num_classes, activation="softmax"),
        ]
    )
    batch_size = 50
    epochs = 3
    model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
    model.fit(x_train, y_train, batch_size=batch_size, epochs=epochs, validation_split=0.25, verbose=0)
    print("trained")
"""


def _fit_counts(rank: Any, *, epochs: int, train: list[float], val: list[float]) -> None:
    """Training and validation steps of a fit: ``train`` / ``val`` are one epoch's samples per batch."""
    steps = rank.steps
    t, v = steps["phase"] == 0, steps["phase"] == 1
    assert rank.stream.step_source == "keras"
    assert np.array_equal(steps["samples"][t], np.array(train * epochs))
    assert list(steps["epoch"][t]) == [e for e in range(epochs) for _ in train]
    assert list(steps["index"][t]) == list(range(len(train) * epochs))
    assert np.array_equal(steps["samples"][v], np.array(val * epochs))


def test_keras_io_style_tensorflow_imported_first(tmp_path: Path) -> None:
    r, run = _observe(tmp_path, KERAS_IO)
    assert r.stdout.strip() == "trained"
    (rank,) = run.ranks
    # 256 samples, validation_split 0.25: 192 to train (3 x 50 + 42) and the last 64 to validate (50 + 14)
    _fit_counts(rank, epochs=3, train=[50.0, 50.0, 50.0, 42.0], val=[50.0, 14.0])
    assert rank.model["total_params"] == rank.model["trainable_params"] == MNIST_CONVNET_PARAMS == 34_826
    (fw,) = rank.extra["framework"]
    assert fw["tensorflow"] == importlib.metadata.version("tensorflow-cpu")
    assert fw["keras"] == importlib.metadata.version("keras")
    # Keras' hooks went in while TensorFlow was still importing it: all of them, none refused, none failing later
    hooks = {rec["framework"]: rec for rec in rank.extra["hooks"]}
    assert hooks["keras"]["installed"] == ["fit", "optimizer", "models"] and hooks["keras"]["refused"] == {}
    assert hooks["tensorflow"]["installed"] == ["tf.data", "tf.function"] and hooks["tensorflow"]["refused"] == {}
    assert rank.notes == ()
    assert np.isfinite(rank.steps["data_wait_ns"]).all()  # fit's input metered (collect/keras/keras_datawait.py)


TF_ORG = """\
    import tensorflow as tf
    import numpy as np

    x_train = np.random.default_rng(1).random((100, 6), dtype=np.float32)
    y_train = np.random.default_rng(2).integers(0, 4, 100)
    model = tf.keras.models.Sequential([
      tf.keras.Input(shape=(6,)),
      tf.keras.layers.Dense(16, activation='relu'),
      tf.keras.layers.Dropout(0.2),
      tf.keras.layers.Dense(4)
    ])
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer='adam', loss=loss_fn, metrics=['accuracy'])
    model.fit(x_train, y_train, batch_size=32, epochs=2, verbose=0)
    print("trained")
"""


def test_tensorflow_org_style_tf_keras(tmp_path: Path) -> None:
    r, run = _observe(tmp_path, TF_ORG)
    assert r.stdout.strip() == "trained"
    (rank,) = run.ranks
    # 100 samples in batches of 32: 3 x 32 + 4, two epochs, no validation
    _fit_counts(rank, epochs=2, train=[32.0, 32.0, 32.0, 4.0], val=[])
    assert rank.model["total_params"] == (6 * 16 + 16) + (16 * 4 + 4)


TAPE_IN_FUNCTION = """\
    def main():
        import tensorflow as tf

        x = tf.random.stateless_normal((60, 3), seed=(1, 2))
        y = tf.reduce_sum(x, axis=1, keepdims=True)
        dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
        model = tf.keras.Sequential([tf.keras.Input(shape=(3,)), tf.keras.layers.Dense(1)])
        optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)
        loss_fn = tf.keras.losses.MeanSquaredError()

        @tf.function
        def train_step(xb, yb):
            with tf.GradientTape() as tape:
                loss = loss_fn(yb, model(xb, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            return loss

        for epoch in range(3):
            for xb, yb in dataset:
                train_step(xb, yb)
        print("trained")


    if __name__ == "__main__":
        main()
"""


def test_gradient_tape_loop_imported_inside_a_function(tmp_path: Path) -> None:
    r, run = _observe(tmp_path, TAPE_IN_FUNCTION)
    assert r.stdout.strip() == "trained"
    (rank,) = run.ranks
    steps = rank.steps
    assert rank.stream.step_source == "keras_optimizer"
    # 60 samples in batches of 16: 3 x 16 + 12, three epochs, one apply_gradients per batch
    assert np.array_equal(steps["samples"], np.array([16.0, 16.0, 16.0, 12.0] * 3))
    assert list(steps["epoch"]) == [0] * 4 + [1] * 4 + [2] * 4
    assert rank.model["total_params"] == 3 + 1


JAX_FIRST = """\
    import os

    os.environ["KERAS_BACKEND"] = "jax"
    import jax
    import jax.numpy as jnp
    import keras
    import numpy as np

    x = np.asarray(jnp.ones((40, 5)) * np.arange(40)[:, None] / 40, dtype=np.float32)
    y = x.sum(axis=1, keepdims=True)
    model = keras.Sequential([keras.Input(shape=(5,)), keras.layers.Dense(3), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x, y, batch_size=16, epochs=2, verbose=0)
    print("trained", keras.backend.backend())
"""


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")
def test_jax_imported_before_keras(tmp_path: Path) -> None:
    r, run = _observe(tmp_path, JAX_FIRST)
    assert r.stdout.strip() == "trained jax"
    (rank,) = run.ranks
    # 40 samples in batches of 16: 16, 16, 8; two epochs
    _fit_counts(rank, epochs=2, train=[16.0, 16.0, 8.0], val=[])
    assert rank.model["total_params"] == (5 * 3 + 3) + (3 + 1)
