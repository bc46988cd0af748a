"""A loop whose step time is a known function of two settings, for `stepscope tune` and `sweep` tests.

Each step sleeps 20 ms + 15 ms x |inter - 2| + 15 ms x |intra - 1| (fastest at inter=2, intra=1), over
stepscope.steps (a plain iterable: no torch import, so a run takes well under a second). --fail exits with
code 5 after printing a last line on stderr; --fail-when VALUE fails only where inter equals VALUE.
"""

import argparse
import sys
import time

import stepscope

p = argparse.ArgumentParser()
p.add_argument("--inter", type=int, default=0)
p.add_argument("--intra", type=int, default=1)
p.add_argument("--steps", type=int, default=25)
p.add_argument("--fail", action="store_true")
args = p.parse_args()
if args.fail:
    print("tune_steps: cannot open the data set", file=sys.stderr)
    sys.exit(5)
ms = 20.0 + 15.0 * abs(args.inter - 2) + 15.0 * abs(args.intra - 1)
for _ in stepscope.steps(range(args.steps)):
    time.sleep(ms / 1000)
