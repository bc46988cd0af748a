"""Data-pipeline benchmark results (`stepscope data-bench`), with the CosmoFlow data-benchmark definitions.

Per rank and epoch: ``samples / epoch time`` (local throughput), where the epoch time runs from asking
the loader for an iterator (this starts worker processes) to the last batch received. Per epoch over
ranks: *local* throughput is the mean of the ranks' local throughputs; *total* (global) throughput is
all ranks' samples / (latest end - earliest start). Ranks meet at a barrier before each epoch, so the
global time holds no start-up skew. *First* epoch (cold: file system, worker start-up) and *later*
epochs (warm: page cache, persistent workers) are reported apart, as means over their epochs.

Ideal (weak scaling, as in the CosmoFlow notebook): local ideal = the per-rank throughput of a
single-rank benchmark of the same script; total ideal = ranks x local ideal; efficiency = measured /
ideal. A single-rank run is its own reference (efficiency 1).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from enum import Enum, StrEnum
from typing import Any

import numpy as np

from stepscope.analyze.stats import distribution
from stepscope.model.tables import RunData

INPUT_BOUND_SHARE = 0.8
"""Training is called input-bound when it consumed at least this share of what the pipeline delivers."""
NEAR_BEST = 0.95
"""A worker count within this share of the best throughput is named as the economical choice."""


@dataclass(frozen=True, slots=True)
class RankEpoch:
    """One rank's pass over one loader."""

    rank: int
    epoch: int
    batches: int
    samples: float | None
    """Samples in the batches (first dimension of the first tensor); None when no batch had a tensor."""
    time_ns: int
    """From requesting the iterator to receiving the last batch."""
    first_batch_ns: int | None
    """Time to the first batch (iterator creation and worker start-up included)."""
    batch_p50_ns: float | None
    """Median time per batch after the first."""
    batch_p95_ns: float | None
    samples_per_s: float | None
    batches_per_s: float | None
    stopped: str
    """'end' (the loader was exhausted), 'max_batches' or 'time' (a limit cut the epoch)."""


@dataclass(frozen=True, slots=True)
class EpochThroughput:
    """One epoch over every rank."""

    epoch: int
    ranks: int
    samples: float | None
    batches: int
    global_time_ns: int
    """Earliest start to latest end over ranks."""
    local_samples_per_s: float | None
    """Mean over ranks of rank samples / rank epoch time."""
    local_samples_per_s_std: float | None
    total_samples_per_s: float | None
    """All ranks' samples / global time."""
    total_batches_per_s: float | None
    first_batch_ns: int | None
    """Slowest rank's time to first batch."""


@dataclass(frozen=True, slots=True)
class PhaseThroughput:
    """Mean over the epochs of one phase ('first' or 'later'), with ideal and efficiency."""

    phase: str
    epochs: int
    local_samples_per_s: float | None
    total_samples_per_s: float | None
    total_batches_per_s: float | None
    local_ideal: float | None
    """Per-rank throughput of the single-rank reference; None when none is known."""
    total_ideal: float | None
    local_efficiency: float | None
    total_efficiency: float | None


@dataclass(frozen=True, slots=True)
class LoaderBench:
    loader_index: int
    """0: the loader the script iterated first; others in creation order."""
    config: dict[str, Any]
    """num_workers, batch_size, pin_memory, prefetch_factor, persistent_workers, drop_last, dataset, ..."""
    workers_override: bool
    streaming: bool
    """The loader has no length (an IterableDataset): epochs end only at a limit."""
    limit: str | None
    """The limit that cut epochs, stated ('--max-batches 50', '--time 30 s'), or None."""
    per_rank: tuple[RankEpoch, ...]
    epochs: tuple[EpochThroughput, ...]
    first: PhaseThroughput
    later: PhaseThroughput | None


class InputVerdict(StrEnum):
    INPUT_BOUND = "input_bound"
    NOT_INPUT_BOUND = "not_input_bound"


@dataclass(frozen=True, slots=True)
class TrainingComparison:
    """What an ordinary run of the same script consumed, against what the pipeline delivers."""

    training_run: str
    training_samples_per_s: float
    pipeline_samples_per_s: float
    """Total throughput of the first loader: later epochs where measured, else the first."""
    share: float
    """training / pipeline."""
    verdict: InputVerdict


