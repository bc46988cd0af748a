"""All analyses of one rank's trace, as one typed result (``analyze_trace``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from stepscope.analyze.trace.annotations import Annotations, gpu_annotations
from stepscope.analyze.trace.bandwidth import Bandwidth, bandwidth
from stepscope.analyze.trace.collectives import CollectiveCall, rank_collectives
from stepscope.analyze.trace.commkernels import CommKernels, comm_kernels
from stepscope.analyze.trace.device import DeviceSummary, device_summary
from stepscope.analyze.trace.gpuview import GpuView, gpu_view
from stepscope.analyze.trace.idle import IdleBreakdown, idle_breakdown
from stepscope.analyze.trace.kernels import CopyStats, KernelBreakdown, kernel_breakdown, memory_copies
from stepscope.analyze.trace.launches import LaunchStats, launch_stats
from stepscope.analyze.trace.memory_timeline import MemoryTimeline, memory_timeline
from stepscope.analyze.trace.ops import ModuleNode, OpStats, host_times, module_tree, operator_table
from stepscope.analyze.trace.optimizer import OptimizerStats, optimizer_stats
from stepscope.analyze.trace.precision import GemmPrecision, gemm_precision
from stepscope.analyze.trace.queues import QueueLengths, queue_lengths
from stepscope.analyze.trace.roofline import Roofline, op_roofline
from stepscope.analyze.trace.sequences import MAX_LENGTH, MIN_LENGTH, TOP, KernelSequences, kernel_sequences
from stepscope.analyze.trace.sets import member
from stepscope.analyze.trace.steps import StepSummary, step_summary
from stepscope.analyze.trace.temporal import (
    CommOverlap,
    TemporalBreakdown,
    Utilization,
    comm_overlap,
    temporal_breakdown,
    utilization,
)
from stepscope.model.events import EventKind, EventTable
from stepscope.traces.components import ComponentRules
from stepscope.traces.notes import reading_notes

if TYPE_CHECKING:  # the critical path is asked for (with_critical_path): imported then
    from stepscope.analyze.trace.critical_path import CriticalPath

SCHEMA_VERSION = 1
OVERLAP_TOLERANCE_NS = 1_000


@dataclass(frozen=True, slots=True)
class TraceAnalysis:
    """Every analysis of one rank. None: not measurable from this trace (e.g. no GPU work)."""

    path: str
    rank: int
    world_size: int | None
    events: int
    gpu_events: int
    temporal: TemporalBreakdown | None
    idle: IdleBreakdown | None
    kernels: KernelBreakdown
    overlap: CommOverlap | None
    utilization: Utilization | None
    launches: LaunchStats | None
    copies: tuple[CopyStats, ...]
    operators: tuple[OpStats, ...]
    modules: tuple[ModuleNode, ...]
    steps: StepSummary
    device: DeviceSummary | None
    gemm: GemmPrecision
    optimizer: OptimizerStats
    communication: CommKernels
    warnings: tuple[str, ...]
    roofline: Roofline | None = None
    """Operators by unique arguments on the device's roofline (None: no GPU work)."""
    collectives: tuple[CollectiveCall, ...] = ()
    """The rank's collective kernels, matched across ranks by :func:`~stepscope.analyze.trace.multirank.combine`."""
    critical_path: CriticalPath | None = None
    """HTA's critical path of the whole trace (None: not asked for, no host operators or runtime calls)."""
    queues: QueueLengths | None = None
    """Launch-queue length per stream (None: no launched GPU work)."""
    bandwidth: Bandwidth | None = None
    """Copy bandwidth over time per copy kind (None: no copy with a bandwidth)."""
    memory: MemoryTimeline | None = None
    """Allocator totals over time per device (None: recorded without ``profile_memory=True``)."""
    sequences: KernelSequences | None = None
    """Most frequent GPU kernel sequences per stream (None: no GPU work)."""
    annotations: Annotations | None = None
    """Time by user annotation (None: no annotations)."""

    def to_dict(self) -> dict[str, Any]:
        def d(v: Any) -> Any:
            return v.to_dict() if hasattr(v, "to_dict") else v
        return {"schema_version": SCHEMA_VERSION, "path": self.path, "rank": self.rank,
                "world_size": self.world_size, "events": self.events, "gpu_events": self.gpu_events,
                "temporal": d(self.temporal), "idle": d(self.idle), "kernels": d(self.kernels),
                "overlap": d(self.overlap), "utilization": d(self.utilization), "launches": d(self.launches),
                "copies": [c.to_dict() for c in self.copies], "operators": [o.to_dict() for o in self.operators],
                "modules": [m.to_dict() for m in self.modules], "steps": self.steps.to_dict(),
                "device": d(self.device), "gemm": self.gemm.to_dict(), "optimizer": self.optimizer.to_dict(),
                "communication": self.communication.to_dict(), "roofline": d(self.roofline),
                "critical_path": d(self.critical_path), "warnings": list(self.warnings),
                "queues": d(self.queues), "bandwidth": d(self.bandwidth), "memory": d(self.memory),
                "sequences": d(self.sequences), "annotations": d(self.annotations)}


