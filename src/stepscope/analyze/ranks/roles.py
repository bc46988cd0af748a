"""Busy vs waiting share per role over time: when does the learner saturate while the actors wait?

Ranks (processes) carry a role (``stepscope run --role``, ``stepscope.session(role=...)``). For every
step of every rank: waiting = communication + data wait (time blocked on others or on input), busy = the
rest of the step. The run's span is cut into equal windows; each step's busy and waiting time is spread
uniformly over the windows it overlaps, and summed per role. busy share = busy / (busy + waiting) over
the time covered by steps (time outside any step is not counted). A role is *saturated* in a window when
its busy share is at least ``SATURATED``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stepscope.model.tables import RunData

SATURATED = 0.9
WAITING = 0.5
NO_ROLE = "(none)"


@dataclass(frozen=True, slots=True)
class RoleLoad:
    """One role: its ranks, busy / waiting share over the whole run, and per window (None: no step there)."""

    role: str
    ranks: tuple[int, ...]
    busy_share: float | None
    waiting_share: float | None
    busy_by_bin: tuple[float | None, ...]
    saturated_bins: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class RoleAnalysis:
    """Per-role load. ``bins_ns``: window edges, ns since the first step's start (len = windows + 1).
    ``findings``: sentences naming saturation (a role saturated while another waits in the same windows)."""

    roles: tuple[RoleLoad, ...]
    bins_ns: tuple[float, ...]
    findings: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _spread(start: np.ndarray, end: np.ndarray, value: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Sum of ``value`` per bin, each interval's value spread uniformly over its length."""
    out = np.zeros(len(edges) - 1)
    length = np.maximum(end - start, 1)
    for i in range(len(edges) - 1):
        overlap = np.clip(np.minimum(end, edges[i + 1]) - np.maximum(start, edges[i]), 0, None)
        out[i] = float((value * overlap / length).sum())
    return out


def analyze_roles(data: RunData, *, bins: int = 20) -> RoleAnalysis:
    per_rank = []
    for r in data.ranks:
        s = r.steps
        if not len(s):
            continue
        dur = s.duration_ns.astype("float64")
        wait = np.nan_to_num(s["comm_ns"], nan=0.0) + np.nan_to_num(s["data_wait_ns"], nan=0.0)
        wait = np.minimum(wait, dur)
        per_rank.append((r.stream.role or NO_ROLE, r.stream.rank, s["start_ns"].astype("float64"),
                         s["end_ns"].astype("float64"), dur - wait, wait))
    if not per_rank:
        return RoleAnalysis((), (), ())
    t0 = min(p[2].min() for p in per_rank)
    t1 = max(p[3].max() for p in per_rank)
    n = max(1, min(bins, int(min(len(p[2]) for p in per_rank))))
    edges = np.linspace(t0, max(t1, t0 + 1), n + 1)
    loads = []
    by_role: dict[str, list[Any]] = {}
    for p in per_rank:
        by_role.setdefault(p[0], []).append(p)
    for role, items in sorted(by_role.items()):
        busy = np.sum([_spread(p[2], p[3], p[4], edges) for p in items], axis=0)
        wait = np.sum([_spread(p[2], p[3], p[5], edges) for p in items], axis=0)
        tot = busy + wait
        share = [float(b / t) if t > 0 else None for b, t in zip(busy.tolist(), tot.tolist(), strict=True)]
        b_all, w_all = float(sum(p[4].sum() for p in items)), float(sum(p[5].sum() for p in items))
        whole = b_all + w_all
        loads.append(RoleLoad(role=role, ranks=tuple(sorted(p[1] for p in items)),
                              busy_share=b_all / whole if whole > 0 else None,
                              waiting_share=w_all / whole if whole > 0 else None, busy_by_bin=tuple(share),
                              saturated_bins=tuple(i for i, v in enumerate(share) if v is not None and v >= SATURATED)))
    return RoleAnalysis(tuple(loads), tuple(float(e - t0) for e in edges), tuple(_findings(loads, n)))


def _findings(loads: list[RoleLoad], n: int) -> list[str]:
    out = []
    for busy in loads:
        for other in loads:
            if other is busy or not busy.saturated_bins:
                continue
            waiting = [i for i in busy.saturated_bins
                       if other.busy_by_bin[i] is not None and 1 - other.busy_by_bin[i] >= WAITING]  # type: ignore[operator]
            if waiting:
                mean_wait = float(np.mean([1 - other.busy_by_bin[i] for i in waiting]))  # type: ignore[operator]
                out.append(f"{busy.role} is saturated (busy >= {SATURATED:.0%}) in {len(waiting)} of {n} windows "
                           f"while {other.role} waits {mean_wait:.0%} of its time there: {busy.role} limits "
                           f"{other.role}")
    return out
