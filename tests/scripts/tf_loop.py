"""A custom TensorFlow loop: ``tf.GradientTape`` + a Keras optimizer's ``apply_gradients`` over a ``tf.data``
pipeline whose map sleeps (a known data wait).

    tf_loop.py --epochs 2 --samples 96 --batch 16 --sleep 0.05 [--eager]

``--eager`` runs the step eagerly; by default it is a ``tf.function``. Prints nothing.
"""

import argparse
import time

import keras
import numpy as np
import tensorflow as tf


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--samples", type=int, default=96)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--sleep", type=float, default=0.0, help="seconds the map sleeps per batch")
    p.add_argument("--eager", action="store_true")
    args = p.parse_args()

    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.samples, 8)).astype("float32")
    y = rng.normal(size=(args.samples, 1)).astype("float32")

    def slow(xb: tf.Tensor, yb: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        def sleep(v: tf.Tensor) -> tf.Tensor:
            time.sleep(args.sleep)
            return v

        xb = tf.py_function(sleep, [xb], tf.float32)
        xb.set_shape([None, 8])
        return xb, yb

    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(args.batch)
    if args.sleep:
        ds = ds.map(slow)
        opts = tf.data.Options()
        opts.experimental_optimization.inject_prefetch = False  # no background fetch: each batch waits in full
        ds = ds.with_options(opts)
    model = keras.Sequential([keras.Input(shape=(8,)), keras.layers.Dense(4, activation="relu"),
                              keras.layers.Dense(1)])
    opt = keras.optimizers.SGD(0.01)
    loss_fn = keras.losses.MeanSquaredError()

    def step(xb: tf.Tensor, yb: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    train_step = step if args.eager else tf.function(step)
    for _ in range(args.epochs):
        for xb, yb in ds:
            train_step(xb, yb)


if __name__ == "__main__":
    main()
