"""The Keras side of benchmarks/overhead.py: ``Model.fit`` of a Dense model whose step takes ~10 ms on one CPU
thread (TensorFlow backend), timed by a callback of its own (batch begin to batch begin, no ``*_batch_end``
method, so Keras' async dispatch stays on). Prints one JSON line with the median step time (first 10 steps
excluded). Run bare or under `stepscope run` (the zero-code Keras / TensorFlow hooks).

Under `stepscope run`, ``--hook-cost`` also times the hooks' own work in this process, around the real steps
of the same ``fit`` (JSON field ``hook_cost``, all in ns):

* ``callback_per_step``: stepscope's fit callback, each call timed with ``perf_counter_ns`` by a wrapper:
  the mean of its per-batch method (``on_train_batch_begin``: ends the previous step into the session's
  buffers and, every 64 steps, reads the input-wait meter), steps 10 and later (``callback_median`` beside
  it); the once-per-fit and once-per-epoch methods (``on_train_begin`` records the framework settings and
  the model summary) are
  ``callback_once`` in total, not per step; ``meter_read``: the part of it spent reading the input-wait meter
  (its ring of per-batch waits, read every 64 steps and at the epoch's end: all its reads over the steps);
* ``function_wrapper_per_call`` x ``function_calls_per_step``: stepscope's ``tf.function.__call__`` wrapper
  against the original ``__call__`` on a trivial function, interleaved blocks, best block each; calls counted
  during the fit;
* ``stage_per_batch``: the input-wait stage (collect/keras/keras_datawait.py) on fit's own dataset, pulled inside
  a ``tf.function`` loop with and without the stage, interleaved blocks, best block each;
* ``per_step``: their sum, to set against ``median_step_ns``; ``per_step_cpu`` the same with the callback's
  thread CPU time (``time.thread_time_ns``: what the hooks make the CPU do, without the time the thread
  was preempted by other processes, which a loaded machine adds to any wall time).

With ``STEPSCOPE_KERAS_DATA_WAIT=off`` in the environment the hooks run without the input-wait metering (no
stage, no meter read): the cost of the rest.

``--stage-only`` times the input-wait stage alone (no fit, no `stepscope run` needed): as shipped, its two
functions run inline in the thread that pulls the batch, against the same stage with plain ``map``s (a
thread pool runs their ops: the stage before), on fit's own dataset; prints the µs and the voluntary
thread switches each adds per batch, and the process CPU time (``stage_comparison``).

    python benchmarks/_keras_loop.py --steps 150 --hidden 1024 [--hook-cost | --stage-only]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

_perf = time.perf_counter_ns
_cpu = time.thread_time_ns


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--hook-cost", action="store_true", help="under `stepscope run`: time the hooks' own work")
    p.add_argument("--stage-only", action="store_true",
                   help="the input-wait stage alone, as shipped (inline) and on a thread pool; no fit")
    args = p.parse_args()

    import keras
    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    x = np.random.default_rng(0).normal(size=(args.batch * args.steps, args.hidden)).astype("float32")
    y = x[:, :1]
    if args.stage_only:
        print(json.dumps(stage_comparison(x, y, args.batch)))
        return
    model = keras.Sequential([keras.Input(shape=(args.hidden,)), keras.layers.Dense(args.hidden, activation="relu"),
                              keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")

    class Timer(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.times: list[int] = []
            self.t = 0

        def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
            t = _perf()
            if self.t:
                self.times.append(t - self.t)
            self.t = t

    timer = Timer()
    probe = HookTimers() if args.hook_cost else None
    model.fit(x, y, batch_size=args.batch, epochs=1, verbose=0, callbacks=[timer])
    out: dict[str, Any] = {"median_step_ns": statistics.median(timer.times[10:]), "steps": len(timer.times) + 1}
    if probe is not None:
        out["hook_cost"] = probe.result(steps=out["steps"], x=x, y=y, batch=args.batch)
    print(json.dumps(out))


class HookTimers:
    """Times stepscope's Keras / TensorFlow hook work in this process (see the module docstring); needs the
    hooks installed (`stepscope run`)."""

    def __init__(self) -> None:
        from tensorflow.python.eager.polymorphic_function import polymorphic_function as pf

        from stepscope.collect.keras import keras_hooks

        self.callback_ns: dict[str, list[int]] = {}
        self.cpu_ns: dict[int, list[int]] = {}
        """Thread CPU time of each timed call, keyed by the id of its wall-clock list."""
        self.calls = 0
        cls = keras_hooks._callback_class()
        for name in [n for n in vars(cls) if n.startswith("on_")]:
            setattr(cls, name, self._timed(getattr(cls, name), self.callback_ns.setdefault(name, [])))
        from stepscope.collect.keras.keras_datawait import InputWaitMeter

        self.meter_reads: list[int] = []  # part of the callback's time: the input-wait meter's reads
        InputWaitMeter.take_batches = self._timed(  # type: ignore[method-assign]
            InputWaitMeter.take_batches, self.meter_reads)
        InputWaitMeter.take_ready = self._timed(  # type: ignore[method-assign]
            InputWaitMeter.take_ready, self.meter_reads)  # fit's training data, stamped when ready
        self.hooked_call = pf.Function.__call__
        self.orig_call = getattr(self.hooked_call, "__wrapped__", None)
        if self.orig_call is None:
            raise SystemExit("--hook-cost: the stepscope hooks are not installed (run under `stepscope run`)")
        hooked = self.hooked_call

        def counting(fn: Any, *a: Any, **k: Any) -> Any:
            self.calls += 1
            return hooked(fn, *a, **k)

        pf.Function.__call__ = counting

    def _timed(self, method: Callable[..., Any], into: list[int]) -> Callable[..., Any]:
        cpu = self.cpu_ns.setdefault(id(into), [])

        def timed(cb: Any, *a: Any, **k: Any) -> Any:
            c0, t0 = _cpu(), _perf()
            try:
                return method(cb, *a, **k)
            finally:
                into.append(_perf() - t0)
                cpu.append(_cpu() - c0)

        return timed

    def result(self, *, steps: int, x: Any, y: Any, batch: int) -> dict[str, float]:
        from tensorflow.python.eager.polymorphic_function import polymorphic_function as pf

        pf.Function.__call__ = self.hooked_call
        wrapper = _paired_best(lambda: self._calls(self.hooked_call), lambda: self._calls(self.orig_call))
        from stepscope.collect.keras.keras_hooks import DATA_WAIT_ENV

        metered = os.environ.get(DATA_WAIT_ENV, "").lower() not in ("0", "off", "no", "false")
        stage = _stage_cost(x, y, batch) if metered else 0.0  # no stage in the pipeline when it is off
        wall = self.callback_ns.get("on_train_batch_begin", [])
        per_batch = wall[10:] or [0]
        cpu = self.cpu_ns.get(id(wall), [])[10:] or [0]
        out = {"callback_per_step": statistics.fmean(per_batch), "callback_median": statistics.median(per_batch),
               "callback_cpu_per_step": statistics.fmean(cpu),
               "callback_once": float(sum(sum(v) for k, v in self.callback_ns.items() if k != "on_train_batch_begin")),
               "meter_read": sum(self.meter_reads) / max(len(wall), 1),
               "function_calls_per_step": self.calls / steps, "function_wrapper_per_call": wrapper,
               "stage_per_batch": stage}
        out["per_step"] = out["callback_per_step"] + out["function_calls_per_step"] * wrapper + stage
        out["per_step_cpu"] = out["callback_cpu_per_step"] + out["function_calls_per_step"] * wrapper + stage
        return out

    @staticmethod
    def _calls(call: Any, n: int = 500) -> float:
        import tensorflow as tf

        f = _TRIVIAL.setdefault("f", tf.function(lambda: tf.constant(1.0)))
        call(f)
        t0 = _perf()
        for _ in range(n):
            call(f)
        return (_perf() - t0) / n


_TRIVIAL: dict[str, Any] = {}

TARGET_SHARE = 0.01
"""Issue 16: the hooks' cost below 1% of a ~10 ms Keras step."""


