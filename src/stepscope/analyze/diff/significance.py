"""Is a difference between two runs (or two sets of repeated runs) real? One verdict per compared number.

**The run is the unit of evidence** (see docs/diff.md). Steps inside one run are barely autocorrelated, but
whole runs shift level from one run to the next (placement, frequency, neighbours), which no per-step test can
see: on a busy 2-core machine a per-step test called 9 of 11 A/A pairs "faster" or "slower". So every verdict
comes from :func:`compare_runs`, on one value per run (its median step time with warm-up excluded, its mean
phase time per step, its throughput):

- repeats on both sides (2 or more runs each): Welch's t on log per-run values (ratio of geometric means), or
  with ``DiffSettings.paired`` (interleaved A/B pairs from ``stepscope bench --ab``) the paired t on the
  per-pair log ratios. FASTER / SLOWER when the ``confidence`` interval of the ratio excludes 1 *and* the
  ratio is beyond the practical threshold; otherwise NO_SIGNIFICANT_CHANGE, reported with the minimum
  detectable effect (80% power) of those repeats;
- one run on a side: INCONCLUSIVE ("repeat with `stepscope bench --repeat N`") unless the change exceeds the
  between-run noise floor (learned from repeats of the same command in the store, else a stated conservative
  default; inflated when a side's measurement quality is poor) at 99%, and the practical threshold. When the
  two runs met different CPU contention (run-queue wait of the training thread, analyze/diff/contention.py),
  the change must also clear what that difference can explain (``NoiseFloor.load_allowance``), and an
  inconclusive verdict names the two runs' loads instead of the floor.

The per-step test below (:func:`compare_samples`) is kept for within-run questions (a profiled window's steps)
and never decides a verdict between runs. Its rules, for reference:

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
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any

import numpy as np

from stepscope.analyze.stats import (
    MAX_REPEATS_NEEDED,
    NoiseFloor,
    RatioTest,
    bootstrap_ratio_ci,
    geometric_mean,
    mann_whitney_u,
    noise_floor_ratio,
    paired_log_ratio,
    repeats_needed,
    welch_log_ratio,
)

MIN_SAMPLES = 5
"""Fewer measured values than this on either side: no test, NO_SIGNIFICANT_CHANGE with a note."""
BENCH_CONFIDENCE = 0.99
"""The level `bench --ab` decides at. An interval's level is its A/A false rate once the spread dwarfs the
threshold (a busy host's wall clock): at 95% 1 study in 20 of identical commands was called faster or slower (1 of
10 seen under two CPU hogs, x0.796), so the interleaved study, whose promise is "no A/A verdict", decides at 99%
(benchmarks/ab_coverage.py: at most 1% A/A false verdicts at every simulated noise setting)."""
MAX_BOOT_SAMPLES = 4000
"""Longer samples are thinned evenly before the bootstrap (the U test always sees every value)."""


class Verdict(StrEnum):
    """How the experiment compares with the baseline on one number."""

    FASTER = "faster"
    SLOWER = "slower"
    NO_SIGNIFICANT_CHANGE = "no_significant_change"
    INCONCLUSIVE = "inconclusive"
    """One run a side and a change within the between-run noise floor: repeat the runs to tell."""


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
    """Bootstrap resamples (within-run window tests only)."""
    paired: bool = False
    """The sides' runs are interleaved A/B pairs (run i of each side made back to back): paired test."""
    floor_confidence: float = 0.99
    """One run a side: a change is called only when the noise floor explains it less than 1 - this often."""
    metric: str = "step_time"
    """The clock the headline verdict is decided on: "step_time" (wall), "step_cpu_time" (the stepping thread's
    CPU time) or "process_cpu_time" (metric.py)."""

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence

    def describe(self) -> str:
        test = "paired t on log ratios of interleaved A/B pairs" if self.paired else \
            "Welch t on log per-run values (ratio of geometric means)"
        on = "" if self.metric == "step_time" else f"on {self.metric}, "
        return (f"run-level: {on}{test}, {self.confidence:.0%} interval excluding 1 and |change| >= "
                f"{self.threshold:.0%}; one run a side: inconclusive unless beyond the between-run noise floor "
                f"at {self.floor_confidence:.0%}; warm-up steps excluded")

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
    method: str = "per_step"
    """"welch_log", "paired_log", "noise_floor" (one run a side), or "per_step" (within one run's window)."""
    mde: float | None = None
    """Smallest relative change these runs detect with 80% power (0.05 = 5%); for one run a side, the change
    the noise floor requires (widened where the runs' loads differed)."""
    noise_floor: str | None = None
    """For one run a side: where the noise floor came from (learned from the store, or the stated default)."""

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


