"""Keras ``fit`` on a ``tf.data`` pipeline whose map sleeps a known time per batch (a known data wait).

    keras_slow_fit.py --sleep 0.06 [--prefetch] [--step-sleep 0.1] [--deterministic] [--generator]

Without ``--prefetch`` the pipeline's injected prefetch is turned off, so every batch is fetched while the
step waits; with it, a callback that sleeps ``--step-sleep`` at each batch's begin gives the pipeline time to
prepare the next batch. ``--deterministic`` turns TensorFlow's op determinism on. ``--generator`` feeds
fit from a Python generator that sleeps ``--sleep`` per batch instead (any Keras backend, KERAS_BACKEND).
Seeded, one thread: prints the loss of each epoch as JSON.
"""

import argparse
import json
import time
from collections.abc import Iterator

import keras
import numpy as np


def make_model() -> keras.Model:
    model = keras.Sequential([keras.Input(shape=(8,)), keras.layers.Dense(4), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    return model


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sleep", type=float, default=0.06, help="seconds the map sleeps per batch")
    p.add_argument("--prefetch", action="store_true")
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--samples", type=int, default=80)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--deterministic", action="store_true")
    p.add_argument("--generator", action="store_true", help="a Python generator that sleeps, not tf.data")
    args = p.parse_args()

    keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(args.samples, 8)).astype("float32")
    y = x[:, :1] * 2.0
    if args.generator:  # any backend: Keras calls next() on it in Python (JAX, PyTorch) or through tf.data
        def batches() -> Iterator[tuple[np.ndarray, np.ndarray]]:
            while True:
                for i in range(0, args.samples, args.batch):
                    time.sleep(args.sleep)
                    yield x[i:i + args.batch], y[i:i + args.batch]

        steps = -(-args.samples // args.batch)
        history = make_model().fit(batches(), epochs=2, steps_per_epoch=steps, verbose=0)
        print(json.dumps({"loss": [float(v) for v in history.history["loss"]]}))
        return

    import tensorflow as tf

    if args.deterministic:
        tf.config.experimental.enable_op_determinism()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)

    def slow(xb: tf.Tensor, yb: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        def sleep(v: tf.Tensor) -> tf.Tensor:
            time.sleep(args.sleep)
            return v

        xb = tf.py_function(sleep, [xb], tf.float32)
        xb.set_shape([None, 8])
        return xb, yb

    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(args.batch).map(slow)
    if not args.prefetch:
        opts = tf.data.Options()
        opts.experimental_optimization.inject_prefetch = False
        ds = ds.with_options(opts)

    class StepWork(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch: int, logs: object = None) -> None:
            time.sleep(args.step_sleep)

    history = make_model().fit(ds, epochs=2, verbose=0, callbacks=[StepWork()])
    print(json.dumps({"loss": [float(v) for v in history.history["loss"]]}))


if __name__ == "__main__":
    main()
