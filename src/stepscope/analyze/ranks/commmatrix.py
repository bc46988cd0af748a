"""Rank x rank communication matrix (who talks to whom, how much, how long), from each rank's CommTable
(stepscope's torch.distributed timing) or from per-rank profiler traces (analyze/trace/comm.py).

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
  a collective's duration is spread evenly over the other members. From CommTables it is CPU wall-clock
  time until the call (or its ``wait()``) returned; from traces it is the communication kernel's GPU
  duration. Both include waiting for late peers.

Both sources are turned into :class:`CommCall` records and reduced by :func:`matrix_from_calls`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stepscope.model.tables import CommTable, RunData

P2P_SEND = ("send", "isend")
P2P_RECV = ("recv", "irecv")
UNKNOWN_PEERS = ("batch_isend_irecv",)
"""Point-to-point batches recorded without their peers: counted as unattributed."""
DDP_GROUP_FLAG = 0x8000
"""Set in the group id of DDP's bucket all-reduces (collect/torch/ddp.py); the group is the id without it."""


def group_id(seq: int) -> int:
    return (seq >> 32) & ~DDP_GROUP_FLAG if seq >= 0 else -1


@dataclass(frozen=True, slots=True)
class CommCall:
    """One communication call of one rank, in the terms the matrix needs.

    op: "send", "recv", "sendrecv" (point-to-point, direction unknown: time only) or a collective's name.
    bytes: the payload this rank brings (None: not recorded). duration_ns: its time (see the module
    docstring). peer: point-to-point peer (global rank), -1 unknown. group: a collective's members (global
    ranks, this rank included), None when they cannot be told.
    """

    op: str
    bytes: float | None
    duration_ns: float
    peer: int = -1
    group: tuple[int, ...] | None = None

    @property
    def p2p(self) -> bool:
        return self.op in P2P_SEND or self.op in P2P_RECV or self.op == "sendrecv"


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
    """Bytes of calls whose peer or group members could not be told."""
    source: str
    """Where the numbers come from: 'comm_table' (stepscope's torch.distributed timing) or 'traces'
    (communication kernels of profiler traces)."""
    convention: str
    notes: tuple[str, ...]
    unattributed_time_ns: float = 0.0
    """Time of calls whose peer or group members could not be told."""
    calls_without_bytes: int = 0
    """Calls whose size was not recorded (older traces): their time is in the matrix, their bytes are not."""
    untraced_ranks: tuple[int, ...] = ()
    """Ranks named as peers or group members but without data of their own: their rows are empty."""

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


def _table_calls(rank: int, t: CommTable, members: Mapping[int, list[int]]) -> list[CommCall]:
    """A CommTable's rows as calls; a collective whose group size disagrees with its members has no group."""
    out = []
    nbytes = np.nan_to_num(t["bytes"], nan=0.0).tolist()
    for op, b, d, peer, seq, gsize in zip(t.column_strings(), nbytes, t["duration_ns"].tolist(), t["peer"].tolist(),
                                          t["seq"].tolist(), t["group_size"].tolist(), strict=True):
        if op in P2P_SEND or op in P2P_RECV:
            out.append(CommCall(op, b, d, peer=peer))
            continue
        group = None if op in UNKNOWN_PEERS else members.get(group_id(seq))
        if group is not None and ((gsize > 0 and len(group) != gsize) or rank not in group):
            group = None
        out.append(CommCall(op, b, d, group=None if group is None else tuple(group)))
    return out


def comm_matrix_from_tables(tables: Mapping[int, CommTable], *, top: int = 5) -> CommMatrix:
    """The matrix of the ranks in ``tables`` (rank -> that rank's CommTable)."""
    members = _members(tables, sorted(tables))
    calls = {rank: _table_calls(rank, t, members) for rank, t in tables.items()}
    notes = []
    if not any(len(t) for t in tables.values()):
        notes.append("no torch.distributed call was recorded (run without --no-comm-timing)")
    return matrix_from_calls(calls, source="comm_table", convention=CONVENTION, notes=notes, top=top)


