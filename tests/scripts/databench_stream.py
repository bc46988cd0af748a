"""An endless streaming loader (IterableDataset without a length); each sample takes SLEEP_S to make
(argv[1] when given). Sharded across DataLoader workers so that more workers deliver more."""

import itertools
import sys
import time

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

SLEEP_S = float(sys.argv[1]) if len(sys.argv) > 1 else 0.005


class Endless(IterableDataset):
    def __iter__(self):  # type: ignore[no-untyped-def]
        info = get_worker_info()
        start = info.id if info else 0
        for i in itertools.count(start, info.num_workers if info else 1):
            time.sleep(SLEEP_S)
            yield torch.full((4,), float(i))


loader = DataLoader(Endless(), batch_size=4)
for step, _xb in enumerate(loader):
    if step >= 10_000:
        break
