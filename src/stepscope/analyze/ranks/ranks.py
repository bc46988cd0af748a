"""Per-rank analysis of a multi-rank run: where each rank's step time goes, POP efficiency metrics,
stragglers, and the transfer / synchronisation split of its collectives.

Definitions (docs/distributed.md has them with examples):

* Window: the training steps every complete rank recorded, warm-up excluded (the largest warm-up of any
  rank). A rank that died mid-run (no end record) keeps the steps it has in the window and is marked.
* Per rank and per step: comm = time in torch.distributed calls (collect/torch/comm.py; blocking time),
  data wait = time blocked on the DataLoader, useful = step time - comm (computation *and* data wait:
  a rank slow to load data makes the others wait just as a rank slow to compute does), compute = useful
  - data wait. Per-rank values are means per step over the window (CPU wall clock).
* POP metrics (Performance Optimisation and Productivity Centre of Excellence), with u_i a rank's
  useful time and T the runtime (the largest mean step time of any rank):
  load balance LB = mean_i(u_i) / max_i(u_i); communication efficiency CommE = max_i(u_i) / T;
  parallel efficiency PE = LB * CommE = mean_i(u_i) / T. All in (0, 1], 1 is perfect.
* Straggler: a rank whose median useful time per step exceeds the median of the other ranks' medians by
  more than ``STRAGGLER_MIN_SHARE`` of the median step time, with a Mann-Whitney p-value below
  ``STRAGGLER_ALPHA`` (per-step values of the rank vs the others'): slower beyond noise. Its excess is
  that difference (ns per step).
* Host contention: such a rank is not called a straggler, but *unresolved*, when its excess share is at most
  ``CONTENTION_FACTOR`` times the largest share of the window any rank's main thread spent waiting for a CPU
  (run-queue wait, analyze/diff/contention.py). Identical ranks on an oversubscribed host differ by about that
  much: the scheduler keeps one of them waiting more, step after step (docs/distributed.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from stepscope.analyze.ranks.commsplit import CommSplit, split_calls
from stepscope.analyze.run.steps import warmup_steps
from stepscope.analyze.stats import mann_whitney_u
from stepscope.model.run import RunStatus
from stepscope.model.tables import Phase, RankData, RunData

RANKS_SCHEMA = "stepscope.ranks/1"
STRAGGLER_MIN_SHARE = 0.03
"""A straggler's excess must be at least this share of the median step time."""
STRAGGLER_ALPHA = 0.01
CONTENTION_FACTOR = 1.5
"""Excess shares up to this many times the ranks' largest CPU wait share are left unresolved. Measured
(docs/distributed.md): in 24 balanced 2-rank runs beside one CPU hog on 2 cores the ranks waited for a CPU
4-16% of their window, and of the 16 that differed by over 3% of the step the largest difference / wait share
was 0.93."""
BALANCED_LOAD_BALANCE = 0.9
"""Load balance at or above this, with no straggler, is reported as balanced."""


@dataclass(frozen=True, slots=True)
class RankTimes:
    """One rank over the window: means per step (ns, CPU wall clock) and shares of its step time.

    comm_ns / data_wait_ns: 0 where measured as nothing, None where the rank could not measure them.
    transfer_ns / sync_ns: the rank's matched collective time per step split in transfer and waiting
    (see analyze/ranks/commsplit.py); None without matched collectives.
    """

    rank: int
    role: str | None
    host: str
    complete: bool
    steps: int
    step_ns: float
    step_median_ns: float
    useful_ns: float
    compute_ns: float
    comm_ns: float | None
    data_wait_ns: float | None
    transfer_ns: float | None
    sync_ns: float | None
    samples_per_s: float | None
    cpu_wait_share: float | None = None
    """Share of the window the rank's main thread was ready to run but waited for a CPU; None unsampled."""

    @property
    def comm_share(self) -> float | None:
        return None if self.comm_ns is None or self.step_ns <= 0 else self.comm_ns / self.step_ns


@dataclass(frozen=True, slots=True)
class PopMetrics:
    """POP efficiency metrics over the window (see the module docstring), from per-call comm timing."""

    load_balance: float
    communication_efficiency: float
    parallel_efficiency: float
    runtime_ns: float
    """T: the largest mean step time of any rank."""
    mean_useful_ns: float
    max_useful_ns: float


