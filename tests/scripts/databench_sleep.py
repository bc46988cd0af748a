"""A loader whose dataset sleeps SLEEP_S on the first access of each item and serves it from a cache
afterwards (cold first epoch, warm later epochs). Under torchrun it shards with a DistributedSampler.
Writes MARKER when the training loop ran (data-bench must stop the script before that)."""

import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

SLEEP_S = 0.004
N = 96


class CachedSlow(Dataset):
    def __init__(self) -> None:
        self.cache: dict[int, torch.Tensor] = {}

    def __len__(self) -> int:
        return N

    def __getitem__(self, i: int) -> torch.Tensor:
        if i not in self.cache:
            time.sleep(SLEEP_S)
            self.cache[i] = torch.full((4,), float(i))
        return self.cache[i]


def main() -> None:
    sampler = None
    if "RANK" in os.environ:
        import torch.distributed as dist
        from torch.utils.data.distributed import DistributedSampler

        dist.init_process_group("gloo")
        sampler = DistributedSampler(range(N), shuffle=False)
    loader = DataLoader(CachedSlow(), batch_size=8, sampler=sampler)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(2):
        for xb in loader:
            opt.zero_grad()
            model(xb).sum().backward()
            opt.step()
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            fh.write("trained")


if __name__ == "__main__":
    main()
