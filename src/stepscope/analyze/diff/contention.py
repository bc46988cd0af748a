"""CPU contention of a run, and how much of a step-time change between two single runs it can explain.

On a shared machine the main cause of a level shift between two runs of the same code is the load of other
processes: the training thread, ready to run, waits for a CPU. The system sampler records, from Linux
``/proc/PID/schedstat`` of the process's main (training) thread, its run-queue wait (``run_queue_wait_pct``)
and its CPU time (``main_thread_cpu_pct``) in each sampling interval, with the 1-minute load average
(``load_avg_1m``).

**The contention of a run** is ``w = wait / (wait + cpu)`` summed over the sampling intervals of the measured
steps: the share of the time the training thread was ready to run that it spent waiting for a CPU (0 on an idle
machine). Sleeps, I/O and waits for the GPU are left out on purpose: a change that makes each step sleep
longer lowers the wait's share of the wall time at an unchanged load, but not ``w``.

**The contention shift.** If the thread's CPU work per step is unchanged, its running-or-ready time per step
is ``cpu / (1 - w)``, so B's step is at most A's times ``(1 - w_A) / (1 - w_B)`` (exactly, for a step that
never sleeps); ``shift_log = ln((1 - w_A) / (1 - w_B))``.

**How it is used** (one run a side only; repeats measure their own between-run noise): the noise floor is
widened by ``LOAD_FACTOR * (|shift_log| - sigma * sqrt(2))`` (``stats.NoiseFloor.load_allowance``) in both
directions, never subtracted from the change: the verdict tests the *median* step, and contention that comes in bursts
moves the mean (which ``w`` tracks) more than the median, sometimes so that the two runs' medians move the
other way (docs/diff.md, "Load differences between single runs"). Hence a widening, not a correction.

The load average is reported, not used: it is smoothed over a minute, so a run of a few seconds barely moves
it (runs beside two CPU hogs moved it by under 0.5 while their run-queue wait tripled).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stepscope.model.tables import Phase, RunData

WAIT_COLUMN = "run_queue_wait_pct"
CPU_COLUMN = "main_thread_cpu_pct"
LOAD_COLUMN = "load_avg_1m"

LOAD_FACTOR = 1.25
"""Widening of the floor per unit of contention shift beyond sigma * sqrt(2). ``shift_log`` is an upper bound of
what contention does to a step whose CPU work is unchanged (reached by a step that never sleeps), so 1 is the
bound's own factor. Measured (docs/diff.md): in 20 A/A pairs of runs of the same script, the first with nothing
added and the second beside 0-3 CPU hogs, the log ratio of median steps was -0.04 to 0.88 times ``shift_log``,
and the factor needed to keep every pair from being called faster or slower at most 0.83 (against a 2% floor;
0.75 against the stated default 5%); 1.25 leaves half as much again."""


@dataclass(frozen=True, slots=True)
class Contention:
    """CPU contention one side met (rank 0's process). ``wait_share``: the share (0-1) of the time its main
    thread was ready to run that it waited for a CPU (module docstring); ``load_avg``: median 1-minute load average;
    ``samples``: sampling intervals used. None: not recorded (older runs, other systems). For a side of several
    runs, the wait share whose ``1 - w`` is the geometric mean of the runs' (as their step times are
    averaged)."""

    wait_share: float | None
    load_avg: float | None
    samples: int

    def describe(self) -> str:
        parts = []
        if self.wait_share is not None:
            parts.append(f"waited for a CPU {self.wait_share:.0%} of the time it was ready to run")
        if self.load_avg is not None:
            parts.append(f"load average {self.load_avg:.1f}")
        return ", ".join(parts) or "not measured"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _stat(col: Any, keep: Any, stat: Any) -> float | None:
    if col is None:
        return None
    a = np.asarray(col, dtype="float64")[keep]
    a = a[np.isfinite(a)]
    return float(stat(a)) if a.size else None


def run_contention(data: RunData, *, warmup: int = 0) -> Contention:
    """The contention of a stored run over its measured training steps (warm-up excluded)."""
    if not data.ranks:
        return Contention(None, None, 0)
    rank = data.ranks[0]
    cols, t = rank.samples.columns, np.asarray(rank.samples.t_ns, dtype="int64")
    keep = np.ones(t.size, dtype=bool)
    steps = rank.steps
    train = steps["phase"] == int(Phase.TRAIN)
    start, end = steps["start_ns"][train][warmup:], steps["end_ns"][train][warmup:]
    if start.size and t.size:
        # a sample closes the interval before it: keep those ending after the first measured step began, up to
        # the first one at or after the last step's end
        after_end = np.flatnonzero(t >= int(end.max()))
        last = after_end[0] if after_end.size else t.size - 1
        window = (t > int(start.min())) & (np.arange(t.size) <= last)
        if window.any():
            keep = window
    load = _stat(cols.get(LOAD_COLUMN), keep, np.median)
    if WAIT_COLUMN not in cols or CPU_COLUMN not in cols:
        return Contention(None, load, 0)
    # interval lengths weight the per-interval percentages into ns (the first sample closes no interval)
    dt = np.diff(t, prepend=t[0] if t.size else 0).astype("float64")
    wait = np.asarray(cols[WAIT_COLUMN], dtype="float64") * dt
    cpu = np.asarray(cols[CPU_COLUMN], dtype="float64") * dt
    ok = keep & np.isfinite(wait) & np.isfinite(cpu)
    ready = float(wait[ok].sum() + cpu[ok].sum())
    if ready <= 0:
        return Contention(None, load, int(ok.sum()))
    return Contention(min(float(wait[ok].sum()) / ready, 0.99), load, int(ok.sum()))


def side_contention(runs: list[Contention]) -> Contention:
    """One side's contention from its runs' (wait share: ``1 - w`` averaged geometrically; load: median)."""
    waits = [c.wait_share for c in runs]
    loads = [c.load_avg for c in runs if c.load_avg is not None]
    share = None if not waits or any(w is None for w in waits) else \
        1.0 - math.exp(float(np.mean([math.log1p(-float(w or 0.0)) for w in waits])))
    return Contention(share, float(np.median(loads)) if loads else None, sum(c.samples for c in runs))


@dataclass(frozen=True, slots=True)
class LoadShift:
    """The contention of the two sides of a one-run-a-side diff and what it predicts.

    ``shift_log``: ln((1 - w_baseline) / (1 - w_experiment)), the log step-time ratio the difference in
    contention alone predicts (positive: the experiment met more contention, so it would look slower); None when
    a side has no run-queue wait recorded.
    """

    baseline: Contention
    experiment: Contention
    shift_log: float | None

    def reason(self) -> str:
        """The sentence an inconclusive verdict gives when the loads differed enough to widen the floor."""
        ratio = math.exp(self.shift_log or 0.0)
        return (f"inconclusive: the machines' load differed (the training thread, A: {self.baseline.describe()}; "
                f"B: {self.experiment.describe()}; that alone can move the step by up to x{ratio:.2f}) — rerun both "
                "with `stepscope bench --repeat N` or in one `stepscope bench --ab` session")

    def to_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline.to_dict(), "experiment": self.experiment.to_dict(),
                "shift_log": self.shift_log}


def load_shift(base: Contention, exp: Contention) -> LoadShift:
    """The predicted contention shift between the two sides (module docstring)."""
    if base.wait_share is None or exp.wait_share is None:
        return LoadShift(base, exp, None)
    return LoadShift(base, exp, math.log((1.0 - base.wait_share) / (1.0 - exp.wait_share)))