def analyze_trace(table: EventTable, *, rules: ComponentRules | None = None, sequence_min: int = MIN_LENGTH,
                  sequence_max: int = MAX_LENGTH, sequence_top: int = TOP,
                  with_critical_path: bool = False, critical_path_step: int | None = None) -> TraceAnalysis:
    """Run every analysis on one rank's event table (``sequence_*``: the kernel-sequence lengths and how many
    sequences of each length to keep). ``with_critical_path``: add the critical path of the whole trace (off by
    default: with it a worker peaks at about 1.87 times the table on its first rank and 1.69 on later ones, past
    its budget of 1.5 times; without it 1.39 and 1.29);
    ``critical_path_step``: of that ProfilerStep instance only (0: the first, HTA's default window)."""
    rules = rules or ComponentRules.defaults()
    gpu = gpu_view(table, rules)
    steps = step_summary(table, gpu)
    host = host_times(table, gpu)  # held only while the operator table and module tree need it
    operators, modules = operator_table(table, host, rules), module_tree(table, host)
    roofline = op_roofline(table, host) if len(gpu) else None
    del host
    return TraceAnalysis(
        path=table.meta.path, rank=table.meta.rank, world_size=table.meta.world_size, events=len(table),
        gpu_events=len(gpu), temporal=temporal_breakdown(gpu), idle=idle_breakdown(table, gpu) if len(gpu) else None,
        kernels=kernel_breakdown(table, gpu), overlap=comm_overlap(gpu), utilization=utilization(table, gpu),
        launches=launch_stats(table, gpu), copies=memory_copies(table, gpu),
        operators=operators, modules=modules, steps=steps,
        device=device_summary(table), gemm=gemm_precision(table, gpu), optimizer=optimizer_stats(table, gpu),
        communication=comm_kernels(table, gpu),
        warnings=tuple(trace_warnings(table, gpu, steps)), roofline=roofline,
        collectives=rank_collectives(table, gpu),
        critical_path=_critical_path(table, rules, gpu, with_critical_path, critical_path_step),
        queues=queue_lengths(table), bandwidth=bandwidth(table), memory=memory_timeline(table),
        sequences=kernel_sequences(table, min_length=sequence_min, max_length=sequence_max, top=sequence_top),
        annotations=gpu_annotations(table),
    )


def _critical_path(table: EventTable, rules: ComponentRules, gpu: GpuView, whole: bool,
                   step: int | None) -> CriticalPath | None:
    """The critical path asked for: of the whole trace, or of one ProfilerStep (None where the trace has none)."""
    if step is None and not whole:
        return None
    from stepscope.analyze.trace.critical_path import critical_path
    from stepscope.analyze.trace.critical_path_graph import step_window

    if step is not None:
        window = step_window(table, instances=(step, step))
        return critical_path(table, rules=rules, gpu=gpu, window=window) if window is not None else None
    return critical_path(table, rules=rules, gpu=gpu) if whole else None


def trace_warnings(table: EventTable, gpu: GpuView, steps: StepSummary) -> list[str]:
    """Things the reader of the figures must know (one line each)."""
    m, out = table.meta, []
    if not len(table):
        out.append("the trace has no complete events: nothing to analyse")
    elif not len(gpu):
        out.append("no GPU work in the trace (CPU-only, or recorded without CUDA/ROCm activities): "
                   "GPU figures are absent")
    if len(table) and not steps.steps:
        out.append("no ProfilerStep#N annotations: per-step times are absent (record with torch.profiler and "
                   "call prof.step() each iteration)")
    if m.unknown_categories:
        out.append(f"unknown event categories kept as 'other': {', '.join(m.unknown_categories[:5])}")
    if m.dropped_events:
        out.append(f"{m.dropped_events} events without a timestamp or duration were dropped")
    out.extend(reading_notes(m))
    if (m.world_size or 1) > 1 and len(gpu) and not gpu.component_mask("communication").any():
        out.append(f"rank {m.rank} of {m.world_size} has no communication kernels: check the component rules "
                   "(`stepscope trace rules`) or whether communication ran outside the trace")
    overlaps = _stream_overlaps(gpu)
    if overlaps:
        out.append(f"{overlaps} GPU work items overlap the previous one on their stream by more than "
                   f"{OVERLAP_TOLERANCE_NS} ns (clock skew in the trace); unions are used, so no time is counted twice")
    unlaunched = _unlaunched(table, gpu)
    if unlaunched:
        out.append(f"{unlaunched} GPU work items name a launching call (correlation id) that is not in the trace; "
                   "they are counted (HTA drops them)")
    if (table["kind"] == EventKind.SYNC).any():
        out.append("cuda_sync events are not counted as GPU work (HTA counts them in its temporal window)")
    return out


def _stream_overlaps(gpu: GpuView) -> int:
    if len(gpu) < 2:
        return 0
    order = np.lexsort((gpu.ts, gpu.stream))
    s, ts, end = gpu.stream[order], gpu.ts[order], gpu.end[order]
    same = s[1:] == s[:-1]
    return int((same & (ts[1:] < end[:-1] - OVERLAP_TOLERANCE_NS)).sum())


def _unlaunched(table: EventTable, gpu: GpuView) -> int:
    launched = table["correlation"][(table["kind"] == EventKind.RUNTIME) & (table["correlation"] >= 0)]
    if not launched.size:
        return 0
    corr = table["correlation"][gpu.rows]
    return int(((corr >= 0) & ~member(corr, launched)).sum())  # (no id at all: HTA keeps such work too)