def matrix_from_calls(calls: Mapping[int, Sequence[CommCall]], *, source: str, convention: str,
                      notes: Sequence[str] = (), top: int = 5) -> CommMatrix:
    """Reduce each rank's calls (rank -> calls) to the matrix, by the conventions of the module docstring.

    The matrix holds the ranks in ``calls`` plus every rank named as a peer or group member (those have
    empty rows and are listed in ``untraced_ranks``).
    """
    named = {m for cs in calls.values() for c in cs for m in ((c.peer,) if c.p2p else c.group or ()) if m >= 0}
    ranks = sorted(set(calls) | named)
    pos = {r: i for i, r in enumerate(ranks)}
    n = len(ranks)
    sent, recvd, coll, time_ns = (np.zeros((n, n)) for _ in range(4))
    ncalls = np.zeros((n, n), dtype=np.int64)
    lost_bytes = lost_time = 0.0
    sizeless = 0
    for rank, cs in calls.items():
        i = pos[rank]
        for c in cs:
            b = c.bytes or 0.0
            sizeless += c.bytes is None
            if c.p2p:
                j = pos.get(c.peer) if c.peer != rank else None
                if j is None:
                    lost_bytes, lost_time = lost_bytes + b, lost_time + c.duration_ns
                    continue
                if c.op in P2P_SEND:
                    sent[i, j] += b
                elif c.op in P2P_RECV:
                    recvd[j, i] += b
                time_ns[i, j] += c.duration_ns
                ncalls[i, j] += 1
                continue
            if c.group is None:
                lost_bytes, lost_time = lost_bytes + b, lost_time + c.duration_ns
                continue
            others = [pos[m] for m in c.group if m != rank]
            for j in others:
                coll[i, j] += b / len(others)
                time_ns[i, j] += c.duration_ns / len(others)
                ncalls[i, j] += 1
    p2p = np.maximum(sent, recvd)
    total = p2p + coll
    busiest = sorted(((total[i, j], time_ns[i, j], i, j) for i in range(n) for j in range(n)
                      if i != j and (total[i, j] > 0 or time_ns[i, j] > 0)), reverse=True)[:top]
    pairs = tuple(PairTraffic(ranks[i], ranks[j], float(total[i, j]), float(p2p[i, j]), float(coll[i, j]),
                              float(time_ns[i, j]), int(ncalls[i, j])) for _, _, i, j in busiest)

    def tup(m: Any) -> tuple[tuple[Any, ...], ...]:
        return tuple(tuple(row) for row in m.tolist())

    untraced = tuple(r for r in ranks if r not in calls)
    notes = list(notes)
    if lost_time:
        notes.append(f"{lost_time / 1e6:,.3f} ms of calls whose peer or group members could not be told are not in "
                     "the matrix (unattributed_time_ns)")
    if untraced:
        notes.append(f"rank(s) {', '.join(map(str, untraced))} appear as peers or group members but have no data "
                     "of their own: their rows are empty")
    return CommMatrix(ranks=tuple(ranks), bytes=tup(total), p2p_bytes=tup(p2p), collective_bytes=tup(coll),
                      time_ns=tup(time_ns), calls=tup(ncalls), busiest=pairs, total_bytes=float(total.sum()),
                      unattributed_bytes=float(lost_bytes), source=source, convention=convention,
                      notes=tuple(notes), unattributed_time_ns=float(lost_time), calls_without_bytes=sizeless,
                      untraced_ranks=untraced)


def comm_matrix(data: RunData, *, top: int = 5) -> CommMatrix | None:
    """The run's matrix from its CommTables; None for a run with fewer than two rank streams (nothing to pair)."""
    tables = {r.stream.rank: r.comm for r in data.ranks}
    if len(tables) < 2:
        return None
    return comm_matrix_from_tables(tables, top=top)
