"""An MPI job through mpi4py (no torch): each step sleeps --sleep-ms, then all ranks sum their step index
with ``allreduce``; steps are marked with ``stepscope.steps`` and each rank logs the sum and its own MPI
rank, so a test can check that the ranks really talked and that stepscope named each rank as MPI did."""

import argparse
import time

from mpi4py import MPI

import stepscope

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=6)
p.add_argument("--sleep-ms", type=float, default=5.0)
args = p.parse_args()
comm = MPI.COMM_WORLD
for i in stepscope.steps(range(args.steps)):
    time.sleep(args.sleep_ms / 1000)
    stepscope.log(allreduce_sum=comm.allreduce(i), mpi_rank=comm.Get_rank(), mpi_size=comm.Get_size())
comm.Barrier()
print(f"rank {comm.Get_rank()} of {comm.Get_size()}: {args.steps} steps", flush=True)
