"""Phase and region diff: where inside the step the time moved, biggest absolute change first."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stepscope.analyze.diff.significance import Change, DiffSettings, compare_runs
from stepscope.analyze.stats import NoiseFloor


@dataclass(frozen=True, slots=True)
class BreakdownRow:
    """Mean time per measured step (ns, CPU wall clock unless the run timed with CUDA events) in one phase
    or user region, rank 0 of each run, warm-up excluded.

    ``kind``: "phase" (data_wait, forward, backward, optimizer, comm, other = step time in no measured
    phase) or "region" (a ``stepscope.region`` path, 'outer/inner'; a region's time includes its nested
    regions and overlaps the phases). ``baseline_ns``/``experiment_ns``: None when the run does not have
    it ("only in baseline / experiment"); with several runs a side, the geometric mean of the per-run means
    (the tested values). ``share_*``: of the side's step time. ``change``: the run-level test of the per-run
    means (practical floor 0.5% of the baseline step time; one run a side: the part must move by more than the
    step time's noise floor).
    """

    kind: str
    name: str
    depth: int
    baseline_ns: float | None
    experiment_ns: float | None
    delta_ns: float
    delta_pct: float | None
    share_baseline: float | None
    share_experiment: float | None
    change: Change | None

    @property
    def presence(self) -> str:
        if self.baseline_ns is None:
            return "only in experiment"
        if self.experiment_ns is None:
            return "only in baseline"
        return "both"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["change"] = self.change.to_dict() if self.change else None
        d["presence"] = self.presence
        return d


def _row(kind: str, name: str, b: list[float] | None, e: list[float] | None, mb: float, me: float,
         settings: DiffSettings, floor: NoiseFloor | None, abs_floor: float) -> BreakdownRow:
    change = None
    if b is not None and e is not None:
        change = compare_runs(b, e, settings=settings, floor=floor, abs_floor=abs_floor, unit_scale=mb)
    if change is not None and change.method != "none":
        vb: float | None = change.baseline
        ve: float | None = change.experiment
    else:
        vb = float(np.mean(b)) if b else (0.0 if b is not None else None)
        ve = float(np.mean(e)) if e else (0.0 if e is not None else None)
    delta = (ve or 0.0) - (vb or 0.0)
    pct = 100.0 * delta / vb if vb else None
    return BreakdownRow(kind=kind, name=name, depth=name.count("/") if kind == "region" else 0,
                        baseline_ns=vb, experiment_ns=ve, delta_ns=delta, delta_pct=pct,
                        share_baseline=vb / mb if vb is not None and mb > 0 else None,
                        share_experiment=ve / me if ve is not None and me > 0 else None, change=change)


def _per_run(runs: list[dict[tuple[str, str], float]], key: tuple[str, str]) -> list[float] | None:
    vals = [r[key] for r in runs if key in r]
    return vals or None


def breakdown_diff(base: list[dict[tuple[str, str], float]], exp: list[dict[tuple[str, str], float]],
                   base_step_ns: float, exp_step_ns: float, settings: DiffSettings,
                   floor: NoiseFloor | None) -> list[BreakdownRow]:
    """Phase rows then region rows, all sorted together by absolute delta (largest first).

    ``base``/``exp``: per run of each side, (kind, name) -> mean ns per measured step (rank 0);
    ``*_step_ns``: each side's step time (the shares' denominator; the baseline's scales the floors)."""
    if not base or not exp or not base_step_ns or not exp_step_ns:
        return []
    abs_floor = settings.part_floor * base_step_ns
    rows = []
    keys = list(dict.fromkeys([*(k for r in base for k in r), *(k for r in exp for k in r)]))
    keys.sort(key=lambda k: k[0] != "phase")
    for key in keys:
        rows.append(_row(key[0], key[1], _per_run(base, key), _per_run(exp, key), base_step_ns, exp_step_ns,
                         settings, floor, abs_floor))
    rows.sort(key=lambda r: (-abs(r.delta_ns), r.kind, r.name))
    return rows
