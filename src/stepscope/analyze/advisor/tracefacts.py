"""The few numbers the advisor needs from one rank's profiled window (a Kineto trace as an EventTable).

Pure and columnar: intervals are merged with analyze.trace.intervals, strings are classified once per
distinct name.
GPU idle follows HolisticTraceAnalysis' temporal breakdown (span of GPU activity minus the union of
kernel / memcpy / memset intervals); overlap of communication follows HTA's comm/compute overlap (time
a communication kernel runs while a compute kernel runs on another stream).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stepscope.analyze.trace.intervals import intersection, length, merge
from stepscope.model.events import GPU_WORK_KINDS, EventKind, EventTable

COMM_KERNEL = re.compile(r"nccl|rccl|all_?reduce|allgather|reduce_?scatter|c10d", re.IGNORECASE)
GEMM_KERNEL = re.compile(r"gemm|xmma|cutlass|matmul|cublas", re.IGNORECASE)
LOW_PRECISION = re.compile(r"fp16|bf16|f16|half|h884|h1688|h16816|s16816|hgemm|e4m3|e5m2|int8|i8i8", re.IGNORECASE)
"""GEMM kernel names that run in 16-bit or lower. ``s1688`` (TF32) and ``sgemm`` count as fp32."""
LAUNCH_CALL = re.compile(r"LaunchKernel|LaunchCooperativeKernel|ModuleLaunchKernel|GraphLaunch|job_prep_and_submit",
                         re.IGNORECASE)
OPTIMIZER_STEP = re.compile(r"^Optimizer\.step#")
FUSED_OPTIMIZER = re.compile(r"multi_tensor_apply|fused|foreach", re.IGNORECASE)
SHORT_KERNEL_NS = 10_000
"""Kernels shorter than this are dominated by their launch cost (a CUDA launch costs ~5-10 µs on the host)."""

@dataclass(frozen=True, slots=True)
class TraceFacts:
    """One rank's profiled window. Times in ns on the trace clock, summed over the window (all its steps).

    ``profiled_steps``: ProfilerStep# annotations (at least 1). ``gpu_idle_share``: 1 - busy / span, None
    without GPU events. ``tensor_cores``: compute capability >= 7.0 on the first device, None unknown.
    ``comm_overlap_share``: overlapped / communication kernel time, None without communication kernels.
    ``optimizer_launches``: kernel launches made inside Optimizer.step annotations.
    ``comm_calls``: communication kernels; ``comm_bytes_median``: their median payload (In msg nelems × dtype
    size) where Kineto recorded it, else None.
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _name_mask(t: EventTable, pattern: re.Pattern[str]) -> np.ndarray:
    per_name = np.asarray([bool(pattern.search(n)) for n in t.names], dtype=bool)
    return per_name[t["name"]] if len(t) and len(per_name) else np.zeros(len(t), dtype=bool)


def trace_facts(t: EventTable) -> TraceFacts:
    """The advisor's facts of one trace (see TraceFacts)."""
    kind = t["kind"]
    ts, end = t["ts_ns"], t.end_ns
    gpu = np.isin(kind, np.asarray(GPU_WORK_KINDS, dtype=np.int8))
    kern = kind == EventKind.KERNEL
    busy = merge(ts[gpu], end[gpu])
    span = float(busy[1][-1] - busy[0][0]) if len(busy[0]) else 0.0
    busy_ns = float(length(*busy))
    comm = kern & _name_mask(t, COMM_KERNEL)
    gemm = kern & _name_mask(t, GEMM_KERNEL)
    low = _name_mask(t, LOW_PRECISION)
    comm_iv = merge(ts[comm], end[comm])
    compute_iv = merge(ts[kern & ~comm], end[kern & ~comm])
    comm_ns = float(length(*comm_iv))
    overlapped = float(intersection(comm_iv, compute_iv))
    runtime = kind == EventKind.RUNTIME
    launch = runtime & _name_mask(t, LAUNCH_CALL)
    ann = kind == EventKind.USER_ANNOTATION
    opt = ann & _name_mask(t, OPTIMIZER_STEP)
    opt_iv = merge(ts[opt], end[opt])
    lts = ts[launch]
    i = np.searchsorted(opt_iv[0], lts, side="right") - 1
    if len(opt_iv[0]):
        in_opt = (i >= 0) & (lts < np.where(i >= 0, opt_iv[1][np.maximum(i, 0)], 0))
    else:
        in_opt = np.zeros(0, dtype=bool)
    opt_names = [t.names[c] for c in np.unique(t["name"][opt])]
    kdur = t["dur_ns"][kern]
    dev = t.meta.devices[0] if t.meta.devices else None
    cc = dev.compute_capability if dev else None
    steps = int((ann & _name_mask(t, re.compile(r"^ProfilerStep#"))).sum())
    return TraceFacts(
        path=t.meta.path, rank=t.meta.rank, profiled_steps=max(1, steps),
        device_name=dev.name if dev else None, compute_capability=cc,
        tensor_cores=_tensor_cores(cc, dev.name if dev else None),
        gpu_span_ns=span, gpu_busy_ns=busy_ns, gpu_idle_share=1 - busy_ns / span if span > 0 else None,
        kernels=int(kern.sum()), kernel_ns=float(kdur.sum()),
        kernel_median_ns=float(np.median(kdur)) if len(kdur) else None,
        short_kernels=int((kdur < SHORT_KERNEL_NS).sum()),
        launches=int(launch.sum()), launch_api_ns=float(t["dur_ns"][launch].sum()),
        gemm_ns=float(t["dur_ns"][gemm].sum()), fp32_gemm_ns=float(t["dur_ns"][gemm & ~low].sum()),
        comm_ns=comm_ns, comm_overlapped_ns=overlapped, comm_overlap_share=overlapped / comm_ns if comm_ns else None,
        optimizer_steps=int(opt.sum()), optimizer_ns=float(length(*opt_iv)), optimizer_launches=int(in_opt.sum()),
        optimizer_fused=any(FUSED_OPTIMIZER.search(n) for n in opt_names),
        comm_calls=int(comm.sum()), comm_bytes_median=_median_payload(t, comm),
    )


def _median_payload(t: EventTable, comm: np.ndarray) -> float | None:
    from stepscope.analyze.trace.comm import DTYPE_BYTES

    codes = t["coll"][comm]
    sizes = []
    for c in codes[codes >= 0].tolist():
        a = t.colls[c]
        size = DTYPE_BYTES.get(a.dtype or "")
        if a.in_nelems is not None and size:
            sizes.append(a.in_nelems * size)
    return float(np.median(sizes)) if sizes else None


def _tensor_cores(cc: str | None, name: str | None) -> bool | None:
    if name and re.search(r"AMD|Instinct|MI\d", name, re.IGNORECASE):
        return bool(re.search(r"MI[123]\d\d", name))
    if cc is None:
        return None
    try:
        return float(cc) >= 7.0
    except ValueError:
        return None


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
