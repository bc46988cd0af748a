"""The per-step cost of the zero-code step hooks on a realistic step (a small CNN fed by a real DataLoader).

One process trains one model (two conv layers and a linear head on 3x16x16 synthetic images, batches of 32
from a ``DataLoader`` over a ``TensorDataset``, SGD, one CPU thread: about 1.5 ms a step on a quiet core). It
runs in rounds; each round runs one block of steps per arm, in a shuffled order, so machine drift hits every
arm alike:

* ``bare``: no hook installed;
* ``bare-again``: no hook either (the A/A arm: its difference to ``bare`` is the noise floor of the method);
* ``hooks``: the four hooks that run every step (DataLoader fetch, model forward, backward, optimizer step and
  its step mark), installed as a run installs them at the block's start and removed at its end.

A block's figures are its median step time by the wall clock and by the thread's CPU clock (after a few
untimed steps: the first hooked step also finds the model). Per round, each arm's difference to ``bare`` (µs)
and its ratio; printed: the median over rounds with its distribution-free 95% interval (sign test), per process
and pooled over processes.

    python benchmarks/step_overhead.py [--rounds 120] [--steps 20] [--processes 3] [--arms bare,bare-again,hooks]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # run as a script: `benchmarks.hook_costs` importable
ARMS: dict[str, dict[str, str] | None] = {"bare": None, "bare-again": None, "hooks": {}}
"""Each arm: None (no hook) or the environment its hooks are installed under (an arm comparing two ways of
installing them sets what tells them apart; benchmarks/RESULTS.md has the run that compared the compiled and the
Python hook bodies this way)."""
CLOCKS = ("wall", "cpu")
"""Each block's median step time by the wall clock and by the training thread's CPU clock (on a loaded machine
the CPU clock leaves out the time the thread waited for a core)."""
WARM = 3
"""Untimed steps at each block's start (the first hooked step finds the model)."""


