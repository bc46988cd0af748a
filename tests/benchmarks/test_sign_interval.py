"""benchmarks/hook_costs.py ``sign_interval``: the sign test's order statistics and coverage, checked against
the binomial by hand (n = 20) and against scipy's binomial for the 1,500 rounds keras_within.py pairs."""

from __future__ import annotations

from benchmarks.hook_costs import sign_interval
from scipy.stats import binom


def test_twenty_values_give_the_6th_and_15th() -> None:
    # P(B <= 5), B ~ Binomial(20, 1/2): (1 + 20 + 190 + 1140 + 4845 + 15504) / 2**20 = 21700 / 1048576;
    # k = 7 would need P(B <= 6) = 60460 / 1048576, coverage 0.885 < 95%
    low, high, cover = sign_interval([float(v) for v in range(20, 0, -1)])
    assert (low, high) == (6.0, 15.0)
    assert cover == 1 - 2 * 21700 / 2**20


def test_many_rounds_take_the_widest_k_whose_coverage_holds() -> None:
    n = 1500
    low, high, cover = sign_interval([float(v) for v in range(n)], 0.95)
    k = int(low) + 1  # the values are 0..n-1: the k-th smallest is k - 1
    assert high == n - k
    assert abs(cover - (1 - 2 * binom.cdf(k - 1, n, 0.5))) < 1e-9
    assert cover >= 0.95 and 1 - 2 * binom.cdf(k, n, 0.5) < 0.95
