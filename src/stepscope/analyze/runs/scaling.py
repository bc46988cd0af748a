"""Scaling over a group of runs at several world sizes: throughput, ideal lines, efficiency, weak/strong.

Definitions (as in the MLPerf HPC CosmoFlow scaling notebook; docs/distributed.md has them in full):

* Selection: ``all`` = every training step after warm-up; where every run has two or more epochs also
  ``first_epoch`` (epoch 0, warm-up included: cold caches are the point) and ``later_epochs`` (epochs 1+).
* For one window (a run's selection, or one later epoch of it): samples = all ranks' samples;
  total time = first step start to last step end over all ranks (wall clock); local time of a rank = the
  sum of its step times; local throughput = mean over ranks of (rank samples / local time); total
  throughput = samples / total time. comm share = summed comm time / summed step time over the ranks.
* Per world size: mean and sample std (ddof=1; 0 for one value) over the windows of its runs: one window
  per run, or one per later epoch for ``later_epochs``.
* Ideal, from the smallest world size n0: local ideal = its local throughput; total ideal = its total
  throughput * n / n0. Efficiency = measured / ideal (both weak and strong scaling). Time efficiency:
  weak t0 / t; strong (t0 * n0) / (t * n); speedup t0 / t.
* Mode: weak when samples per rank stay within 25% across sizes, strong when the total samples do;
  ``--mode`` overrides. Time to target: seconds from the first step's start to the first logged value of
  the metric at or past the target (<= when the metric starts above it, >= otherwise), rank 0 first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import PurePath
from typing import Any

import numpy as np

from stepscope.analyze.ranks.ranks import step_window
from stepscope.model.run import RunStatus
from stepscope.model.tables import Phase, RunData

SCALING_SCHEMA = "stepscope.scaling/1"
MODE_TOLERANCE = 0.25


@dataclass(frozen=True, slots=True)
class Window:
    """One measured window of one run (see the module docstring). Throughputs in samples/s, times in s."""

    run_id: str
    world_size: int
    selection: str
    samples: float
    total_time_s: float
    local_throughput: float | None
    total_throughput: float | None
    comm_share: float | None


@dataclass(frozen=True, slots=True)
class SizeRow:
    """One world size in one selection: statistics over its windows and the ideal / efficiency columns."""

    world_size: int
    runs: int
    windows: int
    samples: float
    total_time_mean_s: float
    total_time_std_s: float
    local_throughput_mean: float | None
    local_throughput_std: float | None
    total_throughput_mean: float | None
    total_throughput_std: float | None
    local_ideal: float | None
    total_ideal: float | None
    local_efficiency: float | None
    total_efficiency: float | None
    time_efficiency: float | None
    speedup: float | None
    comm_share: float | None
    time_to_target_mean_s: float | None = None
    time_to_target_std_s: float | None = None
    target_reached: int = 0


@dataclass(frozen=True, slots=True)
class ScalingTable:
    selection: str
    rows: tuple[SizeRow, ...]


@dataclass(frozen=True, slots=True)
class Target:
    metric: str
    value: float


@dataclass(frozen=True, slots=True)
class ScalingAnalysis:
    """The scaling report of a group of runs. ``mode``: 'weak' or 'strong'; ``mode_source``: 'given' or
    'inferred' (or 'default' when the samples fit neither). ``excluded``: run id -> why it was left out."""

    mode: str
    mode_source: str
    base_size: int
    sizes: tuple[int, ...]
    tables: tuple[ScalingTable, ...]
    windows: tuple[Window, ...]
    target: Target | None
    scripts: dict[str, list[str]]
    excluded: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def table(self, selection: str) -> ScalingTable | None:
        return next((t for t in self.tables if t.selection == selection), None)

    def to_dict(self) -> dict[str, Any]:
        from stepscope.analyze.run.summary import _clean

        return {"schema": SCALING_SCHEMA, **_clean(asdict(self))}


def script_of(command: Sequence[str]) -> str:
    """The script a run ran: the first ``*.py`` argument (or ``-m module``), else the executable."""
    for i, a in enumerate(command):
        if a.endswith(".py"):
            return PurePath(a).name
        if a == "-m" and i + 1 < len(command):
            return command[i + 1]
    return PurePath(command[0]).name if command else "?"


def _steps(data: RunData, selection: str, window: tuple[int, int] | None, epoch: int | None) -> list[Any]:
    out = []
    for r in data.ranks:
        s = r.steps.take(r.steps["phase"] == int(Phase.TRAIN))
        if selection == "all" and window is not None:
            s = s.take((s["index"] >= window[0]) & (s["index"] <= window[1]))
        elif epoch is not None:
            s = s.take(s["epoch"] == epoch)
        if len(s):
            out.append(s)
    return out


def measure_window(data: RunData, selection: str, *, window: tuple[int, int] | None = None,
                   epoch: int | None = None) -> Window | None:
    """The numbers of one window of one run (module docstring); None when it has no step."""
    parts = _steps(data, selection, window, epoch)
    if not parts:
        return None
    total_time = (max(int(s["end_ns"].max()) for s in parts) - min(int(s["start_ns"].min()) for s in parts)) / 1e9
    samples = [float(np.nansum(s["samples"])) if np.isfinite(s["samples"]).any() else math.nan for s in parts]
    local = [n / (s.duration_ns.sum() / 1e9) for n, s in zip(samples, parts, strict=True) if s.duration_ns.sum() > 0]
    total_samples = float(np.nansum(samples)) if any(math.isfinite(n) for n in samples) else math.nan
    step_sum = float(sum(s.duration_ns.sum() for s in parts))
    comm = float(sum(np.nansum(s["comm_ns"]) for s in parts))
    finite_local = [v for v in local if math.isfinite(v)]
    size = max((r.stream.world_size for r in data.ranks), default=data.run.world_size)
    ok = total_time > 0 and math.isfinite(total_samples)
    return Window(run_id=data.run.id, world_size=size, selection=selection,
                  samples=total_samples, total_time_s=total_time,
                  local_throughput=float(np.mean(finite_local)) if finite_local else None,
                  total_throughput=total_samples / total_time if ok else None,
                  comm_share=comm / step_sum if step_sum > 0 and data.run.options.get("comm_timing", True) else None)


def run_windows(data: RunData, *, warmup: int | None = None) -> list[Window]:
    """Every window of one run: ``all``, and ``first_epoch`` / ``later_epochs`` where it has 2+ epochs."""
    out = []
    w = measure_window(data, "all", window=step_window(data, warmup))
    if w is not None:
        out.append(w)
    epochs = sorted({int(e) for r in data.ranks for e in r.steps["epoch"].tolist() if e >= 0})
    if len(epochs) >= 2:
        for e in epochs:
            w = measure_window(data, "first_epoch" if e == epochs[0] else "later_epochs", epoch=e)
            if w is not None:
                out.append(w)
    return out


def time_to_target(data: RunData, target: Target) -> float | None:
    """Seconds from the first training step's start to the first value of the metric at or past target."""
    starts = [int(r.steps["start_ns"].min()) for r in data.ranks if len(r.steps)]
    if not starts:
        return None
    for r in sorted(data.ranks, key=lambda r: r.stream.rank):
        m = r.metrics
        mask = m.mask_of(target.metric)
        if not mask.any():
            continue
        v, t = m["value"][mask], m["t_ns"][mask]
        hit = v <= target.value if v[0] > target.value else v >= target.value
        idx = np.flatnonzero(hit)
        return float((t[idx[0]] - min(starts)) / 1e9) if idx.size else None
    return None


