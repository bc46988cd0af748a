"""A known host profile: spin_hot (busy Python loop) runs inside region "prep", wait_cold (sleep) inside
region "io", and Busy.forward spins inside the model's forward."""

import time

import torch

import stepscope


def spin_hot(seconds: float) -> int:
    t, n = time.perf_counter(), 0
    while time.perf_counter() - t < seconds:
        n += 1
    return n


def wait_cold(seconds: float) -> None:
    time.sleep(seconds)


class Busy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spin_hot(0.01)
        return self.lin(x)


model = Busy()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(12):
    with stepscope.region("prep"):
        spin_hot(0.12)  # 1.44 s in all: more than a cold `import torch` (also sampled, and real host time)
    with stepscope.region("io"):
        wait_cold(0.01)
    opt.zero_grad()
    model(torch.randn(8, 4)).sum().backward()
    opt.step()
