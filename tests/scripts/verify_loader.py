"""The slow-DataLoader showcase: a Dataset whose ``__getitem__`` sleeps --sleep seconds per sample, read by a
DataLoader built with num_workers=--workers (0: in the training process), a tiny model trained --steps steps, each
also sleeping --compute seconds (device work the CPU waits for: with it larger than a batch's loading time divided
by the workers, the workers keep ahead and every step takes about --compute, so a step's time does not alternate
between waiting for a batch and finding one ready).
With --out FILE the script writes, independently of stepscope, the processes that ran ``__getitem__`` and the
loader's own arguments as torch kept them: {"main_pid", "item_pids", "num_workers", "persistent_workers"}."""

import argparse
import json
import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __init__(self, n: int, sleep_s: float) -> None:
        self.n, self.sleep_s = n, sleep_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        time.sleep(self.sleep_s)
        return torch.full((16,), float(i)), i % 4, os.getpid()


p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=30)
p.add_argument("--batch-size", type=int, default=4)
p.add_argument("--sleep", type=float, default=0.005)
p.add_argument("--workers", type=int, default=0)
p.add_argument("--compute", type=float, default=0.0)
p.add_argument("--out")
args = p.parse_args()
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(Slow(args.steps * args.batch_size, args.sleep), batch_size=args.batch_size,
                    num_workers=args.workers)
pids: set[int] = set()
for x, y, pid in loader:
    pids.update(int(v) for v in pid)
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    if args.compute:
        time.sleep(args.compute)
    opt.step()
if args.out:
    with open(args.out, "w") as fh:
        json.dump({"main_pid": os.getpid(), "item_pids": sorted(pids), "num_workers": loader.num_workers,
                   "persistent_workers": loader.persistent_workers}, fh)
