"""Steps that sleep ``--step`` seconds, every 5th step (index 0, 5, 10, ...) ``--slow`` seconds more (no torch:
starts in a fraction of a second). Removing the slow steps leaves the median step as it was and cuts the mean by
``--slow`` / 5: a change only the mean step time (total time over the run) sees.

    python slow_fifth.py [--steps 25] [--step 0.01] [--slow 0.05]
"""

import argparse
import time

import stepscope


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=25)
    p.add_argument("--step", type=float, default=0.01)
    p.add_argument("--slow", type=float, default=0.05)
    a = p.parse_args()
    for i in stepscope.steps(range(a.steps)):
        time.sleep(a.step + (a.slow if i % 5 == 0 else 0.0))


if __name__ == "__main__":
    main()