@dataclass(frozen=True, slots=True)
class DataBenchResult:
    run_id: str
    world_size: int
    loaders: tuple[LoaderBench, ...]
    comparison: TrainingComparison | None
    notes: tuple[str, ...]

    @property
    def headline_samples_per_s(self) -> float | None:
        """Total throughput of the first loader, later epochs where measured, else the first."""
        if not self.loaders:
            return None
        lb = self.loaders[0]
        return (lb.later or lb.first).total_samples_per_s

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = _clean({"schema": "stepscope.databench/1", **asdict(self)})
        return out


def _clean(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, Enum):
        return obj.value
    return obj


def _rate(n: float | None, ns: int) -> float | None:
    return None if n is None or ns <= 0 else n / (ns / 1e9)


def rank_epoch(rank: int, rec: dict[str, Any]) -> RankEpoch:
    b = np.asarray(rec.get("batch_ns", []), dtype=float)
    s = np.asarray([np.nan if v is None else v for v in rec.get("samples", [])], dtype=float)
    samples = float(np.nansum(s)) if np.isfinite(s).any() else None
    time_ns = int(rec["end_ns"]) - int(rec["start_ns"])
    rest = distribution(b[1:])
    return RankEpoch(rank=rank, epoch=int(rec["epoch"]), batches=len(b), samples=samples, time_ns=time_ns,
                     first_batch_ns=int(b[0]) if len(b) else None,
                     batch_p50_ns=rest.p50 if rest else None, batch_p95_ns=rest.p95 if rest else None,
                     samples_per_s=_rate(samples, time_ns), batches_per_s=_rate(float(len(b)), time_ns),
                     stopped=str(rec.get("stopped", "end")))


def epoch_throughput(epoch: int, recs: list[tuple[RankEpoch, dict[str, Any]]]) -> EpochThroughput:
    start = min(int(r["start_ns"]) for _, r in recs)
    end = max(int(r["end_ns"]) for _, r in recs)
    samples = [e.samples for e, _ in recs if e.samples is not None]
    local = [e.samples_per_s for e, _ in recs if e.samples_per_s is not None]
    firsts = [e.first_batch_ns for e, _ in recs if e.first_batch_ns is not None]
    total = float(sum(samples)) if samples else None
    batches = sum(e.batches for e, _ in recs)
    return EpochThroughput(epoch=epoch, ranks=len(recs), samples=total, batches=batches, global_time_ns=end - start,
                           local_samples_per_s=float(np.mean(local)) if local else None,
                           local_samples_per_s_std=float(np.std(local)) if local else None,
                           total_samples_per_s=_rate(total, end - start),
                           total_batches_per_s=_rate(float(batches), end - start),
                           first_batch_ns=max(firsts) if firsts else None)


def _mean(vals: list[float | None]) -> float | None:
    got = [v for v in vals if v is not None]
    return float(np.mean(got)) if got else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def phase_throughput(phase: str, epochs: list[EpochThroughput], ranks: int,
                     reference: float | None) -> PhaseThroughput:
    local = _mean([e.local_samples_per_s for e in epochs])
    total = _mean([e.total_samples_per_s for e in epochs])
    ideal = local if ranks == 1 and reference is None else reference
    total_ideal = None if ideal is None else ideal * ranks
    return PhaseThroughput(phase=phase, epochs=len(epochs), local_samples_per_s=local, total_samples_per_s=total,
                           total_batches_per_s=_mean([e.total_batches_per_s for e in epochs]), local_ideal=ideal,
                           total_ideal=total_ideal, local_efficiency=_ratio(local, ideal),
                           total_efficiency=_ratio(total, total_ideal))


def loader_bench(data: RunData, index: int, *, reference: tuple[float | None, float | None] = (None, None)
                 ) -> LoaderBench | None:
    per_rank: list[tuple[RankEpoch, dict[str, Any]]] = []
    head: dict[str, Any] | None = None
    for r in data.ranks:
        for rec in r.extra.get("databench", []):
            if int(rec.get("loader_index", -1)) == index:
                head = head or rec
                per_rank += [(rank_epoch(r.stream.rank, e), e) for e in rec.get("epochs", [])]
    if head is None:
        return None
    nranks = len({e.rank for e, _ in per_rank}) or 1
    epochs = [epoch_throughput(ep, [x for x in per_rank if x[0].epoch == ep])
              for ep in sorted({e.epoch for e, _ in per_rank})]
    stops = {e.stopped for e, _ in per_rank} - {"end"}
    limit = None
    if "max_batches" in stops:
        limit = f"--max-batches {head.get('max_batches')}"
    elif "time" in stops:
        limit = f"--time {head.get('time_limit_s'):g} s"
    return LoaderBench(
        loader_index=index, config=dict(head.get("config") or {}), workers_override=bool(head.get("workers_override")),
        streaming=bool(head.get("streaming")), limit=limit, per_rank=tuple(e for e, _ in per_rank),
        epochs=tuple(epochs), first=phase_throughput("first", epochs[:1], nranks, reference[0]),
        later=phase_throughput("later", epochs[1:], nranks, reference[1]) if len(epochs) > 1 else None)


