"""Training in multiprocessing children. argv[1]: 'spawn-ddp' (torch.multiprocessing.spawn, 2 ranks,
gloo DDP) or 'fork' (2 multiprocessing.Process children with the fork start method, each training its
own model). The parent process never trains. Each child trains STEPS steps."""

import multiprocessing as mp
import os
import socket
import sys

import torch
import torch.distributed as dist

STEPS = 5


def _loop(model: torch.nn.Module) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(STEPS):
        opt.zero_grad()
        model(torch.randn(8, 16)).sum().backward()
        opt.step()


def ddp_rank(rank: int, world: int, port: int) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(16, 4))
    _loop(model)
    dist.destroy_process_group()


def plain(seed: int) -> None:
    torch.manual_seed(seed)
    _loop(torch.nn.Linear(16, 4))


def main() -> None:
    if sys.argv[1] == "spawn-ddp":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        import torch.multiprocessing as tmp

        tmp.spawn(ddp_rank, args=(2, port), nprocs=2, join=True)
    else:
        ctx = mp.get_context("fork")
        procs = [ctx.Process(target=plain, args=(i,)) for i in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        assert all(p.exitcode == 0 for p in procs)
    print("children done", flush=True)


if __name__ == "__main__":
    main()
