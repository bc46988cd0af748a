"""DDP on gloo with a tiny model: nn.Linear(20, 1) has 21 float32 parameters, one 84-byte bucket.

Every step all-reduces 84 bytes: the call's fixed latency (and waiting for the other rank) is all the
communication there is. ``--width N`` uses nn.Linear(N, N) instead (N*N + N float32: a bandwidth-bound
bucket for large N). ``--batch`` rows of random data per step, ``STEPS`` steps (default 30).
"""

import argparse

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=30)
p.add_argument("--width", type=int, default=0)
p.add_argument("--batch", type=int, default=8)
args = p.parse_args()
torch.set_num_threads(1)
dist.init_process_group("gloo")
torch.manual_seed(0)
inner = nn.Linear(args.width, args.width) if args.width else nn.Linear(20, 1)
model = DistributedDataParallel(inner)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
gen = torch.Generator().manual_seed(dist.get_rank())
n_in = args.width or 20
for _ in range(args.steps):
    loss = model(torch.randn(args.batch, n_in, generator=gen)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
dist.destroy_process_group()