def compare_runs(base: Any, exp: Any, *, settings: DiffSettings | None = None, higher_is_better: bool = False,
                 floor: NoiseFloor | None = None, abs_floor: float = 0.0, unit_scale: float | None = None,
                 widen_log: float = 0.0) -> Change:
    """The run-level verdict on one number from its per-run values (see the module docstring).

    Args:
        base, exp: one value per run (positive; others are dropped), in run order; paired when
            ``settings.paired`` (pair i = base[i], exp[i]).
        widen_log: repeats only: widen the interval by this (log) on both sides, for drift that the pairing does
            not cancel (drift.py).
        floor: between-run noise for one run a side (None: such a comparison is always INCONCLUSIVE).
        abs_floor: smallest absolute change (values' unit) that counts as practical (parts of a step).
        unit_scale: for parts of a step, one run a side: the baseline step time, so that the noise floor's
            relative change applies to the whole step (a part must move by more than the step's noise).
    The printed ``baseline``/``experiment`` are the geometric means of the per-run values (the tested numbers).
    """
    s = settings or DiffSettings()
    b = [float(v) for v in base if v is not None and math.isfinite(v) and v > 0]
    e = [float(v) for v in exp if v is not None and math.isfinite(v) and v > 0]
    vb, ve = geometric_mean(b), geometric_mean(e)
    ratio = ve / vb if b and e else None
    change = functools.partial(Change, statistic="geometric mean of per-run values", baseline=vb, experiment=ve,
                               delta=ve - vb, ratio=ratio, n_baseline=len(b), n_experiment=len(e),
                               higher_is_better=higher_is_better)
    if not b or not e:
        return change(ci_low=None, ci_high=None, p_value=None, verdict=Verdict.INCONCLUSIVE, method="none",
                      note="not measured (or zero) on a side")
    paired = s.paired and len(b) == len(e) and len(b) == len(list(base)) == len(list(exp))
    if len(b) >= 2 and len(e) >= 2:
        t = paired_log_ratio(b, e, confidence=s.confidence) if paired else \
            welch_log_ratio(b, e, confidence=s.confidence)
        if widen_log > 0 and t.ci_low is not None and t.ci_high is not None:
            # drift the pairing does not cancel (drift.py): the interval and the MDE grow by it on both sides
            t = replace(t, ci_low=t.ci_low * math.exp(-widen_log), ci_high=t.ci_high * math.exp(widen_log),
                        mde=None if t.mde is None else math.expm1(math.log1p(t.mde) + widen_log))
        verdict = pair_verdict(t, s.threshold, higher_is_better=higher_is_better, large=abs(ve - vb) >= abs_floor)
        note = blind_note(t, b, e, s, paired) if verdict is Verdict.INCONCLUSIVE else None
        return change(ci_low=t.ci_low, ci_high=t.ci_high, p_value=t.p_value, verdict=verdict, method=t.method,
                      mde=t.mde, note=note)
    hint = "one run a side — repeat with `stepscope bench --repeat N` (or `--ab`)"
    if floor is None:
        return change(ci_low=None, ci_high=None, p_value=None, verdict=Verdict.INCONCLUSIVE, method="noise_floor",
                      note=hint)
    t = noise_floor_ratio(vb, ve, floor, confidence=s.floor_confidence)
    need = math.log1p(t.mde or 0.0) + floor.load_allowance()
    mde = math.expm1(need)
    moved = abs(math.log(ve / vb)) if unit_scale is None else abs(ve - vb) / unit_scale
    if unit_scale is not None:
        need = math.expm1(need)
    called = moved > need and _practical(t, s, abs(ve - vb), abs_floor)
    if not called:
        hint = decide_hint(floor, max(s.threshold, abs(ve / vb - 1.0)), s.confidence)
    return change(ci_low=None, ci_high=None, p_value=t.p_value,
                  verdict=_direction(vb, ve, higher_is_better) if called else Verdict.INCONCLUSIVE,
                  method="noise_floor", mde=mde, noise_floor=floor.source,
                  note=None if called else floor.load_reason or
                  f"within the between-run noise floor ({floor.source}); {hint}")


