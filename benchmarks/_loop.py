"""The training loop that benchmarks/overhead.py runs under each tool. Prints one JSON line."""

import argparse
import json
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--hidden", type=int, default=1024)
    p.add_argument("--mode", default="bare", choices=["bare", "torch-profiler", "lightning-simple"])
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    n = args.steps * 32
    loader = DataLoader(TensorDataset(torch.randn(n, 256), torch.randint(0, 10, (n,))), batch_size=32)
    model = nn.Sequential(nn.Linear(256, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.hidden), nn.ReLU(),
                          nn.Linear(args.hidden, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    prof = None
    simple = None
    if args.mode == "torch-profiler":
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
        prof.start()
    elif args.mode == "lightning-simple":
        from lightning.pytorch.profilers import SimpleProfiler

        simple = SimpleProfiler()
    times = []
    t_prev = time.perf_counter_ns()
    for x, y in loader:
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
        times.append(t - t_prev)
        t_prev = t
    if prof is not None:
        prof.stop()
    warm = times[len(times) // 5:]
    warm.sort()
    print(json.dumps({"median_step_ns": warm[len(warm) // 2], "mean_step_ns": sum(warm) / len(warm),
                      "steps": len(times)}))


if __name__ == "__main__":
    main()
