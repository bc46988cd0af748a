"""The run summary: everything the terminal report, the JSON output and the index show for one run."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from stepscope.analyze.run.blind import blind_warnings, no_step_warning
from stepscope.analyze.run.cpusteps import CpuInSteps, cpu_in_steps
from stepscope.analyze.run.flops import FlopsSummary, counted_steps, flops_summary
from stepscope.analyze.run.lost import records_lost
from stepscope.analyze.run.memory import MemoryOp, memory_ops
from stepscope.analyze.run.regions import RegionStats, region_stats
from stepscope.analyze.run.steps import (
    ROLE_FLOP_COUNT,
    ROLE_MEMORY_SNAPSHOT,
    ROLE_PROFILED,
    ROLE_PROFILER_WRITE,
    StepStats,
    step_stats,
)
from stepscope.analyze.run.system import MetricStats, energy_per_step_j, metric_stats
from stepscope.model.run import Run, RunStatus
from stepscope.model.tables import RankData, RunData

SUMMARY_SCHEMA = "stepscope.summary/1"


@dataclass(frozen=True, slots=True)
class UserMetric:
    """A logged metric: how many values, first / last / min / max, and the step of the last one."""

    name: str
    count: int
    first: float
    last: float
    min: float
    max: float
    last_step: int


@dataclass(frozen=True, slots=True)
class RankSummary:
    rank: int
    local_rank: int
    role: str | None
    host: str
    pid: int
    complete: bool
    exit_reason: str | None
    step_source: str | None
    timing: str
    steps: StepStats
    regions: tuple[RegionStats, ...]
    system: tuple[MetricStats, ...]
    peak_rss_bytes: float | None
    peak_gpu_mem_bytes: dict[str, float]
    """Per GPU ('gpu0', ...): max of NVML memory used, or of the allocator's per-step reserved peak."""
    energy_per_step_j: dict[str, float]
    metrics: tuple[UserMetric, ...]
    dataloaders: tuple[dict[str, Any], ...]
    notes: tuple[str, ...]
    memory_ops: tuple[MemoryOp, ...] = ()
    """Operators that allocate most, from a window recorded with --profile-memory."""
    cpu_in_steps: CpuInSteps | None = None
    """The process's and its main thread's CPU over the measured steps (None: not sampled there)."""


@dataclass(frozen=True, slots=True)
class Headline:
    """Run-level numbers. Step times are rank 0's (ranks of a data-parallel job step together); the
    throughputs add up every rank's (global); data-wait share is the mean over ranks; peaks are maxima
    over ranks and devices; energy per step adds the GPU and CPU sources measured. None: not measured."""

    steps: int
    warmup_steps: int
    step_time_median_ns: float | None
    step_time_p95_ns: float | None
    samples_per_s: float | None
    tokens_per_s: float | None
    steps_per_s: float | None
    data_wait_share: float | None
    gpu_util_pct: float | None
    peak_rss_bytes: float | None
    peak_gpu_mem_bytes: float | None
    energy_per_step_j: float | None
    first_step_ns: float | None


@dataclass(frozen=True, slots=True)
class RunSummary:
    run: Run
    headline: Headline
    ranks: tuple[RankSummary, ...]
    models: tuple[dict[str, Any], ...]
    artifacts: tuple[str, ...]
    warnings: tuple[str, ...] = field(default_factory=tuple)
    flops: FlopsSummary | None = None
    """FLOPs per step, achieved FLOP/s and MFU (analyze/run/flops.py); None when not measured or given."""
    framework: dict[str, Any] | None = None
    """Rank 0's ``framework`` record (Keras / TensorFlow / JAX versions, backend, thread pools, devices)."""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["run"]["status"] = self.run.status.value
        lost = records_lost(n for r in self.ranks for n in r.notes)  # as ls --json says it
        return {"schema": SUMMARY_SCHEMA, **_clean(d), "partial": lost > 0, "records_lost": lost}


def _clean(obj: Any) -> Any:
    """JSON-safe: NaN / inf become None, tuples lists."""
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if hasattr(obj, "value") and hasattr(obj, "name") and not isinstance(obj, (int, float, str)):
        return obj.value
    return obj


def user_metrics(rank: RankData) -> tuple[UserMetric, ...]:
    t = rank.metrics
    out = []
    for code, name in enumerate(t.names):
        mask = t["name_code"] == code
        v = t["value"][mask]
        if not v.size:
            continue
        f = v[np.isfinite(v)]
        out.append(UserMetric(name=name, count=int(v.size), first=float(v[0]), last=float(v[-1]),
                              min=float(f.min()) if f.size else math.nan, max=float(f.max()) if f.size else math.nan,
                              last_step=int(t["step"][mask][-1])))
    return tuple(out)


