"""Overhead of the Keras / TensorFlow hooks, measured in one process (TensorFlow imports once).

1. Paired fit: the same Keras ``fit`` (a Dense model whose step takes ~10 ms on one CPU thread) runs with
   the stepscope hooks installed and removed, interleaved over several rounds so that machine drift hits
   both alike; prints the median step time of each (from a timing callback of its own) and the ratio.
2. Per-step cost of the callback alone: ``on_train_batch_begin`` (which ends the previous step into the
   session's buffers) called in a loop, and the ``tf.function`` call wrapper around a
   trivial function, in µs.

Target: < 1% of a 10 ms step.

    python benchmarks/keras_overhead.py [--rounds 5] [--steps 100]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--hidden", type=int, default=1024)
    args = p.parse_args()

    import keras
    import numpy as np
    import tensorflow as tf

    from stepscope.collect import keras_hooks, tensorflow_hooks
    from stepscope.collect.options import Options
    from stepscope.collect.session import Session, set_current

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    session = Session(Path(tempfile.mkdtemp()) / "run", "bench", Options())
    set_current(session)

    batch = 256
    x = np.random.default_rng(0).normal(size=(batch * args.steps, args.hidden)).astype("float32")
    y = x[:, :1]
    model = keras.Sequential([keras.Input(shape=(args.hidden,)), keras.layers.Dense(args.hidden, activation="relu"),
                              keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")

    class Timer(keras.callbacks.Callback):
        """Time from one batch's begin to the next (no *_batch_end method: Keras' async dispatch stays on)."""

        def __init__(self) -> None:
            super().__init__()
            self.times: list[int] = []
            self.t = 0

        def on_train_batch_begin(self, b: int, logs: Any = None) -> None:
            t = time.perf_counter_ns()
            if self.t:
                self.times.append(t - self.t)
            self.t = t

    def fit_median() -> float:
        timer = Timer()
        model.fit(x, y, batch_size=batch, epochs=1, verbose=0, callbacks=[timer])
        return statistics.median(timer.times[5:])

    def install() -> None:
        tensorflow_hooks.install_tensorflow_hooks(session)
        keras_hooks.install_keras_hooks(session)

    def remove() -> None:
        keras_hooks.remove_all()
        tensorflow_hooks.remove_all()
        session.step_source = None

    fit_median()  # trace and warm up
    bare: list[float] = []
    hooked: list[float] = []
    for _ in range(args.rounds):
        bare.append(fit_median())
        install()
        hooked.append(fit_median())
        remove()
    b, h = statistics.median(bare), statistics.median(hooked)
    print(f"fit step, median of {args.rounds} rounds x {args.steps} steps: bare {b / 1e6:.3f} ms, "
          f"hooked {h / 1e6:.3f} ms, ratio {h / b:.4f}")

    install()
    cb = keras_hooks.StepscopeKerasCallback(session)
    cb.set_model(model)
    cb.on_train_begin()
    n = 20000
    t0 = time.perf_counter_ns()
    for i in range(n):
        cb.on_train_batch_begin(i)
    per_step = (time.perf_counter_ns() - t0) / n
    f = tf.function(lambda: tf.constant(1.0))
    f()
    remove()
    t0 = time.perf_counter_ns()
    for _ in range(2000):
        f()
    bare_call = (time.perf_counter_ns() - t0) / 2000
    install()
    t0 = time.perf_counter_ns()
    for _ in range(2000):
        f()
    hooked_call = (time.perf_counter_ns() - t0) / 2000
    remove()
    print(f"callback per step: {per_step / 1e3:.1f} µs ({per_step / b * 100:.3f}% of the bare step); "
          f"tf.function call: bare {bare_call / 1e3:.1f} µs, hooked {hooked_call / 1e3:.1f} µs")
    session.close()


if __name__ == "__main__":
    main()
