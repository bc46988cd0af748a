"""A tiny, configurable training script for the tests (seconds on a CPU)."""

import argparse
import os
import signal
import sys
import time

import torch
from synthetic import Synthetic
from torch import nn
from torch.utils.data import DataLoader


def main() -> None:
    p = argparse.ArgumentParser(description="tiny training for stepscope tests")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--fail-at", type=int, default=-1, help="raise RuntimeError at this step")
    p.add_argument("--kill-at", type=int, default=-1, help="SIGKILL itself at this step")
    p.add_argument("--wait-at-kill", type=float, default=0.0, help="seconds to sleep before the SIGKILL")
    p.add_argument("--step-sleep", type=float, default=0.0, help="sleep per step (seconds) outside any phase")
    p.add_argument("--sample-sleep", type=float, default=0.0, help="sleep per sample in the dataset")
    p.add_argument("--print-pid", action="store_true")
    args = p.parse_args()

    torch.manual_seed(0)
    n = args.steps * args.batch_size
    loader = DataLoader(Synthetic(n, args.sample_sleep), batch_size=args.batch_size)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    for _ in range(args.epochs):
        for x, y in loader:
            if step == args.fail_at:
                raise RuntimeError(f"planned failure at step {step}")
            if step == args.kill_at:
                time.sleep(args.wait_at_kill)
                os.kill(os.getpid(), signal.SIGKILL)
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            if args.step_sleep:
                time.sleep(args.step_sleep)
            opt.step()
            step += 1
            if args.print_pid and step == 3:
                print(f"PID {os.getpid()} after 3 steps", flush=True)
    print(f"trained {step} steps", file=sys.stderr)


if __name__ == "__main__":
    main()
