"""Trains a small model with a DataLoader under ``stepscope.session`` after breaking torch's private paths that
stepscope's hooks would use (argv: a comma list of ``loader-renamed``, ``loader-bypassed``, ``slot-ignored``;
``none``). torch is imported and broken before stepscope installs its hooks, as a renamed or changed private
attribute in another torch version would be. Prints one JSON line: the loop's own counts."""

from __future__ import annotations

import json
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data import dataloader as dl

EPOCHS, BATCHES, BATCH = 3, 5, 4
breaks = [b for b in sys.argv[1].split(",") if b != "none"]
store = sys.argv[2]

if "loader-renamed" in breaks:  # as if torch renamed its iterator base class
    del dl._BaseDataLoaderIter
if "loader-bypassed" in breaks:  # the iterators get their own __next__: the base class's is never called
    base_next = vars(dl._SingleProcessDataLoaderIter.__mro__[1])["__next__"]

    def own_next(self: object) -> object:
        return base_next(self)

    dl._SingleProcessDataLoaderIter.__next__ = own_next  # type: ignore[method-assign,assignment]
if "slot-ignored" in breaks:  # as if torch stopped calling the per-instance call slot
    nn.Module.__call__ = lambda self, *a, **k: self._call_impl(*a, **k)  # type: ignore[method-assign]

import stepscope  # noqa: E402  (after torch is broken: the hooks install inside the session)

torch.manual_seed(0)
data = TensorDataset(torch.randn(BATCHES * BATCH, 3), torch.randn(BATCHES * BATCH, 1))
loader = DataLoader(data, batch_size=BATCH)
model = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
steps = 0
with stepscope.session(name="private-paths", store=store):
    for _ in range(EPOCHS):
        for x, y in loader:
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            steps += 1
    hook_slot = "_compiled_call_impl" in vars(model)
print(json.dumps({"steps": steps, "epochs": EPOCHS, "batch": BATCH, "slot_used": hook_slot}))
