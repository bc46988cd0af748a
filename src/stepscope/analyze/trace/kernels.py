"""Kernel breakdown by component and by kernel name, and memory-copy statistics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stepscope.analyze.trace.gpuview import GpuView
from stepscope.analyze.trace.intervals import group_stats
from stepscope.analyze.trace.sets import unique_inverse
from stepscope.model.events import EventKind, EventTable


@dataclass(frozen=True, slots=True)
class KernelStats:
    """Durations of the GPU work items in one group (a component or a kernel name), from the trace.

    sum/mean/min/max/std in ns (std: sample standard deviation, 0 for one item). pct: share of the summed
    duration of all GPU work of the rank.
    """

    key: str
    component: str
    count: int
    sum_ns: int
    mean_ns: float
    min_ns: int
    max_ns: int
    std_ns: float
    pct: float

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass(frozen=True, slots=True)
class KernelBreakdown:
    """Components first (largest first), then kernels (largest first). total_ns: summed GPU work time."""

    total_ns: int
    by_component: tuple[KernelStats, ...]
    by_kernel: tuple[KernelStats, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"total_ns": self.total_ns, "by_component": [s.to_dict() for s in self.by_component],
                "by_kernel": [s.to_dict() for s in self.by_kernel]}


def _rows(keys: list[str], comps: list[str], stats: dict[str, Any], total: float) -> tuple[KernelStats, ...]:
    out = [KernelStats(keys[i], comps[i], int(stats["count"][i]), int(stats["sum"][i]), float(stats["mean"][i]),
                       int(stats["min"][i]), int(stats["max"][i]), float(stats["std"][i]),
                       100.0 * float(stats["sum"][i]) / total if total else 0.0)
           for i in range(len(keys)) if stats["count"][i] > 0]
    return tuple(sorted(out, key=lambda s: (-s.sum_ns, s.key)))


def kernel_breakdown(table: EventTable, gpu: GpuView) -> KernelBreakdown:
    dur = table["dur_ns"][gpu.rows]
    total = float(dur.sum())
    comps = list(gpu.components)
    by_comp = _rows(comps, comps, group_stats(gpu.component, dur, len(comps)), total)
    uniq, codes, _ = unique_inverse(gpu.name)
    names = table.name_of(uniq)
    first = np.zeros(uniq.size, dtype=np.int64)
    first[codes[::-1]] = np.arange(codes.size)[::-1]
    kcomps = [comps[c] for c in gpu.component[first].tolist()] if uniq.size else []
    by_kernel = _rows(names, kcomps, group_stats(codes, dur, uniq.size), total)
    return KernelBreakdown(int(total), by_comp, by_kernel)


MEMCPY_DIRECTIONS = ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP")


@dataclass(frozen=True, slots=True)
class CopyStats:
    """One direction of memory copies (or memset). bytes None: the trace does not record sizes.
    bandwidth_gbps: bytes / summed duration (GB/s = bytes per ns), over items with a recorded size."""

    direction: str
    count: int
    dur_ns: int
    bytes: int | None
    bandwidth_gbps: float | None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


def _direction(name: str, kind: int) -> str:
    if kind == EventKind.MEMSET or name.lower().startswith("memset"):
        return "memset"
    return next((d for d in MEMCPY_DIRECTIONS if d.lower() in name.lower()), "other")


def memory_copies(table: EventTable, gpu: GpuView) -> tuple[CopyStats, ...]:
    """H2D / D2H / D2D / P2P copies and memsets: counts, bytes, achieved bandwidth."""
    sel = (gpu.kind == EventKind.MEMCPY) | (gpu.kind == EventKind.MEMSET) | \
        gpu.component_mask("memcpy") | gpu.component_mask("memset")
    rows = gpu.rows[sel]
    pairs, at, _ = unique_inverse(table["name"][rows].astype(np.int64) * len(EventKind) + gpu.kind[sel])
    names, kinds = np.divmod(pairs, len(EventKind))  # each distinct (name, kind) once
    per_pair = [_direction(table.names[n], k) for n, k in zip(names.tolist(), kinds.tolist())]
    labels = sorted(set(per_pair))
    code = np.asarray([labels.index(d) for d in per_pair], dtype=np.int64)[at] if per_pair else at
    out = []
    for c, d in enumerate(labels):
        r = rows[code == c]
        dur, nbytes = table["dur_ns"][r], table["bytes"][r]
        known = nbytes >= 0
        b = int(nbytes[known].sum()) if known.any() else None
        kd = int(dur[known].sum())
        out.append(CopyStats(d, int(r.size), int(dur.sum()), b, b / kd if b is not None and kd > 0 else None))
    return tuple(sorted(out, key=lambda c: c.direction))
