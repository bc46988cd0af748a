"""The Keras side of benchmarks/overhead.py: ``Model.fit`` of a Dense model whose step takes ~10 ms on one CPU
thread (TensorFlow backend), timed by a callback of its own (batch begin to batch begin, no ``*_batch_end``
method, so Keras' async dispatch stays on). Prints one JSON line with the median step time (first 10 steps
excluded). Run bare or under `stepscope run` (the zero-code Keras / TensorFlow hooks).

    python benchmarks/_keras_loop.py --steps 150 --hidden 1024
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--batch", type=int, default=256)
    args = p.parse_args()

    import keras
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    x = np.random.default_rng(0).normal(size=(args.batch * args.steps, args.hidden)).astype("float32")
    y = x[:, :1]
    model = keras.Sequential([keras.Input(shape=(args.hidden,)), keras.layers.Dense(args.hidden, activation="relu"),
                              keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")

    class Timer(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.times: list[int] = []
            self.t = 0

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            t = time.perf_counter_ns()
            if self.t:
                self.times.append(t - self.t)
            self.t = t

    timer = Timer()
    model.fit(x, y, batch_size=args.batch, epochs=1, verbose=0, callbacks=[timer])
    print(json.dumps({"median_step_ns": statistics.median(timer.times[10:]), "steps": len(timer.times) + 1}))


if __name__ == "__main__":
    main()
