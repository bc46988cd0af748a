"""A process's CPU over its measured training steps, from the system sampler.

The whole-run means (:func:`stepscope.analyze.run.system.metric_stats`) include start-up, imports and model
building, which in a run of a few seconds outweigh the steps (a run whose 2 processes oversubscribe the cores
showed a 55% run-queue wait over the run with 1 thread each and 7 ms steps, from the start-up). Rules that
speak of what a step costs read these figures instead.

The window is the one :mod:`stepscope.analyze.diff.contention` uses: the sampling intervals that overlap the span
from the first measured step's start to the last step's end (a sample closes the interval before it). Each
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


def cpu_in_steps(samples: SampleTable, steps: StepTable, *, first_step: int = 0) -> CpuInSteps | None:
    """The CPU figures over the training steps from ``first_step`` (warm-up excluded) on; None when there are no
    such steps or no sampling interval overlaps them."""
    train = steps.take(steps["phase"] == int(Phase.TRAIN))
    if len(train) <= first_step or len(samples) < 2:
        return None
    t0, t1 = int(train["start_ns"][first_step:].min()), int(train["end_ns"][first_step:].max())
    t = np.asarray(samples.t_ns, dtype="int64")
    after_end = np.flatnonzero(t >= t1)
    last = after_end[0] if after_end.size else t.size - 1
    dt = np.diff(t, prepend=t[0]).astype("float64")
    keep = (t > t0) & (np.arange(t.size) <= last) & (dt > 0)
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
