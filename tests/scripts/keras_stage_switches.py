"""Thread switches the Keras data-wait stage (collect/keras/keras_datawait.py) adds to each batch it passes.

Pulls ``--batches`` elements eagerly from a trivial ``tf.data`` pipeline three ways: as is; through the
stage (``InputWaitMeter(...).dataset``); through a plain ``map`` of a small stateful function (a counter
variable's ``assign_add``), whose ops TensorFlow hands to a thread pool while the pulling thread waits. For
each, the voluntary context switches of all the process's threads per element (Linux ``/proc``: a thread
that blocks on a wait switches out voluntarily; preemption by other processes counts as involuntary and
is left out). Prints one JSON line: {"plain": ..., "staged": ..., "plain_map": ..., "batches_counted": ...}.
"""

import argparse
import json
import os

import tensorflow as tf

from stepscope.collect.keras.keras_datawait import InputWaitMeter


def voluntary_switches() -> int:
    total = 0
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/status") as f:
                total += sum(int(line.split()[1]) for line in f if line.startswith("voluntary_ctxt_switches"))
        except FileNotFoundError:  # a thread that ended meanwhile
            pass
    return total


def per_element(dataset: tf.data.Dataset, n: int) -> float:
    it = iter(dataset)
    next(it)  # the iterator's start (threads, function instantiation) is not per element
    before = voluntary_switches()
    for _ in range(n):
        next(it)
    return (voluntary_switches() - before) / n


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batches", type=int, default=300)
    args = p.parse_args()
    plain = tf.data.Dataset.from_tensors((tf.zeros([4, 4]), tf.zeros([4, 1]))).repeat()
    meter = InputWaitMeter(plain)
    counter = tf.Variable(tf.constant(0, tf.int64), trainable=False)

    def count(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        counter.assign_add(1)
        return x, y

    out = {"plain": per_element(plain, args.batches), "staged": per_element(meter.dataset, args.batches),
           "plain_map": per_element(plain.map(count), args.batches)}
    out["batches_counted"] = len(meter.take_batches() or [])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
