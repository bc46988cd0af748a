"""The mpi4py calls an EXARL-like code makes besides plain Send/Recv, on 2 ranks, for tests/collect/mpi/test_mpi.py:
non-blocking buffer and pickle calls completed by the class-level Waitall / waitall, Sendrecv, an in-place
Allreduce, a non-blocking Iallreduce with Wait, a Barrier on a Split communicator, a Send of the first 4 of
10 doubles into a larger receive buffer, and a Waitany. Prints one JSON line per rank with what the user
code saw (so the test can check that timing changed nothing)."""

import json

import numpy as np
from mpi4py import MPI

import stepscope

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
other = 1 - rank
seen = []
for _ in stepscope.steps(range(2)):
    sbuf, rbuf = np.arange(6, dtype=np.int32) + rank, np.empty(6, dtype=np.int32)
    reqs = [comm.Isend([sbuf, MPI.INT], other, tag=21), comm.Irecv([rbuf, MPI.INT], other, tag=21)]
    MPI.Request.Waitall(reqs)
    preqs = [comm.isend(("x", rank), other, tag=22), comm.irecv(source=other, tag=22)]
    got = MPI.Request.waitall(preqs)
    out = np.empty(3)
    comm.Sendrecv(np.full(3, rank, dtype=float), other, 23, out, other, 23)
    a = np.ones(5)
    comm.Allreduce(MPI.IN_PLACE, a)
    b = np.empty(2)
    q = comm.Iallreduce(np.ones(2), b)
    q.Wait()
    sub = comm.Split(rank, 0)
    sub.Barrier()
    sub.Free()
    if rank == 0:
        comm.Send([np.zeros(10), 4, MPI.DOUBLE], 1, 24)
    else:
        comm.Recv([np.empty(10), 10, MPI.DOUBLE], 0, 24)
    areq = [comm.Isend(np.zeros(2, dtype=np.int64), other, tag=25),
            comm.Irecv(np.empty(2, dtype=np.int64), other, tag=25)]
    done = {MPI.Request.Waitany(areq), MPI.Request.Waitany(areq)}
    seen.append({"rbuf": rbuf.tolist(), "got": [g if g is None else list(g) for g in got], "out": out.tolist(),
                 "a": a.tolist(), "b": b.tolist(), "waitany": sorted(done),
                 "isinstance": isinstance(reqs[0], MPI.Request) and isinstance(q, MPI.Request)})
print(json.dumps({"rank": rank, "seen": seen}), flush=True)
