"""`stepscope tune`'s search: a screen by coordinate descent on few lax pairs, then a confirmation of its best
against the start on fresh interleaved pairs at 99%.

A pure function over a ``measure`` callback (one call = one run of the command at a setting, returning its
metric, or None when the run failed), so the search is tested on a deterministic objective without runs.

**Screen** (picks a setting; claims nothing). From the recorded setting (each dimension's ``start``), one
dimension at a time: the neighbours of the current value (adjacent values in the order given; after a move only
the next value in the same direction) run in interleaved blocks with the current setting (C x y / y x C: drift of
the machine hits every side alike), ``screen_pairs`` blocks, and each candidate is decided by diff's paired rule
(``compare_runs``) at a lax one-sided ``screen_confidence``. "better" moves there (the best of several by ratio),
"worse" and "cannot tell" stop that direction, "no gain" (no change, shown with power: a plateau) tries the value
past it once. A move makes every other dimension worth another look. A wrong move only costs runs: nothing the
screen sees is reported.

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

from stepscope.analyze.diff.sequential import Looks
from stepscope.analyze.diff.significance import BENCH_CONFIDENCE, Change, DiffSettings, Verdict, compare_runs

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
    """Coordinate descent from ``start`` on ``pairs`` blocks a candidate; the setting it ends at."""
    current = dict(start)
    settled: set[str] = set()
    while len(settled) < len(space) and not st.exhausted and not st.start_failed:
        dim = next(d for d in space if d.name not in settled)
        direction: int | None = None
        while True:
            cands = neighbours(dim, current[dim.name], direction)
            if not cands:
                break
            won = _block(dim, current, cands, measure, st, settings, pairs, higher)
            if won is None and not st.exhausted and not st.start_failed:
                # a plateau (a neighbour as fast as the current, shown with power): try once past it
                flat = {c.candidate[dim.name] for c in st.comparisons[-len(cands):] if c.outcome is Outcome.NO_GAIN}
                far = [f for d, v in cands if v in flat for f in neighbours(dim, current[dim.name], d, 2)]
                won = _block(dim, current, far, measure, st, settings, pairs, higher) if far else None
            if won is None:
                break
            direction, comp = won
            current = dict(comp.candidate)
            settled = set()  # a move makes the other dimensions worth another look
        settled.add(dim.name)
    return current


def _block(dim: Dimension, current: dict[str, str], cands: list[tuple[int, str]], measure: Measure, st: _State,
           settings: DiffSettings, pairs: int, higher: bool) -> tuple[int, Comparison] | None:
    """``pairs`` interleaved blocks of the current setting and ``cands``; the winning (direction, comparison)."""
    live = {v: {**current, dim.name: v} for _, v in cands}
    direction = {v: d for d, v in cands}
    base: list[float | None] = []
    vals: dict[str, list[float | None]] = {v: [] for v in live}
    failed: set[str] = set()
    for k in range(pairs):
        todo = [v for v in live if v not in failed]
        if not todo:
            break
        if st.runs + 1 + len(todo) > st.budget:
            st.exhausted = True
            break
        base.append(None)
        for v in ["@", *todo] if k % 2 == 0 else [*todo[::-1], "@"]:
            got = measure(dict(current if v == "@" else live[v]),
                          "screen, current" if v == "@" else f"screen, {dim.name}={v}")
            st.runs += 1
            if v == "@":
                base[-1] = got
                if got is None and st.runs == 1:
                    st.start_failed = True  # the command fails as given: nothing can be compared
                    return None
            else:
                vals[v].append(got)
                if got is None:
                    failed.add(v)
    done = []
    for v in live:
        if v in failed:
            c = _comparison(dim.name, current, live[v], 0, None, Outcome.FAILED, settings)
        elif len(vals[v]) < pairs:
            c = _comparison(dim.name, current, live[v], len(vals[v]), None, Outcome.UNFINISHED, settings)
        else:
            c = _decide(dim.name, current, live[v], base, vals[v], settings, higher, last=True)
        done.append(c)
    st.comparisons.extend(done)
    better = [c for c in done if c.outcome is Outcome.BETTER]
    if not better:
        return None
    best = max(better, key=lambda c: (c.ratio or 1.0) if higher else 1.0 / (c.ratio or 1.0))
    return direction[best.candidate[dim.name]], best


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
    outcome = {Verdict.FASTER: Outcome.BETTER, Verdict.SLOWER: Outcome.WORSE,
               Verdict.NO_SIGNIFICANT_CHANGE: Outcome.NO_GAIN}.get(
        change.verdict, Outcome.CANNOT_TELL if last else Outcome.UNFINISHED)
    return _comparison(dim, current, cand, len(pairs), change, outcome, settings)


def _comparison(dim: str, current: dict[str, str], cand: dict[str, str], pairs: int, change: Change | None,
                outcome: Outcome, settings: DiffSettings, like: Comparison | None = None) -> Comparison:
    if like is not None:  # an unfinished confirmation keeps its last look's figures
        return Comparison(dim, dict(current), dict(cand), like.pairs, like.ratio, like.ci_low, like.ci_high,
                          like.mde, outcome, like.confidence, like.note)
    return Comparison(dim, dict(current), dict(cand), pairs, getattr(change, "ratio", None),
                      getattr(change, "ci_low", None), getattr(change, "ci_high", None),
                      getattr(change, "mde", None), outcome, settings.confidence,
                      change.note if change is not None and outcome is Outcome.CANNOT_TELL else None)
