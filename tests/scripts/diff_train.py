"""Training loop for the diff tests: a small model plus a fixed wait per step (like a GPU-bound step,
whose host mostly waits on the device), so CPU contention from other jobs on a shared machine moves
both runs of a pair alike. About 5 ms a step.

    --wait S           seconds each step waits in region "device_wait" (default 0.004)
    --slow-pct P       sleep P% of each step's own time in region "extra" (a real slowdown of P%)
    --loader-sleep S   sleep S seconds in each DataLoader item (a slower data loader)
    --width W          hidden width (a larger model: more compute per step)
"""

import argparse
import time

import torch
from synthetic import Synthetic
from torch import nn
from torch.utils.data import DataLoader

import stepscope


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=120)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--wait", type=float, default=0.004)
    p.add_argument("--slow-pct", type=float, default=0.0)
    p.add_argument("--loader-sleep", type=float, default=0.0)
    p.add_argument("--extra-name", default="extra", help="name of the slow-down region")
    a = p.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(128, a.width), nn.ReLU(), nn.Linear(a.width, a.width), nn.ReLU(),
                          nn.Linear(a.width, 8))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Synthetic(a.steps * 32, a.loader_sleep, features=128, classes=8), batch_size=32)
    for x, y in loader:
        t0 = time.perf_counter()
        with stepscope.region("compute"):
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
        with stepscope.region("device_wait"):
            time.sleep(a.wait)
        opt.step()
        opt.zero_grad()
        if a.slow_pct:
            with stepscope.region(a.extra_name):
                time.sleep((time.perf_counter() - t0) * a.slow_pct / 100)
        stepscope.log(loss=loss.item())


if __name__ == "__main__":
    main()