def step_exclusions(rank: RankData) -> tuple[tuple[int, int, str], ...]:
    """Step index ranges (inclusive) slowed by stepscope's own instruments, each with its step role
    (analyze/run/steps.py), most specific first: the step that carried writing the profiler's trace
    (``carried_step``), the step whose FLOPs were counted, a CUDA memory snapshot's recorded steps and the
    step that carried its dump, and the profiler window's traced steps."""
    out: list[tuple[int, int, str]] = []
    for rec in rank.extra.get("profile_boundary", []) + rank.extra.get("profile_window", []):
        carried = rec.get("carried_step")
        if isinstance(carried, int):
            out.append((carried, carried, ROLE_PROFILER_WRITE))
    out.extend((lo, hi, ROLE_FLOP_COUNT) for lo, hi in counted_steps(rank))
    for rec in rank.extra.get("memory_snapshot", []):
        lo, hi = rec.get("first_step"), rec.get("last_step")
        if isinstance(lo, int) and isinstance(hi, int):
            out.append((lo, hi + 1, ROLE_MEMORY_SNAPSHOT))  # the dump happens at the boundary after the last step
    for rec in rank.extra.get("profile_window", []):
        lo = rec.get("traced_first_step", rec.get("first_step"))
        hi = rec.get("last_step")
        if isinstance(lo, int) and isinstance(hi, int):
            out.append((lo, hi, ROLE_PROFILED))
    return tuple(dict.fromkeys(out))


def profiled_steps(rank: RankData) -> tuple[tuple[int, int], ...]:
    """Step index ranges slowed by stepscope's own instruments, kept out of step statistics (the run
    summary's and diff's alike): the ranges of ``step_exclusions`` without their roles."""
    return tuple(sorted({(lo, hi) for lo, hi, _ in step_exclusions(rank)}))


def summarize_rank(rank: RankData, *, warmup: int | None = None) -> RankSummary:
    st = step_stats(rank.steps, warmup=warmup, exclude=profiled_steps(rank))
    regions = region_stats(rank.regions, first_step=st.warmup_steps, measured_steps=st.measured_steps,
                           step_wall_ns=st.wall_ns)
    system = metric_stats(rank.samples)
    rss = rank.samples.columns.get("rss_bytes")
    peak_gpu: dict[str, float] = {}
    for i in rank.samples.gpu_indices():
        col = rank.samples.columns.get(f"gpu{i}_mem_used_bytes")
        if col is not None and np.isfinite(col).any():
            peak_gpu[f"gpu{i}"] = float(np.nanmax(col))
    reserved = rank.steps["mem_reserved_peak_bytes"]
    if np.isfinite(reserved).any():
        key = f"cuda:{rank.stream.local_rank}"
        peak_gpu[key] = float(np.nanmax(reserved))
    s = rank.stream
    return RankSummary(
        rank=s.rank, local_rank=s.local_rank, role=s.role, host=s.host, pid=s.pid, complete=s.complete,
        exit_reason=s.exit_reason, step_source=s.step_source, timing=s.timing, steps=st, regions=tuple(regions),
        system=tuple(system),
        peak_rss_bytes=float(np.nanmax(rss)) if rss is not None and np.isfinite(rss).any() else None,
        peak_gpu_mem_bytes=peak_gpu,
        energy_per_step_j=energy_per_step_j(rank.samples, rank.steps, first_step=st.warmup_steps),
        metrics=user_metrics(rank), dataloaders=tuple(rank.extra.get("dataloader", [])), notes=rank.notes,
        memory_ops=memory_ops(rank),
        cpu_in_steps=cpu_in_steps(rank.samples, rank.steps, first_step=st.warmup_steps),
    )


def _sum(vals: list[float | None]) -> float | None:
    got = [v for v in vals if v is not None]
    return float(sum(got)) if got else None


def headline(ranks: list[RankSummary]) -> Headline:
    if not ranks:
        return Headline(0, 0, None, None, None, None, None, None, None, None, None, None, None)
    r0 = ranks[0].steps
    util = [m.mean for r in ranks for m in r.system if m.name.endswith("_util_pct") and m.mean is not None]
    waits = [r.steps.data_wait_share for r in ranks if r.steps.data_wait_share is not None]
    rss = [r.peak_rss_bytes for r in ranks if r.peak_rss_bytes is not None]
    gpu = [v for r in ranks for v in r.peak_gpu_mem_bytes.values()]
    energy = _sum([v for r in ranks for v in r.energy_per_step_j.values()])
    return Headline(
        steps=r0.steps, warmup_steps=r0.warmup_steps,
        step_time_median_ns=r0.step_time.p50 if r0.step_time else None,
        step_time_p95_ns=r0.step_time.p95 if r0.step_time else None,
        samples_per_s=_sum([r.steps.samples_per_s for r in ranks]),
        tokens_per_s=_sum([r.steps.tokens_per_s for r in ranks]),
        steps_per_s=r0.steps_per_s,
        data_wait_share=float(np.mean(waits)) if waits else None,
        gpu_util_pct=float(np.mean(util)) if util else None,
        peak_rss_bytes=max(rss) if rss else None, peak_gpu_mem_bytes=max(gpu) if gpu else None,
        energy_per_step_j=energy, first_step_ns=r0.first_step_ns,
    )


