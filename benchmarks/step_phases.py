"""Where the zero-code hooks' per-step cost lands: each phase of the realistic step, hooked minus bare.

The step of benchmarks/step_overhead.py (a small CNN fed by a real DataLoader), timed phase by phase with the
clock read between the user's calls: ``next(loader)`` (the DataLoader hook), ``loss_fn(model(x), y)`` (the model's
timed call slot), ``zero_grad`` (no hook: a control that must stay at zero), ``loss.backward()`` (the backward
wrapper) and ``opt.step()`` (the optimizer's global step hooks, with the step mark). In one process, in rounds;
each round runs one block per arm in a shuffled order (``bare``, ``bare-again``: the A/A arm, ``hooks``). Per
round and phase: the arm's block median minus ``bare``'s; printed: the median over rounds and its sign-test 95%
interval.

A hook's cost here is what it costs where it runs: after milliseconds of torch work its code and data are out of
the caches, so a Python call costs several times what it costs called in a loop (benchmarks/hook_costs.py).

    python benchmarks/step_phases.py [--rounds 100] [--steps 20] [--clock cpu|wall]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: `benchmarks.*` importable

from benchmarks.hook_costs import sign_interval
from benchmarks.step_overhead import WARM, Training, install

PHASES = ("next", "forward", "zero_grad", "backward", "optimizer", "step")
ARMS = ("bare", "bare-again", "hooks")


def block(t: Training, n: int, clock: Callable[[], int]) -> dict[str, float]:
    """Per phase, the median (ns) over ``n`` steps after :data:`WARM` untimed ones; the block starts a pass."""
    t.it = iter(t.loader)
    got: dict[str, list[int]] = {p: [] for p in PHASES}
    for i in range(WARM + n):
        c0 = clock()
        try:
            x, y = next(t.it)
        except StopIteration:
            t.it = iter(t.loader)
            x, y = next(t.it)
        c1 = clock()
        loss = t.loss_fn(t.model(x), y)
        c2 = clock()
        t.opt.zero_grad()
        c3 = clock()
        loss.backward()
        c4 = clock()
        t.opt.step()
        c5 = clock()
        if i >= WARM:
            for p, v in zip(PHASES, (c1 - c0, c2 - c1, c3 - c2, c4 - c3, c5 - c4, c5 - c0), strict=True):
                got[p].append(v)
    return {p: float(statistics.median(v)) for p, v in got.items()}


def run(rounds: int, steps: int, clock: Callable[[], int], seed: int = 0) -> dict[str, list[dict[str, float]]]:
    """Per arm, each round's per-phase block medians (ns)."""
    import stepscope
    from stepscope.collect.core import undo as undo_list
    from stepscope.collect.core.session import current

    os.environ.pop("STEPSCOPE_RUN_DIR", None)
    rng = random.Random(seed)
    t = Training()
    out: dict[str, list[dict[str, float]]] = {a: [] for a in ARMS}
    with tempfile.TemporaryDirectory() as store, stepscope.session(name="step-phases", store=store):
        s = current()
        assert s is not None
        undo_list.remove_all()  # the hooks arm installs its own
        for _ in range(rounds):
            order = list(ARMS)
            rng.shuffle(order)
            for arm in order:
                if arm == "hooks":
                    install(s, {})
                try:
                    out[arm].append(block(t, steps, clock))
                finally:
                    undo_list.remove_all()
    return out


def report(out: dict[str, list[dict[str, float]]]) -> list[str]:
    lines = []
    for p in PHASES:
        bare = [r[p] for r in out["bare"]]
        line = f"{p:<10} bare {statistics.median(bare) / 1e3:8.1f} µs"
        for arm in ARMS[1:]:
            d = [(r[p] - b) / 1e3 for r, b in zip(out[arm], bare, strict=True)]
            low, high, _ = sign_interval(d, 0.95)
            line += f" | {arm} {statistics.median(d):+6.1f} ({low:+.1f} to {high:+.1f})"
        lines.append(line)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per block")
    ap.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.rounds < 6 or args.steps < 1:
        sys.exit("step_phases.py: --rounds >= 6, --steps >= 1")
    clock: Any = time.thread_time_ns if args.clock == "cpu" else time.perf_counter_ns
    print(f"load average {os.getloadavg()[0]:.2f}; {args.rounds} rounds x {args.steps} steps per arm, "
          f"{args.clock} clock")
    for line in report(run(args.rounds, args.steps, clock, args.seed)):
        print(line)
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