NOMINAL_STEP_NS = 10e6
"""The step the target speaks of (issue 16: a ~10 ms Keras step)."""


def describe_hook_cost(cost: dict[str, float], step_ns: float) -> str:
    """The in-process hook cost (``hook_cost`` of this script's JSON) in µs and as a share of ``step_ns``; in
    CPU time also as a share of the nominal 10 ms step (a loaded machine stretches wall times, not CPU work)."""
    share = cost["per_step"] / step_ns
    cpu_share = cost["per_step_cpu"] / NOMINAL_STEP_NS
    return (f"hook work per step, timed in-process around the real steps: wall {cost['per_step'] / 1e3:.1f} µs = "
            f"{share * 100:.2f}% of the measured {step_ns / 1e6:.2f} ms step; CPU {cost['per_step_cpu'] / 1e3:.1f} µs"
            f" = {cpu_share * 100:.2f}% of a 10 ms step (target < {TARGET_SHARE * 100:.0f}%: wall "
            f"{'met' if share < TARGET_SHARE else 'NOT met'}, CPU {'met' if cpu_share < TARGET_SHARE else 'NOT met'})"
            f"\n  fit callback wall {cost['callback_per_step'] / 1e3:.1f} µs mean, {cost['callback_median'] / 1e3:.1f}"
            f" µs median, CPU {cost['callback_cpu_per_step'] / 1e3:.1f} µs mean (wall of the input-wait meter's reads "
            f"{cost['meter_read'] / 1e3:.1f} µs per step); tf.function wrapper "
            f"{cost['function_wrapper_per_call'] / 1e3:.1f} µs x {cost['function_calls_per_step']:.2f} calls; "
            f"input-wait stage {cost['stage_per_batch'] / 1e3:.1f} µs per batch; once per fit "
            f"{cost['callback_once'] / 1e6:.1f} ms (framework settings, model summary)")


