"""Step statistics of one rank: warm-up, step time, throughput, and the phase breakdown."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stepscope.analyze.stats import Distribution, distribution, t_quantile
from stepscope.model.tables import Phase, StepTable

PHASES = ("data_wait", "forward", "backward", "optimizer", "comm")
MAX_AUTO_WARMUP = 10


def warmup_steps(durations_ns: np.ndarray, override: int | None = None) -> int:
    """How many leading steps to exclude from statistics.

    ``override`` wins when given. Otherwise: 10% of the steps (at least 1, at most 10; none for
    fewer than 3 steps), extended over any further leading steps slower than twice the median of the
    remaining ones (compilation, cuDNN autotuning, allocator growth), up to a quarter of the steps.
    """
    n = len(durations_ns)
    if override is not None:
        return max(0, min(int(override), n))
    if n < 3:
        return 0
    k = min(max(1, math.ceil(0.1 * n)), MAX_AUTO_WARMUP)
    limit = max(k, n // 4)
    while k < limit:
        rest = np.median(durations_ns[k:])
        if durations_ns[k] > 2 * rest:
            k += 1
        else:
            break
    return k


@dataclass(frozen=True, slots=True)
class PhaseShare:
    """Mean time per measured step in a phase (ns) and its share of the mean step time (0-1).
    None when the phase was not measured on this rank."""

    phase: str
    mean_ns: float | None
    share: float | None


@dataclass(frozen=True, slots=True)
class StepStats:
    """Training-step statistics of one rank, warm-up steps excluded.

    Step time is CPU wall clock between step boundaries (see StepTable) unless ``timing`` is
    ``cuda_events``, where ``device`` holds the GPU-side distribution too. Throughputs divide the
    measured steps' samples (tokens) by their summed wall time. ``other`` is step time not in any
    measured phase. ``first_step_ns`` is the first step's time, kept because long first steps are a
    finding of their own.
    """

    steps: int
    warmup_steps: int
    measured_steps: int
    step_time: Distribution | None
    """ns"""
    device_time: Distribution | None
    """ns, by CUDA events; None when not measured"""
    first_step_ns: float | None
    samples_per_s: float | None
    tokens_per_s: float | None
    steps_per_s: float | None
    samples_per_step: float | None
    phases: tuple[PhaseShare, ...]
    other: PhaseShare
    data_wait_share: float | None
    data_wait_share_low: float | None
    """One-sided 95% lower confidence bound of ``data_wait_share`` over the measured steps (see
    ``share_lower_bound``); None with fewer than 3 measured steps or no data wait measured."""
    epochs: int
    validation_steps: int
    validation_samples_per_s: float | None
    wall_ns: float
    """Summed wall time of the measured steps."""
    thread_cpu_time: Distribution | None = None
    """ns: CPU time of the stepping thread per measured step (docs/metrics.md, "CPU time"); None when not measured"""
    process_cpu_time: Distribution | None = None
    """ns: CPU time of every thread of the process per measured step; None when not measured"""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _throughput(count: np.ndarray, wall_ns: float) -> float | None:
    if not len(count) or not np.isfinite(count).any() or wall_ns <= 0:
        return None
    return float(np.nansum(count) / (wall_ns / 1e9))


SHARE_BOUND_CONFIDENCE = 0.95


def share_lower_bound(part_ns: np.ndarray, step_ns: np.ndarray, *,
                      confidence: float = SHARE_BOUND_CONFIDENCE) -> float | None:
    """One-sided lower confidence bound of sum(part) / sum(step) over steps: the ratio of means, its standard
    error linearised (residuals part_i - share * step_i), Student's t with n - 1 df. Steps are taken as
    independent draws; waits are right-skewed (a few long ones), which makes a lower bound conservative
    (simulated coverage 96-99% at n = 8-100 for steady, bursty and preempted waits:
    tests/analyze/test_stats_steps.py). None below 3 steps."""
    n = len(step_ns)
    total = float(step_ns.sum())
    if n < 3 or total <= 0:
        return None
    share = float(part_ns.sum()) / total
    se = float(np.std(part_ns - share * step_ns, ddof=1)) / math.sqrt(n) / (total / n)
    return share - t_quantile(confidence, n - 1) * se


ROLE_WARMUP = "warmup"
ROLE_MEASURED = "measured"
ROLE_VALIDATION = "validation"
ROLE_PROFILED = "profiled"
"""A step inside the profiler's traced window."""
ROLE_PROFILER_WRITE = "profiler_write"
"""The step that carried writing the profiler's trace."""
ROLE_FLOP_COUNT = "flop_count"
"""The step whose FLOPs were counted."""
ROLE_MEMORY_SNAPSHOT = "memory_snapshot"
"""A step recorded by a CUDA memory snapshot, or the one that carried its dump."""
STEP_ROLES = (ROLE_WARMUP, ROLE_PROFILED, ROLE_PROFILER_WRITE, ROLE_FLOP_COUNT, ROLE_MEMORY_SNAPSHOT,
              ROLE_MEASURED, ROLE_VALIDATION)


