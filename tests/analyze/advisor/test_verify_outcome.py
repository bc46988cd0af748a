"""advise --verify's words for bench --ab's paired verdict, and its realised saving with interval, from per-run
median step times (ns) through the same compare_runs as `diff`; expected values computed here from the inputs
(the pairs a "cannot tell" needs from scipy's t quantiles, not stepscope's)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy import stats

from stepscope.analyze.advisor.verify import (
    CANNOT_TELL,
    CONFIRMED,
    NOT_CONFIRMED,
    WORSE,
    Outcome,
    Suggestion,
    cannot_tell_note,
    combined,
    drift_widening,
    outcome,
    pair_spread,
    pairs_to_tell,
)
from stepscope.analyze.diff.significance import DiffSettings, compare_runs
from stepscope.model.changes import Change

A = [100e6, 104e6, 97e6, 102e6, 99e6]
S = Suggestion("DataLoader num_workers=2", ("input-bound",), (Change("loader", "num_workers", 2, "w=2"),), 0.05,
               True)


def _verify(b: list[float]) -> Outcome:
    step = compare_runs(A, b, settings=DiffSettings(paired=True))
    return outcome(S, step, runs_a=tuple(f"a{i}" for i in range(len(A))), runs_b=tuple(f"b{i}" for i in range(len(b))),
                   spread_log=pair_spread(list(A), list(b)))


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
    assert o.verdict == CANNOT_TELL and o.mde is not None and o.mde > 0.02 and "over 5 pairs" in (o.note or "")


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
    about = outcome_lines(replace(_verify([a * 0.5 for a in A]), suggestion=replace(S, predicted_is_upper_bound=False)))
    assert about[0] == "about 50 ms per step"
    assert ", interval " in realised and verdict == CONFIRMED  # no level recorded: none claimed
    _, realised, _, _ = outcome_lines(replace(_verify([a * 0.5 for a in A]), confidence=0.9975))
    assert ", 99.75% interval " in realised  # the level of the look that decided
    _, realised, verdict, _ = outcome_lines(_verify([a * 1.3 for a in A]))
    assert realised.startswith("lost ") and "30.0% of the step" in realised and verdict == WORSE


def _looks(n: int) -> int:
    """How many looks `--repeat n` plans: at 3 pairs, then about 1.5 times as many each time, n last."""
    at = [3]
    while at[-1] < n:
        at.append(min(n, max(at[-1] + 1, math.ceil(at[-1] * 1.5))))
    return len(at)


def _pairs_needed(sd: float, target: float = math.log(1.02), widen: float = 0.0) -> int:
    """The fewest N whose last look (at 1% / looks, two-sided), its interval widened by ``widen``, has 80% power
    for a change of ``target`` (log) at spread ``sd``."""
    for n in range(3, 1000):
        level = 0.01 / _looks(n)
        if (stats.t.ppf(1 - level / 2, n - 1) + stats.t.ppf(0.8, n - 1)) * sd / math.sqrt(n) + widen <= target:
            return n
    raise AssertionError("more than 1000 pairs")


def test_cannot_tell_names_the_advise_command_and_the_pairs_that_would_tell() -> None:
    """The shared note names `bench --ab --repeat N`; verify's names the command the user runs, with the --repeat
    its own sequential looks need at the spread the pairs measured."""
    noisy = [a * f for a, f in zip(A, (0.96, 1.05, 0.98, 1.04, 1.0), strict=True)]
    step = compare_runs(A, noisy, settings=DiffSettings(paired=True))
    assert "bench --ab" in (step.note or "")  # bench keeps its words
    sd = float(np.std(np.log(np.asarray(noisy) / np.asarray(A)), ddof=1))
    assert pair_spread(list(A), list(noisy)) == pytest.approx(sd)
    need = _pairs_needed(sd)
    assert pairs_to_tell(sd, target_log=math.log(1.02)) == need and need > 10
    cmd = "stepscope advise r1 --verify --rule input-bound"
    o = outcome(S, step, runs_a=tuple("abcde"), runs_b=tuple("fghij"), spread_log=sd, rerun=cmd)
    assert o.verdict == CANNOT_TELL
    assert o.note == (f"cannot tell a 2% change at this per-pair spread ({sd:.1%} over 5 pairs): `{cmd} --repeat "
                      f"{need}` would"), o.note
    assert "bench" not in (o.note or "")


def test_a_large_change_seen_counts_the_pairs_for_its_size_and_the_drift_widening() -> None:
    """Halving the step at a 30% per-pair spread: the pairs that tell a change of that size, not of 2% (which
    would need thousands); a widening for load drift leaves less room for the t interval."""
    cmd = "stepscope advise r1 --verify"
    need = _pairs_needed(0.3, target=math.log(2))
    assert 5 < need < 30
    assert cannot_tell_note(5, 0.3, cmd, ratio=0.5) == (f"cannot tell the change seen (x0.50) at this per-pair "
                                                        f"spread (30.0% over 5 pairs): `{cmd} --repeat {need}` would")
    wider = _pairs_needed(0.3, target=math.log(2), widen=0.2)
    assert wider > need and f"--repeat {wider}` would" in cannot_tell_note(5, 0.3, cmd, ratio=0.5, widen_log=0.2)
    # the widening recovered from an interval: its half-width beyond the t interval's at the look's level
    step = compare_runs(A, [a * f for a, f in zip(A, (0.4, 0.6, 0.45, 0.55, 0.5), strict=True)],
                        settings=DiffSettings(paired=True, confidence=0.995), widen_log=0.1)
    sd = pair_spread(list(A), [a * f for a, f in zip(A, (0.4, 0.6, 0.45, 0.55, 0.5), strict=True)])
    assert sd is not None and drift_widening(step, sd, 5, 0.995) == pytest.approx(0.1)


def test_cannot_tell_without_a_count_says_why() -> None:
    cmd = "stepscope advise r1 --verify"
    assert pairs_to_tell(0.5, target_log=math.log(1.02)) is None  # a 50% spread: more than 1000 pairs
    assert "not even 1000 pairs" in cannot_tell_note(5, 0.5, cmd) and cmd not in cannot_tell_note(5, 0.5, cmd)
    # the interval widened for load drift by more than the change: more pairs would not tell
    note = cannot_tell_note(10, 0.004, cmd, widen_log=0.03)
    assert "widened by 3.0% for load that followed one side" in note and cmd not in note
    # nearly as much: the spread alone would need 72 pairs, the little room left more than 1000
    assert _pairs_needed(0.0395) == pairs_to_tell(0.0395, target_log=math.log(1.02))
    note = cannot_tell_note(3, 0.0395, cmd, widen_log=0.0197)
    assert "widened by 2.0% for load that followed one side, too close to a 2% change" in note, note
