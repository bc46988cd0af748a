"""Idle-time breakdown per GPU stream (HTA ``get_idle_time_breakdown``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope.analyze.trace.gpuview import GpuView
from stepscope.analyze.trace.intervals import unique_sorted
from stepscope.model.events import EventKind, EventTable

KERNEL_WAIT_THRESHOLD_NS = 30_000
"""HTA's ``consecutive_kernel_delay`` default (30 µs)."""


@dataclass(frozen=True, slots=True)
class StreamIdle:
    """Idle gaps between consecutive GPU work items on one stream, by cause.

    host_wait_ns: the next item's launch (runtime call, found by correlation id) started after the previous
    item ended: the CPU did not enqueue work fast enough. kernel_wait_ns: otherwise, gaps shorter than the
    threshold (launch overhead of back-to-back kernels). other_ns: the remaining gaps. Negative gaps
    (overlapping items on one stream, a ns-rounding artefact) count as zero.
    """

    stream: int
    host_wait_ns: int
    kernel_wait_ns: int
    other_ns: int

    @property
    def idle_ns(self) -> int:
        return self.host_wait_ns + self.kernel_wait_ns + self.other_ns

    def to_dict(self) -> dict[str, Any]:
        return {"stream": self.stream, "host_wait_ns": self.host_wait_ns, "kernel_wait_ns": self.kernel_wait_ns,
                "other_ns": self.other_ns, "idle_ns": self.idle_ns}


@dataclass(frozen=True, slots=True)
class IdleBreakdown:
    """Per-stream idle causes and their totals over all streams (sums of per-stream gaps)."""

    streams: tuple[StreamIdle, ...]
    threshold_ns: int

    def total(self, field: str) -> int:
        return sum(getattr(s, field) for s in self.streams)

    def to_dict(self) -> dict[str, Any]:
        totals = {f: self.total(f) for f in ("host_wait_ns", "kernel_wait_ns", "other_ns", "idle_ns")}
        return {"threshold_ns": self.threshold_ns, "totals": totals, "streams": [s.to_dict() for s in self.streams]}


def launch_start_ns(table: EventTable, correlation: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
    """Start of the runtime call with each correlation id (-1 where none)."""
    rt = np.flatnonzero((table["kind"] == EventKind.RUNTIME) & (table["correlation"] >= 0))
    corr = table["correlation"][rt]
    order = np.argsort(corr, kind="stable")
    corr, rt = corr[order], rt[order]
    out = np.full(correlation.size, -1, dtype=np.int64)
    if not corr.size:
        return out
    i = np.clip(np.searchsorted(corr, correlation), 0, corr.size - 1)
    hit = (corr[i] == correlation) & (correlation >= 0)
    out[hit] = table["ts_ns"][rt[i[hit]]]
    return out


def idle_breakdown(table: EventTable, gpu: GpuView, *, threshold_ns: int = KERNEL_WAIT_THRESHOLD_NS) -> IdleBreakdown:
    launch = launch_start_ns(table, table["correlation"][gpu.rows])
    out = []
    for stream in unique_sorted(gpu.stream).tolist():
        sel = np.flatnonzero(gpu.stream == stream)
        sel = sel[np.argsort(gpu.ts[sel], kind="stable")]
        prev_end = gpu.end[sel][:-1]
        gap = np.maximum(gpu.ts[sel][1:] - prev_end, 0)
        host = (launch[sel][1:] > prev_end) & (launch[sel][1:] >= 0)
        kernel = ~host & (gap < threshold_ns)
        other = ~host & ~kernel
        out.append(StreamIdle(int(stream), int(gap[host].sum()), int(gap[kernel].sum()), int(gap[other].sum())))
    return IdleBreakdown(tuple(out), threshold_ns)
