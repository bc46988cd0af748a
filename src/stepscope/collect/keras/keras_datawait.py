"""Data wait of Keras ``fit``: on the TensorFlow backend measured by the input pipeline itself; on the JAX
and PyTorch backends, where Keras calls ``next()`` on a Python iterator, by timing that call.

Keras fetches each batch with ``iterator.get_next()`` inside its compiled train function, so no Python hook
sees the fetch. Instead the ``tf.data`` dataset that ``fit`` iterates gets one small map, in C++ ops only, that
numbers each batch (``n = count.assign_add(1)``, an int64 CPU variable) and writes a time into slot ``n % RING``
of a float64 CPU ring variable (so batch ``i``, counted from 0, is in slot ``(i + 1) % RING``): every batch keeps
its own time, so the fit callback need not read after each step (the first TensorFlow call after a Keras step
is slow: tens to hundreds of µs); it reads the ring and the count together every few steps. The batch itself
passes through untouched (same values, order and structure).

Fit's training data, one batch per step (``steps_per_execution`` 1; ``ready=True``): the map writes
``tf.timestamp()`` (the wall clock, ``time.time_ns``' clock, in float64 seconds), the time batch ``i`` was
ready, and it goes beneath the pipeline's final prefetch, in the prefetch's background thread, off the step's
critical path: a pipeline ending in ``prefetch(k)`` (looked through ``_SKIPPED``, as ``inject_prefetch`` does)
is rebuilt as ``stamp(input).prefetch(k)`` with its options re-applied; one where TensorFlow would inject
``prefetch(AUTOTUNE)`` becomes ``stamp(pipeline).prefetch(AUTOTUNE)`` with the injection off; one with no
prefetch and none injected gets the stamp last (it then runs in the pulling thread, at hand-out). The callback
takes each step's begin on the same clock and gives the step ``clamp(ready - begin, 0, its duration)``
(``ready_wait``, ``take_ready``): from the step's begin to the moment its batch was ready, 0 if it was ready
before; it over-counts by at most Keras' dispatch of the train function where the batch became ready during
that dispatch.

Elsewhere (``steps_per_execution`` > 1, where a batch's request inside a multi-batch execution is not visible
from Python; validation data; a final prefetch whose arguments cannot be read) the stage measures the wait
itself, in the pulling thread:

    zip((request_stamps, dataset)).map(lambda t_request, batch: record(now - t_request); batch)

``zip`` pulls its inputs in order, so ``t_request`` (``tf.timestamp()``) is taken when the train function asks
for the next batch, before the user's pipeline is pulled; the map runs in that same ``GetNext`` call as soon as
the batch is there. ``now - t_request`` is the time the fetch was blocked on its input, written into the ring
(``take_batches``); the callback hands each step the waits of its own batches.

Both maps run their function in the thread that pulls the batch (``_inline_map``: TensorFlow's
single-threaded executor). A plain ``map`` hands its function's ops to a thread pool and blocks until they are
done: two thread switches per function, four per batch, and what they cost is the time to wake a pool thread
and get it a core, a few µs on an idle machine and tens to hundreds of µs when the cores are busy (the
step's own threads, other processes); the woken pool threads also spin looking for more work, taking CPU
from the step. That made the stage cost 0 to 180 µs a batch from run to run; run inline it is about 10 µs
(docs/frameworks.md, "Overhead").

The zip stage must stay where it is: TensorFlow injects ``prefetch(AUTOTUNE)`` after the last transformation of
a pipeline that does not end in a prefetch (``inject_prefetch``), which would move the stamps into a
background thread. So the wrapped dataset turns that injection off, and where TensorFlow would have injected
a prefetch after the user's pipeline (autotune on, ``inject_prefetch`` not off, the pipeline not ending in a
prefetch) the same ``prefetch(AUTOTUNE)`` is added there explicitly: the user's pipeline runs as it did.

Not metered (data wait stays NaN, with a note): TensorFlow's op determinism on
(``tf.config.experimental.enable_op_determinism()``: ``tf.timestamp`` then raises inside the pipeline, so the
stage is never added), a distribution strategy other than the default one (the dataset is a
``DistributedDataset``), a dataset that cannot be wrapped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

_SKIPPED = frozenset({"_OptionsDataset", "_ModelDataset", "_OptimizeDataset", "_MaxIntraOpParallelismDataset",
                      "_PrivateThreadPoolDataset", "_AssertNextDataset"})
"""Python classes of the datasets TensorFlow's ``inject_prefetch`` looks through (its ``kDatasetsToSkip``)."""
_perf = time.perf_counter_ns


