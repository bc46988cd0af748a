"""A model trained as TorchScript (``torch.jit.script`` or ``torch.jit.trace``) or through ``torch.compile``:
``--steps`` optimizer steps on fixed tensors (no DataLoader), then the final loss. ``--kind script|trace|compile``."""

import argparse

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--kind", choices=("script", "trace", "compile"), required=True)
    p.add_argument("--steps", type=int, default=32)
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    net = Net()
    x = torch.randn(8, 16)
    y = torch.randint(0, 4, (8,))
    make = {"script": torch.jit.script, "trace": lambda m: torch.jit.trace(m, x), "compile": torch.compile}
    model = make[args.kind](net)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loss = torch.zeros(())
    for _ in range(args.steps):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    print(f"loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
