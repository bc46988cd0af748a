"""The step script of benchmarks/verdicts.py: 10-20 ms steps (about 4 ms of Python work, then an 8 ms wait, as
a GPU-bound step's host waits), with an optional controlled slowdown. No torch: starts in well under a second.

    --steps N        training steps (default 60)
    --slow-pct P     sleep P% of each step's own time more (a real slowdown of P%)
    --cpu-slow-pct P do P% more of the Python work (a CPU-side slowdown: P% more CPU time on the training thread,
                     about P/3 % more wall time on a quiet host, as the wait stays)
"""

import argparse
import time

import stepscope


def work(n: int) -> float:
    acc = 0.0
    for i in range(n):
        acc += (i % 7) * 0.5
    return acc


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--slow-pct", type=float, default=0.0)
    p.add_argument("--work", type=int, default=40_000)
    p.add_argument("--cpu-slow-pct", type=float, default=0.0)
    a = p.parse_args()
    n = round(a.work * (1 + a.cpu_slow_pct / 100))
    for _ in stepscope.steps(range(a.steps)):
        t0 = time.perf_counter()
        work(n)
        time.sleep(0.008)
        if a.slow_pct:
            time.sleep((time.perf_counter() - t0) * a.slow_pct / 100)


if __name__ == "__main__":
    main()