def summarize_run(data: RunData, *, warmup: int | None = None) -> RunSummary:
    """Summary of a stored run. ``warmup``: steps to exclude (None: the run's option, else automatic)."""
    if warmup is None:
        opt = data.run.options.get("warmup_steps")
        warmup = int(opt) if isinstance(opt, int) else None
    ranks = [summarize_rank(r, warmup=warmup) for r in data.ranks]
    warnings = []
    if not data.ranks:
        warnings.append("no process of the command was observed training: no optimizer step, backward pass, "
                        "DataLoader batch or stepscope call happened (or the script is not Python); if it "
                        "trains without torch.optim, mark each step with stepscope.step()")
    blind = blind_warnings(data.ranks)  # a framework imported, no step seen: what was found and what to do
    warnings.extend(blind)
    if data.ranks and not blind and all(r.steps.steps == 0 for r in ranks):
        warnings.append(no_step_warning(data.ranks))
    for r in data.ranks:
        if not r.stream.complete and data.run.status != RunStatus.RUNNING:  # a running rank has no end record yet
            warnings.append(f"rank {r.stream.rank} ended without its end record (killed): its data stops at the "
                            "last flush")
    warnings.extend(str(p) for p in data.run.extra.get("record_problems", ()))  # store/rundir.read_run
    models = tuple(rec["summary"] for r in data.ranks[:1] for rec in r.extra.get("model", []) if rec.get("summary"))
    return RunSummary(run=data.run, headline=headline(ranks), ranks=tuple(ranks), models=models,
                      artifacts=data.artifacts, warnings=tuple(warnings),
                      flops=flops_summary(data, [r.steps for r in ranks]),
                      framework=next((dict(rec) for r in data.ranks[:1] for rec in r.extra.get("framework", [])),
                                     None))


def index_metrics(summary: RunSummary) -> dict[str, float]:
    """Flat metrics kept in the SQL index for listing, history and the CI gate (seconds, bytes, shares)."""
    h = summary.headline
    out: dict[str, float] = {}

    def put(name: str, value: float | None, scale: float = 1.0) -> None:
        if value is not None and math.isfinite(value):
            out[name] = value * scale

    put("steps", float(h.steps))
    put("step_time_median_s", h.step_time_median_ns, 1e-9)
    put("step_time_p95_s", h.step_time_p95_ns, 1e-9)
    put("samples_per_s", h.samples_per_s)
    put("tokens_per_s", h.tokens_per_s)
    put("data_wait_share", h.data_wait_share)
    put("gpu_util_pct", h.gpu_util_pct)
    put("peak_rss_bytes", h.peak_rss_bytes)
    put("peak_gpu_mem_bytes", h.peak_gpu_mem_bytes)
    put("energy_per_step_j", h.energy_per_step_j)
    put("duration_s", summary.run.duration_ns, 1e-9)
    lost = records_lost(n for r in summary.ranks for n in r.notes)
    if lost:  # a partial run (analyze/run/lost.py): listed beside its status
        put("records_lost", float(lost))
    if summary.flops is not None:
        put("flops_per_step", summary.flops.flops_per_step)
        put("achieved_flops", summary.flops.achieved_flops)
        put("mfu", summary.flops.mfu)
    if summary.ranks:
        r0 = summary.ranks[0]
        put("step_time_mean_s", r0.steps.step_time.mean if r0.steps.step_time else None, 1e-9)  # check --metric
        for key, cpu in (("step_cpu_time_median_s", r0.steps.thread_cpu_time),
                         ("process_cpu_time_median_s", r0.steps.process_cpu_time)):
            put(key, cpu.p50 if cpu is not None else None, 1e-9)  # the CPU clocks beside step time (check --metric)
        for p in (*r0.steps.phases, r0.steps.other):
            put(f"phase.{p.phase}_share", p.share)
        for reg in r0.regions:
            put(f"region.{reg.path}.p50_s", reg.time.p50, 1e-9)
            put(f"region.{reg.path}.share", reg.share_of_steps)
        for m in r0.metrics:
            put(f"metric.{m.name}", m.last)
    return out