def pair_verdict(t: RatioTest, threshold: float, *, higher_is_better: bool = False, large: bool = True) -> Verdict:
    """The one rule that turns a run-level interval into a verdict: `diff`, its dashboard pages, `check` and the
    regressions page all decide here (``regression.check_metric`` maps the verdict to the gate's words).

    - the interval excludes 1 and the ratio is beyond ``threshold`` (and ``large``: beyond a part's absolute
      floor): FASTER / SLOWER;
    - otherwise, unless the interval shows an improvement (which rules a regression out), INCONCLUSIVE when the
      MDE exceeds ``threshold``: a change of the threshold's size could have been missed, so "no change" would
      promise what the data cannot;
    - otherwise NO_SIGNIFICANT_CHANGE (a change of the threshold's size would have been seen).
    No interval (fewer than 2 runs a side): INCONCLUSIVE."""
    if t.ci_low is None or t.ci_high is None:
        return Verdict.INCONCLUSIVE
    if not t.ci_low <= 1.0 <= t.ci_high and abs(t.ratio - 1.0) >= threshold and large:
        return _direction(1.0, t.ratio, higher_is_better)
    improved = t.ci_low > 1.0 if higher_is_better else t.ci_high < 1.0
    if not improved and t.mde is not None and 0 < threshold < t.mde:
        return Verdict.INCONCLUSIVE
    return Verdict.NO_SIGNIFICANT_CHANGE


def blind_note(t: RatioTest, b: list[float], e: list[float], s: DiffSettings, paired: bool) -> str:
    """Why repeats cannot tell: their MDE against the threshold, the spread they measured, and the runs (pairs)
    that would detect a change of the threshold's size at that spread."""
    if paired:
        sigma = float(np.log(np.asarray(e) / np.asarray(b)).std(ddof=1))
        what, cmd = "per-pair spread", "bench --ab --repeat"
    else:
        sigma = math.sqrt((float(np.log(b).var(ddof=1)) + float(np.log(e).var(ddof=1))) / 2)
        what, cmd = "run-to-run spread", "bench --repeat"
    n = repeats_needed(sigma, s.threshold, confidence=s.confidence, paired=paired)
    unit = "pairs" if paired else "runs a side"
    more = f"`stepscope {cmd} {n}` ({n} {unit})" if n < MAX_REPEATS_NEEDED else \
        f"more than {MAX_REPEATS_NEEDED} {unit} (measure on a quieter host)"
    return (f"cannot tell: MDE {t.mde or 0:.1%} exceeds the {s.threshold:.0%} threshold ({what} {sigma:.1%} over "
            f"{t.n_baseline} and {t.n_experiment} runs); {more} would tell a {s.threshold:.0%} change at this spread")


def decide_hint(floor: NoiseFloor, effect: float, confidence: float) -> str:
    """The command that would decide a single-run comparison: interleaved A/B pairs, as many as the floor's spread
    needs to detect ``effect`` (the change seen, or the threshold) at ``confidence`` with 80% power. Each pair's
    log ratio is taken to spread by sigma * sqrt(2), i.e. as if pairing cancelled nothing (the safe side)."""
    n = repeats_needed(floor.sigma_log * math.sqrt(2.0), effect, confidence=confidence, paired=True)
    if n >= MAX_REPEATS_NEEDED:
        return (f"one run a side at a {floor.sigma_log:.0%} between-run spread: not even {MAX_REPEATS_NEEDED} A/B "
                f"pairs would resolve {effect:.1%} — measure on a quieter host")
    return (f"one run a side at a {floor.sigma_log:.0%} between-run spread — `stepscope bench --ab --repeat {n} "
            f"-- ...` would tell a {effect:.1%} change")


def _practical(t: RatioTest, s: DiffSettings, delta: float, abs_floor: float) -> bool:
    return abs(t.ratio - 1.0) >= s.threshold and delta >= abs_floor


def _direction(vb: float, ve: float, higher_is_better: bool) -> Verdict:
    return Verdict.FASTER if (ve > vb) == higher_is_better else Verdict.SLOWER
