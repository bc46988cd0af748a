"""The two inputs of a diff and the per-step samples taken from them (warm-up excluded).

Loading (store, run directories, trace folders) is the caller's business: a :class:`DiffSide` holds what
was loaded. A side is a stored run (``data``), a trace set (``traces``), or a run with its profiled window
analysed (both).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from stepscope.analyze.run.steps import PHASES, step_stats
from stepscope.analyze.run.summary import profiled_steps
from stepscope.model.tables import Phase, RankData, RunData


@dataclass(frozen=True, slots=True)
class DiffSide:
    """One side of a comparison.

    ``label``: how reports name it (run id and name, or the trace folder). ``data``: the stored run, None
    for a bare trace set. ``traces``: the trace engine's analysis of the profiled window (None when the
    run has no window, or when the caller did not analyse it). ``trace_note``: why there is no trace
    analysis, shown instead of the module / operator / kernel parts. ``warmup``: steps to exclude (None:
    the run's option, else automatic, as in ``stepscope show``). ``repeats``: further runs of the same side
    (repeats of the command: a benchmark's runs, or several runs named), in run order; the verdicts test one
    value per run over ``runs`` = (data, *repeats).
    """

    label: str
    data: RunData | None = None
    traces: Any | None = None
    trace_note: str | None = None
    warmup: int | None = None
    repeats: tuple[RunData, ...] = ()

    @property
    def runs(self) -> tuple[RunData, ...]:
        return () if self.data is None else (self.data, *self.repeats)

    @property
    def kind(self) -> str:
        if self.data is None:
            return "traces"
        return "run+traces" if self.traces is not None else "run"

    @property
    def run_id(self) -> str | None:
        return None if self.data is None else self.data.run.id

    def effective_warmup(self) -> int | None:
        if self.warmup is not None or self.data is None:
            return self.warmup
        opt = self.data.run.options.get("warmup_steps")
        return int(opt) if isinstance(opt, int) else None


@dataclass(frozen=True, slots=True)
class StepSample:
    """Per-step values of the measured training steps of one rank (warm-up excluded), in step order.

    ``index``: step indices; ``duration_ns``: CPU wall-clock step time; ``phases``: phase name -> per-step
    ns (only phases measured on this rank; ``other`` = step time not in a measured phase, clipped at 0);
    ``samples``/``tokens``: per step (NaN: not known); ``device_ns``: GPU step time by CUDA events (NaN
    when not measured); ``thread_cpu_ns`` / ``process_cpu_ns``: CPU time of the stepping thread / of the whole
    process per step (NaN: not measured, runs recorded before the CPU clocks). ``warmup``: how many leading steps
    were excluded (traced steps of a profiled window
    are left out too); ``all_duration_ns``: every training step, warm-up and traced steps included (for
    trend plots).
    """

    rank: int
    index: np.ndarray
    duration_ns: np.ndarray
    phases: dict[str, np.ndarray]
    samples: np.ndarray
    tokens: np.ndarray
    device_ns: np.ndarray
    warmup: int
    all_duration_ns: np.ndarray
    all_index: np.ndarray
    thread_cpu_ns: np.ndarray
    process_cpu_ns: np.ndarray

    def __len__(self) -> int:
        return len(self.duration_ns)


def step_sample(rank: RankData, *, warmup: int | None = None) -> StepSample:
    """The measured steps of one rank, with the same rules as the run summary: warm-up excluded, and the
    profiled window's traced steps (slowed by tracing) left out."""
    train = rank.steps.take(rank.steps["phase"] == int(Phase.TRAIN))
    exclude = profiled_steps(rank)
    k = step_stats(rank.steps, warmup=warmup, exclude=exclude).warmup_steps
    keep = np.arange(len(train)) >= k
    for lo, hi in exclude:
        keep &= ~((train["index"] >= lo) & (train["index"] <= hi))
    m = train.take(keep)
    dur = m.duration_ns.astype("float64")
    phases: dict[str, np.ndarray] = {}
    measured = np.zeros(len(m))
    for ph in PHASES:
        col = m[f"{ph}_ns"]
        if len(col) and np.isfinite(col).any():
            vals = np.nan_to_num(col, nan=0.0)
            phases[ph] = vals
            measured += vals
    if len(m):
        phases["other"] = np.clip(dur - measured, 0, None)
    return StepSample(rank=rank.stream.rank, index=m["index"].copy(), duration_ns=dur, phases=phases,
                      samples=m["samples"].copy(), tokens=m["tokens"].copy(), device_ns=m["device_ns"].copy(),
                      warmup=k, all_duration_ns=train.duration_ns.astype("float64"), all_index=train["index"].copy(),
                      thread_cpu_ns=m["thread_cpu_ns"].copy(), process_cpu_ns=m["process_cpu_ns"].copy())


def region_per_step(rank: RankData, sample: StepSample) -> dict[str, np.ndarray]:
    """Per region path: summed time (ns) of its instances that started in each measured step (0 if none)."""
    regions = rank.regions
    out: dict[str, np.ndarray] = {}
    if not len(regions) or not len(sample):
        return out
    pos = {int(s): i for i, s in enumerate(sample.index.tolist())}
    steps = regions["step"]
    dur = regions["duration_ns"].astype("float64")
    codes = regions["path_code"]
    where = np.asarray([pos.get(int(s), -1) for s in steps.tolist()], dtype=np.int64)
    inside = where >= 0
    for code, path in enumerate(regions.names):
        mask = (codes == code) & inside
        if not (codes == code).any():
            continue
        acc = np.zeros(len(sample))
        np.add.at(acc, where[mask], dur[mask])
        out[path] = acc
    return out


def global_rate_per_step(ranks: list[StepSample], column: str) -> np.ndarray:
    """Global throughput per step index measured on every rank: samples (or tokens) summed over ranks,
    divided by the mean step time over ranks, per second. NaN where the count is unknown."""
    if not ranks:
        return np.zeros(0)
    common = set(ranks[0].index.tolist())
    for r in ranks[1:]:
        common &= set(r.index.tolist())
    idx = np.asarray(sorted(common), dtype=np.int64)
    if not idx.size:
        return np.zeros(0)
    counts = np.zeros(idx.size)
    durs = np.zeros(idx.size)
    for r in ranks:
        sel = np.searchsorted(r.index, idx)
        counts += getattr(r, column)[sel]
        durs += r.duration_ns[sel]
    mean_dur = durs / len(ranks)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(mean_dur > 0, counts / (mean_dur / 1e9), np.nan)