RING = 4096
"""Slots of the ring of per-batch waits: the callback must read at least once per RING batches."""


class InputWaitMeter:
    """Per-batch input wait of one dataset that ``fit`` iterates (see the module docstring).

    Attributes:
        dataset: the wrapped dataset to hand to ``fit`` in place of the original.
        prefetch_added: True where the ``prefetch(AUTOTUNE)`` TensorFlow would have injected was added
            explicitly (before the stamping stage).
        deferred: True: the waits are read in batches (``take_batches``), not after every step.
    """

    deferred = True

    def __init__(self, dataset: Any, *, ready: bool = False) -> None:
        import tensorflow as tf

        with tf.device("/CPU:0"):
            self._ring = tf.Variable(tf.zeros([RING], tf.float64), trainable=False, name="stepscope_input_waits")
            self._count = tf.Variable(tf.constant(0, tf.int64), trainable=False, name="stepscope_input_batches")
        ring, count = self._ring, self._count
        self.prefetch_added = would_inject_prefetch(dataset)
        options = tf.data.Options()
        options.experimental_optimization.inject_prefetch = False
        self.stamps_ready = False
        if ready:
            unpacked = type(dataset.element_spec) is tuple  # map calls fn(*element) on a tuple, fn(element) else

            def ready_stamp(*batch: Any) -> Any:
                # batch n (0-based) goes to slot (n + 1) % RING (see stamp below); the time it is ready
                slot = tf.math.floormod(count.assign_add(1), RING)
                tf.raw_ops.ResourceScatterUpdate(resource=ring.handle, indices=slot, updates=tf.timestamp())
                return batch if unpacked else batch[0]

            prefetch = final_prefetch(dataset)
            if prefetch is not None:  # the same prefetch, the stamp beneath it; None: the zip stage below
                buffer = prefetch_args(prefetch)
                if buffer is not None:
                    size, name = buffer
                    self.dataset = _inline_map(prefetch._input_dataset, ready_stamp).prefetch(
                        size, name=name).with_options(dataset.options())
                    self.stamps_ready = True
            else:
                upstream = _inline_map(dataset, ready_stamp)
                if self.prefetch_added:
                    upstream = upstream.prefetch(tf.data.AUTOTUNE)
                self.dataset = upstream.with_options(options)
                self.stamps_ready = True
        if not self.stamps_ready:
            upstream = dataset.prefetch(tf.data.AUTOTUNE) if self.prefetch_added else dataset
            requests = _inline_map(tf.data.Dataset.from_tensors(tf.constant(0, tf.int8)).repeat(),
                                   lambda _: tf.timestamp())

            def stamp(t_request: Any, batch: Any) -> Any:
                # batch n (0-based) goes to slot (n + 1) % RING: the count after its increment, with no op to
                # subtract one; one scalar scatter (stateful: runs before the map returns). Six ops in all
                slot = tf.math.floormod(count.assign_add(1), RING)
                tf.raw_ops.ResourceScatterUpdate(resource=ring.handle, indices=slot,
                                                 updates=tf.timestamp() - t_request)
                return batch

            self.dataset = _inline_map(tf.data.Dataset.zip((requests, upstream)), stamp).with_options(options)
        self._read_ring = _reader(self._ring)
        self._read_count = _reader(self._count)
        self._taken = int(self._read_count())

    def wrap(self, dataset: Any) -> Any:
        """What to hand to Keras in place of ``dataset`` (the one this meter was made for)."""
        return self.dataset

    def take_batches(self) -> list[float] | None:
        """The wait (ns) of each batch fetched since the previous call, in order; None where more than RING
        batches were fetched meanwhile (their waits are overwritten). Two reads of CPU variables."""
        count = int(self._read_count())
        ring = self._read_ring()
        first, self._taken = self._taken, count
        if count - first > RING:
            return None
        return [max(float(ring[(i + 1) % RING]), 0.0) * 1e9 for i in range(first, count)]

    def take_ready(self, n: int) -> list[float] | None:
        """With ``stamps_ready``: the wall-clock time (ns since the epoch, ``time.time_ns``' clock) at which each
        of the next ``n`` batches, in order, was ready (fewer where fewer were stamped); None where one of them
        was overwritten in the ring. The ring is read before the count: the pipeline may be stamping batches
        ahead meanwhile (a prefetch), and a batch's slot is overwritten only once the count passes it by RING."""
        ring = self._read_ring()
        count = int(self._read_count())
        first = self._taken
        if count - first > RING:
            self._taken = count
            return None
        got = max(min(n, count - first), 0)
        self._taken = first + got
        return [float(ring[(i + 1) % RING]) * 1e9 for i in range(first, first + got)]

    def take_ns(self) -> float:
        """Input wait since the previous call, in ns (NaN where the ring overflowed, or where the ring holds
        ready times: those need the steps' begins, ``take_ready``)."""
        if self.stamps_ready:
            return float("nan")
        waits = self.take_batches()
        return float("nan") if waits is None else sum(waits)

    def reset(self) -> None:
        """Start counting from now (fetches made before the first step, e.g. Keras' symbolic build, drop out)."""
        self._taken = int(self._read_count())


