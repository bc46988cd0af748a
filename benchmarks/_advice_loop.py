"""Workloads with a known bottleneck, for benchmarks/advice.py (each a real torch training loop):

- ``loader``: a Dataset whose ``__getitem__`` sleeps --sleep seconds per sample, read with num_workers=--workers
  (0 by default: the loading runs in the training process, the input-bound showcase);
- ``threads``: matrix products on batches from a DataLoader, torch's intra-op threads from the environment
  (OMP_NUM_THREADS), meant to be started as two processes (torchrun) with more threads than the host has cores;
- ``ddp``: DDP on gloo (torchrun, 2 ranks) over a stack of linear layers with gradient buckets of --bucket-mb
  MiB (tiny by default: one all-reduce per layer's gradients, every step); --sync-every k all-reduces every k-th
  step only (the timing of gradient accumulation over k micro-batches under no_sync()).
"""

import argparse
import contextlib
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, TensorDataset


class Slow(Dataset):  # type: ignore[type-arg]
    def __init__(self, n: int, sleep_s: float) -> None:
        self.n, self.sleep_s = n, sleep_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(self.sleep_s)
        return torch.full((64,), float(i % 7)), i % 4


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=("loader", "threads", "ddp"))
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--sleep", type=float, default=0.003)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--width", type=int, default=384)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--bucket-mb", type=float, default=0.02)
    p.add_argument("--sync-every", type=int, default=1,
                   help="ddp: all-reduce every k-th step only (the others' backward under no_sync(): the timing of "
                        "gradient accumulation over k micro-batches, one optimizer step per micro-batch)")
    args = p.parse_args()
    torch.manual_seed(0)
    ddp = args.mode == "ddp"
    if ddp:
        import torch.distributed as dist

        dist.init_process_group("gloo")
    if args.mode == "loader":
        data: Dataset = Slow(args.steps * args.batch_size, args.sleep)  # type: ignore[type-arg]
        model: nn.Module = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))
    else:
        n = args.steps * args.batch_size
        data = TensorDataset(torch.randn(n, args.width), torch.randint(0, 4, (n,)))
        layers: list[nn.Module] = []
        for _ in range(args.layers):
            layers += [nn.Linear(args.width, args.width), nn.ReLU()]
        model = nn.Sequential(*layers, nn.Linear(args.width, 4))
    if ddp:
        from torch.nn.parallel import DistributedDataParallel

        model = DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb)
    loader = DataLoader(data, batch_size=args.batch_size, num_workers=args.workers)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i, (x, y) in enumerate(loader):
        opt.zero_grad()
        skip = ddp and (i + 1) % args.sync_every != 0
        with model.no_sync() if skip else contextlib.nullcontext():  # type: ignore[operator]
            nn.functional.cross_entropy(model(x), y).backward()  # type: ignore[no-untyped-call]
        opt.step()
    if ddp:
        dist.destroy_process_group()
    if os.environ.get("ADVICE_LOOP_SAY"):
        print(f"{args.mode}: {torch.get_num_threads()} threads")


if __name__ == "__main__":
    main()
