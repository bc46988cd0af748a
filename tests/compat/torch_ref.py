"""Compatibility reference for PyTorch: a model, a DataLoader and an optimizer loop with a validation pass per
epoch, unmodified (zero code). tests/compat/test_compat.py runs it under `stepscope run` and checks the stored
counts against the arguments; it prints one line per epoch (the mean loss as a float's repr), which must be the
same with and without stepscope.

    torch_ref.py --epochs 3 --samples 200 --batch 32 --val-samples 50 --val-batch 16 --features 12 --hidden 24
"""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, required=True)
    p.add_argument("--samples", type=int, required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--val-samples", type=int, required=True)
    p.add_argument("--val-batch", type=int, required=True)
    p.add_argument("--features", type=int, required=True)
    p.add_argument("--hidden", type=int, required=True)
    args = p.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)  # the printed losses are the same bit for bit from run to run
    x, y = torch.randn(args.samples, args.features), torch.randint(0, 3, (args.samples,))
    xv, yv = torch.randn(args.val_samples, args.features), torch.randint(0, 3, (args.val_samples,))
    train = DataLoader(TensorDataset(x, y), batch_size=args.batch, shuffle=True)
    val = DataLoader(TensorDataset(xv, yv), batch_size=args.val_batch)
    model = nn.Sequential(nn.Linear(args.features, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for xb, yb in train:
            opt.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            opt.step()
            total += loss.item()
        model.eval()
        with torch.no_grad():
            val_loss = sum(loss_fn(model(xb), yb).item() for xb, yb in val)
        print(f"epoch {epoch}: loss {total!r} val {val_loss!r}")


if __name__ == "__main__":
    main()
