"""Allocations by operator in a window recorded with `--profile-memory`."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from stepscope.model.tables import RankData


@dataclass(frozen=True, slots=True)
class MemoryOp:
    """One operator's allocations over the profiled window (torch.profiler's memory accounting): bytes
    allocated by the operator itself (``self_*``) and including its children (``cpu_bytes``,
    ``device_bytes``), summed over ``calls``. Frees are counted negative by torch, so a self figure is the
    net allocation of the operator."""

    name: str
    calls: int
    self_cpu_bytes: int
    cpu_bytes: int
    self_device_bytes: int
    device_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def memory_ops(rank: RankData) -> tuple[MemoryOp, ...]:
    """The allocating operators of the rank's last memory-profiled window, largest first; () without one."""
    recs = rank.extra.get("profile_memory", [])
    if not recs:
        return ()
    rows = recs[-1].get("operators") or []
    ops = [MemoryOp(**{k: r[k] for k in MemoryOp.__dataclass_fields__}) for r in rows]
    return tuple(sorted(ops, key=lambda o: -max(o.self_cpu_bytes, o.self_device_bytes)))
