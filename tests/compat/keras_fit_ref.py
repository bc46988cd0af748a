"""Compatibility reference for Keras 3 `Model.fit` (TensorFlow backend) with validation data, unmodified (zero
code). tests/compat/test_compat.py checks the stored counts against the arguments.

    keras_fit_ref.py --epochs 2 --samples 150 --batch 32 --val-samples 40 --features 10 --hidden 16
"""

import argparse

import keras
import numpy as np


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--samples", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--val-samples", type=int, required=True)
    p.add_argument("--features", type=int, required=True)
    p.add_argument("--hidden", type=int, required=True)
    args = p.parse_args()

    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.samples, args.features)).astype("float32")
    y = rng.integers(0, 2, size=args.samples)
    xv = rng.normal(size=(args.val_samples, args.features)).astype("float32")
    yv = rng.integers(0, 2, size=args.val_samples)
    model = keras.Sequential([keras.Input(shape=(args.features,)),
                              keras.layers.Dense(args.hidden, activation="relu", name="hidden"),
                              keras.layers.Dense(2, name="out")], name="compat")
    model.compile(optimizer=keras.optimizers.SGD(0.05),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=args.batch, epochs=args.epochs, validation_data=(xv, yv), verbose=0)


if __name__ == "__main__":
    main()
