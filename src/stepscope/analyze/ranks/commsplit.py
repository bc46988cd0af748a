"""Transfer vs synchronisation: how much of each rank's time in a collective moved data, how much waited.

The same collective runs on every rank of its group. The rank that arrives last waits least, so the
shortest instance across ranks is the collective's *transfer* time (an upper bound of the pure
transfer: it still contains the last rank's own latency); the rest of each rank's time in that
instance is *synchronisation* (waiting for the slowest rank). Instances are matched by (op, seq) for
per-call timings (see collect/torch/comm.py for ``seq``) and, in traces, by the k-th kernel of the same name
on each rank. Only instances seen on at least two ranks are split; the others are counted as unmatched.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope.model.tables import CommTable

Array = npt.NDArray[Any]
P2P_OPS = frozenset({"send", "recv", "isend", "irecv", "batch_isend_irecv"})


@dataclass(frozen=True, slots=True)
class OpSplit:
    """One collective (or kernel name) over every rank and matched instance.

    instances: matched instances (each seen on >= 2 ranks). calls: rank-calls in them.
    time_ns: summed time of those rank-calls. transfer_ns / sync_ns: their split (time = transfer + sync).
    bytes_per_call: median payload per rank-call (None where unknown). unmatched_calls: rank-calls whose
    instance no other rank reported (a rank that died, a subgroup of one) — not split.
    """

    op: str
    instances: int
    calls: int
    time_ns: float
    transfer_ns: float
    sync_ns: float
    bytes_per_call: float | None
    unmatched_calls: int

    @property
    def sync_share(self) -> float | None:
        return self.sync_ns / self.time_ns if self.time_ns > 0 else None


@dataclass(frozen=True, slots=True)
class RankSplit:
    """One rank's matched collective time split in transfer and sync (ns, summed over the instances)."""

    rank: int
    time_ns: float
    transfer_ns: float
    sync_ns: float


@dataclass(frozen=True, slots=True)
class CommSplit:
    """Transfer / synchronisation split of every matched collective. ``source``: 'calls' (per-call CPU
    wall-clock timings of torch.distributed calls) or 'trace' (communication kernels of profiler traces,
    GPU time)."""

    source: str
    ops: tuple[OpSplit, ...]
    ranks: tuple[RankSplit, ...]

    def rank(self, rank: int) -> RankSplit | None:
        return next((r for r in self.ranks if r.rank == rank), None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _split(source: str, rows: list[tuple[int, str, Any, float, float]]) -> CommSplit | None:
    """rows: (rank, op, instance key, duration ns, bytes)."""
    if not rows:
        return None
    ranks = np.array([r[0] for r in rows], dtype=np.int64)
    ops = [r[1] for r in rows]
    keys = [(r[1], r[2]) for r in rows]
    dur = np.array([r[3] for r in rows], dtype=np.float64)
    nbytes = np.array([r[4] for r in rows], dtype=np.float64)
    uniq: dict[Any, int] = {}
    inst = np.array([uniq.setdefault(k, len(uniq)) for k in keys], dtype=np.int64)
    n_inst = len(uniq)
    seen = np.zeros(n_inst, dtype=np.int64)
    np.add.at(seen, inst, 1)
    shortest = np.full(n_inst, np.inf)
    np.minimum.at(shortest, inst, dur)
    matched = seen[inst] >= 2
    transfer = np.where(matched, shortest[inst], 0.0)
    sync = np.where(matched, dur - transfer, 0.0)
    op_rows = []
    for op in sorted(set(ops)):
        m = np.array([o == op for o in ops]) & matched
        um = np.array([o == op for o in ops]) & ~matched
        b = nbytes[m]
        b = b[np.isfinite(b)]
        op_rows.append(OpSplit(op=op, instances=len(set(inst[m].tolist())), calls=int(m.sum()),
                               time_ns=float(dur[m].sum()), transfer_ns=float(transfer[m].sum()),
                               sync_ns=float(sync[m].sum()), bytes_per_call=float(np.median(b)) if b.size else None,
                               unmatched_calls=int(um.sum())))
    rank_rows = []
    for r in sorted(set(ranks.tolist())):
        m = (ranks == r) & matched
        rank_rows.append(RankSplit(rank=int(r), time_ns=float(dur[m].sum()), transfer_ns=float(transfer[m].sum()),
                                   sync_ns=float(sync[m].sum())))
    return CommSplit(source=source, ops=tuple(op_rows), ranks=tuple(rank_rows))


def split_calls(ranks: Sequence[tuple[int, CommTable]], *, steps: tuple[int, int] | None = None) -> CommSplit | None:
    """Split the per-call timings of collectives (point-to-point calls are left out).

    steps: (first, last) step indices to keep, inclusive (None: every call).
    """
    rows: list[tuple[int, str, Any, float, float]] = []
    for rank, table in ranks:
        if not len(table):
            continue
        keep = table["seq"] >= 0
        if steps is not None:
            keep &= (table["step"] >= steps[0]) & (table["step"] <= steps[1])
        names = table.column_strings()
        for i in np.flatnonzero(keep).tolist():
            op = names[i]
            if op in P2P_OPS:
                continue
            rows.append((rank, op, int(table["seq"][i]), float(table["duration_ns"][i]), float(table["bytes"][i])))
    return _split("calls", rows)


def split_kernels(ranks: Sequence[tuple[int, Sequence[str], Array]]) -> CommSplit | None:
    """Split communication kernels of several ranks' traces: per rank (rank, kernel names in start order,
    durations ns). The k-th kernel of a name on one rank is matched with the k-th of that name elsewhere."""
    rows: list[tuple[int, str, Any, float, float]] = []
    for rank, names, durs in ranks:
        count: dict[str, int] = {}
        for name, d in zip(names, np.asarray(durs, dtype=np.float64).tolist(), strict=True):
            short = name.split("(", 1)[0]
            k = count.get(short, 0)
            count[short] = k + 1
            rows.append((rank, short, k, d, float("nan")))
    return _split("trace", rows)


def trace_comm_kernels(table: Any) -> tuple[list[str], Array]:
    """(names, durations ns) of one trace's communication kernels in start order (trace engine's view)."""
    from stepscope.analyze.trace.gpuview import KernelType, gpu_view

    g = gpu_view(table)
    m = g.ktype == KernelType.COMMUNICATION
    return [table.names[i] for i in g.name[m].tolist()], (g.end - g.ts)[m]
