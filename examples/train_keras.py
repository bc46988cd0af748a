"""Keras 3 ``Model.fit`` on synthetic data, with validation: observed with zero code.

    stepscope run -- python examples/train_keras.py --epochs 2

Steps, validation steps, epochs, samples, the model summary and the TensorFlow settings are recorded by
the callback that stepscope adds to ``fit`` (docs/frameworks.md). Use ``--dataset`` to feed ``fit`` a
``tf.data`` pipeline instead of arrays.
"""

import argparse

import numpy as np


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--samples", type=int, default=1000)
    p.add_argument("--val-samples", type=int, default=200)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--dataset", action="store_true", help="feed fit a tf.data.Dataset instead of arrays")
    p.add_argument("--inter", type=int, default=None, help="tf.config inter-op threads")
    p.add_argument("--intra", type=int, default=None, help="tf.config intra-op threads")
    args = p.parse_args()

    import keras

    if args.inter is not None or args.intra is not None:
        import tensorflow as tf

        if args.inter is not None:
            tf.config.threading.set_inter_op_parallelism_threads(args.inter)
        if args.intra is not None:
            tf.config.threading.set_intra_op_parallelism_threads(args.intra)

    rng = np.random.default_rng(0)
    w = rng.normal(size=(args.features, 3))
    x = rng.normal(size=(args.samples + args.val_samples, args.features)).astype("float32")
    y = (x @ w).argmax(axis=1)
    (xt, yt), (xv, yv) = (x[:args.samples], y[:args.samples]), (x[args.samples:], y[args.samples:])

    model = keras.Sequential([
        keras.Input(shape=(args.features,)),
        keras.layers.Dense(args.hidden, activation="relu", name="hidden"),
        keras.layers.Dense(3, name="logits"),
    ], name="mlp")
    model.compile(optimizer=keras.optimizers.Adam(1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    if args.dataset:
        import tensorflow as tf

        train = tf.data.Dataset.from_tensor_slices((xt, yt)).batch(args.batch_size).prefetch(2)
        val = tf.data.Dataset.from_tensor_slices((xv, yv)).batch(args.batch_size)
        model.fit(train, validation_data=val, epochs=args.epochs, verbose=0)
    else:
        model.fit(xt, yt, batch_size=args.batch_size, epochs=args.epochs, validation_data=(xv, yv), verbose=0)


if __name__ == "__main__":
    main()
