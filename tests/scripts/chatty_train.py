"""A tiny training loop that prints on stdout and stderr every step (a user's own `USDT:` line among them)
and, at the end, whether KINETO_LOG_LEVEL was in its environment: the tests compare its output under
`stepscope run --profile-steps` with its output run plainly, byte for byte."""

import os
import sys

import torch

torch.manual_seed(0)
model = torch.nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 8), torch.randn(16, 2)
for step in range(12):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.6f}", flush=True)
    print(f"USDT: the user's own line {step}", file=sys.stderr, flush=True)
print(f"KINETO_LOG_LEVEL={os.environ.get('KINETO_LOG_LEVEL')}", flush=True)