def ready_wait(ready_ns: float, begin_ns: int, duration_ns: int) -> int:
    """A step's data wait from the time its batch was ready: from the step's begin to that time, none where
    the batch was ready before the step began, at most the step's duration (ns; begin and ready on the same
    wall clock)."""
    return round(min(max(ready_ns - begin_ns, 0.0), float(max(duration_ns, 0))))


def final_prefetch(dataset: Any) -> Any:
    """The ``prefetch`` a pipeline ends in (looking through the datasets ``inject_prefetch`` looks through,
    ``_SKIPPED``), or None."""
    node, depth = dataset, 0
    while type(node).__name__ in _SKIPPED and depth < 64:
        node, depth = getattr(node, "_input_dataset", None), depth + 1
    return node if node is not None and type(node).__name__ == "_PrefetchDataset" else None


def prefetch_args(prefetch: Any) -> tuple[int, str | None] | None:
    """The buffer size and name a ``_PrefetchDataset`` was made with (TensorFlow keeps ``_input_dataset``,
    ``_buffer_size``, a scalar int64 tensor, and ``_name``; its ``slack_period`` is kept nowhere and is set only
    by a multi-device iterator's own prefetch), or None where one is not there."""
    try:
        if getattr(prefetch, "_input_dataset", None) is None:
            return None
        name = getattr(prefetch, "_name", None)
        return int(prefetch._buffer_size), name if isinstance(name, str) else None
    except (AttributeError, TypeError, ValueError):
        return None


def _inline_map(dataset: Any, fn: Callable[..., Any]) -> Any:
    """``dataset.map(fn)`` whose function runs in the thread that pulls the element: TensorFlow's single-threaded
    executor (``use_inter_op_parallelism=False``, what TensorFlow's own ``sample_from_datasets`` gives its small
    selector function). A plain ``map`` hands the function's ops to a thread pool and blocks until they are
    done: two thread switches per element, whose cost is that of waking a thread (see the module docstring).
    The plain ``map`` where that private class is not there."""
    try:
        from tensorflow.python.data.ops import map_op

        return map_op._MapDataset(dataset, fn, use_inter_op_parallelism=False)
    except (ImportError, AttributeError, TypeError):
        return dataset.map(fn)


