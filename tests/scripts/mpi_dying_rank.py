"""An MPI job in which one rank dies: every rank marks steps with the API and meets the others at a Barrier
each step; after --die-after steps, rank --rank leaves with ``os._exit(3)`` (as a crash or the OOM killer
would: no MPI_Finalize, no Python exit handlers)."""

import argparse
import os
import time

from mpi4py import MPI

import stepscope

p = argparse.ArgumentParser()
p.add_argument("--rank", type=int, default=1)
p.add_argument("--die-after", type=int, default=2)
p.add_argument("--steps", type=int, default=50)
args = p.parse_args()
comm = MPI.COMM_WORLD
for i in stepscope.steps(range(args.steps)):
    if i == args.die_after and comm.Get_rank() == args.rank:
        os._exit(3)
    time.sleep(0.01)
    comm.Barrier()
