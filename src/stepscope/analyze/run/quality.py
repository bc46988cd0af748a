"""Measurement quality of one run: are its figures trustworthy, or noisy? Shown first wherever a run's speed is
judged (``show``, the report, ``diff``, ``check``) and taken into the between-run noise floor of a diff.

A run is **noisy** when any of these holds (thresholds are the module constants):

- the host's CPU was saturated by *other* processes: over the run, the median system CPU use was at least
  ``SATURATED_PCT`` of all cores while other processes (system use minus this run's processes) held at least
  ``OTHERS_CORES`` cores — the training then competes for CPU time, and its speed depends on its neighbours;
- the step-time coefficient of variation (robust: 1.4826 * MAD / median of the measured steps, warm-up
  excluded) is above ``CV_NOISY``;
- CPU steal (a virtual machine's host taking time) or frequency throttling, where the sampler recorded them
  (``cpu_steal_pct``, ``cpu_freq_mhz`` columns; absent columns are "not measured", never "fine").

A quiet verdict only says none of the measured signs was seen.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from stepscope.model.tables import Phase, RunData

SATURATED_PCT = 85.0
"""Median system CPU use (% of all logical cores) at or above which the host counts as saturated ..."""
OTHERS_CORES = 0.5
"""... when other processes hold at least this many cores."""
CV_NOISY = 0.15
"""Robust step-time CV above which a run's steps are too irregular to trust a small change."""
STEAL_PCT = 5.0
"""Median CPU steal (% of CPU time) above which a virtual machine's host is taking time."""
THROTTLE_DROP = 0.15
"""CPU frequency falling this far below its run maximum (median vs max) counts as throttling."""
NOISE_INFLATION = 2.0
"""A noisy side multiplies the between-run noise floor by this (see analyze/diff/significance.py)."""


@dataclass(frozen=True, slots=True)
class Quality:
    """``noisy``: any sign seen; ``reasons``: one plain sentence per sign; ``step_cv``: robust step-time CV
    (None: fewer than 5 measured steps); ``others_cores``: median cores used by other processes (None: not
    sampled); ``system_cpu_pct``: median system CPU use in % of all cores (None: not sampled);
    ``not_measured``: signs the run has no data for."""

    noisy: bool
    reasons: tuple[str, ...]
    step_cv: float | None
    others_cores: float | None
    system_cpu_pct: float | None
    not_measured: tuple[str, ...]

    def headline(self) -> str:
        if self.noisy:
            return "these figures are noisy: " + "; ".join(self.reasons)
        return "measurement quality: no sign of noise (" + ", ".join(self._seen()) + ")"

    def caveat(self) -> str | None:
        """The line a run's summaries open with when its figures are noisy (the end of `stepscope run`, `show`,
        the report, the notebook overview); None when no sign of noise was seen."""
        return self.headline() if self.noisy else None

    def _seen(self) -> list[str]:
        out = []
        if self.step_cv is not None:
            out.append(f"step-time CV {self.step_cv:.1%}")
        if self.others_cores is not None:
            out.append(f"other processes {self.others_cores:.1f} cores")
        return out or ["nothing measured"]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "headline": self.headline()}


def _median(col: Any) -> float | None:
    if col is None:
        return None
    a = np.asarray(col, dtype="float64")
    a = a[np.isfinite(a)]
    return float(np.median(a)) if a.size else None


def measurement_quality(data: RunData, *, warmup: int = 0) -> Quality:
    """The quality verdict of a stored run (rank 0's steps; samples of every rank on the run's host)."""
    reasons: list[str] = []
    missing: list[str] = []
    cv = None
    if data.ranks:
        steps = data.ranks[0].steps
        train = steps.duration_ns[steps["phase"] == int(Phase.TRAIN)].astype("float64")[warmup:]
        if train.size >= 5:
            med = float(np.median(train))
            cv = float(1.4826 * np.median(np.abs(train - med)) / med) if med > 0 else None
            if cv is not None and cv > CV_NOISY:
                reasons.append(f"step-time CV {cv:.0%} (above {CV_NOISY:.0%})")
    cores = data.run.host.cpu_cores_logical or 1
    system_pct = others = None
    sys_vals, proc_vals = [], []
    for r in data.ranks[:1]:
        sys_vals.append(r.samples.columns.get("cpu_system_pct"))
        proc_vals.append(r.samples.columns.get("cpu_process_pct"))
    sys_col = sys_vals[0] if sys_vals else None
    proc_col = proc_vals[0] if proc_vals else None
    if sys_col is not None and proc_col is not None and len(sys_col) == len(proc_col) and len(sys_col):
        system_pct = _median(sys_col)
        used = np.asarray(sys_col, dtype="float64") / 100.0 * cores
        mine = np.asarray(proc_col, dtype="float64") / 100.0 * max(data.run.world_size, 1)
        others = _median(np.clip(used - mine, 0, None))
        if system_pct is not None and others is not None and system_pct >= SATURATED_PCT and others >= OTHERS_CORES:
            reasons.append(f"host CPU saturated ({system_pct:.0f}% of {cores} cores busy, {others:.1f} cores by "
                           "other processes)")
    else:
        missing.append("host CPU use")
    for col, what in (("cpu_steal_pct", "CPU steal"), ("cpu_freq_mhz", "CPU frequency")):
        vals = [r.samples.columns.get(col) for r in data.ranks[:1]]
        c = vals[0] if vals else None
        if c is None or not np.isfinite(np.asarray(c, dtype="float64")).any():
            missing.append(what)
            continue
        a = np.asarray(c, dtype="float64")
        a = a[np.isfinite(a)]
        if col == "cpu_steal_pct" and float(np.median(a)) > STEAL_PCT:
            reasons.append(f"CPU steal {float(np.median(a)):.0f}%")
        if col == "cpu_freq_mhz" and a.max() > 0 and float(np.median(a)) < (1 - THROTTLE_DROP) * float(a.max()):
            reasons.append(f"CPU frequency throttled (median {float(np.median(a)):.0f} MHz of {float(a.max()):.0f})")
    return Quality(bool(reasons), tuple(reasons), cv, others, system_pct, tuple(missing))