def _reader(variable: Any) -> Callable[[], Any]:
    """A function reading the variable's value as numpy: TensorFlow's fast-path execution of one
    ``ReadVariableOp`` (what ``variable.value()`` ends in, without its Python layers: about 3x cheaper), proved
    once here; the public ``variable.value()`` where that private path is not there."""
    import numpy as np

    def public() -> Any:
        return np.array(variable.value().numpy())

    try:
        from tensorflow.python import pywrap_tfe
        from tensorflow.python.eager import context

        ctx, handle, dtype = context.context(), variable.handle, variable.dtype

        def fast() -> Any:
            return np.array(pywrap_tfe.TFE_Py_FastPathExecute(ctx, "ReadVariableOp", None, handle, "dtype",
                                                              dtype)._numpy())

        if np.array_equal(fast(), public()):
            return fast
    except Exception:
        pass
    return public


def would_inject_prefetch(dataset: Any) -> bool:
    """Whether TensorFlow's ``inject_prefetch`` rewrite would append ``prefetch(AUTOTUNE)`` to ``dataset``:
    autotune on, the option not turned off (it is a default optimisation: ``apply_default_optimizations=False``
    turns it off unless set explicitly), and the last transformation not a prefetch."""
    options = dataset.options()
    if options.autotune.enabled is False:
        return False
    opt = options.experimental_optimization
    if opt.inject_prefetch is False or (opt.inject_prefetch is None and opt.apply_default_optimizations is False):
        return False
    return final_prefetch(dataset) is None


def meter_for(dataset: Any, *, ready: bool = False) -> InputWaitMeter | None:
    """A meter for a dataset ``fit`` iterates, or None where it cannot be metered (not a plain ``tf.data``
    dataset: a distribution strategy's ``DistributedDataset``). ``ready``: stamp when each batch is ready
    (fit's training data, one batch per step), where the dataset allows it."""
    import tensorflow as tf

    if not isinstance(dataset, tf.data.Dataset) or _deterministic():
        return None
    return InputWaitMeter(dataset, ready=ready)


def unmetered_reason(dataset: Any) -> str:
    """Why ``meter_for`` gave no meter, in words for a note."""
    if _deterministic():
        return "TensorFlow's op determinism is on (tf.timestamp, which the metering uses, is refused then)"
    return f"fit iterates a {type(dataset).__name__} (a distribution strategy's), not a tf.data dataset"



def _deterministic() -> bool:
    """TensorFlow's op determinism switch (not exported as a public getter)."""
    from tensorflow.python.framework import config

    return bool(config.is_op_determinism_enabled())


class PythonWaitMeter:
    """Cumulative time ``next()`` blocked on the Python iterators of one iterable that ``fit`` iterates (Keras'
    JAX and PyTorch backends: the data adapter's iterator or ``DataLoader``, ``next`` called by the trainer in
    Python). Same interface as InputWaitMeter, read after every step (reading is a Python int: cheap).

    Attributes:
        waited_ns: the time ``next()`` blocked, in all, on every iterable ``wrap`` handed out.
    """

    deferred = False

    def __init__(self) -> None:
        self.waited_ns = 0
        self._last_ns = 0

    def wrap(self, iterable: Any) -> Any:
        """What to hand to Keras in place of ``iterable`` (each ``iter()`` of it times its ``next()`` calls)."""
        return _TimedIterable(iterable, self)

    def take_ns(self) -> float:
        now = self.waited_ns
        delta, self._last_ns = now - self._last_ns, now
        return float(delta)

    def reset(self) -> None:
        self._last_ns = self.waited_ns


class _TimedIterable:
    def __init__(self, inner: Any, meter: PythonWaitMeter) -> None:
        self._inner, self._meter = inner, meter

    def __iter__(self) -> _TimedIterator:
        return _TimedIterator(iter(self._inner), self._meter)

    def __getattr__(self, name: str) -> Any:  # a DataLoader's attributes stay reachable
        return getattr(self._inner, name)


class _TimedIterator:
    def __init__(self, inner: Any, meter: PythonWaitMeter) -> None:
        self._inner, self._meter = inner, meter

    def __iter__(self) -> _TimedIterator:
        return self

    def __next__(self) -> Any:
        t0 = _perf()
        try:
            return next(self._inner)
        finally:
            self._meter.waited_ns += _perf() - t0
