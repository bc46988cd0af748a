"""The few numbers the advisor needs from one rank's profiled window: a projection of the trace engine's
``TraceAnalysis`` (analyze/trace/), so every fact is the figure `stepscope trace analyze` prints, defined
once (docs/traces.md says where each comes from). No name classification or interval code lives here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stepscope.analyze.trace.analysis import TraceAnalysis, analyze_trace
from stepscope.model.events import EventKind, EventTable


@dataclass(frozen=True, slots=True)
class TraceFacts:
    """One rank's profiled window. Times in ns on the trace clock, summed over the window (all its steps).
    Each field is a trace-engine figure (``TraceAnalysis``, in brackets its `trace analyze --json` key):

    ``profiled_steps``: ProfilerStep#N annotations [steps.count]. ``gpu_span_ns`` / ``gpu_busy_ns``: GPU
    window and union of GPU work [temporal.window_ns / busy_ns]; ``gpu_idle_share``: idle / window, None
    without GPU work [temporal.idle_pct]. ``kernels``: kernels (not memcpy / memset) [launches.kernels];
    ``short_kernels``: those shorter than their share of their launching call, i.e. launch-bound
    [launches.short_kernels]; ``kernel_median_ns`` [launches.kernel_p50_ns]; ``kernel_ns``: summed GPU work
    time, kernels, memcpy and memset [kernels.total_ns].
    ``launches`` / ``launch_api_ns``: launching calls and their summed CPU time [launches.launches /
    launch_total_ns]. ``gemm_ns`` / ``fp32_gemm_ns``: GEMM and convolution kernels, all and fp32/TF32
    [gemm.gemm_ns / fp32_ns]. ``comm_ns`` / ``comm_overlapped_ns`` / ``comm_overlap_share``: union of
    communication kernels, its part under computation, and their ratio [overlap.*]. ``comm_calls`` /
    ``comm_bytes_median`` [communication.kernels / bytes_median]. ``optimizer_*`` [optimizer.*].
    ``device_name`` / ``compute_capability`` / ``tensor_cores`` [device.*].
    """

    path: str
    rank: int
    profiled_steps: int
    device_name: str | None
    compute_capability: str | None
    tensor_cores: bool | None
    gpu_span_ns: float
    gpu_busy_ns: float
    gpu_idle_share: float | None
    kernels: int
    kernel_ns: float
    kernel_median_ns: float | None
    short_kernels: int
    launches: int
    launch_api_ns: float
    gemm_ns: float
    fp32_gemm_ns: float
    comm_ns: float
    comm_overlapped_ns: float
    comm_overlap_share: float | None
    optimizer_steps: int
    optimizer_ns: float
    optimizer_launches: int
    optimizer_fused: bool
    comm_calls: int = 0
    comm_bytes_median: float | None = None

    @property
    def gpu_idle_ns(self) -> float:
        """GPU span minus GPU busy time (ns, summed over the window)."""
        return self.gpu_span_ns - self.gpu_busy_ns

    @property
    def steps_in_window(self) -> int:
        """What window totals are divided by for a per-step figure: the profiled steps, or 1 for a window
        recorded without ProfilerStep annotations (its totals are then per window)."""
        return max(1, self.profiled_steps)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def facts_of(a: TraceAnalysis) -> TraceFacts:
    """The advisor's facts of one rank, projected from its trace-engine analysis."""
    t, ov, la, dev = a.temporal, a.overlap, a.launches, a.device
    return TraceFacts(
        path=a.path, rank=a.rank, profiled_steps=len(a.steps.steps),
        device_name=dev.name if dev else None, compute_capability=dev.compute_capability if dev else None,
        tensor_cores=dev.tensor_cores if dev else None,
        gpu_span_ns=float(t.window_ns) if t else 0.0, gpu_busy_ns=float(t.busy_ns) if t else 0.0,
        gpu_idle_share=t.idle_ns / t.window_ns if t and t.window_ns > 0 else None,
        kernels=la.kernels if la else 0, kernel_ns=float(a.kernels.total_ns),
        kernel_median_ns=la.kernel_p50_ns if la else None, short_kernels=la.short_kernels if la else 0,
        launches=la.launches if la else 0, launch_api_ns=float(la.launch_total_ns) if la else 0.0,
        gemm_ns=float(a.gemm.gemm_ns), fp32_gemm_ns=float(a.gemm.fp32_ns),
        comm_ns=float(ov.communication_ns) if ov else 0.0, comm_overlapped_ns=float(ov.overlap_ns) if ov else 0.0,
        comm_overlap_share=ov.overlap_ns / ov.communication_ns if ov and ov.communication_ns else None,
        optimizer_steps=a.optimizer.steps, optimizer_ns=float(a.optimizer.dur_ns),
        optimizer_launches=a.optimizer.launches, optimizer_fused=a.optimizer.fused,
        comm_calls=a.communication.kernels, comm_bytes_median=a.communication.bytes_median,
    )


def trace_facts(t: EventTable) -> TraceFacts:
    """The advisor's facts of one trace (analyses it; given the analysis, use ``facts_of``)."""
    return facts_of(analyze_trace(t))


@dataclass(frozen=True, slots=True)
class NameTotal:
    """Events of one name in the window: count, summed and mean duration (ns), share of the kind's total."""

    name: str
    count: int
    total_ns: float
    mean_ns: float
    share: float


def top_names(t: EventTable, kind: EventKind, *, limit: int = 20) -> tuple[NameTotal, ...]:
    """The ``limit`` names of one event kind with the largest summed duration (kernels, operators)."""
    sel = t["kind"] == kind
    if not sel.any():
        return ()
    codes = t["name"][sel]
    dur = t["dur_ns"][sel].astype("float64")
    tot = np.bincount(codes, weights=dur, minlength=len(t.names))
    cnt = np.bincount(codes, minlength=len(t.names))
    grand = float(dur.sum()) or 1.0
    order = np.argsort(-tot, kind="stable")[:limit]
    return tuple(NameTotal(t.names[i], int(cnt[i]), float(tot[i]), float(tot[i] / cnt[i]), float(tot[i] / grand))
                 for i in order if cnt[i])
