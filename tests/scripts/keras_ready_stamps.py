"""When the Keras data-wait stage (collect/keras/keras_datawait.py) stamps fit's training batches as ready.

A ``tf.data`` pipeline whose map sleeps ``--sleep`` per batch, metered as fit's training data is
(``InputWaitMeter(..., ready=True)``), pulled eagerly: one batch, then ``--pause`` seconds of other work (a
step), then the wall-clock time (``time.time_ns``) of the next pull's begin and the pull. Three pipelines:
ending in ``prefetch(2)`` (the stamp is put beneath it), ending in a map where TensorFlow would inject a
prefetch (the same prefetch is added, the stamp beneath it), and ending in a map with the injection turned
off (the stamp is the last stage). Prints one JSON line, per pipeline: the stamp kind, and for each pull after
the first, its ready time minus its begin (ns).
"""

import argparse
import json
import time

import tensorflow as tf

from stepscope.collect.keras.keras_datawait import InputWaitMeter


def pipeline(sleep: float, end: str) -> tf.data.Dataset:
    def slow(x: tf.Tensor) -> tf.Tensor:
        def nap(v: tf.Tensor) -> tf.Tensor:
            time.sleep(sleep)
            return v

        y = tf.py_function(nap, [x], tf.int64)
        y.set_shape(x.shape)
        return y

    ds = tf.data.Dataset.range(6).map(slow)
    if end == "prefetch":
        return ds.prefetch(2)
    if end == "off":
        opts = tf.data.Options()
        opts.experimental_optimization.inject_prefetch = False
        return ds.with_options(opts)
    return ds


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sleep", type=float, default=0.03)
    p.add_argument("--pause", type=float, default=0.2)
    args = p.parse_args()
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    out = {}
    for end in ("prefetch", "injected", "off"):
        meter = InputWaitMeter(pipeline(args.sleep, end), ready=True)
        meter.reset()
        it = iter(meter.dataset)
        next(it)
        begins = []
        for _ in range(4):
            time.sleep(args.pause)
            begins.append(time.time_ns())
            next(it)
        ready = meter.take_ready(5)
        assert ready is not None and len(ready) == 5, ready
        out[end] = {"ready": meter.stamps_ready, "prefetch_added": meter.prefetch_added,
                    "after_begin_ns": [r - b for r, b in zip(ready[1:], begins, strict=True)]}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
