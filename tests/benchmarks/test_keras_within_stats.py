"""The statistics of benchmarks/keras_within.py (the Keras hooks' overhead paired within one process): the
paired median with its sign-test interval, and the verdict against 1% on the interval's ends, on numbers
worked out by hand."""

from __future__ import annotations

import pytest
from benchmarks.keras_within import paired, verdict

MS = 1_000_000
US = 1_000
BARE = [10 * MS, 12 * MS, 9 * MS, 11 * MS, 10 * MS, 13 * MS, 8 * MS, 10 * MS, 10 * MS]
"""Nine rounds' bare step times: median 10 ms (sorted: 8, 9, 10, 10, 10, 10, 11, 12, 13)."""


def _arm(diffs_us: list[int]) -> list[int]:
    return [b + d * US for b, d in zip(BARE, diffs_us, strict=True)]


def test_paired_takes_the_median_of_the_differences_round_by_round() -> None:
    diffs = [50, 10, 90, 30, 70, 20, 80, 40, 60]
    p = paired(_arm(diffs), BARE)
    # nine differences, sorted 10..90 µs: median 50 µs. The sign test's interval for n = 9: order statistics
    # k and 10 - k for the largest k with 1 - 2 P(B <= k - 1) >= 95%, B ~ Bin(9, 1/2): k = 2 gives
    # 1 - 2 (1 + 9) / 512 = 492/512; k = 3 would give 1 - 2 (1 + 9 + 36) / 512 = 420/512 < 95%
    assert p.median_ns == 50 * US
    assert (p.low_ns, p.high_ns) == (20 * US, 80 * US)
    assert p.coverage == pytest.approx(492 / 512)
    assert p.bare_ns == 10 * MS
    # not the difference of the medians: the arm's median step is 10.06 ms (sorted: 8.08, 9.09, 10.04, 10.05,
    # 10.06, 10.07, 11.03, 12.01, 13.02), 60 µs above bare's, where the paired figure is 50 µs
    assert sorted(_arm(diffs))[4] - sorted(BARE)[4] == 60 * US
    assert p.share(p.median_ns) == pytest.approx(0.005)


@pytest.mark.parametrize(("diffs_us", "expected"), [
    ([50, 10, 90, 30, 70, 20, 80, 40, 60], "met"),  # [20, 80] µs: 0.2%-0.8% of 10 ms, all below 1%
    ([150, 110, 190, 130, 170, 120, 180, 140, 160], "NOT met"),  # [120, 180] µs: 1.2%-1.8%, all at or above
    ([100, 60, 140, 80, 120, 70, 130, 90, 110], "not decided (the interval spans it)"),  # [70, 130] µs
    ([50, 10, 110, 30, 70, 20, 100, 40, 60], "not decided (the interval spans it)"),  # [20, 100]: 1% not below
    ([150, 100, 190, 130, 170, 120, 180, 140, 160], "NOT met"),  # [120, 180]: the lowest value is not the end
])
def test_verdict_is_judged_on_the_interval_ends(diffs_us: list[int], expected: str) -> None:
    assert verdict(paired(_arm(diffs_us), BARE)) == expected


def test_an_arm_equal_to_bare_gives_zero_with_a_zero_width_interval() -> None:
    p = paired(BARE, BARE)
    assert (p.median_ns, p.low_ns, p.high_ns) == (0, 0, 0)
    assert verdict(p) == "met"


def test_the_report_judges_all_and_checks_the_known_cost() -> None:
    from benchmarks.keras_within import describe

    ten = [10 * MS] * 9
    times = {"bare": {"wall": BARE, "CPU": ten}, "bare again": {"wall": BARE, "CPU": ten},
             "all": {"wall": _arm([50, 10, 90, 30, 70, 20, 80, 40, 60]),
                     "CPU": [t + d * US for t, d in zip(ten, [150, 110, 190, 130, 170, 120, 180, 140, 160],
                                                        strict=True)]},
             "known 100 µs": {"wall": _arm([100, 90, 130, 95, 105, 110, 85, 120, 101]), "CPU": ten}}
    text = describe(times, block=1, warm=0)
    assert "verdict, all (what `stepscope run` installs in fit) < 1% of the step: wall met; CPU NOT met" in text
    # the known arm's wall differences, sorted 85..130 µs: interval [90, 120] holds 100; its CPU ones are 0
    lines = text.splitlines()
    known = lines.index("  known 100 µs:")
    assert "known 100 µs inside the interval" in lines[known + 1]
    assert "known 100 µs OUTSIDE the interval" in lines[known + 2]
