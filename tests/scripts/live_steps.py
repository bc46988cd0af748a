"""A 2-rank (torchrun, gloo) training loop for `stepscope top`: every step sleeps --sleep-ms ("compute"),
runs a tiny forward/backward, one all_reduce and an optimizer step. From step --straggle-from on, rank
--straggler sleeps --delay-ms more per step, and at its first slow step it writes the wall-clock time
(time.time()) to the file named by --mark: the moment the straggler appears."""

import argparse
import time
from pathlib import Path

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=100)
p.add_argument("--sleep-ms", type=float, default=30.0)
p.add_argument("--straggler", type=int, default=-1)
p.add_argument("--straggle-from", type=int, default=0)
p.add_argument("--delay-ms", type=float, default=0.0)
p.add_argument("--mark", default="")
args = p.parse_args()
torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(8, 8), torch.randn(8, 1)
for step in range(args.steps):
    slow = rank == args.straggler and step >= args.straggle_from
    if slow and step == args.straggle_from and args.mark:
        Path(args.mark).write_text(repr(time.time()))
    time.sleep((args.sleep_ms + (args.delay_ms if slow else 0.0)) / 1000)
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    dist.all_reduce(torch.ones(1000))
    opt.step()
dist.destroy_process_group()
