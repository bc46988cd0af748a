"""Training script that provokes (or avoids) the advisor's host-side problems, in a few seconds on a CPU."""

import argparse
import time

import torch
from synthetic import Synthetic
from torch import nn
from torch.utils.data import DataLoader


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--sample-sleep", type=float, default=0.0, help="seconds per sample in the dataset")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--first-step-sleep", type=float, default=0.0, help="extra seconds in step 0 (warm-up)")
    p.add_argument("--compute", type=int, default=0, help="extra matmuls per step (busy compute)")
    p.add_argument("--instrument", action="store_true", help="stepscope regions and logged metrics")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    loader = DataLoader(Synthetic(args.steps * args.batch_size, args.sample_sleep), batch_size=args.batch_size,
                        num_workers=args.workers)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = nn.CrossEntropyLoss()
    a = torch.randn(128, 128)
    import contextlib

    region = contextlib.nullcontext
    if args.instrument:
        import stepscope

        region = stepscope.region  # type: ignore[assignment]
    for step, (x, y) in enumerate(loader):
        opt.zero_grad()
        with region("model"):  # type: ignore[call-arg]
            with region("forward"):  # type: ignore[call-arg]
                loss = loss_fn(model(x), y)
            loss.backward()
        with region("extra"):  # type: ignore[call-arg]
            for _ in range(args.compute):
                a = torch.tanh(a @ a)
        if args.instrument:
            stepscope.log(loss=float(loss), lr=0.1)
        if step == 0 and args.first_step_sleep:
            time.sleep(args.first_step_sleep)
        opt.step()


if __name__ == "__main__":
    main()
