"""Trains 3 steps (stepscope's session becomes active), then creates and terminates multiprocessing
Pools in a loop (terminate right after creation: workers get SIGTERM while they start)."""

import multiprocessing as mp
import sys

import torch


def main() -> None:
    cycles = int(sys.argv[1])
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(2, 4)).sum().backward()
        opt.step()
    n = 0
    while cycles < 0 or n < cycles:
        pool = mp.get_context("fork").Pool(4)
        pool.terminate()
        pool.join()
        n += 1
        print(f"cycle {n}", flush=True)


if __name__ == "__main__":
    main()
