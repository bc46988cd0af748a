"""Robust statistics in one place: distributions, confidence intervals, two-sample tests.

Percentiles use linear interpolation (NumPy's default). Significance tests say what they cannot say:
``p_value > alpha`` means the data cannot tell, not that there is no difference.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]


@dataclass(frozen=True, slots=True)
class Distribution:
    """Summary of a sample of values (NaN values dropped). All fields in the sample's unit."""

    count: int
    mean: float
    std: float
    """Sample standard deviation (ddof=1); 0 for a single value."""
    min: float
    p50: float
    p95: float
    max: float
    total: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def distribution(values: Array | list[float]) -> Distribution | None:
    """Distribution of the finite values, or None when there are none."""
    a = np.asarray(values, dtype="float64")
    a = a[np.isfinite(a)]
    if a.size == 0:
        return None
    return Distribution(count=int(a.size), mean=float(a.mean()), std=float(a.std(ddof=1)) if a.size > 1 else 0.0,
                        min=float(a.min()), p50=float(np.percentile(a, 50)), p95=float(np.percentile(a, 95)),
                        max=float(a.max()), total=float(a.sum()))


def bootstrap_ratio_ci(base: Array, exp: Array, *, statistic: str = "median", confidence: float = 0.95,
                       n_boot: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap interval of stat(exp) / stat(base), ``statistic`` "median" or "mean", resampling
    each sample alone; (nan, nan) when no resample has a non-zero baseline statistic.

    Deterministic (fixed seed) so reports do not change between renderings.
    """
    stat = np.median if statistic == "median" else np.mean
    rng = np.random.default_rng(seed)
    b = np.asarray(base, dtype="float64")
    e = np.asarray(exp, dtype="float64")
    bi = rng.integers(0, b.size, size=(n_boot, b.size))
    ei = rng.integers(0, e.size, size=(n_boot, e.size))
    mb = stat(b[bi], axis=1)
    me = stat(e[ei], axis=1)
    ratios = me / np.where(mb == 0, np.nan, mb)
    if not np.isfinite(ratios).any():
        return math.nan, math.nan
    lo, hi = np.nanpercentile(ratios, [(1 - confidence) / 2 * 100, (1 + confidence) / 2 * 100])
    return float(lo), float(hi)


def bootstrap_median_ratio_ci(base: Array, exp: Array, *, confidence: float = 0.95, n_boot: int = 2000,
                              seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap interval of median(exp) / median(base) (see ``bootstrap_ratio_ci``)."""
    return bootstrap_ratio_ci(base, exp, confidence=confidence, n_boot=n_boot, seed=seed)


def median_ci(values: Array, *, confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free interval of the median from order statistics (binomial, normal approx.)."""
    a = np.sort(np.asarray(values, dtype="float64"))
    n = a.size
    if n == 0:
        return (math.nan, math.nan)
    if n < 3:
        return (float(a[0]), float(a[-1]))
    z = _z(confidence)
    half = z * math.sqrt(n) / 2
    lo = max(math.floor(n / 2 - half), 0)
    hi = min(math.ceil(n / 2 + half), n - 1)
    return float(a[lo]), float(a[hi])


def mann_whitney_u(x: Array, y: Array) -> float:
    """Two-sided p-value of the Mann-Whitney U test (normal approximation with tie correction).

    Valid for samples of about 8 or more each; below that it is conservative in practice.
    """
    x = np.asarray(x, dtype="float64")
    y = np.asarray(y, dtype="float64")
    n1, n2 = x.size, y.size
    if n1 == 0 or n2 == 0:
        return math.nan
    allv = np.concatenate([x, y])
    ranks = _rankdata(allv)
    r1 = ranks[:n1].sum()
    u1 = r1 - n1 * (n1 + 1) / 2
    mu = n1 * n2 / 2
    _, counts = np.unique(allv, return_counts=True)
    n = n1 + n2
    tie = (counts**3 - counts).sum() / (n * (n - 1)) if n > 1 else 0.0
    sigma = math.sqrt(n1 * n2 / 12 * ((n + 1) - tie))
    if sigma == 0:
        return 1.0
    z = (abs(u1 - mu) - 0.5) / sigma  # continuity correction
    return float(math.erfc(max(z, 0.0) / math.sqrt(2)))


def _rankdata(a: Array) -> Array:
    """Average ranks (1-based), ties sharing their mean rank."""
    order = np.argsort(a, kind="mergesort")
    sorted_a = a[order]
    ranks = np.empty(a.size, dtype="float64")
    i = 0
    n = a.size
    while i < n:
        j = i
        while j + 1 < n and sorted_a[j + 1] == sorted_a[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def _z(confidence: float) -> float:
    """Two-sided normal quantile for a confidence level (inverse erf by bisection; no SciPy needed)."""
    target = confidence
    lo, hi = 0.0, 10.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if math.erf(mid / math.sqrt(2)) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# --- run-level tests: the run is the unit of evidence --------------------------------------------------------------
#
# One method family for every verdict between runs (diff, bench, check, history): per-run values (one number per
# run, e.g. its median step time with warm-up excluded) are compared on the log scale, so the estimate is a ratio
# of geometric means and the interval is a t interval, exp(d +- t * se):
#
# - independent repeats (``welch_log_ratio``): Welch's t on log values, Welch-Satterthwaite degrees of freedom;
# - interleaved A/B pairs (``paired_log_ratio``): one-sample t on the per-pair log ratios (n - 1 df);
# - fewer than 2 runs on a side (or pairs): no interval at all.
#
# Coverage is checked by simulation in tests/analyze/test_stats_runlevel.py (log-normal and t(3) run effects,
# n = 2..10): the 95% intervals cover the true ratio 93-97% of the time (t(3) tails at n = 2: up to 99%,
# conservative). Steps inside one run are not independent evidence about a between-run change and are never
# the sample of these tests.


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularised incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        de = d * c
        h *= de
        if abs(de - 1.0) < 1e-14:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbeta = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbeta) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbeta) * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """Upper tail P(T > t) of Student's t with ``df`` degrees of freedom (df may be fractional; inf = normal)."""
    if not math.isfinite(df) or df > 1e7:
        return 0.5 * math.erfc(t / math.sqrt(2))
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def _t_pdf(t: float, df: float) -> float:
    lc = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(lc - (df + 1) / 2 * math.log1p(t * t / df))


@functools.lru_cache(maxsize=4096)
def _t_quantile_cached(p: float, df: float) -> float:
    if not math.isfinite(df) or df > 1e7:
        lo, hi = 0.0, 40.0
        for _ in range(100):
            mid = (lo + hi) / 2
            if 0.5 * math.erfc(mid / math.sqrt(2)) > 1.0 - p:
                lo = mid
            else:
                hi = mid
        return (lo + hi) / 2
    # bracket, then Newton steps safeguarded by bisection
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > 1.0 - p:
        lo, hi = hi, hi * 2.0
        if hi > 1e12:
            return math.inf
    x = (lo + hi) / 2
    for _ in range(100):
        f = (1.0 - p) - t_sf(x, df)  # increasing in x
        if abs(f) < 1e-13:
            break
        if f < 0:
            lo = x
        else:
            hi = x
        step = x - f / _t_pdf(x, df)
        x = step if lo < step < hi else (lo + hi) / 2
        if hi - lo < 1e-12 * max(1.0, x):
            break
    return x


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (0 < p < 1; df may be fractional, inf = normal)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"quantile level {p} outside (0, 1)")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    if p == 0.5:
        return 0.0
    return _t_quantile_cached(p, df if not math.isfinite(df) else round(df, 9))


@dataclass(frozen=True, slots=True)
class RatioTest:
    """A run-level comparison of two sides' per-run values (experiment / baseline).

    ``method``: "welch_log" (independent repeats), "paired_log" (interleaved A/B pairs; "paired_log_pooled" on a
    spread pooled over comparisons made alongside), "single_run" (one run a side: no interval; see
    ``noise_floor_ratio``). ``ratio``: the ratio of geometric means (paired: geometric mean
    of the per-pair ratios); ``ci_low``/``ci_high``: its ``confidence`` interval (None when there is none);
    ``p_value``: two-sided p of "ratio = 1" (None when not tested); ``df``: degrees of freedom of the t
    interval; ``se_log``: standard error of log(ratio); ``mde``: the smallest relative change (0.05 = 5%) these
    repeats detect with 80% power at this level (None without an interval). ``n_baseline``/``n_experiment``:
    runs per side (pairs: both the number of pairs).
    """

    method: str
    ratio: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    df: float | None
    se_log: float | None
    mde: float | None
    n_baseline: int
    n_experiment: int
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _positive(values: Any) -> Array:
    a: Array = np.asarray(values, dtype="float64").ravel()
    out: Array = a[np.isfinite(a) & (a > 0)]
    return out


def geometric_mean(values: Any) -> float:
    """Geometric mean of the positive finite values (nan when none)."""
    a = _positive(values)
    return float(np.exp(np.log(a).mean())) if a.size else math.nan


def _finish(method: str, d: float, se: float, df: float, nb: int, ne: int, confidence: float) -> RatioTest:
    if se > 0 and math.isfinite(se):
        tq = t_quantile(0.5 + confidence / 2, df)
        p = min(1.0, 2.0 * t_sf(abs(d) / se, df))
        mde = math.expm1((tq + t_quantile(0.8, df)) * se)
        return RatioTest(method, math.exp(d), math.exp(d - tq * se), math.exp(d + tq * se), p, df, se, mde, nb, ne,
                         confidence)
    # no spread at all (identical values): the interval is the point itself
    return RatioTest(method, math.exp(d), math.exp(d), math.exp(d), 1.0 if d == 0 else 0.0, df, 0.0, 0.0, nb, ne,
                     confidence)


def welch_log_ratio(base: Any, exp: Any, *, confidence: float = 0.95) -> RatioTest:
    """Welch's t on the logs of independent per-run values; fewer than 2 runs a side: no interval."""
    b, e = np.log(_positive(base)), np.log(_positive(exp))
    nb, ne = int(b.size), int(e.size)
    if nb == 0 or ne == 0:
        return RatioTest("welch_log", math.nan, None, None, None, None, None, None, nb, ne, confidence)
    d = float(e.mean() - b.mean())
    if nb < 2 or ne < 2:
        return RatioTest("single_run", math.exp(d), None, None, None, None, None, None, nb, ne, confidence)
    vb, ve = float(b.var(ddof=1)) / nb, float(e.var(ddof=1)) / ne
    se = math.sqrt(vb + ve)
    df = (vb + ve) ** 2 / (vb**2 / (nb - 1) + ve**2 / (ne - 1)) if vb + ve > 0 else float(nb + ne - 2)
    return _finish("welch_log", d, se, df, nb, ne, confidence)


def paired_log_ratio(base: Any, exp: Any, *, confidence: float = 0.95,
                     pooled: tuple[float, int] | None = None) -> RatioTest:
    """One-sample t on log(exp_i / base_i) of interleaved pairs (same length, pair i = base[i], exp[i]).

    ``pooled``: (sum of squared deviations, degrees of freedom) of per-pair log ratios around their own
    comparison's mean, summed over comparisons of the same program made alongside (tune's screen): the spread
    comes from all of them instead of this comparison's own few pairs."""
    b = np.asarray(base, dtype="float64").ravel()
    e = np.asarray(exp, dtype="float64").ravel()
    if b.size != e.size:
        raise ValueError(f"paired test needs as many baseline as experiment runs ({b.size} vs {e.size})")
    ok = np.isfinite(b) & np.isfinite(e) & (b > 0) & (e > 0)
    r = np.log(e[ok] / b[ok])
    n = int(r.size)
    if n == 0:
        return RatioTest("paired_log", math.nan, None, None, None, None, None, None, 0, 0, confidence)
    d = float(r.mean())
    if pooled is not None and pooled[1] > 0:
        return _finish("paired_log_pooled", d, math.sqrt(pooled[0] / pooled[1] / n), float(pooled[1]), n, n,
                       confidence)
    if n < 2:
        return RatioTest("single_run", math.exp(d), None, None, None, None, None, None, 1, 1, confidence)
    return _finish("paired_log", d, float(r.std(ddof=1)) / math.sqrt(n), float(n - 1), n, n, confidence)


MAX_REPEATS_NEEDED = 1000
"""``repeats_needed`` stops counting here (a spread that needs more cannot be beaten by repeating)."""


def repeats_needed(sigma_log: float, effect: float, *, confidence: float = 0.95, power: float = 0.8,
                   paired: bool = False) -> int:
    """Fewest runs a side (or A/B pairs) whose test, at this two-sided ``confidence``, detects a relative change
    of ``effect`` (0.05 = 5%) with ``power``, at a between-run spread of ``sigma_log`` (standard deviation of log
    per-run values; for pairs, of the per-pair log ratios). Independent sides: t on 2n - 2 df with standard error
    sigma * sqrt(2 / n); pairs: n - 1 df and sigma / sqrt(n). ``MAX_REPEATS_NEEDED`` when no count up to it does."""
    target = math.log1p(effect)
    if target <= 0 or not math.isfinite(sigma_log):
        return MAX_REPEATS_NEEDED
    if sigma_log <= 0:
        return 2
    for n in range(2, MAX_REPEATS_NEEDED):
        df = float(n - 1 if paired else 2 * n - 2)
        se = sigma_log / math.sqrt(n) if paired else sigma_log * math.sqrt(2.0 / n)
        if (t_quantile(0.5 + confidence / 2, df) + t_quantile(power, df)) * se <= target:
            return n
    return MAX_REPEATS_NEEDED


CHI2_1_MEDIAN = 0.4549364231195724
"""Median of the chi-square distribution with 1 degree of freedom."""
MIN_HISTORY_COMMITS = 6
"""Fewest commits in a history to estimate the between-commit variance from (fewer: runs treated as independent)."""
MEDIAN_EFFICIENCY = 0.37
"""Share of the degrees of freedom a median of squared differences keeps, against their mean (chi-square 1)."""


@dataclass(frozen=True, slots=True)
class BetweenCommits:
    """How much a commit's level moves beyond its runs' own spread (runs of one commit run back to back and share
    the machine's state): ``tau2_log`` the between-commit variance of log values, ``df`` its degrees of freedom
    (consecutive commit pairs used, times the median's efficiency), ``sigma2_log`` the pooled within-commit
    variance it was separated from."""

    tau2_log: float
    df: int
    sigma2_log: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def between_commits(groups: Any) -> BetweenCommits | None:
    """The between-commit variance of per-run values from a history (``groups``: each commit's values, in commit
    order; only commits with a positive value count). From successive differences of commit means (von Neumann's
    MSSD, robustly: their median square, so a real step between two commits is one outlier, not a level split):
    E[(m_i+1 - m_i)^2] / 2 = tau^2 + mean(sigma^2 / n); ``tau2_log`` = that minus the runs' own share, at least
    0. None with fewer than ``MIN_HISTORY_COMMITS`` commits, or no commit with 2 runs (within and between cannot
    be told apart)."""
    logs = [np.log(_positive(g)) for g in groups]
    logs = [a for a in logs if a.size]
    within = [a for a in logs if a.size >= 2]
    if len(logs) < MIN_HISTORY_COMMITS or not within:
        return None
    sigma2 = sum(float(((a - a.mean()) ** 2).sum()) for a in within) / sum(a.size - 1 for a in within)
    means = np.asarray([a.mean() for a in logs])
    # the median squared difference over its chi-square(1) median (0.455): a real step between two commits is one
    # outlying difference, and must not be read as commits wandering
    mssd = float(np.median(np.diff(means) ** 2)) / CHI2_1_MEDIAN / 2
    own = float(np.mean([sigma2 / a.size for a in logs]))
    # a median keeps about 37% of the information of the mean it replaces: fewer degrees of freedom
    return BetweenCommits(max(mssd - own, 0.0), max(1, round(MEDIAN_EFFICIENCY * (len(logs) - 1))), sigma2)


def clustered_log_ratio(base: Any, base_commits: Any, exp: Any, between: BetweenCommits, *,
                        confidence: float = 0.95) -> RatioTest:
    """Welch's t on log values, with each side's commits as clusters: the candidate (``exp``, one commit) and the
    baseline window (``base``, whose run i belongs to commit ``base_commits[i]``) each carry their commits' shared
    level, so var(d) = Welch's se^2 + tau^2 * (1 + sum_j w_j^2), w_j the share of the window's runs at commit j.
    Degrees of freedom: Satterthwaite's over the two parts (Welch's df for the runs, the history's for tau^2)."""
    w = welch_log_ratio(base, exp, confidence=confidence)
    if w.se_log is None or w.df is None:
        return w
    keys = list(base_commits)
    shares = [keys.count(k) / len(keys) for k in dict.fromkeys(keys)] if keys else [1.0]
    vw, vt = w.se_log**2, between.tau2_log * (1.0 + sum(x * x for x in shares))
    se = math.sqrt(vw + vt)
    # Welch-Satterthwaite over the two variance parts: the between part brings the history's df
    df = (vw + vt) ** 2 / (vw**2 / w.df + vt**2 / max(between.df, 1)) if vt > 0 and vw + vt > 0 else w.df
    return _finish("welch_log_clustered", math.log(w.ratio), se, df, w.n_baseline, w.n_experiment, confidence)


@dataclass(frozen=True, slots=True)
class NoiseFloor:
    """Between-run noise of one command on one machine: the standard deviation of log(per-run value) among
    repeats of the same command (``sigma_log``; 0.05 is about 5% run-to-run CV), with ``df`` degrees of freedom
    (inf for a stated default), and where it came from (``source``: a sentence reports print)."""

    sigma_log: float
    df: float
    source: str
    load_shift_log: float = 0.0
    """ln of the step-time ratio (experiment / baseline) that the two runs' difference in CPU contention predicts
    (analyze/diff/contention.py); 0 when equal or not measured."""
    load_factor: float = 0.0
    """How much of a step-time change a contention shift can explain, per unit of shift (see ``load_allowance``)."""
    load_reason: str | None = None
    """The sentence an inconclusive verdict gives when the loads differed (None: they did not, or unknown)."""

    def threshold(self, *, confidence: float = 0.99) -> float:
        """Smallest |log ratio| of two single runs that this noise explains less than 1 - ``confidence`` of
        the time: t(confidence) * sigma * sqrt(2)."""
        return t_quantile(0.5 + confidence / 2, self.df) * self.sigma_log * math.sqrt(2.0)

    def inflated(self, factor: float, why: str) -> NoiseFloor:
        return NoiseFloor(self.sigma_log * factor, self.df, f"{self.source}, x{factor:g} because {why}",
                          self.load_shift_log, self.load_factor, self.load_reason)

    def with_load(self, shift_log: float, factor: float, reason: str) -> NoiseFloor:
        """This floor for two runs whose CPU contention differed by ``shift_log`` (see ``load_allowance``); when
        that widens it, ``source`` says so and ``load_reason`` is ``reason``."""
        out = NoiseFloor(self.sigma_log, self.df, self.source, shift_log, factor, None)
        wide = out.load_allowance()
        if wide <= 0:
            return out
        return NoiseFloor(self.sigma_log, self.df, f"{self.source}; widened by {math.expm1(wide):.0%} because the "
                          "runs' CPU contention differed", shift_log, factor, reason)

    def load_allowance(self) -> float:
        """What a log change must clear on top of ``threshold()`` because the runs' contention differed:
        ``load_factor * (|load_shift_log| - sigma_log * sqrt(2))``, nothing when the shift is within one standard
        deviation of the difference of two runs (the floor's own between-run noise already holds ordinary load
        changes). In either direction: a run's median step can move by more or less than its mean run-queue wait
        predicts, so the shift widens the floor and is never subtracted from the change."""
        return self.load_factor * max(abs(self.load_shift_log) - self.sigma_log * math.sqrt(2.0), 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"sigma_log": self.sigma_log, "df": self.df if math.isfinite(self.df) else None,
                "source": self.source, "load_shift_log": self.load_shift_log, "load_factor": self.load_factor,
                "load_reason": self.load_reason}


DEFAULT_RUN_SIGMA = 0.05
"""Stated conservative default of the between-run noise (5% run-to-run CV; doubled for a run measured on a noisy
host), used when the store holds no repeats of the command. Measured on the shared 2-core machine: docs/diff.md."""


MIN_FLOOR_DF = 5
"""A learned noise floor with fewer degrees of freedom than this is not used alone (see pooled_noise_floor)."""


def default_noise_floor() -> NoiseFloor:
    return NoiseFloor(DEFAULT_RUN_SIGMA, math.inf, f"no repeats of this command in the store: stated default "
                      f"{DEFAULT_RUN_SIGMA:.0%} between-run CV")


def pooled_noise_floor(groups: Any, *, what: str = "repeats of this command") -> NoiseFloor | None:
    """Pooled between-run standard deviation of log values over groups of repeats (each group: runs of the same
    command and code); None when no group has 2 or more positive values."""
    ss, df, n_groups = 0.0, 0, 0
    for g in groups:
        a = np.log(_positive(g))
        if a.size >= 2:
            ss += float(((a - a.mean()) ** 2).sum())
            df += int(a.size - 1)
            n_groups += 1
    if df == 0:
        return None
    sigma = math.sqrt(ss / df)
    learned = f"learned from {df + n_groups} {what} in the store ({n_groups} group(s), between-run CV {sigma:.1%}"
    if df < MIN_FLOOR_DF:
        # too few repeats to rely on alone: the larger of them and the stated default, treated as known
        return NoiseFloor(max(sigma, DEFAULT_RUN_SIGMA), math.inf,
                          f"{learned}; {df} df, fewer than {MIN_FLOOR_DF}: the larger of it and the stated default "
                          f"{DEFAULT_RUN_SIGMA:.0%})")
    return NoiseFloor(sigma, float(df), learned + ")")


def noise_floor_ratio(base: float, exp: float, floor: NoiseFloor, *, confidence: float = 0.99) -> RatioTest:
    """One run a side: the ratio, and whether it exceeds the noise floor (``p_value`` from the floor's t; no
    interval, since two runs cannot estimate their own noise). ``mde``: the change the floor requires, before
    any widening for a difference in load (``NoiseFloor.load_allowance``)."""
    d = math.log(exp / base)
    se = floor.sigma_log * math.sqrt(2.0)
    p = min(1.0, 2.0 * t_sf(abs(d) / se, floor.df)) if se > 0 else (1.0 if d == 0 else 0.0)
    return RatioTest("noise_floor", math.exp(d), None, None, p, floor.df if math.isfinite(floor.df) else None,
                     se, math.expm1(floor.threshold(confidence=confidence)), 1, 1, confidence)


@dataclass(frozen=True, slots=True)
class SpreadInterval:
    """What an interval of a few repeats honestly is.

    ``kind``: "t95" (n >= 3: ``confidence`` t interval of the geometric mean, i.e. of the centre of a
    log-symmetric run distribution), "min-max" (n = 2: the range, no coverage claimed), "single" (n = 1).
    ``low``/``high`` in the values' unit.
    """

    kind: str
    low: float
    high: float
    n: int

    @property
    def label(self) -> str:
        return {"t95": "95% CI", "min-max": "min–max (2 runs)", "single": "one run"}.get(self.kind, self.kind)


def run_interval(values: Any, *, confidence: float = 0.95) -> SpreadInterval | None:
    """Interval of the centre of per-run values: a t interval on logs from 3 runs, min–max below (labelled)."""
    a = _positive(values)
    n = int(a.size)
    if n == 0:
        return None
    if n == 1:
        return SpreadInterval("single", float(a[0]), float(a[0]), 1)
    if n < 3:
        return SpreadInterval("min-max", float(a.min()), float(a.max()), n)
    lg = np.log(a)
    m, se = float(lg.mean()), float(lg.std(ddof=1)) / math.sqrt(n)
    tq = t_quantile(0.5 + confidence / 2, n - 1)
    return SpreadInterval("t95", math.exp(m - tq * se), math.exp(m + tq * se), n)