@dataclass(frozen=True, slots=True)
class TraceRank:
    """One rank's GPU time in its profiler trace (the trace engine's temporal breakdown, unions of kernel
    intervals, ns): window = first to last GPU work; compute = computation kernels; communication =
    communication kernels (may overlap compute); idle = window minus all GPU work."""

    rank: int
    window_ns: int
    compute_ns: int
    communication_ns: int
    idle_ns: int


@dataclass(frozen=True, slots=True)
class Straggler:
    """A rank slower than the others beyond noise: ``excess_ns`` per step (median useful time minus the
    median of the other ranks' medians), ``excess_share`` of the median step time, and the test's p."""

    rank: int
    excess_ns: float
    excess_share: float
    p_value: float


@dataclass(frozen=True, slots=True)
class StragglerVerdict:
    """Ranks slower beyond noise: ``stragglers``, and ``unresolved`` ones whose excess the host's CPU contention
    (``cpu_wait_share``, the largest of any rank; None unsampled) can explain (module docstring)."""

    stragglers: tuple[Straggler, ...]
    unresolved: tuple[Straggler, ...] = ()
    cpu_wait_share: float | None = None


@dataclass(frozen=True, slots=True)
class RankAnalysis:
    """The per-rank report of one run. ``window``: (first, last) step index analysed, inclusive."""

    world_size: int
    window: tuple[int, int] | None
    ranks: tuple[RankTimes, ...]
    pop: PopMetrics | None
    pop_note: str | None
    """Why ``pop`` is None (one rank, no communication measured, no common steps)."""
    stragglers: tuple[Straggler, ...]
    balanced: bool | None
    """No straggler and load balance >= BALANCED_LOAD_BALANCE; None when it cannot be told (no POP metrics, or
    an unresolved rank)."""
    comm_split: CommSplit | None
    trace_split: CommSplit | None = None
    """The same split from communication kernels of the profiler window's traces, where there are any."""
    trace_ranks: tuple[TraceRank, ...] = ()
    trace_pop: PopMetrics | None = None
    """POP metrics of the traced window on the GPU: useful = computation kernel time, runtime = the longest
    GPU window of any rank (trace clocks are per rank, so windows are compared by length)."""
    incomplete_ranks: tuple[int, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)
    unresolved: tuple[Straggler, ...] = ()
    """Ranks slower beyond noise by no more than the host's CPU contention explains: neither straggler nor not."""
    cpu_wait_share: float | None = None
    """The largest share of the window any rank's main thread waited for a CPU; None unsampled."""

    def to_dict(self) -> dict[str, Any]:
        from stepscope.analyze.run.summary import _clean

        d = _clean(asdict(self))
        for r, rt in zip(d["ranks"], self.ranks, strict=True):
            r["comm_share"] = rt.comm_share
        return {"schema": RANKS_SCHEMA, **d}


def _train(rank: RankData) -> Any:
    s = rank.steps
    return s.take(s["phase"] == int(Phase.TRAIN))


def run_warmup(data: RunData, warmup: int | None) -> int | None:
    """The warm-up override in force: the caller's, else the run's ``--warmup-steps``, else None (automatic)."""
    if warmup is not None:
        return warmup
    opt = data.run.options.get("warmup_steps")
    return int(opt) if isinstance(opt, int) else None


def step_window(data: RunData, warmup: int | None) -> tuple[int, int] | None:
    """(first, last) training step index analysed: steps of every complete rank, warm-up excluded."""
    warmup = run_warmup(data, warmup)
    trains = [(_train(r), r.stream.complete) for r in data.ranks]
    trains = [(t, c) for t, c in trains if len(t)]
    if not trains:
        return None
    k = max(warmup_steps(t.duration_ns.astype("float64"), warmup) for t, _ in trains)
    full = [t for t, c in trains if c] or [t for t, _ in trains]
    last = min(int(t["index"].max()) for t in full)
    first = min(int(t["index"].min()) for t in full) + k
    if first > last:
        first = min(int(t["index"].min()) for t in full)
    return (first, last) if first <= last else None


