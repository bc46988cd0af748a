"""A process's CPU over its measured training steps, from the system sampler.

The whole-run means (:func:`stepscope.analyze.run.system.metric_stats`) include start-up, imports and model
building, which in a run of a few seconds outweigh the steps (a run whose 2 processes oversubscribe the cores
showed a 55% run-queue wait over the run with 1 thread each and 7 ms steps, from the start-up). Rules that
speak of what a step costs read these figures instead.

The window (:func:`sample_window`, also the contention's in :mod:`stepscope.analyze.diff.contention`): the sampling
intervals that overlap the span from the first measured step's start to the last step's end (a sample closes the
interval before it). Each
percentage is averaged weighted by its interval's length.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stepscope.model.tables import Phase, SampleTable, StepTable

COLUMNS = ("cpu_process_pct", "main_thread_cpu_pct", "run_queue_wait_pct")


@dataclass(frozen=True, slots=True)
class CpuInSteps:
    """Time-weighted means over the measured steps' sampling intervals, in percent of one core's time (None:
    that column was not sampled there). ``process_pct``: every thread of the process; ``main_thread_pct``: the
    main (training) thread on a CPU; ``run_queue_wait_pct``: the main thread runnable but waiting for a CPU
    (Linux ``/proc/PID/schedstat``); ``intervals``: sampling intervals used; ``seconds``: their length."""

    process_pct: float | None
    main_thread_pct: float | None
    run_queue_wait_pct: float | None
    intervals: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def step_span(steps: StepTable, first_step: int = 0) -> tuple[int, int] | None:
    """(start, end) ns of the training steps from ``first_step`` on (warm-up excluded); None without such steps."""
    train = steps["phase"] == int(Phase.TRAIN)
    start, end = steps["start_ns"][train][first_step:], steps["end_ns"][train][first_step:]
    return (int(start.min()), int(end.max())) if start.size else None


def sample_window(t_ns: Any, span: tuple[int, int]) -> Any:
    """The samples whose intervals overlap ``span`` (a bool mask over ``t_ns``): a sample closes the interval
    before it, so those after the span began, up to the first one at or after its end."""
    t = np.asarray(t_ns, dtype="int64")
    after_end = np.flatnonzero(t >= span[1])
    last = after_end[0] if after_end.size else t.size - 1
    return (t > span[0]) & (np.arange(t.size) <= last)


def cpu_in_steps(samples: SampleTable, steps: StepTable, *, first_step: int = 0) -> CpuInSteps | None:
    """The CPU figures over the training steps from ``first_step`` (warm-up excluded) on; None when there are no
    such steps or no sampling interval overlaps them."""
    span = step_span(steps, first_step)
    if span is None or len(samples) < 2:
        return None
    t = np.asarray(samples.t_ns, dtype="int64")
    dt = np.diff(t, prepend=t[0]).astype("float64")
    keep = sample_window(t, span) & (dt > 0)
    if not keep.any():
        return None
    means: dict[str, float | None] = {}
    for name in COLUMNS:
        col = samples.columns.get(name)
        if col is None:
            means[name] = None
            continue
        v = np.asarray(col, dtype="float64")
        ok = keep & np.isfinite(v)
        means[name] = float((v[ok] * dt[ok]).sum() / dt[ok].sum()) if ok.any() else None
    return CpuInSteps(means["cpu_process_pct"], means["main_thread_cpu_pct"], means["run_queue_wait_pct"],
                   int(keep.sum()), float(dt[keep].sum()) / 1e9)