def _stat(values: list[float | None]) -> tuple[float | None, float | None]:
    v = [x for x in values if x is not None and math.isfinite(x)]
    if not v:
        return None, None
    return float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else 0.0


def _mean_finite(values: list[float]) -> float:
    """Mean of the finite values; NaN (never a NumPy 'Mean of empty slice' warning) when there is none."""
    v = [x for x in values if math.isfinite(x)]
    return float(np.mean(v)) if v else math.nan


def _infer_mode(rows: list[SizeRow]) -> str | None:
    if len(rows) < 2 or not all(r.samples > 0 for r in rows):
        return None
    per_rank = [r.samples / r.world_size for r in rows]
    total = [r.samples for r in rows]
    if max(per_rank) / min(per_rank) <= 1 + MODE_TOLERANCE:
        return "weak"
    if max(total) / min(total) <= 1 + MODE_TOLERANCE:
        return "strong"
    return None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b is not None and b > 0 else None


def _table(selection: str, windows: list[Window], ttt: dict[str, float | None], mode: str) -> ScalingTable:
    sizes = sorted({w.world_size for w in windows})
    raw = []
    for n in sizes:
        ws = [w for w in windows if w.world_size == n]
        ids = sorted({w.run_id for w in ws})
        tt, tt_std = _stat([w.total_time_s for w in ws])
        lt, lt_std = _stat([w.local_throughput for w in ws])
        gt, gt_std = _stat([w.total_throughput for w in ws])
        comm, _ = _stat([w.comm_share for w in ws])
        hits = [ttt.get(i) for i in ids if ttt.get(i) is not None]
        t_mean, t_std = _stat(hits)
        raw.append((n, len(ids), len(ws), _mean_finite([w.samples for w in ws]), tt or 0.0, tt_std or 0.0,
                    lt, lt_std, gt, gt_std, comm, t_mean, t_std, len(hits)))
    n0, t0, l0, g0 = raw[0][0], raw[0][4], raw[0][6], raw[0][8]
    rows = []
    for n, runs, nw, samples, tt, tt_std, lt, lt_std, gt, gt_std, comm, t_mean, t_std, reached in raw:
        g_ideal = g0 * n / n0 if g0 is not None else None
        time_eff = (t0 / tt if mode == "weak" else (t0 * n0) / (tt * n)) if tt > 0 else None
        rows.append(SizeRow(world_size=n, runs=runs, windows=nw, samples=samples, total_time_mean_s=tt,
                            total_time_std_s=tt_std, local_throughput_mean=lt, local_throughput_std=lt_std,
                            total_throughput_mean=gt, total_throughput_std=gt_std, local_ideal=l0, total_ideal=g_ideal,
                            local_efficiency=_ratio(lt, l0), total_efficiency=_ratio(gt, g_ideal),
                            time_efficiency=time_eff, speedup=t0 / tt if tt > 0 else None, comm_share=comm,
                            time_to_target_mean_s=t_mean, time_to_target_std_s=t_std, target_reached=reached))
    return ScalingTable(selection, tuple(rows))