def _per_step(rank: RankData, window: tuple[int, int], comm_measured: bool) -> dict[str, np.ndarray]:
    t = _train(rank)
    idx = t["index"]
    t = t.take((idx >= window[0]) & (idx <= window[1]))
    dur = t.duration_ns.astype("float64")
    comm = np.nan_to_num(t["comm_ns"], nan=0.0) if comm_measured else np.zeros(len(t))
    wait = t["data_wait_ns"]
    return {"dur": dur, "comm": comm, "wait": np.nan_to_num(wait, nan=0.0), "wait_measured": np.isfinite(wait),
            "useful": np.clip(dur - comm, 0, None), "samples": t["samples"], "start": t["start_ns"],
            "end": t["end_ns"]}


def _comm_measured(data: RunData) -> bool:
    if data.run.options.get("comm_timing") is False:
        return False
    return any(len(r.comm) or np.isfinite(r.steps["comm_ns"]).any() for r in data.ranks)


def _rank_times(rank: RankData, v: dict[str, np.ndarray], comm_measured: bool,
                split: CommSplit | None) -> RankTimes:
    n = len(v["dur"])
    s = rank.stream

    def mean(a: np.ndarray) -> float:
        return float(a.mean()) if n else float("nan")

    from stepscope.analyze.diff.contention import rank_contention  # loads analyze.diff: not at start-up

    rs = split.rank(s.rank) if split is not None else None
    cpu_wait = rank_contention(rank, (int(v["start"].min()), int(v["end"].max()))).wait_share if n else None
    wall = float(v["dur"].sum())
    samples = v["samples"]
    sps = float(np.nansum(samples) / (wall / 1e9)) if n and wall > 0 and np.isfinite(samples).any() else None
    return RankTimes(
        rank=s.rank, role=s.role, host=s.host, complete=s.complete, steps=n, step_ns=mean(v["dur"]),
        step_median_ns=float(np.median(v["dur"])) if n else float("nan"),
        useful_ns=mean(v["useful"]), compute_ns=mean(np.clip(v["useful"] - v["wait"], 0, None)),
        comm_ns=mean(v["comm"]) if comm_measured else None,
        data_wait_ns=mean(v["wait"]) if n and v["wait_measured"].any() else None,
        transfer_ns=rs.transfer_ns / n if rs is not None and n and rs.time_ns > 0 else None,
        sync_ns=rs.sync_ns / n if rs is not None and n and rs.time_ns > 0 else None,
        samples_per_s=sps, cpu_wait_share=cpu_wait)


def pop_metrics(useful_ns: list[float], step_ns: list[float]) -> PopMetrics | None:
    """POP metrics from each rank's mean useful time and mean step time per step (ns)."""
    u = np.asarray(useful_ns, dtype=np.float64)
    t = np.asarray(step_ns, dtype=np.float64)
    ok = np.isfinite(u) & np.isfinite(t)
    u, t = u[ok], t[ok]
    if not u.size or u.max() <= 0 or t.max() <= 0:
        return None
    runtime = float(t.max())
    lb = float(u.mean() / u.max())
    ce = float(min(u.max() / runtime, 1.0))
    return PopMetrics(load_balance=lb, communication_efficiency=ce, parallel_efficiency=lb * ce,
                      runtime_ns=runtime, mean_useful_ns=float(u.mean()), max_useful_ns=float(u.max()))


def find_stragglers(useful: dict[int, np.ndarray], median_step_ns: float,
                    cpu_wait: dict[int, float | None] | None = None) -> StragglerVerdict:
    """Ranks whose per-step useful time exceeds the others' beyond noise, and beyond what the host's CPU
    contention explains (``cpu_wait``: each rank's share of the window waiting for a CPU; module docstring)."""
    out = []
    ranks = [r for r, v in useful.items() if len(v)]
    waits = [w for r, w in (cpu_wait or {}).items() if r in ranks and w is not None]
    q = max(waits) if waits else None
    if len(ranks) < 2 or not median_step_ns > 0:
        return StragglerVerdict((), (), q)
    medians = {r: float(np.median(useful[r])) for r in ranks}
    for r in ranks:
        others = [o for o in ranks if o != r]
        excess = medians[r] - float(np.median([medians[o] for o in others]))
        if excess <= STRAGGLER_MIN_SHARE * median_step_ns:
            continue
        p = mann_whitney_u(useful[r], np.concatenate([useful[o] for o in others]))
        if p < STRAGGLER_ALPHA:
            out.append(Straggler(rank=r, excess_ns=excess, excess_share=excess / median_step_ns, p_value=p))
    out.sort(key=lambda s: -s.excess_ns)
    limit = CONTENTION_FACTOR * q if q is not None else -1.0  # unsampled: nothing explained by contention
    return StragglerVerdict(tuple(s for s in out if s.excess_share > limit),
                            tuple(s for s in out if s.excess_share <= limit), q)


