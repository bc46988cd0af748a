"""advise --verify's words for bench --ab's paired verdict, and its realised saving with interval, from per-run
median step times (ns) through the same compare_runs as `diff`; expected values computed here from the inputs."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from stepscope.analyze.advisor.verify import (
    CANNOT_TELL,
    CONFIRMED,
    NOT_CONFIRMED,
    WORSE,
    Outcome,
    Suggestion,
    combined,
    outcome,
)
from stepscope.analyze.diff.significance import DiffSettings, compare_runs
from stepscope.model.changes import Change

A = [100e6, 104e6, 97e6, 102e6, 99e6]
S = Suggestion("DataLoader num_workers=2", ("input-bound",), (Change("loader", "num_workers", 2, "w=2"),), 0.05)


def _verify(b: list[float]) -> Outcome:
    step = compare_runs(A, b, settings=DiffSettings(paired=True))
    return outcome(S, step, runs_a=tuple(f"a{i}" for i in range(len(A))), runs_b=tuple(f"b{i}" for i in range(len(b))))


def _gm(v: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in v) / len(v))


def test_half_the_step_is_confirmed_with_the_saving_and_its_interval() -> None:
    b = [a * f for a, f in zip(A, (0.50, 0.52, 0.49, 0.51, 0.50), strict=True)]
    o = _verify(b)
    assert o.verdict == CONFIRMED and o.pairs == 5
    assert o.baseline_step_s == pytest.approx(_gm(A) / 1e9)
    assert o.saving_s_per_step == pytest.approx((_gm(A) - _gm(b)) / 1e9)
    assert o.ci_low is not None and o.ci_high is not None and o.ci_high < 1
    assert 0 < o.saving_low_s < o.saving_s_per_step < o.saving_high_s  # type: ignore[operator]
    assert o.saving_low_s == pytest.approx(_gm(A) / 1e9 * (1 - o.ci_high))


def test_no_change_is_not_confirmed_slower_is_worse_noise_cannot_tell() -> None:
    same = [a * f for a, f in zip(A, (1.001, 0.999, 1.0005, 0.9995, 1.0), strict=True)]
    assert _verify(same).verdict == NOT_CONFIRMED
    slower = [a * f for a, f in zip(A, (1.30, 1.31, 1.29, 1.30, 1.32), strict=True)]
    assert _verify(slower).verdict == WORSE
    noisy = [a * f for a, f in zip(A, (0.6, 1.5, 0.8, 1.3, 1.0), strict=True)]
    o = _verify(noisy)
    assert o.verdict == CANNOT_TELL and o.mde is not None and o.mde > 0.02 and "pairs" in (o.note or "")
    assert (o.note or "").startswith("after 5 pairs, cannot tell: MDE ")  # how many pairs the answer rests on


def test_outcome_round_trips_and_confirmed_ones_combine() -> None:
    o = _verify([a * 0.5 for a in A])
    assert Outcome.from_dict(o.to_dict()) == o
    assert combined([o]) is None
    both = combined([o, o])
    assert both is not None and len(both.changes) == 2 and both.predicted_s_per_step is None


def test_words_say_saved_or_lost_with_the_interval() -> None:
    from stepscope.report.advice import outcome_lines

    predicted, realised, verdict, _ = outcome_lines(_verify([a * 0.5 for a in A]))
    assert predicted == "up to 50 ms per step" and realised.startswith("saved ") and "50.0% of the step" in realised
    assert ", interval " in realised and verdict == CONFIRMED  # no level recorded: none claimed
    _, realised, _, _ = outcome_lines(replace(_verify([a * 0.5 for a in A]), confidence=0.9975))
    assert ", 99.75% interval " in realised  # the level of the look that decided
    _, realised, verdict, _ = outcome_lines(_verify([a * 1.3 for a in A]))
    assert realised.startswith("lost ") and "30.0% of the step" in realised and verdict == WORSE
