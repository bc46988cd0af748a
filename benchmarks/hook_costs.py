"""Per-hook cost of the zero-code hooks, each measured alone, in one process.

Each row times one operation a training step performs (a DataLoader `next`, a model forward, a backward,
an optimizer step, a step boundary, a region) with stepscope's hooks installed and without, alternating
the two states round after round; the cost is the difference of the two minima (the minimum of many
repeats is what survives a busy machine). The sum is the always-on cost of a step of that shape.

Target (issue 20): <= 10 µs per step in total, a region enter/exit <= 0.5 µs.

    python benchmarks/hook_costs.py [--rounds 7] [--number 2000]

The second table counts what stepscope's code does per step (Python calls, C calls, memory blocks kept),
by hook: figures a loaded machine cannot move (benchmarks/_hotpath.py; tests/collect/test_hot_path.py
holds them to a budget).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import timeit
from collections.abc import Callable
from typing import Any


def _setup() -> dict[str, Callable[[], Any]]:
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(20, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = TensorDataset(torch.randn(48 * 64, 20), torch.randn(48 * 64, 1))
    loader = DataLoader(data, batch_size=48)
    state: dict[str, Any] = {"it": iter(loader)}
    x = torch.randn(48, 20)

    def fetch() -> Any:
        try:
            return next(state["it"])
        except StopIteration:
            state["it"] = iter(loader)
            return next(state["it"])

    def forward() -> Any:
        return model(x)

    def backward() -> None:
        model(x).sum().backward()

    def step() -> None:
        opt.step()

    return {"dataloader next (48-item batch)": fetch, "forward (3-module model)": forward,
            "forward + backward": backward, "optimizer step (step boundary)": step}


def _region_once() -> None:
    import stepscope

    stepscope.region("x").__enter__().__exit__(None, None, None)


def _cost(fn: Callable[[], Any], number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=3)) / number


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--number", type=int, default=2000)
    args = p.parse_args()
    import stepscope
    from stepscope.collect import hooks
    from stepscope.collect.session import current

    ops = _setup()
    bare: dict[str, list[float]] = {k: [] for k in ops}
    hooked: dict[str, list[float]] = {k: [] for k in ops}
    region_ns: list[float] = []
    with tempfile.TemporaryDirectory() as store:
        os.environ.pop("STEPSCOPE_RUN_DIR", None)
        for _ in range(args.rounds):
            for k, fn in ops.items():
                bare[k].append(_cost(fn, args.number))
            with stepscope.session(name="hook-costs", store=store):
                s = current()
                assert s is not None and hooks.installed() > 0, "hooks were not installed"
                for _ in range(3):  # the first step finds the model and swaps global hooks for its own
                    ops["forward + backward"]()
                    ops["optimizer step (step boundary)"]()
                for k, fn in ops.items():
                    hooked[k].append(_cost(fn, args.number))
                region_ns.append(_cost(_region_once, args.number) * 1e9)
    print(f"{'operation':<36}{'bare':>10}{'hooked':>10}{'cost':>10}")
    total = 0.0
    for k in ops:
        b, h = min(bare[k]) * 1e6, min(hooked[k]) * 1e6
        total += max(0.0, h - b)
        print(f"{k:<36}{b:>8.2f}µs{h:>8.2f}µs{h - b:>8.2f}µs")
    # forward + backward includes a forward: the step's cost counts it once
    fwd = max(0.0, (min(hooked["forward (3-module model)"]) - min(bare["forward (3-module model)"])) * 1e6)
    print(f"\nper step (fetch + forward + backward + optimizer step): {total - fwd:.2f} µs (target <= 10 µs)")
    print(f"region enter+exit: {min(region_ns):.0f} ns (target <= 500 ns)")
    print("\nthe hook functions called directly (µs per call, minimum of repeats):")
    for k, v in direct_hook_costs().items():
        print(f"{k:<40}{v:>8.2f}µs")
    print_call_counts()


def direct_hook_costs(number: int = 20000) -> dict[str, float]:
    """µs per call of the hook functions themselves, called directly in a session (no torch work around
    them, so a busy machine moves the minimum far less than the hooked-vs-bare difference of a whole step):
    the optimizer's pre + post hooks (they mark the step: one row, one StepState, the per-step collectors),
    the model's forward pre + post hooks, and a backward through the wrapper around a no-op backward."""
    import torch
    from torch.optim import optimizer as optim_mod

    import stepscope
    from stepscope.collect import hooks
    from stepscope.collect.session import current

    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as store, stepscope.session(name="hook-direct", store=store):
        s = current()
        assert s is not None
        ops = _setup()
        for _ in range(3):
            ops["forward + backward"]()
            ops["optimizer step (step boundary)"]()
        pre = list(optim_mod._global_optimizer_pre_hooks.values())[-1]
        post = list(optim_mod._global_optimizer_post_hooks.values())[-1]
        marker = _cell(post, "marker").cell_contents  # the optimizer that marks steps
        watch = hooks._WATCH["modules"]
        model = watch.models[0]
        x = (torch.randn(48, 20),)

        def optimizer_hooks() -> None:
            pre(marker, (), {})
            post(marker, (), {})

        def forward_hooks() -> None:
            watch._pre(model, x)
            watch._post(model, x, None)

        backward = torch.autograd.backward
        orig = _cell(backward, "orig")
        real = orig.cell_contents
        orig.cell_contents = lambda *a, **k: None  # the wrapper's own work only
        try:
            out["backward wrapper"] = _cost(lambda: backward(None), number) * 1e6
        finally:
            orig.cell_contents = real
        out["optimizer pre+post (marks the step)"] = _cost(optimizer_hooks, number) * 1e6
        out["model forward pre+post"] = _cost(forward_hooks, number) * 1e6
        out["region enter+exit"] = _cost(_region_once, number) * 1e6
        out["empty Python call (reference)"] = _cost(lambda: None, number) * 1e6
    return out


def _cell(fn: Any, name: str) -> Any:
    """The closure cell of ``fn`` holding its free variable ``name``."""
    return fn.__closure__[fn.__code__.co_freevars.index(name)]


def print_call_counts() -> None:
    """The load-independent side (benchmarks/_hotpath.py): stepscope calls per step, by hook."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from benchmarks._hotpath import by_hook, measure

    m = measure()
    step = m["step"]
    print(f"\nstepscope's own work per step (does not move with machine load): {step.py_calls:.1f} Python calls, "
          f"{step.c_calls:.1f} C calls, {m['step_blocks']:.1f} memory blocks kept until the flush")
    print(f"{'hook':<24}{'Python calls':>14}")
    for hook, n in by_hook(step).items():
        print(f"{hook:<24}{n:>14.1f}")
    r = m["region"]
    print(f"region enter+exit: {r.py_calls:.1f} Python calls, {r.c_calls:.1f} C calls, "
          f"{m['region_blocks']:.1f} blocks kept until the flush")


if __name__ == "__main__":
    main()
