"""A tiny training loop whose dataset sleeps --sample-sleep per sample. The script times its own data
fetching, independently of stepscope: the wall time inside each batch's ``__getitem__`` calls, and the
wall time of each ``next()`` on the loader's iterator (the first one including ``iter()``), written as
JSON to OUT: {"getitem_ns": [per step], "next_ns": [per step]}."""

import argparse
import json
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __init__(self, n: int, sleep_s: float) -> None:
        self.n, self.sleep_s, self.spent_ns = n, sleep_s, 0

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        t0 = time.perf_counter_ns()
        time.sleep(self.sleep_s)
        item = torch.full((16,), float(i)), i % 4
        self.spent_ns += time.perf_counter_ns() - t0
        return item


p = argparse.ArgumentParser()
p.add_argument("out")
p.add_argument("--steps", type=int, default=6)
p.add_argument("--batch-size", type=int, default=4)
p.add_argument("--sample-sleep", type=float, default=0.01)
args = p.parse_args()
torch.manual_seed(0)
data = Slow(args.steps * args.batch_size, args.sample_sleep)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
getitem_ns, next_ns = [], []
t0 = time.perf_counter_ns()
it = iter(DataLoader(data, batch_size=args.batch_size))
for _ in range(args.steps):
    data.spent_ns = 0
    x, y = next(it)
    next_ns.append(time.perf_counter_ns() - t0)
    getitem_ns.append(data.spent_ns)
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    t0 = time.perf_counter_ns()
with open(args.out, "w") as fh:
    json.dump({"getitem_ns": getitem_ns, "next_ns": next_ns}, fh)
