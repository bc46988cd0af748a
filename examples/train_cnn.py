"""A small CNN on synthetic 32x32 images with a multi-worker DataLoader (seconds on a CPU).

    stepscope run -- python examples/train_cnn.py --workers 2 --epochs 1
"""

import argparse

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SyntheticImages(Dataset):
    """Images made on the fly per item, as a decoding pipeline would: the workers have real work to do."""

    def __init__(self, n: int, augment_ops: int) -> None:
        self.n = n
        self.augment_ops = augment_ops

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        g = torch.Generator().manual_seed(i)
        img = torch.rand(3, 32, 32, generator=g)
        for _ in range(self.augment_ops):  # stand-in for decoding / augmentation cost
            img = torch.flip(img, dims=[2]) * 0.99 + 0.01
        return img, i % 10


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--augment-ops", type=int, default=4)
    args = p.parse_args()

    torch.manual_seed(0)
    loader = DataLoader(SyntheticImages(args.samples, args.augment_ops), batch_size=args.batch_size, shuffle=True,
                        num_workers=args.workers, persistent_workers=args.workers > 0)
    model = nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        model.train()
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
        print(f"epoch {epoch}: last loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