class Training:
    """The step: a small CNN on 3x16x16 images, a real DataLoader restarted at each pass (an epoch loop)."""

    def __init__(self, batches: int = 64, batch: int = 32) -> None:
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset

        torch.manual_seed(0)
        torch.set_num_threads(1)
        n = batches * batch
        data = TensorDataset(torch.randn(n, 3, 16, 16), torch.randint(0, 10, (n,)))
        self.loader = DataLoader(data, batch_size=batch, shuffle=True)
        self.model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                   nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                   nn.Flatten(), nn.Linear(16 * 4 * 4, 10))
        self.loss_fn = nn.CrossEntropyLoss()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-3)
        self.it: Any = None

    def step(self) -> None:
        if self.it is None:
            self.it = iter(self.loader)
        try:
            x, y = next(self.it)
        except StopIteration:
            self.it = iter(self.loader)
            x, y = next(self.it)
        loss = self.loss_fn(self.model(x), y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()


def install(session: Any, env: dict[str, str]) -> None:
    """The hooks that run every step, installed as ``install_torch_hooks`` installs them, under ``env``."""
    from stepscope.collect.core import undo as undo_list
    from stepscope.collect.torch import hooks

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        hooks._install_optimizer_hooks(session)
        hooks._install_backward_hook(session)
        hooks._install_part("torch.loader", "install_loader_hooks")(session, undo_list.UNDO)
        hooks._install_modules(session)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def block(t: Training, n: int) -> tuple[float, float]:
    """Median wall and thread CPU time (ns) of ``n`` steps after :data:`WARM` untimed ones; each block starts a
    loader pass."""
    t.it = None
    for _ in range(WARM):
        t.step()
    perf, cpu = time.perf_counter_ns, time.thread_time_ns
    walls, cpus = [], []
    for _ in range(n):
        w0, c0 = perf(), cpu()
        t.step()
        c1, w1 = cpu(), perf()
        walls.append(w1 - w0)
        cpus.append(c1 - c0)
    return float(statistics.median(walls)), float(statistics.median(cpus))


def run_rounds(rounds: int, steps: int, arms: list[str], seed: int) -> dict[str, Any]:
    """In this process: per round, each arm's block median (ns); the steps the session recorded."""
    import stepscope
    from stepscope.collect.core import undo as undo_list
    from stepscope.collect.core.session import current

    os.environ.pop("STEPSCOPE_RUN_DIR", None)
    rng = random.Random(seed)
    t = Training()
    medians: dict[str, list[float]] = {a: [] for a in arms}
    cpu: dict[str, list[float]] = {a: [] for a in arms}
    with tempfile.TemporaryDirectory() as store, stepscope.session(name="step-overhead", store=store):
        s = current()
        assert s is not None
        undo_list.remove_all()  # the arms install their own
        for _ in range(rounds):
            order = list(arms)
            rng.shuffle(order)
            for arm in order:
                env = ARMS[arm]
                if env is not None:
                    install(s, env)
                try:
                    w, c = block(t, steps)
                    medians[arm].append(w)
                    cpu[arm].append(c)
                finally:
                    undo_list.remove_all()
        recorded = s.step_index
    want = rounds * (WARM + steps) * sum(ARMS[a] is not None for a in arms)
    if recorded != want:  # hooks that missed steps would look cheap: no figure from them
        raise SystemExit(f"step_overhead.py: the hooked blocks recorded {recorded} steps of their {want}")
    return {"wall": medians, "cpu": cpu, "recorded_steps": recorded}


def sign_interval(xs: list[float], level: float = 0.95) -> tuple[float, float]:
    """The sign test's distribution-free interval for the median of ``xs`` (benchmarks/hook_costs.py)."""
    from benchmarks.hook_costs import sign_interval as si

    low, high, _ = si(xs, level)
    return low, high


def summary(medians: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """Per arm but ``bare``: its difference (µs) and ratio to the same round's ``bare``, median and interval;
    with more than one arm hooked, the paired differences between them too."""
    bare = medians["bare"]
    out: dict[str, dict[str, float]] = {"bare": {"step_us": statistics.median(bare) / 1e3}}
    for arm, ms in medians.items():
        if arm == "bare":
            continue
        diff = [(m - b) / 1e3 for m, b in zip(ms, bare, strict=True)]
        ratio = [m / b for m, b in zip(ms, bare, strict=True)]
        dl, dh = sign_interval(diff)
        rl, rh = sign_interval(ratio)
        out[arm] = {"step_us": statistics.median(ms) / 1e3, "diff_us": statistics.median(diff), "diff_low": dl,
                    "diff_high": dh, "ratio": statistics.median(ratio), "ratio_low": rl, "ratio_high": rh}
    return out


def print_summary(title: str, medians: dict[str, list[float]]) -> None:
    res = summary(medians)
    n = len(medians["bare"])
    print(f"{title} ({n} rounds): bare step {res['bare']['step_us']:.0f} µs")
    for arm, r in res.items():
        if arm == "bare":
            continue
        print(f"  {arm:<12} step {r['step_us']:7.0f} µs   {r['diff_us']:+7.1f} µs ({r['diff_low']:+.1f} to "
              f"{r['diff_high']:+.1f})   ratio {r['ratio']:.4f} ({r['ratio_low']:.4f} to {r['ratio_high']:.4f})")
    hooked = [a for a in medians if ARMS.get(a) is not None]
    for i, a in enumerate(hooked):
        for b in hooked[i + 1:]:
            d = [(x - y) / 1e3 for x, y in zip(medians[a], medians[b], strict=True)]
            low, high = sign_interval(d)
            print(f"  {a} - {b}: {statistics.median(d):+.1f} µs ({low:+.1f} to {high:+.1f})")


def child(args: argparse.Namespace) -> None:
    res = run_rounds(args.rounds, args.steps, args.arms.split(","), args.seed)
    print(json.dumps(res))


def measure(rounds: int, steps: int, processes: int, arms: list[str], seed: int = 0,
            show: bool = True) -> dict[str, dict[str, list[float]]]:
    """``processes`` fresh processes one after another, each ``rounds`` rounds; per clock, each arm's block
    medians pooled over processes (each process's summary printed with ``show``)."""
    pooled: dict[str, dict[str, list[float]]] = {c: {a: [] for a in arms} for c in CLOCKS}
    for i in range(processes):
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--rounds", str(rounds),
               "--steps", str(steps), "--arms", ",".join(arms), "--seed", str(seed + i)]
        done = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE.parent,
                              env={**os.environ, "PYTHONPATH": str(HERE.parent)})
        if done.returncode:
            sys.exit(f"step_overhead.py: process {i} failed:\n{done.stderr[-2000:]}")
        res = json.loads(done.stdout.strip().splitlines()[-1])
        for c in CLOCKS:
            if show:
                print_summary(f"process {i}, {c}", res[c])
            for a in arms:
                pooled[c][a].extend(res[c][a])
        if show:
            print(f"  steps recorded by the hooked blocks: {res['recorded_steps']}")
    return pooled


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=120)
    ap.add_argument("--steps", type=int, default=20, help="timed steps per block")
    ap.add_argument("--processes", type=int, default=3)
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    arms = args.arms.split(",")
    bad = [a for a in arms if a not in ARMS]
    if bad or "bare" not in arms or args.rounds < 6 or args.steps < 1 or args.processes < 1:
        sys.exit(f"step_overhead.py: --arms takes 'bare' and any of {', '.join(ARMS)}; --rounds >= 6, "
                 "--steps >= 1, --processes >= 1")
    if args.child:
        child(args)
        return
    print(f"load average {os.getloadavg()[0]:.2f}; {args.processes} processes x {args.rounds} rounds x "
          f"{args.steps} steps per arm")
    pooled = measure(args.rounds, args.steps, args.processes, arms, args.seed)
    if args.processes > 1:
        for c in CLOCKS:
            print_summary(f"pooled, {c}", pooled[c])
    print(f"load average at end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
