"""`stepscope tune`'s search: a screen by compass search on few lax pairs, then a confirmation of its best
against the start on fresh interleaved pairs at 99%.

A pure function over a ``measure`` callback (one call = one run of the command at a setting, returning its
metric, or None when the run failed), so the search is tested on a deterministic objective without runs.

**Screen** (picks a setting; claims nothing). From the recorded setting (each dimension's ``start``), rounds:
the current setting and its neighbours on every dimension at once (adjacent values in the order given; a
dimension that has moved goes on only the way it moved) run in interleaved blocks (C x y / y x C: drift of the
machine hits every side alike; the current setting's runs serve every candidate of the round), ``screen_pairs``
blocks. Each candidate is decided by diff's paired rule (``pair_verdict``) at a lax one-sided
``screen_confidence``, on a spread pooled over every pair the screen has run (one program, one run-to-run
spread: two pairs alone give one degree of freedom and miss large gains). The best "better" moves there;
without one, a "no gain" neighbour (a plateau, shown with power) has the value past it tried once, and then the
screen stops. A setting screened and not found better is not screened again. A wrong move only costs runs:
nothing the screen sees is reported.

**Confirmation** (the only claim). The screen's best against the start on fresh interleaved pairs, decided on the
sequential looks of analyze/diff/sequential.py (``min_pairs``, then about 1.5 times as many each look, up to
``max_pairs``) at ``confidence`` overall, one-sided (only "better" is a claim). Its runs are independent of the
runs that selected the setting, so the selection's luck does not reach the verdict: on a program no setting
speeds up a gain is claimed in at most ``1 - confidence`` of searches. The gain and its interval are the
confirmation's; anything else keeps the start and says why (with the pairs that would tell).

The budget counts every run; the screen stops where the next block would leave fewer than ``min_pairs`` pairs
for the confirmation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np

from stepscope.analyze.diff.sequential import Looks
from stepscope.analyze.diff.significance import (
    BENCH_CONFIDENCE,
    Change,
    DiffSettings,
    Verdict,
    compare_runs,
    pair_verdict,
)
from stepscope.analyze.stats import paired_log_ratio

TUNE_SCHEMA = "stepscope.tune/2"

Measure = Callable[[Mapping[str, str], str], float | None]
"""``measure(setting, note)``: run once at ``setting`` (``note`` names the run's role: ``screen ...`` or
``confirm ...``, for progress lines) and return its metric; None when the run failed or had no metric."""

SCREEN_PAIRS = 2
"""Blocks a screened candidate gets: enough to see a step of tens of percent at a few percent run spread."""
SCREEN_CONFIDENCE = 0.90
"""One-sided level of a screen move: lax, since a wrong move costs runs, never a claim."""
MIN_PAIRS = 3
"""Confirmation pairs before the first look (with 2, one degree of freedom: at 99% the interval spans orders of
magnitude)."""
MAX_PAIRS = 8


class Outcome(StrEnum):
    """A candidate's fate against the current setting (screen), or the best's against the start (confirmation)."""

    BETTER = "better"
    WORSE = "worse"
    NO_GAIN = "no gain"
    CANNOT_TELL = "cannot tell"
    FAILED = "failed"
    """The candidate's run failed (or had no metric): the setting is dropped."""
    UNFINISHED = "unfinished"
    """The budget ran out, or another neighbour was better first."""


@dataclass(frozen=True, slots=True)
class Dimension:
    """One tunable setting: its values in order (neighbours are adjacent) and the value to start from."""

    name: str
    values: tuple[str, ...]
    start: str

    def __post_init__(self) -> None:
        if self.start not in self.values:
            raise ValueError(f"{self.name}: start {self.start!r} is not one of {self.values}")