def _paired_best(hooked: Callable[[], float], bare: Callable[[], float], rounds: int = 15) -> float:
    """Best (lowest) per-call time of each over interleaved blocks; their difference, floored at 0."""
    h, b = [], []
    for _ in range(rounds):
        h.append(hooked())
        b.append(bare())
    return max(min(h) - min(b), 0.0)


def _fit_dataset(x: Any, y: Any, batch: int) -> Any:
    """fit's own dataset of these arrays (Keras' array adapter), repeated: the stage goes above the repeat, so
    that the staged and the bare pipeline get the same prefetch."""
    from keras.src.trainers.data_adapters import get_data_adapter

    return get_data_adapter(x, y, batch_size=batch, shuffle=False).get_tf_dataset().repeat()


def _block_timer(n: int) -> Callable[[Any], tuple[float, float, float]]:
    """A function timing one block of ``n`` batches pulled from a fresh iterator of a dataset inside a
    ``tf.function`` loop (as Keras' train function pulls them), after a first block that warms it: per batch,
    the wall time (ns), the process's CPU time (ns, all threads) and the voluntary context switches of the
    process's threads, all three of that block only (not the iterator's start)."""
    import tensorflow as tf

    @tf.function
    def pull(it: Any) -> Any:
        total = tf.constant(0.0)
        for _ in tf.range(n):
            xb, _yb = next(it)
            total += xb[0, 0]
        return total

    def timed(ds: Any) -> tuple[float, float, float]:
        it = iter(ds)
        pull(it)
        s0, c0, t0 = _voluntary_switches(), time.process_time_ns(), _perf()
        pull(it)
        t1, c1, s1 = _perf(), time.process_time_ns(), _voluntary_switches()
        return (t1 - t0) / n, (c1 - c0) / n, (s1 - s0) / n

    return timed


