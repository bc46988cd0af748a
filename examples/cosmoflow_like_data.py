"""A CosmoFlow-like ``tf.data`` benchmark: synthetic 3-D volumes read from a TFRecord file, parsed and
normalised in a parallel ``map``, batched and prefetched, for a few epochs, each batch then through a
CosmoFlow-like first two blocks (``tf.nn.conv3d`` 3x3x3 with ``--filters`` and twice as many filters, each with
leaky ReLU and 2x2x2 max-pool: the forward of a step, so that TensorFlow's thread pools matter as they do in
CosmoFlow); TensorFlow's thread
pools set from ``--inter`` / ``--intra`` (``tf.config.threading``; 0 = TensorFlow's default), as in the
CosmoFlow data benchmark's sweep of ``inter_op_parallelism_threads`` x ``intra_op_parallelism_threads``.
``--filters 0`` leaves the data pipeline alone (its thread pools then barely matter: tf.data's own pool does
the map).

    stepscope sweep --param inter=0,1,2 --param intra=1,2 --metric metric.first_epoch_samples_per_s \\
        -- python examples/cosmoflow_like_data.py --inter {inter} --intra {intra}
    stepscope sweep --group <the sweep's group> --metric metric.later_epochs_samples_per_s

Each batch is one step (``stepscope.steps``: the time to get the batch is data wait); per epoch the script
measures samples / epoch time (from creating the iterator to the last batch, as the CosmoFlow benchmark does)
and logs ``first_epoch_samples_per_s`` (cold: the file is read and parsed) and ``later_epochs_samples_per_s``
(the mean over the later epochs; with ``--cache`` the parsed volumes come from memory), which `sweep`
draws as heat maps over the two thread settings.
"""

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--inter", type=int, default=0, help="tf.config inter-op threads (0: TensorFlow's default)")
    p.add_argument("--intra", type=int, default=0, help="tf.config intra-op threads (0: TensorFlow's default)")
    p.add_argument("--samples", type=int, default=128, help="volumes in the data set")
    p.add_argument("--size", type=int, default=32, help="volume side (CosmoFlow: 128)")
    p.add_argument("--channels", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--filters", type=int, default=16,
                   help="conv3d filters of the step's first layer, twice as many in the second (0: no layers)")
    p.add_argument("--no-cache", action="store_true", help="parse every epoch again (no .cache() after the map)")
    args = p.parse_args()

    import tensorflow as tf

    import stepscope

    tf.config.threading.set_inter_op_parallelism_threads(args.inter)  # before TensorFlow's runtime starts
    tf.config.threading.set_intra_op_parallelism_threads(args.intra)
    shape = (args.size, args.size, args.size, args.channels)

    with tempfile.TemporaryDirectory(prefix="cosmoflow-like-") as tmp:
        path = str(Path(tmp) / "volumes.tfrecord")
        _write_records(path, args.samples, shape)

        def parse(record: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            feats = tf.io.parse_single_example(record, {"x": tf.io.FixedLenFeature([], tf.string),
                                                        "y": tf.io.FixedLenFeature([4], tf.float32)})
            x = tf.reshape(tf.io.decode_raw(feats["x"], tf.int16), shape)
            x = tf.math.log1p(tf.cast(x, tf.float32))  # CosmoFlow's log normalisation
            return x / tf.reduce_max(x), feats["y"]

        ds = tf.data.TFRecordDataset(path).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        if not args.no_cache:
            ds = ds.cache()
        ds = ds.batch(args.batch_size).prefetch(tf.data.AUTOTUNE)

        layer = _layer(args.channels, args.filters)
        rates = []
        for epoch in range(args.epochs):
            t0, n = time.perf_counter(), 0
            for x, _y in stepscope.steps(ds):
                layer(x)
                n += int(x.shape[0])
            rates.append(n / (time.perf_counter() - t0))
            print(f"epoch {epoch}: {n} samples, {rates[-1]:.1f} samples/s")
            if epoch == 0:
                stepscope.log(first_epoch_samples_per_s=rates[0])
        if len(rates) > 1:
            stepscope.log(later_epochs_samples_per_s=float(np.mean(rates[1:])))


def _layer(channels: int, filters: int) -> Callable[[Any], Any]:
    """CosmoFlow's first two blocks, forward only: conv3d 3x3x3 (SAME), leaky ReLU, max-pool 2x2x2, with
    ``filters`` then twice as many filters; the identity when ``filters`` is 0. The second block's convolution
    is the one TensorFlow spreads over its intra-op threads. Its result is read back (``.numpy()``) so that the
    step waits for it."""
    import tensorflow as tf

    if filters <= 0:
        return lambda x: x
    rng = np.random.default_rng(1)
    kernels = [tf.constant(rng.normal(0, 0.1, (3, 3, 3, c_in, c_out)).astype(np.float32))
               for c_in, c_out in ((channels, filters), (filters, 2 * filters))]

    def forward(x: tf.Tensor) -> tf.Tensor:
        for k in kernels:
            x = tf.nn.leaky_relu(tf.nn.conv3d(x, k, strides=[1, 1, 1, 1, 1], padding="SAME"), alpha=0.3)
            x = tf.nn.max_pool3d(x, ksize=2, strides=2, padding="VALID")
        return tf.reduce_sum(x)

    graph = tf.function(forward)  # one graph, traced once: the step is the layers, not Python
    return lambda x: graph(x).numpy()


def _write_records(path: str, samples: int, shape: tuple[int, ...]) -> None:
    import tensorflow as tf

    rng = np.random.default_rng(0)
    with tf.io.TFRecordWriter(path) as w:
        for _ in range(samples):
            x = rng.integers(0, 1000, size=shape, dtype=np.int16)
            y = rng.normal(size=4).astype(np.float32)
            ex = tf.train.Example(features=tf.train.Features(feature={
                "x": tf.train.Feature(bytes_list=tf.train.BytesList(value=[x.tobytes()])),
                "y": tf.train.Feature(float_list=tf.train.FloatList(value=y.tolist())),
            }))
            w.write(ex.SerializeToString())


if __name__ == "__main__":
    main()
