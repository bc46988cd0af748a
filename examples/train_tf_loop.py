"""A custom TensorFlow training loop: ``tf.GradientTape`` and a Keras optimizer over a ``tf.data`` pipeline.

    stepscope run -- python examples/train_tf_loop.py --epochs 2

Zero code: each ``apply_gradients`` of the Keras optimizer (here inside a ``tf.function``) is one step;
the time ``for x, y in dataset`` waits for the next batch is data wait; samples and epochs come from the
batches and the passes over the dataset (docs/frameworks.md).
"""

import argparse

import numpy as np


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--eager", action="store_true", help="run the step eagerly instead of in a tf.function")
    args = p.parse_args()

    import keras
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.samples, args.features)).astype("float32")
    y = (x @ rng.normal(size=(args.features, 1))).astype("float32")
    dataset = (tf.data.Dataset.from_tensor_slices((x, y)).shuffle(args.samples, seed=0)
               .batch(args.batch_size).prefetch(tf.data.AUTOTUNE))

    model = keras.Sequential([keras.Input(shape=(args.features,)), keras.layers.Dense(64, activation="relu"),
                              keras.layers.Dense(1)], name="regressor")
    optimizer = keras.optimizers.Adam(1e-3)
    loss_fn = keras.losses.MeanSquaredError()

    def train_step(xb, yb):
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    step = train_step if args.eager else tf.function(train_step)
    for epoch in range(args.epochs):
        for xb, yb in dataset:
            loss = step(xb, yb)
        print(f"epoch {epoch}: loss {float(loss):.4f}")


if __name__ == "__main__":
    main()