def analyze_ranks(data: RunData, *, warmup: int | None = None, traces: dict[int, Any] | None = None) -> RankAnalysis:
    """Per-rank times, POP metrics, stragglers and the transfer / sync split of one stored run.

    warmup: steps to exclude (None: the run's option, else automatic). traces: rank -> EventTable of the
    profiler window, for the kernel-based split (optional; the CLI loads them).
    """
    ranks = sorted(data.ranks, key=lambda r: r.stream.rank)
    running = data.run.status == RunStatus.RUNNING  # a running run's ranks have no end record yet: not killed
    incomplete = () if running else tuple(r.stream.rank for r in ranks if not r.stream.complete)
    warnings = [f"rank {r} ended without its end record (died or was killed): analysed up to its last flush"
                for r in incomplete]
    window = step_window(data, warmup)
    measured = _comm_measured(data)
    trace_split = _trace_split(traces)
    trace_ranks = _trace_ranks(traces)
    trace_pop = (pop_metrics([t.compute_ns for t in trace_ranks], [t.window_ns for t in trace_ranks])
                 if len(trace_ranks) >= 2 else None)
    if window is None:
        return RankAnalysis(world_size=len(ranks), window=None, ranks=(), pop=None, pop_note="no training step "
                            "was recorded", stragglers=(), balanced=None, comm_split=None, trace_split=trace_split,
                            trace_ranks=trace_ranks, trace_pop=trace_pop, incomplete_ranks=incomplete,
                            warnings=tuple(warnings))
    per = {r.stream.rank: _per_step(r, window, measured) for r in ranks}
    split = split_calls([(r.stream.rank, r.comm) for r in ranks], steps=window) if measured else None
    times = tuple(_rank_times(r, per[r.stream.rank], measured, split) for r in ranks)
    present = [t for t in times if t.steps]
    for t in times:
        if not t.steps:
            warnings.append(f"rank {t.rank} has no step in the window {window[0]}-{window[1]}")
    pop, note = None, None
    if len(present) < 2:
        note = "one rank: nothing to balance"
    elif not measured:
        note = ("no communication time was measured (--no-comm-timing, or communication outside "
                "torch.distributed's Python API)")
    else:
        pop = pop_metrics([t.useful_ns for t in present], [t.step_ns for t in present])
    med_step = float(np.median(np.concatenate([per[t.rank]["dur"] for t in present]))) if present else float("nan")
    found = (find_stragglers({t.rank: per[t.rank]["useful"] for t in present}, med_step,
                             {t.rank: t.cpu_wait_share for t in present}) if measured else StragglerVerdict(()))
    balanced = (None if pop is None or found.unresolved
                else not found.stragglers and pop.load_balance >= BALANCED_LOAD_BALANCE)
    return RankAnalysis(world_size=len(ranks), window=window, ranks=times, pop=pop, pop_note=note,
                        stragglers=found.stragglers, balanced=balanced, comm_split=split, trace_split=trace_split,
                        trace_ranks=trace_ranks, trace_pop=trace_pop, incomplete_ranks=incomplete,
                        warnings=tuple(warnings), unresolved=found.unresolved, cpu_wait_share=found.cpu_wait_share)


def _trace_split(traces: dict[int, Any] | None) -> CommSplit | None:
    if not traces or len(traces) < 2:
        return None
    from stepscope.analyze.ranks.commsplit import split_kernels, trace_comm_kernels

    rows = []
    for rank, table in sorted(traces.items()):
        names, durs = trace_comm_kernels(table)
        rows.append((rank, names, durs))
    return split_kernels(rows)


def _trace_ranks(traces: dict[int, Any] | None) -> tuple[TraceRank, ...]:
    if not traces:
        return ()
    from stepscope.analyze.trace.gpuview import gpu_view
    from stepscope.analyze.trace.temporal import temporal_breakdown

    out = []
    for rank, table in sorted(traces.items()):
        tb = temporal_breakdown(gpu_view(table))
        if tb is not None:
            out.append(TraceRank(rank=rank, window_ns=tb.window_ns, compute_ns=tb.compute_ns,
                                 communication_ns=tb.communication_ns, idle_ns=tb.idle_ns))
    return tuple(out)
