"""One value per run: what the run-level verdicts test (see significance.py).

For each run of a side: rank 0's median and mean step time (warm-up and traced steps excluded), its median CPU time per
step (stepping thread, whole process; metric.py), GPU step time by CUDA events, the run's throughputs and
data-wait share (the summary's headline figures), the mean time per measured step of each phase and region
(rank 0), each rank's median step time, the run's measurement quality and the CPU contention it met (run-queue
wait of the training thread over the measured steps).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from stepscope.analyze.diff.contention import Contention, run_contention
from stepscope.analyze.diff.sides import StepSample, region_per_step, step_sample
from stepscope.analyze.run.quality import Quality, measurement_quality
from stepscope.analyze.run.summary import RunSummary, summarize_run
from stepscope.model.tables import RunData


@dataclass(frozen=True, slots=True)
class RunValues:
    """The per-run values of one run (None: not measured). Times in ns; ``parts`` maps ("phase" | "region",
    name) to the mean ns per measured step on rank 0; ``ranks`` maps rank -> median step ns."""

    run_id: str
    summary: RunSummary
    samples: tuple[StepSample, ...]
    step_ns: float | None
    device_ns: float | None
    samples_per_s: float | None
    tokens_per_s: float | None
    data_wait_share: float | None
    parts: dict[tuple[str, str], float] = field(default_factory=dict)
    ranks: dict[int, float] = field(default_factory=dict)
    quality: Quality | None = None
    code: dict[str, str] | None = None
    """Content hashes of the script and the Python files it imported from its working directory (relative path
    -> hash), recorded by the collector at exit; None when the run has no such record."""
    contention: Contention | None = None
    """CPU contention over the measured steps (see contention.py)."""
    cpu_freq_mhz: float | None = None
    """Median CPU frequency the sampler recorded on rank 0 (None: not sampled)."""
    thread_cpu_ns: float | None = None
    """Median CPU time per measured step of the stepping thread, rank 0 (None: not measured; metric.py)."""
    process_cpu_ns: float | None = None
    """Median CPU time per measured step of the whole process, rank 0 (None: not measured)."""
    step_mean_ns: float | None = None
    """Mean wall-clock time of the measured steps, rank 0: the steps ``step_ns`` is the median of (metric.py)."""


def _warmup(data: RunData, warmup: int | None) -> int | None:
    if warmup is not None:
        return warmup
    opt = data.run.options.get("warmup_steps")
    return int(opt) if isinstance(opt, int) else None


def run_values(data: RunData, *, warmup: int | None = None) -> RunValues:
    """The values a verdict tests, of one stored run."""
    w = _warmup(data, warmup)
    summary = summarize_run(data, warmup=w)
    samples = tuple(step_sample(r, warmup=w) for r in data.ranks)
    s0 = samples[0] if samples and len(samples[0]) else None
    parts: dict[tuple[str, str], float] = {}
    device = None
    if s0 is not None:
        for ph, col in s0.phases.items():
            parts[("phase", ph)] = float(col.mean())
        for path, col in region_per_step(data.ranks[0], s0).items():
            parts[("region", path)] = float(col.mean())
        if np.isfinite(s0.device_ns).any():
            device = float(np.nanmedian(s0.device_ns))
    h = summary.headline
    ranks = {s.rank: float(np.median(s.duration_ns)) for s in samples if len(s)}
    return RunValues(run_id=data.run.id, summary=summary, samples=samples,
                     step_ns=float(np.median(s0.duration_ns)) if s0 is not None else None, device_ns=device,
                     samples_per_s=h.samples_per_s, tokens_per_s=h.tokens_per_s, data_wait_share=h.data_wait_share,
                     parts=parts, ranks=ranks, quality=measurement_quality(data, warmup=s0.warmup if s0 else 0),
                     code=code_of(data), contention=run_contention(data, warmup=s0.warmup if s0 else 0),
                     cpu_freq_mhz=_median_freq(data), thread_cpu_ns=_median(s0, "thread_cpu_ns"),
                     process_cpu_ns=_median(s0, "process_cpu_ns"),
                     step_mean_ns=float(np.mean(s0.duration_ns)) if s0 is not None else None)


def _median(sample: StepSample | None, column: str) -> float | None:
    """Median of a per-step CPU column over the measured steps; None when no step has it."""
    if sample is None:
        return None
    a = np.asarray(getattr(sample, column), dtype="float64")
    a = a[np.isfinite(a)]
    return float(np.median(a)) if a.size else None


def _median_freq(data: RunData) -> float | None:
    col = data.ranks[0].samples.columns.get("cpu_freq_mhz") if data.ranks else None
    if col is None:
        return None
    a = np.asarray(col, dtype="float64")
    a = a[np.isfinite(a) & (a > 0)]
    return float(np.median(a)) if a.size else None


def code_of(data: RunData) -> dict[str, str] | None:
    """The run's recorded code hashes (rank 0's ``code`` record; None when not recorded)."""
    for rank in data.ranks[:1]:
        recs = rank.extra.get("code") or []
        if recs and isinstance(recs[-1].get("files"), dict):
            return {str(k): str(v) for k, v in recs[-1]["files"].items()}
    return None
