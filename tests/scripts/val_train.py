"""Training with a validation loop every epoch (zero code): validation steps must not disturb epochs."""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
train = DataLoader(TensorDataset(torch.randn(64, 8), torch.randn(64, 1)), batch_size=8)  # 8 steps per epoch
val = DataLoader(TensorDataset(torch.randn(24, 8), torch.randn(24, 1)), batch_size=8)  # 3 batches
model = nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, _y in val:  # a sanity check before training: the validation loader runs one extra time
    with torch.no_grad():
        model.eval()
        model(x)
for _epoch in range(3):
    model.train()
    for x, y in train:
        opt.zero_grad()
        ((model(x) - y) ** 2).mean().backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        for x, _ in val:
            model(x)