def _excluded(index: np.ndarray, ranges: Sequence[tuple[int, int]]) -> np.ndarray:
    out = np.zeros(len(index), dtype=bool)
    for lo, hi in ranges:
        out |= (index >= lo) & (index <= hi)
    return out


def measured_mask(train: StepTable, warmup: int, exclude: Sequence[tuple[int, int]]) -> np.ndarray:
    """Which training steps the statistics count: after the first ``warmup`` ones and outside the step index
    ranges ``exclude`` (inclusive). The one definition of a measured step (``step_stats``, ``step_roles``)."""
    keep: np.ndarray = (np.arange(len(train)) >= warmup) & ~_excluded(train["index"], exclude)
    return keep


def step_roles(steps: StepTable, warmup: int, exclude: Sequence[tuple[int, int, str]]) -> list[str]:
    """What each step (row of ``steps``) is to the statistics: ``validation``, ``warmup``, one of the
    instruments' roles of ``exclude`` (lo, hi, role; the first range holding the step names it) or
    ``measured`` — exactly the steps ``step_stats`` counts with the same warm-up and ranges."""
    is_train = steps["phase"] == int(Phase.TRAIN)
    train = steps.take(is_train)
    measured = measured_mask(train, warmup, [(lo, hi) for lo, hi, _ in exclude])
    roles: list[str] = []
    for pos, (idx, ok) in enumerate(zip(train["index"].tolist(), measured.tolist(), strict=True)):
        if ok:
            roles.append(ROLE_MEASURED)
        elif pos < warmup:
            roles.append(ROLE_WARMUP)
        else:
            roles.append(next(role for lo, hi, role in exclude if lo <= idx <= hi))
    it = iter(roles)
    return [next(it) if t else ROLE_VALIDATION for t in is_train.tolist()]


def step_stats(steps: StepTable, *, warmup: int | None = None,
               exclude: Sequence[tuple[int, int]] = ()) -> StepStats:
    """Statistics of the training steps after warm-up, leaving out the step index ranges ``exclude``
    (inclusive; the profiled window's traced steps)."""
    train = steps.take(steps["phase"] == int(Phase.TRAIN))
    val = steps.take(steps["phase"] == int(Phase.VALIDATION))
    dur = train.duration_ns.astype("float64")
    k = warmup_steps(dur, warmup)
    m = train.take(measured_mask(train, k, exclude))
    mdur = m.duration_ns.astype("float64")
    wall = float(mdur.sum())
    mean_step = float(mdur.mean()) if len(mdur) else math.nan
    phases = []
    measured_sum = np.zeros(len(m))
    for ph in PHASES:
        col = m[f"{ph}_ns"]
        if len(col) and np.isfinite(col).any():
            vals = np.nan_to_num(col, nan=0.0)
            measured_sum += vals
            mean = float(vals.mean())
            phases.append(PhaseShare(ph, mean, mean / mean_step if mean_step > 0 else None))
        else:
            phases.append(PhaseShare(ph, None, None))
    other_mean = float(np.clip(mdur - measured_sum, 0, None).mean()) if len(m) else None
    other_share = other_mean / mean_step if other_mean is not None and mean_step > 0 else None
    other = PhaseShare("other", other_mean, other_share)
    epochs = train["epoch"]
    vdur = val.duration_ns.astype("float64")
    return StepStats(
        steps=len(train), warmup_steps=k, measured_steps=len(m),
        step_time=distribution(mdur), device_time=distribution(m["device_ns"]),
        first_step_ns=float(dur[0]) if len(dur) else None,
        samples_per_s=_throughput(m["samples"], wall), tokens_per_s=_throughput(m["tokens"], wall),
        steps_per_s=len(m) / (wall / 1e9) if wall > 0 else None,
        samples_per_step=float(np.nanmedian(m["samples"])) if len(m) and np.isfinite(m["samples"]).any() else None,
        phases=tuple(phases), other=other,
        data_wait_share=phases[0].share,
        data_wait_share_low=share_lower_bound(np.nan_to_num(m["data_wait_ns"].astype("float64"), nan=0.0), mdur)
        if phases[0].mean_ns is not None else None,
        epochs=int(epochs.max()) + 1 if len(epochs) and epochs.max() >= 0 else 0,
        validation_steps=len(val),
        validation_samples_per_s=_throughput(val["samples"], float(vdur.sum())),
        wall_ns=wall,
        thread_cpu_time=distribution(m["thread_cpu_ns"]), process_cpu_time=distribution(m["process_cpu_ns"]),
    )
