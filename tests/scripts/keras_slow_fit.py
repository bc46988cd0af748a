"""Keras ``fit`` on a ``tf.data`` pipeline whose map sleeps a known time per batch (a known data wait).

    keras_slow_fit.py --sleep 0.06 [--prefetch] [--step-sleep 0.1] [--deterministic] [--generator]
                      [--samples 80] [--batch 16] [--raise-at N] [--unknown-length]

Without ``--prefetch`` the pipeline's injected prefetch is turned off, so every batch is fetched while the
step waits; with it, a callback that sleeps ``--step-sleep`` at each batch's begin gives the pipeline time to
prepare the next batch. ``--deterministic`` turns TensorFlow's op determinism on. ``--generator`` feeds
fit from a Python generator that sleeps ``--sleep`` per batch instead (any Keras backend, KERAS_BACKEND).
``--raise-at N`` makes a callback raise at the begin of the N-th training batch of the fit (0-based, over
epochs): fit stops with that exception, which the script catches (it then prints an empty loss list).
``--unknown-length`` puts a pass-all ``filter`` before the batch: the dataset's length is unknown to Keras.
``--val-samples N`` validates on N more samples (arrays) after each epoch. ``--general`` (under `stepscope run`)
adds a per-step collector that does nothing to the session, so every training step takes the fit callback's
general path (keras_hooks: ``_end_train`` and ``Session.mark_step``), not its plain one; the JSON line also
gives ``plain_steps``, the steps that took the plain path (``_plain_begin`` calls, counted), and ``ready``, for
each data-wait meter made (training data first), whether it stamps batches when ready (``stamps_ready``).
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
    p.add_argument("--raise-at", type=int, default=-1, help="raise at this training batch of the fit")
    p.add_argument("--unknown-length", action="store_true", help="a filter before the batch")
    p.add_argument("--val-samples", type=int, default=0, help="validation samples (arrays), 0: none")
    p.add_argument("--general", action="store_true", help="a no-op per-step collector: the general path")
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

    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if args.unknown_length:
        ds = ds.filter(lambda xi, yi: True)
    ds = ds.batch(args.batch).map(slow)
    if not args.prefetch:
        opts = tf.data.Options()
        opts.experimental_optimization.inject_prefetch = False
        ds = ds.with_options(opts)

    class StepWork(keras.callbacks.Callback):
        seen = 0

        def on_train_batch_begin(self, batch: int, logs: object = None) -> None:
            if self.seen == args.raise_at:
                raise RuntimeError("raised on purpose (--raise-at)")
            self.seen += 1
            time.sleep(args.step_sleep)

    plain = _count_plain_steps(args.general)
    ready = _meters_ready()
    val = None
    if args.val_samples:
        xv = np.random.default_rng(1).normal(size=(args.val_samples, 8)).astype("float32")
        val = (xv, xv[:, :1] * 2.0)
    try:
        history = make_model().fit(ds, epochs=2, verbose=0, callbacks=[StepWork()], validation_data=val)
    except RuntimeError as e:
        if "--raise-at" not in str(e):
            raise
        print(json.dumps({"loss": []}))
        return
    print(json.dumps({"loss": [float(v) for v in history.history["loss"]], "plain_steps": plain[0],
                      "ready": ready}))


def _meters_ready() -> list[bool]:
    """Under `stepscope run`: for each data-wait meter made from now on, in order, its ``stamps_ready``."""
    made: list[bool] = []
    try:
        from stepscope.collect.keras import keras_datawait
    except ImportError:
        return made
    init = keras_datawait.InputWaitMeter.__init__

    def noted(self: keras_datawait.InputWaitMeter, *a: object, **k: object) -> None:
        init(self, *a, **k)  # type: ignore[arg-type]
        made.append(self.stamps_ready)

    keras_datawait.InputWaitMeter.__init__ = noted  # type: ignore[method-assign]
    return made


def _count_plain_steps(general: bool) -> list[int]:
    """Under `stepscope run`: a counter of the fit callback's plain-path steps (one element, updated in place);
    with ``general``, a no-op per-step collector added to the session first."""
    count = [0]
    try:
        from stepscope.collect.core.session import current
        from stepscope.collect.keras import keras_hooks
    except ImportError:
        return count
    session = current()
    if session is None:
        return count
    if general:
        session.extras.append(lambda: None)
    cls = keras_hooks._callback_class()
    plain = cls._plain_begin

    def counted(self: object, *a: object) -> None:
        count[0] += 1
        plain(self, *a)

    cls._plain_begin = counted
    return count


if __name__ == "__main__":
    main()
