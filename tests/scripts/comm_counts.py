"""Known communication on gloo ranks, plus DDP training whose final parameters rank 0 saves to $OUT.

Per rank: one broadcast of 100 float32 (400 B) before training; per step (STEPS, default 5): one
all_reduce of 1000 float32 (4000 B) and one async all_reduce of 10 float32 (40 B) waited; after
training: rank 0 isend / rank 1 irecv of 50 float32 (200 B) waited, then one barrier. The DDP model has
2177 float32 parameters (8708 B, one bucket). Ranks draw different data, so the gradient average matters.
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DistributedDataParallel(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
gen = torch.Generator().manual_seed(rank)
dist.broadcast(torch.zeros(100), src=0)
for _ in range(int(os.environ.get("STEPS", "5"))):
    loss = model(torch.randn(16, 32, generator=gen)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    dist.all_reduce(torch.ones(1000))
    dist.all_reduce(torch.ones(10), async_op=True).wait()
    opt.step()
if rank == 0:
    dist.isend(torch.ones(50), dst=1).wait()
elif rank == 1:
    dist.irecv(torch.empty(50), src=0).wait()
dist.barrier()
if rank == 0 and os.environ.get("OUT"):
    torch.save([p.detach() for p in model.parameters()], os.environ["OUT"])
dist.destroy_process_group()
