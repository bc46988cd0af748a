"""The few numbers the communication advice needs from a run's torch.distributed calls (CommTable rows).

Over the analysed steps (warm-up excluded, as everywhere): per operation, calls per step and rank, the
median payload per call and the time per step and rank; and the share of the collectives' time spent
waiting for other ranks (the transfer / synchronisation split of :mod:`stepscope.analyze.ranks.commsplit`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stepscope.analyze.ranks.commsplit import P2P_OPS, split_calls
from stepscope.analyze.ranks.ranks import step_window
from stepscope.model.tables import RunData

LATENCY_BOUND_BYTES = 1 << 20
"""A collective moving less than this per call is latency-bound: its fixed cost per call (tens of µs
for NCCL, hundreds for gloo over TCP) exceeds the time its bytes take at link bandwidth (1 MiB at
~10-100 GB/s is 10-100 µs). Such calls get faster only by being fewer, not by being split or shrunk."""
DDP_BUCKET_OP = "ddp:all_reduce"
NOT_PAYLOAD = frozenset({"barrier", "monitored_barrier"})


@dataclass(frozen=True, slots=True)
class CommOp:
    """One torch.distributed operation over the analysed steps, per rank: calls and time per step, the
    median payload per call (None when not recorded)."""

    op: str
    calls_per_step: float
    bytes_median: float | None
    time_per_step_ns: float

    @property
    def latency_bound(self) -> bool | None:
        """True when the median call moves less than LATENCY_BOUND_BYTES; None when bytes are unknown."""
        return None if self.bytes_median is None else self.bytes_median < LATENCY_BOUND_BYTES


@dataclass(frozen=True, slots=True)
class CommFacts:
    """torch.distributed calls of every rank over ``steps`` analysed steps. ``sync_share``: share of the
    matched collectives' time spent waiting for the slowest rank (None with fewer than two ranks)."""

    steps: int
    ranks: int
    ops: tuple[CommOp, ...]
    sync_share: float | None

    def main_collective(self) -> CommOp | None:
        """DDP's gradient buckets when recorded, else the collective taking the most time per step."""
        colls = [o for o in self.ops if o.op not in P2P_OPS and o.op not in NOT_PAYLOAD]
        ddp = next((o for o in colls if o.op == DDP_BUCKET_OP), None)
        return ddp or max(colls, key=lambda o: o.time_per_step_ns, default=None)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def comm_facts(data: RunData, *, warmup: int | None = None) -> CommFacts | None:
    """CommFacts of a run; None when it made no torch.distributed call in its analysed steps."""
    window = step_window(data, warmup)
    if window is None:
        return None
    lo, hi = window
    steps = hi - lo + 1
    calls: dict[str, list[tuple[float, float]]] = {}
    ranks = 0
    for r in data.ranks:
        table = r.comm
        if not len(table):
            continue
        keep = (table["step"] >= lo) & (table["step"] <= hi)
        if not keep.any():
            continue
        ranks += 1
        names = table.column_strings()
        for i in np.flatnonzero(keep).tolist():
            calls.setdefault(names[i], []).append((float(table["duration_ns"][i]), float(table["bytes"][i])))
    if not calls:
        return None
    ops = []
    for op, rows in sorted(calls.items()):
        dur = np.asarray([d for d, _ in rows])
        nbytes = np.asarray([b for _, b in rows])
        nbytes = nbytes[np.isfinite(nbytes)]
        ops.append(CommOp(op=op, calls_per_step=len(rows) / (steps * ranks),
                          bytes_median=float(np.median(nbytes)) if nbytes.size else None,
                          time_per_step_ns=float(dur.sum()) / (steps * ranks)))
    split = split_calls([(r.stream.rank, r.comm) for r in data.ranks], steps=window)
    total = sum(o.time_ns for o in split.ops) if split else 0.0
    sync = sum(o.sync_ns for o in split.ops) / total if split and total > 0 else None
    return CommFacts(steps=steps, ranks=ranks, ops=tuple(ops), sync_share=sync)


__all__ = ["LATENCY_BOUND_BYTES", "CommFacts", "CommOp", "comm_facts"]
