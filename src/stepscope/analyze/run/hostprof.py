"""Host profile from sampled Python stacks (`stepscope run --sample-stacks HZ`, see collect/system/stacks.py).

A function's *self* samples are those where it was the innermost Python frame (the CPU was in it, or in
C code it called); its *total* samples are those where it was anywhere on the stack (counted once per
sample, however deep the recursion). Time estimates are samples times the effective sample period
(sampled wall time / samples taken), so they are wall-clock seconds of the sampled thread.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from stepscope.model.tables import RankData, RunData

NO_REGION = "(no region)"


@dataclass(frozen=True, slots=True)
class FunctionCost:
    """One function (``qualname (file:line)``) within a set of samples."""

    function: str
    self_samples: int
    """Samples with this function innermost."""
    total_samples: int
    """Samples with this function anywhere on the stack."""
    self_share: float
    """self_samples / samples of the set (0..1)."""
    total_share: float
    self_s: float
    """self_samples x effective sample period, seconds."""
    total_s: float


@dataclass(frozen=True, slots=True)
class GroupProfile:
    """Samples taken while a region (innermost stepscope region path) and a step phase were active."""

    region: str
    """Region path, or NO_REGION."""
    phase: str
    """data_wait, forward, backward, optimizer, other; loader_worker for DataLoader worker processes."""
    samples: int
    share: float
    """Of the process's samples."""
    time_s: float
    functions: tuple[FunctionCost, ...]
    """Hottest by self samples, at most ``top``."""


@dataclass(frozen=True, slots=True)
class ProcessProfile:
    """One sampled process of one rank: its main thread (``main``) or its DataLoader workers together
    (``worker``)."""

    rank: int
    process: str
    samples: int
    dropped: int
    """Samples lost to the bounded aggregation (too many distinct stacks) or to errors."""
    hz: float
    """Requested rate."""
    sampled_s: float
    """Wall time covered by the sampler (sum over its records; for workers, summed over workers)."""
    period_s: float | None
    """Effective seconds per sample: sampled_s / samples."""
    phases: tuple[tuple[str, int, float], ...]
    """(phase, samples, share), most samples first."""
    functions: tuple[FunctionCost, ...]
    """Hottest over every sample of the process, by self samples."""
    groups: tuple[GroupProfile, ...]
    """Per (region, phase), most samples first."""


@dataclass(frozen=True, slots=True)
class HostProfile:
    run_id: str
    processes: tuple[ProcessProfile, ...]
    notes: tuple[str, ...]
    """Why there is nothing to show, or what was not sampled."""

    def to_dict(self) -> dict[str, Any]:
        return {"schema": "stepscope.host/1", **asdict(self)}


Row = tuple[str, str, str, int]
"""(region, phase, collapsed stack root first, samples)."""


def stack_rows(rank: RankData, process: str = "main") -> list[Row]:
    """Every aggregated row of one rank's ``stacks`` records of ``process`` (unmerged)."""
    out: list[Row] = []
    for rec in rank.extra.get("stacks", []):
        if rec.get("process", "main") == process:
            out.extend((str(r[0]), str(r[1]), str(r[2]), int(r[3])) for r in rec.get("rows", []))
    return out


def collapsed(rows: Iterable[Row], *, with_context: bool = False) -> dict[str, int]:
    """Collapsed stacks (``root;...;leaf`` -> samples), merged; with_context puts the region and phase
    first as two root frames (``region:train/fwd;phase:forward;...``)."""
    out: Counter[str] = Counter()
    for region, phase, stack, n in rows:
        key = f"region:{region or NO_REGION};phase:{phase};{stack}" if with_context else stack
        out[key] += n
    return dict(out)


