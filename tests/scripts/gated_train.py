"""A tiny DataLoader training loop that stops after --gate-after steps until the file --gate exists, then runs
the rest: a test opens a running run's page while it is short and lets it grow past what the page was
rendered with. From the gate on it logs its loss (a metric the page was rendered without)."""

import argparse
import time
from pathlib import Path

import torch
from synthetic import Synthetic
from torch import nn
from torch.utils.data import DataLoader

import stepscope

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=200)
p.add_argument("--gate-after", type=int, default=3)
p.add_argument("--gate", required=True)
p.add_argument("--sample-sleep", type=float, default=0.002)
args = p.parse_args()
torch.set_num_threads(1)
torch.manual_seed(0)
loader = DataLoader(Synthetic(args.steps * 8, args.sample_sleep), batch_size=8)
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(loader):
    if step == args.gate_after:
        deadline = time.monotonic() + 120
        while not Path(args.gate).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    if step >= args.gate_after:
        stepscope.log(loss=float(loss))
    opt.step()
