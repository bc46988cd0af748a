"""A known communication pattern on 4 gloo ranks: rank r sends (r + 1) * 1000 float32 values to rank
(r + 1) % 4 (even ranks send first, then receive; odd ranks the other way round), then every rank joins
one all_reduce of 256 float32 values. Two optimizer steps make it a training run."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
opt.zero_grad()
model(torch.randn(2, 4)).sum().backward()
opt.step()
out = torch.ones((rank + 1) * 1000)
inp = torch.empty(((rank - 1) % world + 1) * 1000)
if rank % 2 == 0:
    dist.send(out, (rank + 1) % world)
    dist.recv(inp, (rank - 1) % world)
else:
    dist.recv(inp, (rank - 1) % world)
    dist.send(out, (rank + 1) % world)
dist.all_reduce(torch.ones(256))
opt.step()
dist.destroy_process_group()
