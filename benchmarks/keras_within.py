"""Overhead of the Keras / TensorFlow hooks on a ~10 ms ``fit`` step, paired within one process and one
compiled train function (``keras_overhead.py --within``; ``overhead.py --only-keras`` prints it too).

Separate fits per arm (keras_overhead.py part 1) have an A/A floor of several % on this machine: each fit
is a new epoch iterator, new threads, a new place in the machine's load. Here there is ONE model and its
real compiled ``model.train_function`` (made by a first, untimed ``fit``), and every arm drives it the way
``fit``'s loop does (keras/src/backend/tensorflow/trainer.py ``fit``: ``callbacks.on_train_batch_begin(step)``,
``logs = train_function(iterator)``, ``callbacks.on_train_batch_end(step, logs)``), with its own
``TFEpochIterator`` over the same arrays (fit's own dataset: Keras' array adapter, shuffled, batch 256) and
its own ``CallbackList`` (``add_history=True``, as fit's):

* ``bare``: the epoch iterator's dataset as Keras hands it out, no stepscope callback (the reference);
* ``bare again``: the same, a second arm (A/A: its difference from ``bare`` is the design's noise floor);
* ``stage``: the data-wait stage appended as stepscope does in fit (the keras hooks' ``_get_iterator``
  patch on an iterator an observed fit created as its training data: collect/keras/keras_datawait.py; for these
  arrays the stamp of each batch's ready time beneath the pipeline's final prefetch), nothing reading it;
* ``callback``: the bare dataset, stepscope's real fit callback in the CallbackList (unmetered: as with
  ``STEPSCOPE_KERAS_DATA_WAIT=off``);
* ``all``: the stage, the callback reading it (every 64 steps), and the ``tf.function`` / ``tf.data``
  hooks installed around the block: what `stepscope run` installs in fit (without a profiler window);
* ``known 100 µs``: the bare dataset and a callback that busy-waits 100 µs at each batch begin: a known
  cost the design must find (its interval should hold 100 µs plus a call's few µs).

One session (activated: its flush and sampling threads run through every arm alike, so their work is not
attributed here; benchmarks/hook_costs.py measures it) serves the stepscope arms. Each round runs one block
per arm in a new random order; a block is ``warm`` untimed steps then ``block`` timed ones (keras_overhead.py's
defaults: one untimed, one timed). One timed step is the finest pairing, whose A/A floor measured narrowest on
the loaded machine (longer blocks let the load drift between an arm and its bare pair). The untimed step before
it matters for ``all``: its ``tf.function`` / ``tf.data`` hooks are installed just before its block and removed
after it (they are process-wide), so with no untimed step the timed one would run right after that
installation, which a real ``fit`` pays once, not at every step; with one, every arm's timed step follows a step
of its own arm, as in a real ``fit`` (measured both ways: docs/frameworks.md, "Within one process").
Per block: the wall time per step and the process CPU time
per step (every thread). Epochs (``epoch_steps`` batches; longer than 64 so the callback's every-64-steps
ring read falls among the timed steps) end and begin between blocks, untimed, as fit's epoch ends do (per
epoch, not per step). Per arm and statistic: the median over rounds of (arm - the same round's bare), a
distribution-free sign-test interval of >= 95% coverage, in µs per step and % of bare's median step, and the
verdict against 1%: met only if the interval's upper end is below 1%, NOT met if its lower end is at or
above, else not decided. The median is the typical step's cost: a cost paid on one step in 64 (the ring read)
moves it little, so the mean of the differences is printed beside it (no interval: under load its noise is
heavy-tailed).

    python benchmarks/keras_overhead.py --within [--rounds 1000] [--block 1] [--warm 1] [--cost-runs 0]
"""

from __future__ import annotations

import gc
import os
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.hook_costs import sign_interval

REFERENCE = "bare"
ARMS = ("bare again", "stage", "callback", "all", "known 100 µs")
"""The arms beside ``bare``, in print order (module docstring)."""
KNOWN_NS = 100_000
"""The busy wait of the ``known 100 µs`` arm, per step."""
STATISTICS = ("wall", "CPU")
"""Per block, per step: the wall time and the process CPU time (all threads), means over the block's timed
steps."""
TARGET_SHARE = 0.01
"""Issue 16: the hooks' cost below 1% of a ~10 ms Keras step."""


@dataclass(frozen=True, slots=True)
class Paired:
    """An arm against ``bare``, paired by round: the median of the differences (arm - bare, ns per step) with
    its sign-test interval and coverage, and bare's median (the step the shares are of)."""

    median_ns: float
    low_ns: float
    high_ns: float
    coverage: float
    bare_ns: float

    def share(self, ns: float) -> float:
        return ns / self.bare_ns