@dataclass(frozen=True, slots=True)
class Comparison:
    """One candidate against the current setting over ``pairs`` interleaved pairs (candidate / current);
    ``confidence``: the two-sided level of the interval; ``note``: why it cannot tell (and the pairs that would)."""

    dimension: str
    current: dict[str, str]
    candidate: dict[str, str]
    pairs: int
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    mde: float | None
    outcome: Outcome
    confidence: float | None = None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class TuneResult:
    """The search's answer. ``best`` is the screen's best when the confirmation showed it better, else the start;
    ``gain`` (best / start of the metric: >1 is better for a throughput, <1 for a time) and its interval come
    from the confirmation's pairs only; None when nothing was claimed."""

    metric: str
    higher_is_better: bool
    start: dict[str, str]
    best: dict[str, str]
    gain: float | None
    gain_low: float | None
    gain_high: float | None
    runs: int
    budget: int
    budget_exhausted: bool
    comparisons: tuple[Comparison, ...]
    """The screen's."""
    screen_best: dict[str, str] = field(default_factory=dict)
    screen_runs: int = 0
    confirmation: Comparison | None = None
    """The screen's best against the start on fresh pairs (None: the screen kept the start, or no budget)."""
    start_failed: bool = False
    """The very first run (at the start setting) failed: nothing was compared."""
    notes: tuple[str, ...] = field(default=())

    @property
    def claimed(self) -> bool:
        return self.gain is not None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["schema"] = TUNE_SCHEMA
        d["claimed"] = self.claimed
        for c in [*d["comparisons"], *([d["confirmation"]] if d["confirmation"] else [])]:
            c["outcome"] = str(c["outcome"])
        return d


@dataclass(slots=True)
class _State:
    budget: int
    runs: int = 0
    comparisons: list[Comparison] = field(default_factory=list)
    exhausted: bool = False
    start_failed: bool = False
    spread: tuple[float, int] = (0.0, 0)
    """The screen's per-pair log ratios: squared deviations from their comparison's mean, summed, and their
    degrees of freedom (one program, one spread: every screen decision uses them all)."""


def neighbours(dim: Dimension, value: str, direction: int | None, distance: int = 1) -> list[tuple[int, str]]:
    """(direction, value) of the values ``distance`` places from ``value`` (both sides, or ``direction``'s)."""
    i = dim.values.index(value)
    out = []
    for step in ((-1, 1) if direction is None else (direction,)):
        if 0 <= i + step * distance < len(dim.values):
            out.append((step, dim.values[i + step * distance]))
    return out


def search(space: Sequence[Dimension], measure: Measure, *, budget: int, metric: str = "metric",
           higher_is_better: bool = True, screen_pairs: int = SCREEN_PAIRS,
           screen_confidence: float = SCREEN_CONFIDENCE, min_pairs: int = MIN_PAIRS, max_pairs: int = MAX_PAIRS,
           threshold: float = 0.02, confidence: float = BENCH_CONFIDENCE) -> TuneResult:
    """The screen, then the confirmation (see the module docstring); at most ``budget`` calls of ``measure``."""
    if not space:
        raise ValueError("nothing to tune: no dimension")
    if not 2 <= min_pairs <= max_pairs:
        raise ValueError(f"need 2 <= min_pairs <= max_pairs, got {min_pairs}, {max_pairs}")
    if screen_pairs < 2 or not 0.5 < screen_confidence < 1:
        raise ValueError(f"need screen_pairs >= 2 and 0.5 < screen_confidence < 1, got {screen_pairs}, "
                         f"{screen_confidence}")
    start = {d.name: d.start for d in space}
    # the screen leaves the confirmation its first look
    st = _State(budget=max(0, budget - 2 * min_pairs))
    lax = DiffSettings(paired=True, threshold=threshold, confidence=1.0 - 2.0 * (1.0 - screen_confidence))
    best = _screen(space, start, measure, st, lax, screen_pairs, higher_is_better)
    screen_runs = st.runs
    common: dict[str, Any] = dict(metric=metric, higher_is_better=higher_is_better, start=start, budget=budget,
                                  comparisons=tuple(st.comparisons), screen_best=best, screen_runs=screen_runs,
                                  start_failed=st.start_failed)
    if st.start_failed or best == start:
        return TuneResult(best=dict(start), gain=None, gain_low=None, gain_high=None, runs=st.runs,
                          budget_exhausted=st.exhausted, **common)
    looks = Looks(min_pairs, max_pairs, confidence, one_sided=True)
    st.budget, exhausted = budget, st.exhausted
    conf = _confirm(start, best, measure, st, looks, threshold, higher_is_better)
    won = conf.outcome is Outcome.BETTER
    return TuneResult(best=dict(best if won else start), gain=conf.ratio if won else None,
                      gain_low=conf.ci_low if won else None, gain_high=conf.ci_high if won else None,
                      runs=st.runs, budget_exhausted=exhausted or st.exhausted, confirmation=conf, **common)


