"""The synthetic dataset the test training scripts share (imported from their folder, which Python puts on sys.path)."""

import time

import torch
from torch.utils.data import Dataset


class Synthetic(Dataset):
    """`n` seeded random samples of `features` floats with a label in [0, classes); each item sleeps `sleep_s` first
    (a slow data loader)."""

    def __init__(self, n: int, sleep_s: float, features: int = 16, classes: int = 4) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, features, generator=g)
        self.y = torch.randint(0, classes, (n,), generator=g)
        self.sleep_s = sleep_s

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return self.x[i], self.y[i]