def paired(arm: Sequence[float], bare: Sequence[float]) -> Paired:
    """``arm`` against ``bare`` (same length: one value per round, same round at the same index)."""
    diffs = [a - b for a, b in zip(arm, bare, strict=True)]
    low, high, coverage = sign_interval(diffs)
    return Paired(statistics.median(diffs), low, high, coverage, statistics.median(bare))


def verdict(p: Paired, target: float = TARGET_SHARE) -> str:
    """Against the target share of bare's step, on the interval's ends."""
    if p.share(p.high_ns) < target:
        return "met"
    return "NOT met" if p.share(p.low_ns) >= target else "not decided (the interval spans it)"


def describe(times: dict[str, dict[str, list[float]]], *, block: int, warm: int) -> str:
    """The figures of ``measure`` as lines of text (module docstring)."""
    bare = times[REFERENCE]
    rounds = len(bare[STATISTICS[0]])
    lines = [f"within one process and one compiled train function: {rounds} rounds, each one block per arm in a "
             f"random order ({warm} untimed + {block} timed steps); per arm: median over rounds of (arm - the same "
             f"round's bare) [sign-test interval, coverage], µs per step and % of bare's step; target < "
             f"{TARGET_SHARE * 100:.0f}%, judged on the interval's ends",
             "  bare: " + ", ".join(f"{s} {statistics.median(bare[s]) / 1e6:.3f} ms" for s in STATISTICS)]
    for name in [n for n in ARMS if n in times]:
        lines.append(f"  {name}:")
        for stat in STATISTICS:
            p = paired(times[name][stat], bare[stat])
            note = verdict(p)
            if name == "bare again":
                note = "the A/A floor"
            elif name == "known 100 µs":
                hit = p.low_ns <= KNOWN_NS <= p.high_ns
                note = f"known {KNOWN_NS / 1e3:.0f} µs {'inside' if hit else 'OUTSIDE'} the interval"
            mean = statistics.fmean(times[name][stat]) - statistics.fmean(bare[stat])
            lines.append(f"    {stat:<5}{p.median_ns / 1e3:+8.1f} µs [{p.low_ns / 1e3:+7.1f}, {p.high_ns / 1e3:+7.1f}]"
                         f" ({p.coverage * 100:.0f}%) = {p.share(p.median_ns) * 100:+.2f}% "
                         f"[{p.share(p.low_ns) * 100:+.2f}%, {p.share(p.high_ns) * 100:+.2f}%]; {note} "
                         f"(mean {mean / 1e3:+.0f} µs)")
    if "all" in times:
        verdicts = "; ".join(f"{stat} {verdict(paired(times['all'][stat], bare[stat]))}" for stat in STATISTICS)
        lines.append(f"  verdict, all (what `stepscope run` installs in fit) < {TARGET_SHARE * 100:.0f}% of the step: "
                     f"{verdicts}. (mean: the mean of the differences, no interval: under load it follows the "
                     "preemptions. The intervals are this run's: between runs an arm has moved by more, so take "
                     "2-3 runs)")
    if rounds < 6:
        lines.append(f"  ({rounds} rounds: a sign-test interval of 95% needs 6 or more; the coverage is printed)")
    return "\n".join(lines)


