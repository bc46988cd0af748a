"""The training loops that benchmarks/overhead.py runs under each tool, and that benchmarks/hook_costs.py
times in-process. Run as a script it prints one JSON line (median step time, CPU time per step).

Scripts (``--script``):

* ``mlp``: the default, ~10 ms steps on one CPU thread (``--hidden 1024``): a DataLoader of 32-row
  batches from a TensorDataset, a 3-layer MLP, SGD.
* the three shapes of issue 20 where the zero-code hooks cost the most relative to the step:
  ``loader48`` (a map-style dataset of single items, 48 per batch, shuffled: ~1.3 ms a step here, most of
  it in the DataLoader), ``linear`` (``Linear(20, 1)`` on a 64-row batch made in the loop, no DataLoader:
  the smallest step torch does) and ``many`` (201 modules: 100 ``Linear(16, 16)`` + ``ReLU`` blocks).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset

SCRIPTS = ("mlp", "loader48", "linear", "many")


class Items(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """One sample per ``__getitem__`` (the DataLoader collates 48 of them per batch)."""

    def __init__(self, n: int, features: int = 32) -> None:
        self.x = torch.randn(n, features)
        self.y = torch.randn(n, 1)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[i], self.y[i]


class Parts:
    """One script's pieces: its model, optimizer, loss and batches (``next_batch`` restarts the loader at
    the end of each pass, as an epoch loop does)."""

    def __init__(self, script: str, hidden: int = 1024, batches: int = 64) -> None:
        torch.manual_seed(0)
        self.loader: DataLoader[Any] | None = None
        if script == "mlp":
            n = batches * 32
            self.loader = DataLoader(TensorDataset(torch.randn(n, 256), torch.randint(0, 10, (n,))), batch_size=32)
            self.model: nn.Module = nn.Sequential(nn.Linear(256, hidden), nn.ReLU(), nn.Linear(hidden, hidden),
                                                  nn.ReLU(), nn.Linear(hidden, 10))
            self.loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = nn.CrossEntropyLoss()
        elif script == "loader48":
            self.loader = DataLoader(Items(48 * batches), batch_size=48, shuffle=True)
            self.model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))
            self.loss_fn = nn.functional.mse_loss
        elif script == "linear":
            self.model = nn.Linear(20, 1)
            self.batch = (torch.randn(64, 20), torch.randn(64, 1))
            self.loss_fn = nn.functional.mse_loss
        elif script == "many":
            n = batches * 32
            self.loader = DataLoader(TensorDataset(torch.randn(n, 16), torch.randn(n, 1)), batch_size=32)
            blocks = [m for _ in range(100) for m in (nn.Linear(16, 16), nn.ReLU())]
            self.model = nn.Sequential(*blocks, nn.Linear(16, 1))
            self.loss_fn = nn.functional.mse_loss
        else:
            raise ValueError(f"unknown script {script!r}; expected one of {', '.join(SCRIPTS)}")
        self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-3)
        self.it: Any = None

    def next_batch(self) -> Any:
        if self.loader is None:
            return self.batch
        if self.it is None:
            self.it = iter(self.loader)
        try:
            return next(self.it)
        except StopIteration:
            self.it = iter(self.loader)
            return next(self.it)

    def step(self) -> None:
        """One training step: fetch, forward, loss, zero_grad, backward, optimizer step."""
        x, y = self.next_batch()
        loss = self.loss_fn(self.model(x), y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--script", default="mlp", choices=SCRIPTS)
    p.add_argument("--mode", default="bare", choices=["bare", "torch-profiler", "lightning-simple"])
    args = p.parse_args()
    torch.set_num_threads(1)
    parts = Parts(args.script, args.hidden, batches=args.steps)
    model, opt, loss_fn = parts.model, parts.opt, parts.loss_fn
    prof = None
    simple = None
    if args.mode == "torch-profiler":
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        prof.start()
    elif args.mode == "lightning-simple":
        from lightning.pytorch.profilers import SimpleProfiler

        simple = SimpleProfiler()
    times = []
    cpu = []
    t_prev = time.perf_counter_ns()
    c_prev = time.process_time_ns()
    for _ in range(args.steps):
        x, y = parts.next_batch()
        if simple is not None:
            with simple.profile("step"):
                with simple.profile("forward"):
                    loss = loss_fn(model(x), y)
                with simple.profile("backward"):
                    opt.zero_grad()
                    loss.backward()
                with simple.profile("optimizer"):
                    opt.step()
        else:
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if prof is not None:
            prof.step()
        t = time.perf_counter_ns()
        c = time.process_time_ns()
        times.append(t - t_prev)
        cpu.append(c - c_prev)
        t_prev, c_prev = t, c
    if prof is not None:
        prof.stop()
    skip = len(times) // 5
    warm = sorted(times[skip:])
    print(json.dumps({"median_step_ns": warm[len(warm) // 2], "mean_step_ns": sum(warm) / len(warm),
                      "cpu_per_step_ns": sum(cpu[skip:]) / len(cpu[skip:]), "steps": len(times)}))


if __name__ == "__main__":
    main()