def _stage_cost(x: Any, y: Any, batch: int) -> float:
    """ns per batch the input-wait stage adds to fit's own dataset (Keras' array adapter), pulled in-graph."""
    from stepscope.collect.keras.keras_datawait import InputWaitMeter

    base = _fit_dataset(x, y, batch)
    staged = InputWaitMeter(base).dataset
    timed = _block_timer(min(64, len(x) // batch))
    return _paired_best(lambda: timed(staged)[0], lambda: timed(base)[0], rounds=15)


def stage_comparison(x: Any, y: Any, batch: int, rounds: int = 15) -> dict[str, float]:
    """``--stage-only``: the input-wait stage as shipped (its two functions run inline, in the thread that
    pulls the batch) and the same stage with plain ``map``s (their functions' ops handed to a thread pool: the
    stage before), each against the bare pipeline, interleaved blocks of 64 batches, on two pipelines: ``fit``'s
    own dataset of the arrays (``fit_*``: Keras' array adapter, which slices each batch and prefetches) and a
    constant one (``const_*``: fit's first batch repeated, no slicing, no prefetch thread; the stage passes the
    batch's tensors through by reference, so its cost does not depend on what they hold). Per batch: the time
    added (best block minus best block, and median minus median), the process's CPU time added (all threads,
    median minus median; on ``fit``'s dataset it also moves with how far the prefetch thread reads ahead),
    and the voluntary context switches of the process's threads added (Linux /proc; NaN elsewhere: a thread
    that blocks on a wait switches out voluntarily, whatever the machine's load)."""
    import tensorflow as tf

    from stepscope.collect.keras import keras_datawait

    fit_ds = _fit_dataset(x, y, batch)
    first = next(iter(fit_ds))
    out: dict[str, float] = {}
    for label, base in (("fit", fit_ds), ("const", tf.data.Dataset.from_tensors(first).repeat())):
        inline = keras_datawait.InputWaitMeter(base).dataset
        shipped = keras_datawait._inline_map
        keras_datawait._inline_map = lambda ds, fn: ds.map(fn)
        try:
            pooled = keras_datawait.InputWaitMeter(base).dataset
        finally:
            keras_datawait._inline_map = shipped
        n = min(64, len(x) // batch)
        timed = _block_timer(n)
        times: dict[str, list[float]] = {"bare": [], "inline": [], "pooled": []}
        switches: dict[str, list[float]] = {k: [] for k in times}
        cpu: dict[str, list[float]] = {k: [] for k in times}
        for _ in range(rounds):
            for name, ds in (("bare", base), ("inline", inline), ("pooled", pooled)):
                wall, cpu_ns, switched = timed(ds)
                times[name].append(wall)
                cpu[name].append(cpu_ns)
                switches[name].append(switched)
        out[f"{label}_bare_best"] = min(times["bare"])
        out[f"{label}_bare_median"] = statistics.median(times["bare"])
        for name in ("inline", "pooled"):
            out[f"{label}_{name}_best"] = min(times[name]) - min(times["bare"])
            out[f"{label}_{name}_median"] = statistics.median(times[name]) - statistics.median(times["bare"])
            out[f"{label}_{name}_cpu_median"] = statistics.median(cpu[name]) - statistics.median(cpu["bare"])
            out[f"{label}_{name}_switches"] = (statistics.median(switches[name])
                                               - statistics.median(switches["bare"]))
    return out


def _voluntary_switches() -> float:
    """Voluntary context switches of all this process's threads so far (NaN without Linux /proc)."""
    total = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return float("nan")
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/status") as f:
                total += sum(int(ln.split()[1]) for ln in f if ln.startswith("voluntary_ctxt_switches"))
        except OSError:  # a thread that ended meanwhile
            pass
    return float(total)


if __name__ == "__main__":
    main()
