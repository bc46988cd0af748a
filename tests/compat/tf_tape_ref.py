"""Compatibility reference for a TensorFlow custom loop: `tf.GradientTape` and a Keras optimizer's
`apply_gradients` in a `tf.function`, over a `tf.data` dataset, unmodified (zero code), imported as
tensorflow.org's tutorials do (`import tensorflow as tf`, then `tf.keras`).
tests/compat/test_compat.py checks the stored counts against the arguments.

    tf_tape_ref.py --epochs 2 --samples 100 --batch 16 --features 8 --hidden 4
"""

import argparse

import numpy as np
import tensorflow as tf


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--samples", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--features", type=int, required=True)
    p.add_argument("--hidden", type=int, required=True)
    args = p.parse_args()

    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.samples, args.features)).astype("float32")
    y = rng.normal(size=(args.samples, 1)).astype("float32")
    ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(args.batch)
    model = tf.keras.Sequential([tf.keras.Input(shape=(args.features,)),
                                 tf.keras.layers.Dense(args.hidden, activation="relu"), tf.keras.layers.Dense(1)])
    opt = tf.keras.optimizers.SGD(0.01)
    loss_fn = tf.keras.losses.MeanSquaredError()

    @tf.function  # type: ignore[untyped-decorator]
    def train_step(xb: tf.Tensor, yb: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    for _ in range(args.epochs):
        for xb, yb in ds:
            train_step(xb, yb)


if __name__ == "__main__":
    main()
