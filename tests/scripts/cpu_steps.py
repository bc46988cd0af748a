"""Training steps of known CPU content, for the per-step CPU clocks (tests/collect/core/test_step_cpu_time.py).

A tiny torch model (Linear + SGD; the optimizer's step marks the steps) trained for 2 + 3 * N steps: 2 plain
steps, then N "busy" steps (a pure-Python loop on the training thread), N "sleep" steps (time.sleep on the
training thread) and N "helper" steps (the same loop on a second thread that the training thread joins). Each
loop measures its own CPU time with time.thread_time_ns in the thread that runs it, and the script writes them
to OUT as JSON: {"busy": [ns per busy step], "helper": [ns per helper step], "sleep_s": S, "n": N}.

    python cpu_steps.py OUT [--n 8] [--loop 300000] [--sleep 0.03]
"""

import argparse
import json
import threading
import time

import torch
from torch import nn


def loop(n: int, out: list[int]) -> None:
    t0 = time.thread_time_ns()
    acc = 0
    for i in range(n):
        acc += i % 7
    out.append(time.thread_time_ns() - t0 + (acc & 0))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--loop", type=int, default=300_000)
    p.add_argument("--sleep", type=float, default=0.03)
    a = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)  # the model's own work stays on the training thread
    model = nn.Linear(8, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 8), torch.randn(16, 4)
    busy: list[int] = []
    helper: list[int] = []
    plan = ["plain"] * 2 + ["busy"] * a.n + ["sleep"] * a.n + ["helper"] * a.n
    for kind in plan:
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        if kind == "busy":
            loop(a.loop, busy)
        elif kind == "sleep":
            time.sleep(a.sleep)
        elif kind == "helper":
            t = threading.Thread(target=loop, args=(a.loop, helper))
            t.start()
            t.join()
        opt.step()  # ends the step: the loops above ran inside it
    with open(a.out, "w") as f:
        json.dump({"busy": busy, "helper": helper, "sleep_s": a.sleep, "n": a.n}, f)


if __name__ == "__main__":
    main()
