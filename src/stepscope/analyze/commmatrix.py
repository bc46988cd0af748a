"""Rank x rank communication matrix (who talks to whom, how much, how long), from each rank's CommTable.

Conventions (docs/host.md):

* **Point-to-point** (send, isend, recv, irecv): bytes go from the sender (row) to the receiver
  (column). A transfer is seen twice (the send on one rank, the receive on the other); the matrix
  keeps, per directed pair, the larger of the bytes sent and the bytes received, so one unobserved side
  does not hide it and the two sides are never added.
* **Collectives** (all_reduce, all_gather, broadcast, barrier, DDP's bucket all-reduce, ...): uniform
  attribution, independent of the algorithm the backend chose: the payload a rank brings to the call
  (CommTable ``bytes``) is spread evenly over the other members of the group, ``bytes / (n - 1)`` to
  each. A row's sum is then what the rank contributed; it is not the wire traffic of a particular
  algorithm (a ring all-reduce of B bytes sends 2(n-1)/n x B per rank to one neighbour). Group members
  come from the call's ``seq`` (group id in the high 32 bits): the world group is every rank; another
  group is the set of ranks that recorded a call with that group id. Calls of a group whose members
  cannot be told are counted in ``unattributed_bytes``.
* **Time** (row = the rank that spent it): a point-to-point call's duration goes to its peer's column;
  a collective's duration is spread evenly over the other members. It is CPU wall-clock time until the
  call (or its ``wait()``) returned, so it includes waiting for late peers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stepscope.model.tables import CommTable, RunData

P2P_SEND = ("send", "isend")
P2P_RECV = ("recv", "irecv")
UNKNOWN_PEERS = ("batch_isend_irecv",)
"""Point-to-point batches recorded without their peers: counted as unattributed."""
DDP_GROUP_FLAG = 0x8000
"""Set in the group id of DDP's bucket all-reduces (collect/ddp.py); the group is the id without it."""


def group_id(seq: int) -> int:
    return (seq >> 32) & ~DDP_GROUP_FLAG if seq >= 0 else -1


@dataclass(frozen=True, slots=True)
class PairTraffic:
    """One directed pair (src -> dst) of the matrix."""

    src: int
    dst: int
    bytes: float
    """Point-to-point plus attributed collective bytes, src to dst."""
    p2p_bytes: float
    collective_bytes: float
    time_ns: float
    """Time src spent in calls with dst (see the module docstring)."""
    calls: int
    """Point-to-point calls on src with peer dst, plus collectives of a group holding both."""


@dataclass(frozen=True, slots=True)
class CommMatrix:
    """Matrices indexed [i][j] by position in ``ranks``: row i = sender / the rank that spent the time."""

    ranks: tuple[int, ...]
    bytes: tuple[tuple[float, ...], ...]
    p2p_bytes: tuple[tuple[float, ...], ...]
    collective_bytes: tuple[tuple[float, ...], ...]
    time_ns: tuple[tuple[float, ...], ...]
    calls: tuple[tuple[int, ...], ...]
    busiest: tuple[PairTraffic, ...]
    """Directed pairs with the most bytes (then time), at most ``top``, largest first."""
    total_bytes: float
    unattributed_bytes: float
    """Collective bytes whose group members could not be told."""
    source: str
    """Where the numbers come from: 'comm_table' (stepscope's torch.distributed timing)."""
    convention: str
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "stepscope.comm_matrix/1", **asdict(self)}


CONVENTION = ("p2p: bytes sender->receiver (max of the two sides); collectives: each rank's payload spread "
              "evenly over the other group members; time: row rank's call time, collectives spread evenly")


def _members(tables: Mapping[int, CommTable], world: list[int]) -> dict[int, list[int]]:
    """Group id -> ranks that recorded a call of that group (group 0 is the world)."""
    groups: dict[int, set[int]] = {0: set(world)}
    for rank, t in tables.items():
        if not len(t):
            continue
        p2p = np.isin(np.asarray(t.column_strings()), P2P_SEND + P2P_RECV)
        seq = t["seq"][~p2p]
        for gid in {group_id(int(x)) for x in np.unique(seq[seq >= 0]).tolist()}:
            if gid:
                groups.setdefault(gid, set()).add(rank)
    return {g: sorted(m) for g, m in groups.items()}


def comm_matrix_from_tables(tables: Mapping[int, CommTable], *, top: int = 5) -> CommMatrix:
    """The matrix of the ranks in ``tables`` (rank -> that rank's CommTable)."""
    ranks = sorted(tables)
    pos = {r: i for i, r in enumerate(ranks)}
    n = len(ranks)
    sent, recvd, coll, time_ns = (np.zeros((n, n)) for _ in range(4))
    calls = np.zeros((n, n), dtype=np.int64)
    members = _members(tables, ranks)
    unattributed = 0.0
    for rank, t in tables.items():
        i = pos[rank]
        ops = t.column_strings()
        nbytes = np.nan_to_num(t["bytes"], nan=0.0).tolist()
        for op, b, d, peer, seq, gsize in zip(ops, nbytes, t["duration_ns"].tolist(), t["peer"].tolist(),
                                              t["seq"].tolist(), t["group_size"].tolist(), strict=True):
            if op in P2P_SEND or op in P2P_RECV:
                j = pos.get(peer)
                if j is None:
                    unattributed += b
                    continue
                if op in P2P_SEND:
                    sent[i, j] += b
                else:
                    recvd[j, i] += b
                time_ns[i, j] += d
                calls[i, j] += 1
                continue
            group = None if op in UNKNOWN_PEERS else members.get(group_id(seq))
            if group is None or (gsize > 0 and len(group) != gsize) or rank not in group:
                unattributed += b
                continue
            others = [pos[m] for m in group if m != rank and m in pos]
            if not others:
                continue
            for j in others:
                coll[i, j] += b / len(others)
                time_ns[i, j] += d / len(others)
                calls[i, j] += 1
    p2p = np.maximum(sent, recvd)
    total = p2p + coll
    busiest = sorted(((total[i, j], time_ns[i, j], i, j) for i in range(n) for j in range(n)
                      if i != j and (total[i, j] > 0 or time_ns[i, j] > 0)), reverse=True)[:top]
    pairs = tuple(PairTraffic(ranks[i], ranks[j], float(total[i, j]), float(p2p[i, j]), float(coll[i, j]),
                              float(time_ns[i, j]), int(calls[i, j])) for _, _, i, j in busiest)
    notes = []
    if not any(len(t) for t in tables.values()):
        notes.append("no torch.distributed call was recorded (run without --no-comm-timing)")

    def tup(m: Any) -> tuple[tuple[Any, ...], ...]:
        return tuple(tuple(row) for row in m.tolist())

    return CommMatrix(ranks=tuple(ranks), bytes=tup(total), p2p_bytes=tup(p2p), collective_bytes=tup(coll),
                      time_ns=tup(time_ns), calls=tup(calls), busiest=pairs, total_bytes=float(total.sum()),
                      unattributed_bytes=float(unattributed), source="comm_table", convention=CONVENTION,
                      notes=tuple(notes))


def comm_matrix(data: RunData, *, top: int = 5) -> CommMatrix | None:
    """The run's matrix; None for a run with fewer than two rank streams (nothing to pair)."""
    tables = {r.stream.rank: r.comm for r in data.ranks}
    if len(tables) < 2:
        return None
    return comm_matrix_from_tables(tables, top=top)
