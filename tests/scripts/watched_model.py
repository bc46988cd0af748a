"""Trains a tiny model, then saves, pickles, deep-copies, scripts and round-trips it (what
pytorch/examples' word_language_model, super_resolution and EMA scripts do). Prints one line per
round trip with a checksum of its output, so a run under stepscope can be compared with a bare run."""

import copy
import io
import pickle
import sys

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def check(label: str, model: nn.Module, x: torch.Tensor) -> None:
    with torch.no_grad():
        print(f"{label} {float(model(x).sum()):.6f}")


def main() -> None:
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 16)
    y = torch.randint(0, 4, (8,))
    for _ in range(6):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    check("trained", model, x)

    buf = io.BytesIO()
    torch.save(model, buf)  # the whole module, as word_language_model does
    buf.seek(0)
    check("torch.save/load", torch.load(buf, weights_only=False), x)

    check("pickle", pickle.loads(pickle.dumps(model)), x)

    ema = copy.deepcopy(model)  # EMA models
    for p in ema.parameters():
        p.data.mul_(0.5)
    check("deepcopy", ema, x)
    check("original after deepcopy", model, x)

    check("jit.script", torch.jit.script(model), x)
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(model), buf)
    buf.seek(0)
    check("jit.save/load", torch.jit.load(buf), x)

    fresh = Net()
    fresh.load_state_dict(model.state_dict())
    check("state_dict", fresh, x)
    fresh_hooks = len(fresh._forward_hooks) + len(fresh._forward_pre_hooks)
    copy_hooks = len(ema._forward_hooks) + len(ema._forward_pre_hooks)
    print(f"hooks on copies {fresh_hooks + copy_hooks}")
    print("done", file=sys.stderr)


if __name__ == "__main__":
    main()
