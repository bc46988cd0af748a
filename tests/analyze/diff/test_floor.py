"""One run a side: the noise floor comes from what the runs measured (their step-time CV, their host's load),
each source counted once, and an inconclusive verdict names the `bench --ab --repeat N` that would decide."""

from __future__ import annotations

import math
import re

import pytest

from stepscope.analyze.diff.floor import CV_SIGMA, QUIET_SIGMA, SATURATED_SIGMA, measured_floor
from stepscope.analyze.diff.significance import DiffSettings, Verdict, compare_runs
from stepscope.analyze.run.quality import Quality
from stepscope.analyze.stats import NoiseFloor, repeats_needed, t_quantile


def quality(cv: float, *, busy: float = 40.0, others: float = 0.1) -> Quality:
    noisy = cv > 0.15 or (busy >= 85 and others >= 0.5)
    return Quality(noisy, ("noisy",) if noisy else (), cv, others, busy, ())


QUIET = quality(0.02)
SATURATED = quality(0.4, busy=99.0, others=1.8)


def test_quiet_runs_without_repeats_get_the_quiet_host_spread() -> None:
    f = measured_floor(None, [("a", QUIET), ("b", QUIET)])
    assert f.sigma_log == QUIET_SIGMA and "quiet host" in f.source


def test_own_dispersion_and_load_raise_the_floor() -> None:
    f = measured_floor(None, [("a", QUIET), ("b", quality(0.9))])
    assert f.sigma_log == pytest.approx(CV_SIGMA * 0.9) and "run b's own step-time CV 90%" in f.source
    f = measured_floor(None, [("a", SATURATED), ("b", QUIET)])
    assert f.sigma_log == SATURATED_SIGMA and "saturated" in f.source and "run(s) a" in f.source


def test_a_learned_floor_is_not_doubled_for_a_noisy_host() -> None:
    learned = NoiseFloor(0.24, 33.0, "learned from 34 runs")
    f = measured_floor(learned, [("a", SATURATED), ("b", SATURATED)])
    assert f is learned and f.sigma_log == 0.24  # the larger of the sources, not 0.24 x 2 (old: 0.48)
    f = measured_floor(NoiseFloor(0.03, 9.0, "learned from 10 runs"), [("a", SATURATED), ("b", QUIET)])
    assert f.sigma_log == SATURATED_SIGMA and "raised to 15%" in f.source and "learned from 10 runs" in f.source
    quiet_learned = NoiseFloor(0.01, 20.0, "learned from 22 runs")
    assert measured_floor(quiet_learned, [("a", QUIET), ("b", QUIET)]) is quiet_learned  # no quiet-host prior over it


def test_the_issues_aa_pairs_on_a_saturated_host_are_inconclusive() -> None:
    """The issue's A/A pairs without a hog (x1.46, x0.678) were called slower / faster against the doubled 5%
    default (sigma 10%: threshold exp(2.576 * 0.141) = x1.44). Against the saturated host's measured spread they
    are inconclusive, and the note names the pairs that would decide, computed from that spread."""
    floor = measured_floor(None, [("a", SATURATED), ("b", SATURATED)])
    s = DiffSettings()
    for ratio in (1.46, 0.678):
        ch = compare_runs([1.0], [ratio], settings=s, floor=floor)
        assert ch.verdict is Verdict.INCONCLUSIVE, ch
        assert ch.note is not None and "within the between-run noise floor" in ch.note
        n = int(re.search(r"bench --ab --repeat (\d+)", ch.note).group(1))  # type: ignore[union-attr]
        effect = abs(ratio - 1)
        assert n == repeats_needed(SATURATED_SIGMA * math.sqrt(2), effect, confidence=0.95, paired=True)
        # independently: n pairs detect the effect, n - 1 do not
        d = SATURATED_SIGMA * math.sqrt(2)
        assert (t_quantile(0.975, n - 1) + t_quantile(0.8, n - 1)) * d / math.sqrt(n) <= math.log1p(effect)
        assert (t_quantile(0.975, n - 2) + t_quantile(0.8, n - 2)) * d / math.sqrt(n - 1) > math.log1p(effect)
    # a 3x change still clears it: the floor is wide, not blind
    assert compare_runs([1.0], [3.0], settings=s, floor=floor).verdict is Verdict.SLOWER
