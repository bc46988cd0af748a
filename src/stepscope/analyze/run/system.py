"""System metrics: mean, peak and last of every sampled metric; energy per step."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stepscope.model.tables import SampleTable, StepTable

CUMULATIVE = ("_energy_j",)
"""Suffixes of counters that only grow: their rate or delta matters, not their mean."""


@dataclass(frozen=True, slots=True)
class MetricStats:
    """One sampled metric over the run: ``name`` as in SampleTable; values in its unit."""

    name: str
    mean: float | None
    peak: float | None
    min: float | None
    last: float | None
    samples: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def metric_stats(samples: SampleTable) -> list[MetricStats]:
    out = []
    for name in sorted(samples.columns):
        v = samples.columns[name]
        f = v[np.isfinite(v)]
        if not f.size:
            continue
        if name.endswith(CUMULATIVE):
            out.append(MetricStats(name, None, float(f[-1] - f[0]), None, float(f[-1]), int(f.size)))
            continue
        out.append(MetricStats(name, float(f.mean()), float(f.max()), float(f.min()), float(f[-1]), int(f.size)))
    return out


def energy_per_step_j(samples: SampleTable, steps: StepTable, *, first_step: int = 0) -> dict[str, float]:
    """Energy per measured step from cumulative counters (GPU via NVML, CPU via RAPL), by source.

    The counter is interpolated at the first and last measured step boundaries, and the difference is
    divided by the number of steps between them. Sources without at least two samples inside that span
    are left out.
    """
    out: dict[str, float] = {}
    train = steps.take(steps["phase"] == 0)
    if len(train) - first_step < 2 or len(samples) < 2:
        return out
    t0 = float(train["start_ns"][first_step])
    t1 = float(train["end_ns"][-1])
    n = len(train) - first_step
    t = samples.t_ns.astype("float64")
    for name, v in samples.columns.items():
        if not name.endswith("_energy_j"):
            continue
        ok = np.isfinite(v)
        if ok.sum() < 2 or ((t[ok] >= t0) & (t[ok] <= t1)).sum() < 2:
            continue
        e0, e1 = np.interp([t0, t1], t[ok], v[ok])
        out[name.removesuffix("_energy_j")] = float(e1 - e0) / n
    return out
