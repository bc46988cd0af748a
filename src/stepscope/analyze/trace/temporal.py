"""Temporal breakdown, communication/computation overlap and GPU utilisation of one rank."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stepscope.analyze.trace.gpuview import GpuView, KernelType
from stepscope.analyze.trace.intervals import intersection, length
from stepscope.analyze.trace.sets import unique_inverse
from stepscope.model.events import EventTable


def _pct(part: float, whole: float) -> float | None:
    return 100.0 * part / whole if whole > 0 else None


@dataclass(frozen=True, slots=True)
class TemporalBreakdown:
    """Where the GPU's time goes between its first and last work (HTA ``get_temporal_breakdown``).

    All ``*_ns`` are lengths of unions of GPU-work intervals (kernels, memcpy, memset; all streams merged)
    measured from the trace. window_ns: first GPU start to last GPU end. idle_ns: window minus the union of
    all GPU work. compute_ns: union of computation kernels. non_compute_ns: window - compute - idle (HTA's
    figure: communication and memory time not hidden under computation). communication_ns / memory_ns:
    unions of those kernel types on their own (they may overlap computation).
    """

    window_ns: int
    busy_ns: int
    idle_ns: int
    compute_ns: int
    non_compute_ns: int
    communication_ns: int
    memory_ns: int

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {k: getattr(self, k) for k in self.__slots__}
        for k in ("idle", "compute", "non_compute", "communication", "memory", "busy"):
            d[f"{k}_pct"] = _pct(getattr(self, f"{k}_ns"), self.window_ns)
        return d


def temporal_breakdown(gpu: GpuView) -> TemporalBreakdown | None:
    """None when the rank has no GPU work (absent, not zero)."""
    if not len(gpu):
        return None
    window = int(gpu.end.max() - gpu.ts.min())
    busy = length(*gpu.merged())
    compute = length(*gpu.merged(gpu.ktype == KernelType.COMPUTATION))
    idle = window - busy
    return TemporalBreakdown(
        window_ns=window, busy_ns=busy, idle_ns=idle, compute_ns=compute, non_compute_ns=window - compute - idle,
        communication_ns=length(*gpu.merged(gpu.ktype == KernelType.COMMUNICATION)),
        memory_ns=length(*gpu.merged(gpu.ktype == KernelType.MEMORY)),
    )


@dataclass(frozen=True, slots=True)
class CommOverlap:
    """Share of communication time hidden under computation (HTA ``get_comm_comp_overlap``).

    communication_ns: union of communication kernels. overlap_ns: its intersection with the union of
    computation kernels. overlap_pct = 100 * overlap / communication. exposed_ns = communication - overlap.
    """

    communication_ns: int
    computation_ns: int
    overlap_ns: int

    @property
    def overlap_pct(self) -> float | None:
        return _pct(self.overlap_ns, self.communication_ns)

    def to_dict(self) -> dict[str, Any]:
        return {"communication_ns": self.communication_ns, "computation_ns": self.computation_ns,
                "overlap_ns": self.overlap_ns, "exposed_ns": self.communication_ns - self.overlap_ns,
                "overlap_pct": self.overlap_pct}


def comm_overlap(gpu: GpuView) -> CommOverlap | None:
    """None when the rank has no communication kernels."""
    comm = gpu.merged(gpu.ktype == KernelType.COMMUNICATION)
    if not comm[0].size:
        return None
    comp = gpu.merged(gpu.ktype == KernelType.COMPUTATION)
    return CommOverlap(length(*comm), length(*comp), intersection(comm, comp))


@dataclass(frozen=True, slots=True)
class Utilization:
    """How busy the GPU was, from the trace (not from NVML sampling).

    utilization_pct: union of GPU work / window (100 - HTA idle %). sm_efficiency_pct: estimated SM
    efficiency, sum over kernels of dur * min(blocks_per_sm, 1) / window, with blocks_per_sm from the
    launch record or grid blocks / number of SMs (None when neither is recorded). achieved_occupancy_pct:
    kernel-duration-weighted mean of the profiler's "est. achieved occupancy %" (None when not recorded).
    covered_kernel_pct: share of kernel time with the launch data the estimates need.
    """

    window_ns: int
    utilization_pct: float | None
    sm_efficiency_pct: float | None
    achieved_occupancy_pct: float | None
    covered_kernel_pct: float | None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


def utilization(table: EventTable, gpu: GpuView) -> Utilization | None:
    if not len(gpu):
        return None
    window = int(gpu.end.max() - gpu.ts.min())
    kernels = gpu.rows[gpu.kind == 3]
    dur = table["dur_ns"][kernels].astype(np.float64)
    bps = table["blocks_per_sm"][kernels].astype(np.float64)
    sms = _num_sms(table, kernels)
    grid = table["grid_blocks"][kernels].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        bps = np.where(np.isnan(bps) & (grid > 0) & (sms > 0), grid / sms, bps)
    have = ~np.isnan(bps)
    sm_eff = _pct(float((dur[have] * np.minimum(bps[have], 1.0)).sum()), window) if have.any() else None
    occ = table["occupancy_pct"][kernels].astype(np.float64)
    ho = ~np.isnan(occ)
    achieved = float((dur[ho] * occ[ho]).sum() / dur[ho].sum()) if ho.any() and dur[ho].sum() > 0 else None
    return Utilization(window, _pct(length(*gpu.merged()), window), sm_eff, achieved,
                       _pct(float(dur[have].sum()), float(dur.sum())) if dur.size else None)


def _num_sms(table: EventTable, rows: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    by_id = {d.id: d.num_sms or 0 for d in table.meta.devices}
    devices = table["device"][rows]
    if not rows.size:
        return np.empty(0)
    ids, at, _ = unique_inverse(devices)
    return np.asarray([by_id.get(int(d), 0) for d in ids.tolist()], dtype=np.float64)[at]
