"""A training loop whose optimizer step is compiled (``torch.compile`` of a function calling ``opt.step()``, as
torch's "compiling the optimizer" recipe does), bare or inside ``stepscope.session`` (argv: ``bare`` or a store
path). Prints one JSON line: the steps the loop ran."""

from __future__ import annotations

import json
import sys

import torch

STEPS = 4
model = torch.nn.Linear(3, 1)
opt = torch.optim.Adam(model.parameters(), lr=0.01)


@torch.compile(backend="eager")  # type: ignore[misc]
def step() -> None:
    opt.step()


def train() -> None:
    for _ in range(STEPS):
        model(torch.ones(2, 3)).sum().backward()
        step()


if sys.argv[1] == "bare":
    train()
else:
    import stepscope

    with stepscope.session(name="compiled-optimizer", store=sys.argv[1]):
        train()
print(json.dumps({"steps": STEPS}))
