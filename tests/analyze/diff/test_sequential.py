"""Sequential pairs (advise --verify, tune) keep bench's 1%: simulated interleaved studies through the real pair
order and verdict (benchmarks/ab_coverage.py), looked at on the planned looks and stopped once decided. The same
looks each at the overall 99% call A/A studies more often (the control that shows the correction is needed), and
a real change is found in fewer pairs than the maximum."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stepscope.analyze.diff.sequential import Looks
from stepscope.analyze.diff.significance import Verdict

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from ab_coverage import sequential_count

TRIALS = 400


def test_looks_grow_by_half_and_split_the_error() -> None:
    assert Looks(3, 10).at == (3, 5, 8, 10)
    assert Looks(3, 5).at == (3, 5)
    assert Looks(2, 2).at == (2,)
    assert Looks(3, 10).look_confidence == pytest.approx(1 - 0.01 / 4)
    assert Looks(3, 5, one_sided=True).look_confidence == pytest.approx(1 - 0.02 / 2)
    assert Looks(3, 10).stop(3, Verdict.NO_SIGNIFICANT_CHANGE) and not Looks(3, 10).stop(5, Verdict.INCONCLUSIVE)
    assert Looks(3, 10).stop(10, Verdict.INCONCLUSIVE)
    with pytest.raises(ValueError):
        Looks(1, 3)


def test_sequential_pairs_call_at_most_one_aa_study_in_100() -> None:
    """A saturated host's 20% run spread: the threshold screens nothing, only the looks' level decides."""
    looks = Looks(3, 10)
    c = sequential_count("gauss20", looks, TRIALS, 0.02, seed=11, change=False)
    # 1% of 400 is 4; 6 leaves room for chance
    assert c.aa_false <= 6, c
    control = sequential_count("gauss20", looks, TRIALS, 0.02, corrected=False, seed=11, change=False)
    assert control.aa_false >= c.aa_false + 4, (c, control)


def test_a_real_change_stops_early() -> None:
    c = sequential_count("gauss2", Looks(3, 10), 100, 0.02, seed=3)
    assert c.found >= 98, c  # +10% at a 2% run spread: found
    assert c.mean_pairs_found < 7, c  # most studies stop at 3 or 5 pairs, not at the maximum of 10