def _screen(space: Sequence[Dimension], start: dict[str, str], measure: Measure, st: _State,
            settings: DiffSettings, pairs: int, higher: bool) -> dict[str, str]:
    """A compass search from ``start`` on ``pairs`` blocks a round; the setting it ends at."""
    current = dict(start)
    heading: dict[str, int] = {}  # a dimension that moved goes on only the way it moved
    screened: set[tuple[tuple[str, str], ...]] = set()  # settings screened and not better: never again

    def key(s: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(s.items()))

    def fresh(dim: Dimension, direction: int | None, distance: int = 1) -> list[tuple[Dimension, int, str]]:
        return [(dim, d, v) for d, v in neighbours(dim, current[dim.name], direction, distance)
                if key({**current, dim.name: v}) not in screened]

    while not st.exhausted and not st.start_failed:
        cands = [c for dim in space for c in fresh(dim, heading.get(dim.name))]
        if not cands:
            break
        won = _block(current, cands, measure, st, settings, pairs, higher)
        if won is None and not st.exhausted and not st.start_failed:
            # a plateau (a neighbour as fast as the current, shown with power): try once past it
            flat = {(c.dimension, c.candidate[c.dimension]) for c in st.comparisons[-len(cands):]
                    if c.outcome is Outcome.NO_GAIN}
            far = [f for dim, d, v in cands if (dim.name, v) in flat for f in fresh(dim, d, 2)]
            won = _block(current, far, measure, st, settings, pairs, higher) if far else None
        screened.update(key(c.candidate) for c in st.comparisons if c.outcome is not Outcome.BETTER)
        if won is None:
            break
        direction, comp = won  # the setting left behind is never a candidate again: its way back is not taken
        current = dict(comp.candidate)
        heading[comp.dimension] = direction
    return current


def _block(current: dict[str, str], cands: list[tuple[Dimension, int, str]], measure: Measure, st: _State,
           settings: DiffSettings, pairs: int, higher: bool) -> tuple[int, Comparison] | None:
    """``pairs`` interleaved blocks of the current setting and ``cands`` (one value of one dimension each); the
    winning (direction, comparison)."""
    live = {i: {**current, dim.name: v} for i, (dim, _, v) in enumerate(cands)}
    base: list[float | None] = []
    vals: dict[int, list[float | None]] = {i: [] for i in live}
    failed: set[int] = set()
    for k in range(pairs):
        todo = [i for i in live if i not in failed]
        if not todo:
            break
        if st.runs + 1 + len(todo) > st.budget:
            st.exhausted = True
            break
        base.append(None)
        for i in [-1, *todo] if k % 2 == 0 else [*todo[::-1], -1]:
            note = "screen, current" if i < 0 else f"screen, {cands[i][0].name}={cands[i][2]}"
            got = measure(dict(current if i < 0 else live[i]), note)
            st.runs += 1
            if i < 0:
                base[-1] = got
                if got is None and st.runs == 1:
                    st.start_failed = True  # the command fails as given: nothing can be compared
                    return None
            else:
                vals[i].append(got)
                if got is None:
                    failed.add(i)
    complete = [i for i in live if i not in failed and len(vals[i]) == pairs]
    kept = {i: [(b, c) for b, c in zip(base, vals[i], strict=True) if b is not None and c is not None]
            for i in complete}  # pairs whose current run did not fail
    for i in complete:
        if kept[i]:
            d = np.log([c / b for b, c in kept[i]])
            st.spread = (st.spread[0] + float(((d - d.mean()) ** 2).sum()), st.spread[1] + d.size - 1)
    done: list[tuple[int, Comparison]] = []
    for i, (dim, direction, _) in enumerate(cands):
        if i in failed:
            c = _comparison(dim.name, current, live[i], 0, None, Outcome.FAILED, settings)
        elif i not in complete:
            c = _comparison(dim.name, current, live[i], len(vals[i]), None, Outcome.UNFINISHED, settings)
        else:
            t = paired_log_ratio([b for b, _ in kept[i]], [c for _, c in kept[i]], confidence=settings.confidence,
                                 pooled=st.spread)
            outcome = _outcome(pair_verdict(t, settings.threshold, higher_is_better=higher), last=True)
            c = Comparison(dim.name, dict(current), dict(live[i]), len(kept[i]), t.ratio if kept[i] else None,
                           t.ci_low, t.ci_high, t.mde, outcome, settings.confidence)
        done.append((direction, c))
    st.comparisons.extend(c for _, c in done)
    better = [(d, c) for d, c in done if c.outcome is Outcome.BETTER]
    if not better:
        return None
    return max(better, key=lambda dc: (dc[1].ratio or 1.0) if higher else 1.0 / (dc[1].ratio or 1.0))


