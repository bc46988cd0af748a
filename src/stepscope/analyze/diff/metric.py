"""The clocks a verdict can be decided on (``--metric`` of `diff`, `bench --ab` and `check`).

Each is one value per run, rank 0, warm-up and instrumented steps excluded (sides.py), the median over the measured
steps (the mean for ``step_time_mean``):

- ``step_time``: wall-clock time between step boundaries (the default; what the user waits for);
- ``step_time_mean``: the mean of the same steps' wall-clock times: the run's time over its measured steps divided by
  their count, so it follows total time where a minority of slow steps (a stall every few steps, a descheduled
  process) leaves the median unmoved. The price: those few steps move it from run to run too, so on a busy host it
  needs more runs (or pairs) than the median to tell the same change;
- ``step_cpu_time``: CPU time (user + system) of the thread that marked the steps, between the same boundaries. A
  CPU-side change shows here even on a saturated host, where the wall clock also counts time spent waiting for a
  core; what the thread did not do itself is not in it (GPU work, sleeps, I/O waits, work of other threads or of
  DataLoader worker processes), see docs/diff.md "CPU time";
- ``process_cpu_time``: CPU time of every thread of the process over the step (intra-op and inter-op pools,
  stepscope's own sampler and flush threads; DataLoader worker processes excluded). A pool's spinning threads
  count, so it can grow with the threads given, not only with the work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from stepscope.model.tables import RunData


@dataclass(frozen=True, slots=True)
class StepMetric:
    """One clock: its ``--metric`` name, the diff's overview row key, its label, the per-run attribute of
    ``RunValues`` (ns), the run index's metric (seconds) and the step table's column (None: the step's wall
    time, which every run has)."""

    name: str
    row_key: str
    label: str
    attr: str
    index_key: str
    column: str | None = None


METRICS: dict[str, StepMetric] = {m.name: m for m in (
    StepMetric("step_time", "step_time_median_ns", "step time (median)", "step_ns", "step_time_median_s"),
    StepMetric("step_time_mean", "step_time_mean_ns", "mean step time", "step_mean_ns", "step_time_mean_s"),
    StepMetric("step_cpu_time", "step_cpu_time_median_ns", "step CPU time, training thread (median)", "thread_cpu_ns",
               "step_cpu_time_median_s", "thread_cpu_ns"),
    StepMetric("process_cpu_time", "process_cpu_time_median_ns", "process CPU time per step (median)",
               "process_cpu_ns", "process_cpu_time_median_s", "process_cpu_ns"),
)}
DEFAULT_METRIC = "step_time"
CPU_METRICS = tuple(m for m, v in METRICS.items() if v.column is not None)
"""The CPU clocks: measured per step by the collector (runs recorded before them have none)."""


def step_metric(name: str) -> StepMetric:
    """The clock named ``name`` (a ValueError naming the choices otherwise)."""
    try:
        return METRICS[name]
    except KeyError:
        raise ValueError(f"unknown metric {name!r}: expected one of {', '.join(METRICS)}") from None


def unmeasured(metric: StepMetric, runs: Sequence[RunData]) -> list[str]:
    """Ids of the runs whose rank 0 has no step with a value of ``metric`` (runs recorded before the CPU clocks,
    or with no training step); always empty for step time."""
    if metric.column is None:
        return []
    out = []
    for d in runs:
        col = d.ranks[0].steps[metric.column] if d.ranks else np.empty(0)
        if not np.isfinite(np.asarray(col, dtype="float64")).any():
            out.append(d.run.id)
    return out


def not_measured_message(metric: StepMetric, run_ids: Sequence[str]) -> str:
    """The one line for a verdict asked on a clock some compared runs lack."""
    shown = ", ".join(run_ids[:4]) + (f" and {len(run_ids) - 4} more" if len(run_ids) > 4 else "")
    if metric.column is None:  # every run has its steps' wall times: only an index made before the figure lacks it
        return (f"--metric {metric.name}: not measured in the index for run(s) {shown} (indexed before stepscope "
                f"kept {metric.index_key}) — `stepscope store reindex` adds it")
    return (f"--metric {metric.name}: not measured in run(s) {shown} (recorded before stepscope measured per-step "
            f"CPU time, or no training step) — compare on --metric step_time, or record the runs again")
