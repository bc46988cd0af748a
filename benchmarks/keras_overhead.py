"""Overhead of the Keras / TensorFlow hooks: a paired whole-``fit`` ratio and the hooks' own work, timed.

1. Paired fit, in one process: the same Keras ``fit`` (a Dense model whose step takes ~10 ms on one CPU
   thread) runs with the stepscope hooks installed and removed, interleaved over several rounds so that
   machine drift hits both alike; prints the median step time of each (from a timing callback of its own)
   and the ratio. On a shared, loaded machine this ratio moves by more than the hooks cost.
2. The hooks' own work, timed directly: benchmarks/_keras_loop.py ``--hook-cost`` under `stepscope run` (the
   zero-code hooks as a user gets them) times every call of the fit callback around the real steps, the
   ``tf.function`` wrapper and the input-wait stage (see that file), and prints the sum in µs and as a share
   of the step time measured in the same run, beside the target. Best of ``--cost-runs`` runs by share, and
   every run's share (wall, of the measured step; CPU, of a nominal 10 ms step) with their median.

Target: < 1% of a 10 ms step.

    python benchmarks/keras_overhead.py [--rounds 5] [--steps 100] [--cost-runs 3]
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
    p.add_argument("--cost-runs", type=int, default=3, help="runs of the in-process hook timing")
    args = p.parse_args()

    import keras
    import numpy as np
    import tensorflow as tf

    from stepscope.collect import keras_hooks, tensorflow_hooks
    from stepscope.collect.hooks import remove_all
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
        remove_all()  # one undo list for every hook (collect/hooks.py)
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

    session.close()
    hook_cost(args.cost_runs, args.steps, args.hidden)


def hook_cost(runs: int, steps: int, hidden: int) -> None:
    """Part 2: _keras_loop.py --hook-cost under `stepscope run`, ``runs`` times with fit's input-wait metering
    and ``runs`` times without it (STEPSCOPE_KERAS_DATA_WAIT=off), interleaved; the run with the lowest share
    of each."""
    import json
    import os
    import subprocess
    import sys

    from _keras_loop import NOMINAL_STEP_NS, describe_hook_cost

    loop = Path(__file__).resolve().parent / "_keras_loop.py"
    best: dict[str, tuple[float, dict[str, Any], float]] = {}
    every: dict[str, list[tuple[float, float]]] = {}  # (share of the measured step, CPU share of 10 ms) per run
    with tempfile.TemporaryDirectory() as store:
        for _ in range(runs):
            for label, value in (("with the data-wait metering", "on"), ("without it", "off")):
                env = {**os.environ, "STEPSCOPE_KERAS_DATA_WAIT": value}
                out = subprocess.run([sys.executable, "-m", "stepscope", "run", "--quiet", "--store", store, "--",
                                      sys.executable, str(loop), "--steps", str(max(steps, 60)), "--hidden",
                                      str(hidden), "--hook-cost"], capture_output=True, text=True, check=True,
                                     env=env).stdout
                result = json.loads([ln for ln in out.splitlines() if ln.startswith("{")][-1])
                share = result["hook_cost"]["per_step"] / result["median_step_ns"]
                every.setdefault(label, []).append((share, result["hook_cost"]["per_step_cpu"] / NOMINAL_STEP_NS))
                if label not in best or share < best[label][0]:
                    best[label] = (share, result["hook_cost"], result["median_step_ns"])
    for label, (_, cost, step_ns) in best.items():
        print(f"{label}, best of {runs} runs: " + describe_hook_cost(cost, step_ns))
        shares = every[label]
        print(f"  every run: wall share of the step {', '.join(f'{w * 100:.2f}%' for w, _ in shares)} (median "
              f"{statistics.median(w for w, _ in shares) * 100:.2f}%); CPU share of 10 ms "
              f"{', '.join(f'{c * 100:.2f}%' for _, c in shares)} (median "
              f"{statistics.median(c for _, c in shares) * 100:.2f}%)")


if __name__ == "__main__":
    main()
