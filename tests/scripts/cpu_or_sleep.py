"""Steps of pure-Python work then a sleep, both set on the command line (no torch: starts in a fraction of a
second). Trading sleep for work makes a run slower on the CPU clock and faster on the wall clock at once.

    python cpu_or_sleep.py [--steps 20] [--work 40000] [--sleep 0.03]
"""

import argparse
import time

import stepscope


def work(n: int) -> int:
    acc = 0
    for i in range(n):
        acc += i % 7
    return acc


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--work", type=int, default=40_000)
    p.add_argument("--sleep", type=float, default=0.03)
    a = p.parse_args()
    for _ in stepscope.steps(range(a.steps)):
        work(a.work)
        time.sleep(a.sleep)


if __name__ == "__main__":
    main()
