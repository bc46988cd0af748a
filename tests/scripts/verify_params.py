"""Settings whose effect on a step is known, for `advise --verify` (no framework: steps marked with
stepscope.step()). Each of --steps steps waits --load seconds for its input and --work seconds for its compute,
both as sleeps, so a step takes about load + work whatever the host's CPU load, and lowering either shortens it
by a known amount, independently of the other. With --ledger FILE --drift F, the runs sharing FILE drift: the
k-th of them (k counted from 0 in FILE) sleeps 1 + k * F times as long, so interleaved A/B pairs of an
ineffective change see per-pair ratios of about 1 + F and 1 / (1 + F) in turn: a spread known in advance."""

import argparse
import time

import stepscope

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=12)
p.add_argument("--load", type=float, default=0.03)
p.add_argument("--work", type=float, default=0.03)
p.add_argument("--ledger")
p.add_argument("--drift", type=float, default=0.0)
args = p.parse_args()
scale = 1.0
if args.ledger:
    with open(args.ledger, "a+") as fh:
        fh.seek(0)
        scale += args.drift * len(fh.read().splitlines())
        fh.write("run\n")
for _ in range(args.steps):
    time.sleep(args.load * scale)
    time.sleep(args.work * scale)
    stepscope.step()