def analyze_scaling(runs: Sequence[RunData], *, mode: str | None = None, target: Target | None = None,
                    warmup: int | None = None) -> ScalingAnalysis:
    """Scaling tables of a group of stored runs (module docstring). Runs that did not complete, or have
    no step, are excluded and named; runs of different scripts are kept and named in a warning."""
    excluded: dict[str, str] = {}
    kept = []
    for d in runs:
        if d.run.status != RunStatus.COMPLETED:
            excluded[d.run.id] = f"status {d.run.status.value}"
        elif not any(len(r.steps) for r in d.ranks):
            excluded[d.run.id] = "no training step recorded"
        else:
            kept.append(d)
    scripts: dict[str, list[str]] = {}
    for d in runs:
        scripts.setdefault(script_of(d.run.command), []).append(d.run.id)
    warnings = [f"run {i} left out: {why}" for i, why in excluded.items()]
    if len(scripts) > 1:
        named = "; ".join(f"{s}: {', '.join(ids)}" for s, ids in sorted(scripts.items()))
        warnings.append(f"the group mixes runs of different scripts ({named}) — compare like with like")
    windows = [w for d in kept for w in run_windows(d, warmup=warmup)]
    ttt = {d.run.id: time_to_target(d, target) for d in kept} if target else {}
    sizes = tuple(sorted({w.world_size for w in windows}))
    if len(sizes) < 2:
        warnings.append(f"only one world size ({', '.join(map(str, sizes)) or 'none'}): nothing to scale")
    selections = [s for s in ("all", "first_epoch", "later_epochs") if any(w.selection == s for w in windows)]
    base = _table("all", [w for w in windows if w.selection == "all"], ttt, "weak") if windows else None
    inferred = _infer_mode(list(base.rows)) if base else None
    if mode is None:
        mode_used, source = (inferred, "inferred") if inferred else ("weak", "default")
    else:
        mode_used, source = mode, "given"
        if inferred and inferred != mode:
            warnings.append(f"--mode {mode}, but the samples look like {inferred} scaling")
    tables = tuple(_table(s, [w for w in windows if w.selection == s], ttt, mode_used) for s in selections)
    return ScalingAnalysis(mode=mode_used, mode_source=source, base_size=sizes[0] if sizes else 0, sizes=sizes,
                           tables=tables, windows=tuple(windows), target=target, scripts=scripts, excluded=excluded,
                           warnings=tuple(warnings))
