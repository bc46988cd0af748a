"""A training loop whose step time is set by sleeps, so per-rank timings are known in advance.

Each step: fetch a batch (DataLoader, --batch-size samples), sleep --sleep-ms ("compute"; rank
--straggler sleeps --delay-ms more), a tiny forward/backward, one all_reduce of 1000 float32 values
when distributed, optimizer step, and ``stepscope.log(loss=1 / (1 + global step))``.
Runs under torchrun (gloo) or as a single plain process. --fail-at N exits with code 3 at step N.
"""

import argparse
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

import stepscope

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=20, help="steps per epoch")
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--batch-size", type=int, default=8)
p.add_argument("--sleep-ms", type=float, default=10.0)
p.add_argument("--straggler", type=int, default=-1)
p.add_argument("--delay-ms", type=float, default=0.0)
p.add_argument("--workers", type=int, default=0)
p.add_argument("--fail-at", type=int, default=-1)
args = p.parse_args()
torch.set_num_threads(1)
dist = None
if "WORLD_SIZE" in os.environ:
    import torch.distributed as dist

    dist.init_process_group("gloo")
rank = dist.get_rank() if dist else 0
torch.manual_seed(0)
data = TensorDataset(torch.randn(args.steps * args.batch_size, 8), torch.randn(args.steps * args.batch_size, 1))
loader = DataLoader(data, batch_size=args.batch_size, num_workers=args.workers)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
step = 0
for _epoch in range(args.epochs):
    for x, y in loader:
        if step == args.fail_at:
            sys.exit(3)
        time.sleep((args.sleep_ms + (args.delay_ms if rank == args.straggler else 0.0)) / 1000)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        if dist:
            dist.all_reduce(torch.ones(1000))
        opt.step()
        step += 1
        stepscope.log(loss=1.0 / (1 + step))
if dist:
    dist.destroy_process_group()
