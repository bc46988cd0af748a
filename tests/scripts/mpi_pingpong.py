"""A latency-bound mpi4py program of known call counts, for tests/collect/mpi/test_mpi_sampling.py and
benchmarks/mpi_overhead.py. Run it under ``mpirun -n 2``.

Phases (each rank does the same number of calls, so exact counts follow from the arguments):

* ``--round-trips N``: a 1-byte ``Send``/``Recv`` ping-pong (rank 0 sends first): N ``Send`` and N ``Recv``
  per rank, 1 byte each; timed in blocks of ``--block`` round trips (total, and the median block's µs per
  round trip: on a loaded host a rank descheduled while the other spins stalls a block for milliseconds).
* ``--allreduces M`` of ``--allreduce-bytes B`` float64 bytes (``Allreduce(sendbuf, recvbuf)``): M calls, B
  bytes each; total and median call time.
* ``--pickled K``: K pickled ``send``/``recv`` round trips of the int 7 (rank 0 sends first).
* ``--mixed J``: J iterations of every other kind of call, once each: ``Isend``/``Irecv`` of 3 int32 and
  ``Request.Waitall``, pickled ``isend``/``irecv`` of the int 7 and ``waitall``, ``Sendrecv`` of 2 float64,
  ``Iallreduce`` of 2 float64 and ``Wait``, a pickled ``bcast`` of the string "abc" from rank 0, ``Barrier``,
  and a ``Send`` of ``[buf, 2, MPI.INT]`` answered by a ``Recv`` into ``[buf3, MPI.INT]`` (8 bytes each way).
* ``--pairs P --block R`` (with N = 0): P pairs of R round trips each, alternating in every pair the
  communicator's own methods (timed by stepscope when it runs) and mpi4py's untimed base methods on the
  same communicator; the order within a pair alternates. Rank 0 prints the per-pair microseconds per
  round trip of each. On one rank (no mpirun) a round trip is a Send to itself and its Recv: two calls
  with nothing overlapping them, so the difference per round trip / 2 is the cost of one call.

Before the phases, after R warm-up round trips through mpi4py's base methods (not counted by stepscope),
one ``Barrier`` through the communicator's own method: under stepscope it opens the rank's records, so that
one-off start (a few hundred ms) falls outside the phases' times. Rank 0 prints one JSON object: the loop
counts and wall times of each phase (seconds, loop only).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import types
from typing import Any

import numpy as np
from mpi4py import MPI

p = argparse.ArgumentParser()
p.add_argument("--round-trips", type=int, default=0)
p.add_argument("--allreduces", type=int, default=0)
p.add_argument("--allreduce-bytes", type=int, default=1 << 20)
p.add_argument("--pickled", type=int, default=0)
p.add_argument("--mixed", type=int, default=0)
p.add_argument("--pairs", type=int, default=0)
p.add_argument("--block", type=int, default=200)
p.add_argument("--warmup", type=int, default=200, help="untimed round trips first (not counted by stepscope's "
               "records either: they go through mpi4py's base methods)")
args = p.parse_args()

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
other = (1 - rank) if comm.Get_size() > 1 else 0  # one rank: messages to itself (eager, 1 byte)
# mpi4py's own class: the first in the MRO whose Send is not a Python function (stepscope's subclass defines one)
base: Any = next(c for c in type(comm).__mro__ if not isinstance(c.__dict__.get("Send"), types.FunctionType))
one = np.zeros(1, dtype=np.uint8)
out: dict[str, Any] = {"round_trips": args.round_trips, "allreduces": args.allreduces,
                       "allreduce_bytes": args.allreduce_bytes, "pickled": args.pickled}


def pingpong(send: Any, recv: Any, n: int) -> float:
    """n round trips through the bound methods ``send`` and ``recv``."""
    t0 = time.perf_counter()
    if rank == 0:
        for _ in range(n):
            send(one, other, 5)
            recv(one, other, 5)
    else:
        for _ in range(n):
            recv(one, other, 5)
            send(one, other, 5)
    return time.perf_counter() - t0


# mpi4py's methods bound to the same communicator: the same call as on a communicator stepscope left alone
bare_send, bare_recv = base.Send.__get__(comm), base.Recv.__get__(comm)
pingpong(bare_send, bare_recv, args.warmup)
comm.Barrier()  # the one call before the phases that stepscope sees
base.Barrier(comm)  # every rank has opened its records (after its own Barrier returned) before the phases
if args.round_trips:  # in blocks of --block: the median block is the typical round trip, a stall left out
    blocks = [pingpong(comm.Send, comm.Recv, min(args.block, args.round_trips - i))
              for i in range(0, args.round_trips, args.block)]
    out["pingpong_s"] = sum(blocks)
    out["pingpong_median_us"] = statistics.median(b / args.block * 1e6 for b in blocks[:-1] or blocks)
if args.allreduces:
    n = max(1, args.allreduce_bytes // 8)
    sendbuf, recvbuf = np.full(n, 1.0 + rank), np.zeros(n)
    base.Barrier(comm)
    times = []
    for _ in range(args.allreduces):
        t0 = time.perf_counter()
        comm.Allreduce(sendbuf, recvbuf)
        times.append(time.perf_counter() - t0)
    out["allreduce_s"] = sum(times)
    out["allreduce_median_us"] = statistics.median(times) * 1e6
    out["allreduce_ok"] = bool(np.all(recvbuf == 3.0))
if args.pickled:
    got = 0
    for _ in range(args.pickled):
        if rank == 0:
            comm.send(7, other, 6)
            got += comm.recv(None, other, 6)
        else:
            got += comm.recv(None, other, 6)
            comm.send(7, other, 6)
    out["pickled_sum"] = got
if args.mixed:
    ok = True
    for _ in range(args.mixed):
        ints, got3 = np.arange(3, dtype=np.int32) + rank, np.zeros(3, dtype=np.int32)
        MPI.Request.Waitall([comm.Isend(ints, other, 7), comm.Irecv(got3, other, 7)])
        reqs = [comm.isend(7, other, 8), comm.irecv(None, other, 8)]
        _, seven = MPI.Request.waitall(reqs)
        two = np.zeros(2)
        comm.Sendrecv(np.full(2, float(rank)), other, 9, two, other, 9)
        total = np.zeros(2)
        comm.Iallreduce(np.ones(2), total).Wait()
        word = comm.bcast("abc" if rank == 0 else None, root=0)
        comm.Barrier()
        part = np.zeros(3, dtype=np.int32)  # 2 of 3 int32 through buffer specs: [buf, count, type] / [buf, type]
        if rank == 0:
            comm.Send([ints, 2, MPI.INT], other, 10)
            comm.Recv([part, MPI.INT], other, 10)
        else:
            comm.Recv([part, MPI.INT], other, 10)
            comm.Send([ints, 2, MPI.INT], other, 10)
        ok = ok and list(part) == [other, other + 1, 0]
        ok = ok and list(got3) == [other, other + 1, other + 2] and seven == 7 and list(two) == [other] * 2
        ok = ok and list(total) == [2.0, 2.0] and word == "abc"
    out["mixed_ok"] = ok
if args.pairs:
    timed_us: list[float] = []
    bare_us: list[float] = []
    for i in range(args.pairs):
        arms = [("timed", comm.Send, comm.Recv), ("bare", bare_send, bare_recv)]
        for arm, send, recv in arms if i % 2 == 0 else arms[::-1]:
            base.Barrier(comm)
            us = pingpong(send, recv, args.block) / args.block * 1e6
            (timed_us if arm == "timed" else bare_us).append(us)
    out["pairs_timed_us"], out["pairs_bare_us"] = timed_us, bare_us
base.Barrier(comm)
if rank == 0:
    print(json.dumps(out), flush=True)
