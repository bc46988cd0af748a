"""2-rank gloo job (torchrun): both ranks train 2 steps, then rank 1 sleeps forever and rank 0 blocks
in an all_reduce waiting for it (in C, the main thread never returns to Python)."""

import os
import time

import torch
import torch.distributed as dist


def main() -> None:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
    dist.barrier()
    if rank == 0:
        print(f"BLOCKED {os.getpid()}", flush=True)
        dist.all_reduce(torch.ones(4))
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
