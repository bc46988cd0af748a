"""Phase and region diff: where inside the step the time moved, biggest absolute change first."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stepscope.analyze.diff.sides import StepSample
from stepscope.analyze.diff.significance import Change, DiffSettings, compare_samples


@dataclass(frozen=True, slots=True)
class BreakdownRow:
    """Mean time per measured step (ns, CPU wall clock unless the run timed with CUDA events) in one phase
    or user region, rank 0 of each run, warm-up excluded.

    ``kind``: "phase" (data_wait, forward, backward, optimizer, comm, other = step time in no measured
    phase) or "region" (a ``stepscope.region`` path, 'outer/inner'; a region's time includes its nested
    regions and overlaps the phases). ``baseline_ns``/``experiment_ns``: None when the run does not have
    it ("only in baseline / experiment"). ``share_*``: of the mean step time. ``change``: test on the
    per-step values (mean statistic; practical floor 0.5% of the baseline step time).
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


def _row(kind: str, name: str, b: np.ndarray | None, e: np.ndarray | None, mb: float, me: float,
         settings: DiffSettings, floor: float) -> BreakdownRow:
    vb = float(b.mean()) if b is not None and b.size else (0.0 if b is not None else None)
    ve = float(e.mean()) if e is not None and e.size else (0.0 if e is not None else None)
    delta = (ve or 0.0) - (vb or 0.0)
    pct = 100.0 * delta / vb if vb else None
    change = None
    if b is not None and e is not None:
        change = compare_samples(b, e, settings=settings, statistic="mean", floor=floor)
    return BreakdownRow(kind=kind, name=name, depth=name.count("/") if kind == "region" else 0,
                        baseline_ns=vb, experiment_ns=ve, delta_ns=delta, delta_pct=pct,
                        share_baseline=vb / mb if vb is not None and mb > 0 else None,
                        share_experiment=ve / me if ve is not None and me > 0 else None, change=change)


def breakdown_diff(base: StepSample | None, exp: StepSample | None, base_regions: dict[str, np.ndarray],
                   exp_regions: dict[str, np.ndarray], settings: DiffSettings) -> list[BreakdownRow]:
    """Phase rows then region rows, all sorted together by absolute delta (largest first)."""
    if base is None or exp is None or not len(base) or not len(exp):
        return []
    mb, me = float(base.duration_ns.mean()), float(exp.duration_ns.mean())
    floor = settings.part_floor * float(np.median(base.duration_ns))
    rows = []
    for ph in dict.fromkeys([*base.phases, *exp.phases]):
        rows.append(_row("phase", ph, base.phases.get(ph), exp.phases.get(ph), mb, me, settings, floor))
    for path in dict.fromkeys([*base_regions, *exp_regions]):
        rows.append(_row("region", path, base_regions.get(path), exp_regions.get(path), mb, me, settings, floor))
    rows.sort(key=lambda r: (-abs(r.delta_ns), r.kind, r.name))
    return rows
