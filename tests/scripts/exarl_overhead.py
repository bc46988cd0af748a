"""Per-call cost of stepscope's mpi4py timing (the figure in docs/frameworks.md, MPI section). Run it under
`stepscope run -- python tests/scripts/exarl_overhead.py` (one MPI process): it times --iters calls of
``COMM_WORLD.Barrier()`` (timed by stepscope) and of mpi4py's own ``Intracomm.Barrier`` on the same
communicator (not timed), interleaved, --reps times, and prints the best microseconds per call of each."""

import argparse
import time
import types

from mpi4py import MPI

p = argparse.ArgumentParser()
p.add_argument("--iters", type=int, default=20000)
p.add_argument("--reps", type=int, default=5)
args = p.parse_args()
comm = MPI.COMM_WORLD
# mpi4py's own class: the first one without a Python-level Barrier (stepscope's subclass defines one)
base = next(c for c in type(comm).__mro__ if not isinstance(c.__dict__.get("Barrier"), types.FunctionType))
best = {"timed": float("inf"), "untimed": float("inf")}
for _ in range(args.reps):
    t0 = time.perf_counter_ns()
    for _ in range(args.iters):
        comm.Barrier()
    t1 = time.perf_counter_ns()
    for _ in range(args.iters):
        base.Barrier(comm)
    t2 = time.perf_counter_ns()
    best["timed"] = min(best["timed"], (t1 - t0) / args.iters / 1e3)
    best["untimed"] = min(best["untimed"], (t2 - t1) / args.iters / 1e3)
print(f"timed {best['timed']:.2f} us/call, untimed {best['untimed']:.2f} us/call, "
      f"overhead {best['timed'] - best['untimed']:.2f} us/call", flush=True)