def data_bench(data: RunData, *, reference: tuple[float | None, float | None] = (None, None),
               training: tuple[str, float] | None = None) -> DataBenchResult:
    """The benchmark of a `stepscope data-bench` run.

    Args:
        reference: per-rank (first-epoch, later-epoch) samples/s of a single-rank benchmark of the same
            script, for ideal and efficiency of a multi-rank run.
        training: (run id, samples/s) of an ordinary training run of the same script, to compare with.
    """
    indices = sorted({int(rec.get("loader_index", 0)) for r in data.ranks for rec in r.extra.get("databench", [])})
    loaders = [lb for i in indices if (lb := loader_bench(data, i, reference=reference)) is not None]
    notes = [f"loader {r.get('loader_index')} failed: {r.get('error')}" for rk in data.ranks
             for r in rk.extra.get("databench_error", [])]
    for lb in loaders:
        if lb.limit:
            why = "it has no length (streaming)" if lb.streaming else "a limit was given"
            notes.append(f"loader {lb.loader_index}: epochs stopped after {lb.limit} ({why})")
    if not loaders:
        notes.append("the script never iterated a DataLoader: nothing was measured")
    comparison = None
    result = DataBenchResult(data.run.id, max(1, len({r.stream.rank for r in data.ranks})), tuple(loaders), None,
                             tuple(notes))
    pipe = result.headline_samples_per_s
    if training is not None and pipe:
        share = training[1] / pipe
        verdict = InputVerdict.INPUT_BOUND if share >= INPUT_BOUND_SHARE else InputVerdict.NOT_INPUT_BOUND
        comparison = TrainingComparison(training[0], training[1], pipe, share, verdict)
    return DataBenchResult(result.run_id, result.world_size, result.loaders, comparison, result.notes)


def bench_metrics(result: DataBenchResult) -> dict[str, float]:
    """Flat metrics of the first loader for the SQL index (names ``databench.*``, seconds and samples/s)."""
    out: dict[str, float] = {}
    if not result.loaders:
        return out
    lb = result.loaders[0]
    for name, v in (("samples_per_s", result.headline_samples_per_s),
                    ("first_local_samples_per_s", lb.first.local_samples_per_s),
                    ("first_total_samples_per_s", lb.first.total_samples_per_s),
                    ("later_local_samples_per_s", lb.later.local_samples_per_s if lb.later else None),
                    ("later_total_samples_per_s", lb.later.total_samples_per_s if lb.later else None),
                    ("time_to_first_batch_s", lb.epochs[0].first_batch_ns / 1e9
                     if lb.epochs and lb.epochs[0].first_batch_ns is not None else None),
                    ("workers", lb.config.get("num_workers")), ("ranks", float(result.world_size))):
        if isinstance(v, (int, float)) and math.isfinite(v):
            out[f"databench.{name}"] = float(v)
    return out


@dataclass(frozen=True, slots=True)
class WorkerSweep:
    """A --workers sweep: one benchmark per worker count, compared on the first loader's headline."""

    workers: tuple[int, ...]
    samples_per_s: tuple[float | None, ...]
    run_ids: tuple[str, ...]
    best_workers: int | None
    economical_workers: int | None
    """The fewest workers within NEAR_BEST of the best throughput."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = _clean({"schema": "stepscope.databench_sweep/1", **asdict(self)})
        return out


def worker_sweep(results: list[tuple[int, DataBenchResult]]) -> WorkerSweep:
    rates = [r.headline_samples_per_s for _, r in results]
    scored = [(v, w) for (w, _), v in zip(results, rates, strict=True) if v is not None]
    best = max(scored)[1] if scored else None
    top = max(v for v, _ in scored) if scored else None
    econ = min(w for v, w in scored if top is not None and v >= NEAR_BEST * top) if scored else None
    return WorkerSweep(workers=tuple(w for w, _ in results), samples_per_s=tuple(rates),
                       run_ids=tuple(r.run_id for _, r in results), best_workers=best, economical_workers=econ)
