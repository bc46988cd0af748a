"""Robust statistics in one place: distributions, confidence intervals, two-sample tests.

Percentiles use linear interpolation (NumPy's default). Significance tests say what they cannot say:
``p_value > alpha`` means the data cannot tell, not that there is no difference.
"""

from __future__ import annotations

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
