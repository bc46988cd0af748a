"""CPU contention of a run, and how much of a step-time change between two single runs it can explain.

On a shared machine the main cause of a level shift between two runs of the same code is the load of other
processes: the training thread, ready to run, waits for a CPU. The system sampler records, from Linux
``/proc/PID/schedstat`` of the process's main (training) thread, per sampling interval: its run-queue wait
(``run_queue_wait_pct``), its CPU time (``main_thread_cpu_pct``) and how many times it was put on a CPU
(``main_thread_slices``), with the 1-minute load average (``load_avg_1m``).

**The contention of a run**, over the sampling intervals of its measured steps: ``latency`` = run-queue wait
per time put on a CPU (how long the thread waits each time it becomes ready: a property of the machine's
load, not of the code) and ``wait_share`` = run-queue wait / wall time (how much of the run that waiting
took). The latency is what is compared: a change that makes each step sleep or wait for the GPU more often
adds wake-ups, and so wait, at an unchanged load, but not latency (a first version compared wait / (wait +
CPU) and read a 2x slowdown made of sleeps as a load change).

**The contention shift.** If run B's thread (the one that met the higher latency) had waited A's latency each
time instead of its own, its run-queue wait would have been ``latency_A / latency_B`` of what it was, and its
wall time ``1 - wait_share_B * (1 - latency_A / latency_B)`` of what it was. ``shift_log`` is minus the log of
that (B: the experiment, shift positive; when the baseline met the higher latency, the same with the roles
swapped and the sign negative).

**How it is used** (one run a side only; repeats measure their own between-run noise): the noise floor is
widened by ``LOAD_FACTOR * (|shift_log| - sigma * sqrt(2))`` (``stats.NoiseFloor.load_allowance``) in both
directions, never subtracted from the change: the shift is an estimate, and the measured step moved by 0 to
2.2 times it (docs/diff.md, "Load differences between single runs"; contention in bursts moves the median step
less, and hogs also slow a step through caches and memory bandwidth, which the latency does not see). Hence a
widening, not a correction.

The load average is reported, not used: it is smoothed over a minute, so a run of a few seconds barely moves
it (runs beside two CPU hogs moved it by under 1 while their run-queue latency grew 3-5 times).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stepscope.analyze.run.cpusteps import sample_window, step_span
from stepscope.model.tables import RankData, RunData

WAIT_COLUMN = "run_queue_wait_pct"
SLICES_COLUMN = "main_thread_slices"
LOAD_COLUMN = "load_avg_1m"

LOAD_FACTOR = 3.0
"""Widening of the floor per unit of contention shift beyond sigma * sqrt(2). Measured (docs/diff.md): in 12 A/A
pairs of runs of the same script, the first with nothing added and the second beside 0-3 CPU hogs, the log ratio
of median steps was 0.01 to 2.2 times ``shift_log`` (the latency misses part of what hogs do: cache, memory
bandwidth, bursts), and the factor needed to keep every pair from being called faster or slower at most 2.08
against a 2% floor (1.8 against the stated default 5%, 0.79 against the 10% these noisy runs got). With 3.0,
simulated A/A pairs moving by the measured ratios are called at the floor's stated 1% (1.4%, within the binomial
margin; 2.5 gave 1.9%)."""


@dataclass(frozen=True, slots=True)
class Contention:
    """CPU contention one side met (rank 0's process's main thread). ``latency_ms``: run-queue wait per time put
    on a CPU (ms); ``wait_share``: run-queue wait / wall time (0-1); ``load_avg``: median 1-minute load average;
    ``samples``: sampling intervals used. None: not recorded (older runs, other systems). For a side of several
    runs: the geometric mean latency and the mean wait share."""

    latency_ms: float | None
    wait_share: float | None
    load_avg: float | None
    samples: int

    def describe(self) -> str:
        parts = []
        if self.latency_ms is not None and self.wait_share is not None:
            parts.append(f"waited {self.latency_ms:.2g} ms for a CPU each time it became ready, {self.wait_share:.0%} "
                         "of its time")
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
    """The contention of a stored run over its measured training steps (warm-up excluded), from rank 0."""
    if not data.ranks:
        return Contention(None, None, None, 0)
    return rank_contention(data.ranks[0], step_span(data.ranks[0].steps, warmup))


def rank_contention(rank: RankData, span: tuple[int, int] | None) -> Contention:
    """The contention one rank's main thread met over ``span`` (start, end ns: the sampling intervals that
    overlap it), or over the whole recording when None or when no interval overlaps it."""
    cols, t = rank.samples.columns, np.asarray(rank.samples.t_ns, dtype="int64")
    keep = np.ones(t.size, dtype=bool)
    if span is not None and t.size:
        window = sample_window(t, span)
        if window.any():
            keep = window
    load = _stat(cols.get(LOAD_COLUMN), keep, np.median)
    if WAIT_COLUMN not in cols or SLICES_COLUMN not in cols:
        return Contention(None, None, load, 0)
    # interval lengths turn the per-interval percentages into ns (the first sample closes no interval)
    dt = np.diff(t, prepend=t[0] if t.size else 0).astype("float64")
    wait = np.asarray(cols[WAIT_COLUMN], dtype="float64") / 100.0 * dt
    slices = np.asarray(cols[SLICES_COLUMN], dtype="float64")
    ok = keep & np.isfinite(wait) & np.isfinite(slices) & (dt > 0)
    wall, n = float(dt[ok].sum()), float(slices[ok].sum())
    if wall <= 0 or n <= 0:
        return Contention(None, None, load, int(ok.sum()))
    waited = float(wait[ok].sum())
    return Contention(waited / n / 1e6, min(waited / wall, 0.99), load, int(ok.sum()))


def side_contention(runs: list[Contention]) -> Contention:
    """One side's contention from its runs' (latency: geometric mean; wait share: mean; load: median)."""
    lat = [c.latency_ms for c in runs]
    share = [c.wait_share for c in runs]
    loads = [c.load_avg for c in runs if c.load_avg is not None]
    known = bool(runs) and all(x is not None and x > 0 for x in lat) and all(x is not None for x in share)
    return Contention(float(np.exp(np.mean(np.log([float(x or 0) for x in lat])))) if known else None,
                      float(np.mean([float(x or 0) for x in share])) if known else None,
                      float(np.median(loads)) if loads else None, sum(c.samples for c in runs))


@dataclass(frozen=True, slots=True)
class LoadShift:
    """The contention of the two sides of a one-run-a-side diff and what it predicts.

    ``shift_log``: the log step-time ratio the difference in latency can explain (module docstring; positive:
    the experiment met the higher latency, so it would look slower); None when a side has no latency recorded.
    """

    baseline: Contention
    experiment: Contention
    shift_log: float | None

    def reason(self) -> str:
        """The sentence an inconclusive verdict gives when the loads differed enough to widen the floor."""
        ratio = math.exp(self.shift_log or 0.0)
        return (f"inconclusive: the machines' load differed (the training thread, A: {self.baseline.describe()}; "
                f"B: {self.experiment.describe()}; that alone can move the step by about x{ratio:.2f}) — rerun both "
                "with `stepscope bench --repeat N` or in one `stepscope bench --ab` session")

    def to_dict(self) -> dict[str, Any]:
        return {"baseline": self.baseline.to_dict(), "experiment": self.experiment.to_dict(),
                "shift_log": self.shift_log}


def load_shift(base: Contention, exp: Contention) -> LoadShift:
    """The contention shift between the two sides (module docstring)."""
    if base.latency_ms is None or exp.latency_ms is None or base.wait_share is None or exp.wait_share is None:
        return LoadShift(base, exp, None)
    if exp.latency_ms == base.latency_ms:  # both 0 too (no run-queue wait at all): no shift, no 0 / 0
        return LoadShift(base, exp, 0.0)
    if exp.latency_ms > base.latency_ms:
        return LoadShift(base, exp, -math.log1p(-exp.wait_share * (1.0 - base.latency_ms / exp.latency_ms)))
    return LoadShift(base, exp, math.log1p(-base.wait_share * (1.0 - exp.latency_ms / base.latency_ms)))