def measure(arms: Sequence[str], *, rounds: int, block: int = 1, warm: int = 0, hidden: int = 1024, batch: int = 256,
            epoch_steps: int = 96, seed: int = 0,
            progress: Callable[[str], None] = print) -> dict[str, dict[str, list[float]]]:
    """Per arm (``bare`` and ``arms``), per statistic (STATISTICS), one value per round (ns per step)."""
    import keras
    import numpy as np
    import tensorflow as tf

    from stepscope.collect.core.options import Options
    from stepscope.collect.core.session import Session, set_current

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    session = Session(Path(tempfile.mkdtemp()) / "run", "bench-within", Options())
    set_current(session)
    x = np.random.default_rng(0).normal(size=(batch * epoch_steps, hidden)).astype("float32")
    y = x[:, :1]
    model = keras.Sequential([keras.Input(shape=(hidden,)), keras.layers.Dense(hidden, activation="relu"),
                              keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x[:batch * 4], y[:batch * 4], batch_size=batch, epochs=1, verbose=0)  # builds and traces
    lanes = {name: _Lane(name, model, x, y, batch, session) for name in (REFERENCE, *arms)}
    for lane in lanes.values():  # every lane's path once, untimed
        lane.block(2, 8)
    order = list(lanes)
    rng = random.Random(seed)
    out: dict[str, dict[str, list[float]]] = {n: {s: [] for s in STATISTICS} for n in lanes}
    gc.collect()
    gc.freeze()  # TensorFlow's objects out of the collector's way: a full collection of them takes ~1 s here
    gc.disable()  # and none inside a block: the young objects are collected between rounds
    try:
        for r in range(rounds):
            rng.shuffle(order)
            for name in order:
                for stat, value in zip(STATISTICS, lanes[name].block(warm, block), strict=True):
                    out[name][stat].append(value)
            if (r + 1) % 10 == 0 or r + 1 == rounds:
                gc.collect()
                progress(f"round {r + 1}/{rounds} done (load {os.getloadavg()[0]:.2f})")
    finally:
        gc.enable()
        gc.unfreeze()
    for lane in lanes.values():
        lane.close()
    session.close()
    return out


class _Lane:
    """One arm: its epoch iterator, iterator, CallbackList and hooks, driven as fit's loop drives them."""

    def __init__(self, name: str, model: Any, x: Any, y: Any, batch: int, session: Any) -> None:
        from keras.src.backend.tensorflow.trainer import TFEpochIterator
        from keras.src.callbacks.callback_list import CallbackList

        from stepscope.collect.core.undo import remove_all
        from stepscope.collect.keras import keras_hooks

        self.model, self.session = model, session
        self.epoch_iterator = TFEpochIterator(x=x, y=y, batch_size=batch, shuffle=True,
                                              distribute_strategy=model.distribute_strategy, steps_per_execution=1)
        self.steps = int(self.epoch_iterator.num_batches)
        callbacks: list[Any] = []
        self.hooked = name == "all"
        if name in ("stage", "all"):  # the stage handed out by the keras hooks, as to an observed fit
            keras_hooks.install_keras_hooks(session)
            try:
                self.epoch_iterator._stepscope_fit = True
                setattr(self.epoch_iterator, keras_hooks.TRAIN_ATTR, True)  # fit's training data, as fit marks it
                self.epoch_iterator._get_iterator()
            finally:
                remove_all()
            meter = self.epoch_iterator.__dict__.get(keras_hooks.METER_ATTR)
            if meter is None or not meter.stamps_ready:
                raise SystemExit(f"{name}: the data-wait stage (stamping batches when ready) was not installed")
        if name in ("callback", "all"):
            cb = keras_hooks.StepscopeKerasCallback(session)
            cb.iterators = [self.epoch_iterator]
            callbacks.append(cb)
        if name == "known 100 µs":
            callbacks.append(_busy_callback(KNOWN_NS))
        self.callbacks = CallbackList(callbacks, add_history=True, model=model)
        self.callbacks.on_train_begin()
        self.epoch = -1
        self.left = 0
        self.step_index = 0
        self.iterator: Any = None

    def _dataset(self) -> Any:
        from stepscope.collect.keras import keras_hooks

        meter = self.epoch_iterator.__dict__.get(keras_hooks.METER_ATTR)
        dataset = type(self.epoch_iterator).__dict__["_get_iterator"](self.epoch_iterator)
        return dataset if meter is None else meter.wrap(dataset)

    def _next_epoch(self) -> None:
        if self.epoch >= 0:
            self.callbacks.on_epoch_end(self.epoch, {})
        self.epoch += 1
        self.iterator = iter(self._dataset())
        self.left, self.step_index = self.steps, 0
        self.callbacks.on_epoch_begin(self.epoch)

    def _step(self) -> None:
        self.callbacks.on_train_batch_begin(self.step_index)
        logs = self.model.train_function(self.iterator)
        self.callbacks.on_train_batch_end(self.step_index, logs)
        self.step_index += 1
        self.left -= 1

    def block(self, warm: int, n: int) -> tuple[float, float]:
        """``warm`` untimed steps, then ``n`` timed: ns per step, in the order of STATISTICS."""
        from stepscope.collect.core.undo import remove_all
        from stepscope.collect.keras.tensorflow_hooks import install_tensorflow_hooks

        if self.left < warm + n:
            self._next_epoch()
        if self.hooked:
            install_tensorflow_hooks(self.session)
        try:
            for _ in range(warm):
                self._step()
            perf, cpu = time.perf_counter_ns, time.process_time_ns
            t0, c0 = perf(), cpu()
            for _ in range(n):
                self._step()
            t1, c1 = perf(), cpu()
        finally:
            if self.hooked:
                remove_all()
        return (t1 - t0) / n, (c1 - c0) / n

    def close(self) -> None:
        if self.epoch >= 0:
            self.callbacks.on_epoch_end(self.epoch, {})
        self.callbacks.on_train_end()


def _busy_callback(ns: int) -> Any:
    import keras

    class BusyWait(keras.callbacks.Callback):
        """Busy-waits ``ns`` at each training batch begin: a known cost per step."""

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            end = time.perf_counter_ns() + ns
            while time.perf_counter_ns() < end:
                pass

    return BusyWait()