def function_costs(rows: Iterable[tuple[str, int]], *, period_s: float, top: int) -> tuple[FunctionCost, ...]:
    """Hottest functions of (stack, samples) pairs by self samples, then total."""
    self_c: Counter[str] = Counter()
    total_c: Counter[str] = Counter()
    n_all = 0
    for stack, n in rows:
        frames = stack.split(";")
        n_all += n
        self_c[frames[-1]] += n
        for f in set(frames):
            total_c[f] += n
    ranked = sorted(total_c, key=lambda f: (-self_c[f], -total_c[f], f))[:top]
    d = max(n_all, 1)
    return tuple(FunctionCost(f, self_c[f], total_c[f], self_c[f] / d, total_c[f] / d, self_c[f] * period_s,
                              total_c[f] * period_s) for f in ranked)


def process_profile(rank: RankData, process: str, *, top: int = 10) -> ProcessProfile | None:
    recs = [r for r in rank.extra.get("stacks", []) if r.get("process", "main") == process]
    if not recs:
        return None
    rows = stack_rows(rank, process)
    samples = sum(int(r.get("samples", 0)) for r in recs)
    dropped = sum(int(r.get("dropped", 0)) for r in recs)
    sampled_s = sum(max(0, int(r["t1_ns"]) - int(r["t0_ns"])) for r in recs) / 1e9
    period = sampled_s / samples if samples else None
    p = period or 0.0
    by_group: dict[tuple[str, str], list[tuple[str, int]]] = defaultdict(list)
    phases: Counter[str] = Counter()
    for region, phase, stack, n in rows:
        by_group[(region or NO_REGION, phase)].append((stack, n))
        phases[phase] += n
    d = max(samples, 1)
    sizes = {key: sum(n for _, n in g) for key, g in by_group.items()}
    groups = sorted((GroupProfile(region, phase, sizes[region, phase], sizes[region, phase] / d,
                                  sizes[region, phase] * p, function_costs(g, period_s=p, top=top))
                     for (region, phase), g in by_group.items()), key=lambda g: (-g.samples, g.region, g.phase))
    return ProcessProfile(
        rank=rank.stream.rank, process=process, samples=samples, dropped=dropped,
        hz=float(recs[0].get("hz", 0.0)), sampled_s=sampled_s, period_s=period,
        phases=tuple((ph, n, n / d) for ph, n in phases.most_common()),
        functions=function_costs(((s, n) for _, _, s, n in rows), period_s=p, top=top), groups=tuple(groups))


def host_profile(data: RunData, *, top: int = 10) -> HostProfile:
    """Hottest functions per rank and process, overall and per (region, phase)."""
    procs: list[ProcessProfile] = []
    notes: list[str] = []
    for rank in data.ranks:
        for process in ("main", "worker"):
            prof = process_profile(rank, process, top=top)
            if prof is not None:
                procs.append(prof)
        notes += [n for n in rank.notes if "stack" in n and n not in notes]
    if not procs:
        hz = data.run.options.get("sample_stacks_hz") or 0
        notes.append("no stack samples in this run — record one with `stepscope run --sample-stacks 100 -- ...`"
                     if not hz else f"stacks were requested at {hz:g} Hz but no sample was stored")
    return HostProfile(run_id=data.run.id, processes=tuple(procs), notes=tuple(notes))


STACK_COLUMNS = ("rank", "process", "region", "phase", "stack", "samples")


def stack_table(data: RunData) -> dict[str, list[Any]]:
    """Every sampled stack as a table (columns STACK_COLUMNS), merged over the run's records."""
    agg: Counter[tuple[int, str, str, str, str]] = Counter()
    for rank in data.ranks:
        for process in ("main", "worker"):
            for region, phase, stack, n in stack_rows(rank, process):
                agg[(rank.stream.rank, process, region, phase, stack)] += n
    cols: dict[str, list[Any]] = {c: [] for c in STACK_COLUMNS}
    for key, n in sorted(agg.items()):
        for c, v in zip(STACK_COLUMNS, (*key, n), strict=True):
            cols[c].append(v)
    return cols
