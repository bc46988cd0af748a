"""Is a difference between two per-step distributions real? One verdict per compared number.

The decision (see docs/diff.md): a change is reported as FASTER or SLOWER only when all three hold:

1. the two-sided Mann-Whitney U test rejects "same distribution" at ``1 - confidence`` (default p < 0.05);
2. the percentile-bootstrap interval (at ``confidence``) of the ratio experiment / baseline of the
   statistic (median for headline numbers, mean for the additive breakdown) excludes 1;
3. the change is of practical size: ``|ratio - 1| >= threshold`` (default 2%) *and* the absolute change
   is at least ``floor`` (for parts of a step: 0.5% of the baseline step time), so that a 0.3% shift
   measured over 10,000 steps is still "no significant change".

Otherwise the verdict is NO_SIGNIFICANT_CHANGE, which means "the data cannot show a change of at least the
threshold", not "the runs are equal": a real change smaller than the threshold, or one hidden by noise
larger than it, reads the same.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from stepscope.analyze.stats import bootstrap_ratio_ci, mann_whitney_u

MIN_SAMPLES = 5
"""Fewer measured values than this on either side: no test, NO_SIGNIFICANT_CHANGE with a note."""
MAX_BOOT_SAMPLES = 4000
"""Longer samples are thinned evenly before the bootstrap (the U test always sees every value)."""


class Verdict(StrEnum):
    """How the experiment compares with the baseline on one number."""

    FASTER = "faster"
    SLOWER = "slower"
    NO_SIGNIFICANT_CHANGE = "no_significant_change"


@dataclass(frozen=True, slots=True)
class DiffSettings:
    """How verdicts are decided (one instance per diff, shown in every report)."""

    confidence: float = 0.95
    """Confidence level of the bootstrap interval; the U test's significance level is 1 - confidence."""
    threshold: float = 0.02
    """Practical-significance threshold: smallest relative change (0.02 = 2%) that can be called a change."""
    part_floor: float = 0.005
    """Parts of a step (phases, regions): smallest absolute change, as a share of the baseline step time."""
    n_boot: int = 2000
    """Bootstrap resamples."""

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    def describe(self) -> str:
        return (f"Mann-Whitney U (two-sided, p < {self.alpha:.2g}) and a {self.confidence:.0%} bootstrap interval "
                f"of the ratio excluding 1, and |change| >= {self.threshold:.0%} (practical threshold); "
                "warm-up steps excluded")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "alpha": self.alpha, "test": self.describe()}


@dataclass(frozen=True, slots=True)
class Change:
    """One number compared between runs from its per-step values (warm-up excluded), in the values' unit.

    ``statistic`` is "median" or "mean"; ``baseline``/``experiment`` are that statistic of each sample,
    ``delta`` = experiment - baseline, ``ratio`` = experiment / baseline (None when the baseline is 0),
    ``ci_low``/``ci_high`` the bootstrap interval of the ratio at ``settings.confidence`` (None when not
    computed), ``p_value`` the two-sided Mann-Whitney U p-value (None when not tested). ``verdict`` is in
    terms of speed: for a time, larger is SLOWER; for a rate (``higher_is_better``), larger is FASTER.
    ``note`` says why no test was made, if none was.
    """

    statistic: str
    baseline: float
    experiment: float
    delta: float
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    n_baseline: int
    n_experiment: int
    verdict: Verdict
    higher_is_better: bool = False
    note: str | None = None

    @property
    def delta_pct(self) -> float | None:
        return None if self.ratio is None else (self.ratio - 1.0) * 100.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["verdict"] = self.verdict.value
        d["delta_pct"] = self.delta_pct
        return d


def _thin(a: np.ndarray) -> np.ndarray:
    if a.size <= MAX_BOOT_SAMPLES:
        return a
    thinned: np.ndarray = a[np.linspace(0, a.size - 1, MAX_BOOT_SAMPLES).astype(int)]
    return thinned


def compare_samples(base: Any, exp: Any, *, settings: DiffSettings | None = None, statistic: str = "median",
                    higher_is_better: bool = False, floor: float = 0.0) -> Change:
    """Compare two samples of per-step values (NaN dropped) and decide a verdict (see the module docstring).

    Args:
        base, exp: per-step values of the baseline and the experiment, warm-up already excluded.
        statistic: "median" (headline numbers) or "mean" (parts that add up to the step).
        higher_is_better: True for rates (throughput): a larger value is FASTER.
        floor: smallest absolute change (in the values' unit) that counts as practical.
    """
    s = settings or DiffSettings()
    b = np.asarray(base, dtype="float64")
    e = np.asarray(exp, dtype="float64")
    b, e = b[np.isfinite(b)], e[np.isfinite(e)]
    stat = np.median if statistic == "median" else np.mean
    vb = float(stat(b)) if b.size else math.nan
    ve = float(stat(e)) if e.size else math.nan
    ratio = ve / vb if b.size and e.size and vb != 0 else None
    change = functools.partial(Change, statistic=statistic, baseline=vb, experiment=ve, delta=ve - vb, ratio=ratio,
                               n_baseline=int(b.size), n_experiment=int(e.size), higher_is_better=higher_is_better)
    if b.size < MIN_SAMPLES or e.size < MIN_SAMPLES:
        return change(ci_low=None, ci_high=None, p_value=None, verdict=Verdict.NO_SIGNIFICANT_CHANGE,
                      note=f"too few measured steps to test ({b.size} vs {e.size}, need {MIN_SAMPLES} each)")
    p = mann_whitney_u(b, e)
    tb, te = _thin(b), _thin(e)
    lo, hi = bootstrap_ratio_ci(tb, te, statistic=statistic, confidence=s.confidence, n_boot=s.n_boot)
    ci = (lo, hi) if math.isfinite(lo) and math.isfinite(hi) else (None, None)
    verdict = _decide(vb, ve, ratio, ci, p, s, floor, higher_is_better)
    return change(ci_low=ci[0], ci_high=ci[1], p_value=p, verdict=verdict)


def _decide(vb: float, ve: float, ratio: float | None, ci: tuple[float | None, float | None], p: float,
            s: DiffSettings, floor: float, higher_is_better: bool) -> Verdict:
    if not (math.isfinite(p) and p < s.alpha):
        return Verdict.NO_SIGNIFICANT_CHANGE
    if abs(ve - vb) < floor or ve == vb:
        return Verdict.NO_SIGNIFICANT_CHANGE
    if ratio is not None:
        lo, hi = ci
        if abs(ratio - 1.0) < s.threshold:
            return Verdict.NO_SIGNIFICANT_CHANGE
        if lo is None or hi is None or lo <= 1.0 <= hi:
            return Verdict.NO_SIGNIFICANT_CHANGE
    # a baseline of 0 (no data wait before, say) has no ratio: the U test and the floor decide alone
    return Verdict.FASTER if (ve > vb) == higher_is_better else Verdict.SLOWER