def _confirm(start: dict[str, str], best: dict[str, str], measure: Measure, st: _State, looks: Looks,
             threshold: float, higher: bool) -> Comparison:
    """The screen's best against the start on fresh interleaved pairs, sequential looks; the deciding look's
    comparison (CANNOT_TELL after ``max_pairs``, UNFINISHED when the budget ran out first)."""
    settings = DiffSettings(paired=True, threshold=threshold, confidence=looks.look_confidence)
    base: list[float | None] = []
    vals: list[float | None] = []
    last: Comparison | None = None
    for k in range(looks.max_pairs):
        if st.runs + 2 > st.budget:
            st.exhausted = True
            break
        order = [(start, "confirm, start"), (best, "confirm, best")]
        got = {note: measure(dict(s), note) for s, note in (order if k % 2 == 0 else order[::-1])}
        st.runs += 2
        base.append(got["confirm, start"])
        vals.append(got["confirm, best"])
        if got["confirm, best"] is None:
            return _comparison("", start, best, len(base), None, Outcome.FAILED, settings)
        if looks.is_look(k + 1):
            last = _decide("", start, best, base, vals, settings, higher, last=k + 1 == looks.max_pairs)
            if last.outcome is not Outcome.UNFINISHED:
                return last
    if last is None:
        return _comparison("", start, best, len(base), None, Outcome.UNFINISHED, settings)
    return _comparison("", start, best, last.pairs, None, Outcome.UNFINISHED, settings, last)


def _decide(dim: str, current: dict[str, str], cand: dict[str, str], base: Sequence[float | None],
            vals: Sequence[float | None], settings: DiffSettings, higher: bool, *, last: bool) -> Comparison:
    """diff's paired verdict on the complete pairs; INCONCLUSIVE is CANNOT_TELL at the ``last`` look, else
    UNFINISHED."""
    pairs = [(b, c) for b, c in zip(base, vals, strict=True) if b is not None and c is not None]
    change = compare_runs([b for b, _ in pairs], [c for _, c in pairs], settings=settings, higher_is_better=higher)
    return _comparison(dim, current, cand, len(pairs), change, _outcome(change.verdict, last=last), settings)


def _outcome(verdict: Verdict, *, last: bool) -> Outcome:
    """diff's verdict as a candidate's fate; INCONCLUSIVE is CANNOT_TELL at the ``last`` look, else UNFINISHED."""
    return {Verdict.FASTER: Outcome.BETTER, Verdict.SLOWER: Outcome.WORSE,
            Verdict.NO_SIGNIFICANT_CHANGE: Outcome.NO_GAIN}.get(
        verdict, Outcome.CANNOT_TELL if last else Outcome.UNFINISHED)


def _comparison(dim: str, current: dict[str, str], cand: dict[str, str], pairs: int, change: Change | None,
                outcome: Outcome, settings: DiffSettings, like: Comparison | None = None) -> Comparison:
    if like is not None:  # an unfinished confirmation keeps its last look's figures
        return Comparison(dim, dict(current), dict(cand), like.pairs, like.ratio, like.ci_low, like.ci_high,
                          like.mde, outcome, like.confidence, like.note)
    return Comparison(dim, dict(current), dict(cand), pairs, getattr(change, "ratio", None),
                      getattr(change, "ci_low", None), getattr(change, "ci_high", None),
                      getattr(change, "mde", None), outcome, settings.confidence,
                      change.note if change is not None and outcome is Outcome.CANNOT_TELL else None)
