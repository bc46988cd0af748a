"""Two-rank (or more) DistributedDataParallel training with the gloo backend, on the CPU.

    stepscope run -- torchrun --nproc-per-node 2 examples/train_ddp.py --steps 60
"""

import argparse
import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--hidden", type=int, default=128)
    args = p.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    n = args.steps * args.batch_size * world
    x = torch.randn(n, 32)
    y = (x.sum(dim=1, keepdim=True) > 0).float()
    data = TensorDataset(x, y)
    loader = DataLoader(data, batch_size=args.batch_size, sampler=DistributedSampler(data, world, rank, seed=0))
    model = DistributedDataParallel(nn.Sequential(nn.Linear(32, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.BCEWithLogitsLoss()
    for step, (xb, yb) in enumerate(loader):
        if step >= args.steps:
            break
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
    if rank == 0:
        print(f"rank {rank}/{world} done, pid {os.getpid()}, last loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
