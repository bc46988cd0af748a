"""Two threads, each training its own model with its own optimizer on its own tensors (no DataLoader).

Thread "first" trains a 16-32-4 MLP on batches of 8 and starts alone; thread "second" (a 16-24-24-4 MLP on
batches of 12) starts once "first" has finished ``--lead`` steps, so that the thread whose optimizer steps first
is known. Both then train at once, ``--steps`` optimizer steps each; with ``--loader``, each from its own
DataLoader over its tensors (the same batches). Prints each thread's final loss (the same
with and without stepscope: fixed seeds, each thread's own generator)."""

import argparse
import itertools
import threading

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def mlp(widths: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in itertools.pairwise(widths):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def train(name: str, model: nn.Module, x: torch.Tensor, y: torch.Tensor, steps: int, started: threading.Event | None,
          lead: int, wait: threading.Event | None, out: dict[str, float], loader: bool) -> None:
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    n = len(x)
    batches = iter(DataLoader(TensorDataset(x.repeat(steps, 1), y.repeat(steps)), batch_size=n)) if loader else None
    if wait is not None:
        wait.wait()
    loss = torch.zeros(())
    for i in range(steps):
        if started is not None and i == lead:
            started.set()
        if batches is not None:
            x, y = next(batches)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    if started is not None:
        started.set()
    out[name] = loss.item()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=32)
    p.add_argument("--lead", type=int, default=2, help="steps of the first thread before the second starts")
    p.add_argument("--loader", action="store_true", help="each thread's batches from a DataLoader")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)  # models and data made here, in order: the threads share torch's generator
    first, second = mlp([16, 32, 4]), mlp([16, 24, 24, 4])
    x1, y1 = torch.randn(8, 16), torch.randint(0, 4, (8,))
    x2, y2 = torch.randn(12, 16), torch.randint(0, 4, (12,))
    lead = threading.Event()
    out: dict[str, float] = {}
    threads = [threading.Thread(target=train, args=("first", first, x1, y1, args.steps, lead, args.lead, None, out,
                                                    args.loader)),
               threading.Thread(target=train, args=("second", second, x2, y2, args.steps, None, 0,
                                                    lead if args.lead else None, out, args.loader))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in sorted(out):
        print(f"{name} loss {out[name]:.6f}")


if __name__ == "__main__":
    main()
