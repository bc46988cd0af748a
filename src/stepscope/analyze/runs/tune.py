"""`stepscope tune`'s search: coordinate descent over ordered settings, decided by interleaved A/B pairs.

A pure function over a ``measure`` callback (one call = one run of the command at a setting, returning its
metric, or None when the run failed), so the search is tested on a deterministic objective without runs.

The search (documented in docs/cli.md, ``tune``):

- start from the recorded setting (each dimension's ``start``);
- take one dimension at a time and its neighbours of the current value (the adjacent values in the order given;
  after a move, only the next value in the same direction); measure the current setting and those candidates in
  interleaved blocks (C x y / y x C / ...: drift of the machine hits every side alike), each candidate paired with
  the current run of its block;
- a neighbour that shows no gain (with the power to see one) may be a plateau: the value past it is tried once;
- decide each candidate with diff's run-level rule (``compare_runs``, paired, which applies ``pair_verdict``) on
  the sequential looks of analyze/diff/sequential.py (``min_pairs`` blocks, then about 1.5 times as many each
  look, up to ``max_pairs``), each look at its share of ``1 - confidence`` split over the looks and over the
  candidates of a first pass through the space (``family``): on a flat objective a search moves at most
  ``1 - confidence`` of the time, however many candidates and looks it tries. "better" moves the current
  setting there (the best of several by ratio), "worse" and "no gain" stop that direction, "cannot tell"
  after ``max_pairs`` blocks stops it too (a gain the pairs could not show is not taken);
- a move makes every other dimension worth trying again; the search ends when no dimension moves, or when the
  next block would exceed ``budget`` runs.

The gain of the best setting over the start is the product of the accepted comparisons' ratios; its interval
adds their log half-widths in quadrature (exact for one move, an approximation for a chain of moves).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from stepscope.analyze.diff.sequential import Looks
from stepscope.analyze.diff.significance import BENCH_CONFIDENCE

TUNE_SCHEMA = "stepscope.tune/1"

Measure = Callable[[Mapping[str, str], str], float | None]
"""``measure(setting, note)``: run once at ``setting`` (``note`` names the run's role, for progress lines) and
return its metric; None when the run failed or did not yield the metric."""


class Outcome(StrEnum):
    """A candidate's fate against the current setting."""

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
    """One candidate against the current setting over ``pairs`` interleaved pairs (candidate / current)."""

    dimension: str
    current: dict[str, str]
    candidate: dict[str, str]
    pairs: int
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    mde: float | None
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class TuneResult:
    """The search's answer. ``gain``: best / start of the metric (>1 is better for a throughput, <1 for a time),
    with its interval; None when the best is the start."""

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
    start_failed: bool = False
    """The very first run (at the start setting) failed: nothing was compared."""
    notes: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["schema"] = TUNE_SCHEMA
        for c in d["comparisons"]:
            c["outcome"] = str(c["outcome"])
        return d


@dataclass(slots=True)
class _State:
    runs: int = 0
    comparisons: list[Comparison] = field(default_factory=list)
    chain: list[Comparison] = field(default_factory=list)
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


MIN_PAIRS = 3
"""Blocks before the first look (with 2, one degree of freedom: at a look's level the interval spans orders of
magnitude)."""
MAX_PAIRS = 6


def family(space: Sequence[Dimension]) -> int:
    """The candidates a search compares before its first move: each dimension's neighbours and, past a plateau,
    the values two places away (at most 4 a dimension). Bonferroni over them keeps a flat objective's false
    moves within the search's level."""
    return sum(min(len(d.values) - 1, 4) for d in space)


def search(space: Sequence[Dimension], measure: Measure, *, budget: int, metric: str = "metric",
           higher_is_better: bool = True, min_pairs: int = MIN_PAIRS, max_pairs: int = MAX_PAIRS,
           threshold: float = 0.02, confidence: float = BENCH_CONFIDENCE, comparisons: int | None = None) -> TuneResult:
    """Coordinate descent over ``space`` (see the module docstring); at most ``budget`` calls of ``measure``.
    ``comparisons``: the family the level is split over (default ``family(space)``; 1 only to show, in
    simulation, what the split prevents)."""
    if not space:
        raise ValueError("nothing to tune: no dimension")
    if not 2 <= min_pairs <= max_pairs:
        raise ValueError(f"need 2 <= min_pairs <= max_pairs, got {min_pairs}, {max_pairs}")
    looks = Looks(min_pairs, max_pairs, confidence, comparisons or family(space), one_sided=True)
    current = {d.name: d.start for d in space}
    start = dict(current)
    st = _State()
    settled: set[str] = set()
    while len(settled) < len(space) and not st.exhausted and not st.start_failed:
        dim = next(d for d in space if d.name not in settled)
        direction: int | None = None
        while True:
            cands = neighbours(dim, current[dim.name], direction)
            if not cands:
                break
            compare = functools.partial(_compare, dim, current, measure=measure, st=st, budget=budget,
                                        higher=higher_is_better, looks=looks, threshold=threshold)
            won = compare(cands)
            if won is None:
                # a plateau (a neighbour as fast as the current, shown with power): try once past it
                flat = {c.candidate[dim.name] for c in st.comparisons[-len(cands):] if c.outcome is Outcome.NO_GAIN}
                far = [f for d, v in cands if v in flat for f in neighbours(dim, current[dim.name], d, 2)]
                won = compare(far) if far and not st.exhausted else None
            if won is None:
                break
            direction, comp = won
            st.chain.append(comp)
            current = dict(comp.candidate)
            settled = set()  # a move makes the other dimensions worth another look
        settled.add(dim.name)
    gain, low, high = _chain_gain(st.chain)
    return TuneResult(metric=metric, higher_is_better=higher_is_better, start=start, best=current, gain=gain,
                      gain_low=low, gain_high=high, runs=st.runs, budget=budget, budget_exhausted=st.exhausted,
                      comparisons=tuple(st.comparisons), start_failed=st.start_failed)


def _compare(dim: Dimension, current: dict[str, str], cands: list[tuple[int, str]], *, measure: Measure,
             st: _State, budget: int, higher: bool, looks: Looks,
             threshold: float) -> tuple[int, Comparison] | None:
    """Interleaved blocks of the current setting and ``cands``; the winning (direction, comparison) or None."""
    from stepscope.analyze.diff.significance import DiffSettings, Verdict, compare_runs

    settings = DiffSettings(paired=True, threshold=threshold, confidence=looks.look_confidence)
    live = {v: {**current, dim.name: v} for _, v in cands}
    direction = dict((v, d) for d, v in cands)
    base: list[float | None] = []
    vals: dict[str, list[float | None]] = {v: [] for v in live}
    done: dict[str, Comparison] = {}
    pending: dict[str, Any] = {}  # the latest undecided test of each live candidate (for an unfinished one)

    def record(v: str, outcome: Outcome, t: Any = None) -> None:
        done[v] = Comparison(dim.name, dict(current), live[v], len(base), getattr(t, "ratio", None),
                             getattr(t, "ci_low", None), getattr(t, "ci_high", None), getattr(t, "mde", None), outcome)

    for k in range(looks.max_pairs):
        todo = [v for v in live if v not in done]
        if not todo:
            break
        if st.runs + 1 + len(todo) > budget:
            st.exhausted = True
            break
        order = ["@", *todo] if k % 2 == 0 else [*todo[::-1], "@"]
        for v in todo:
            vals[v].append(None)
        base.append(None)
        for v in order:
            setting = current if v == "@" else live[v]
            note = "current" if v == "@" else f"{dim.name}={v}"
            got = measure(dict(setting), note)
            st.runs += 1
            if v == "@":
                base[-1] = got
                if got is None and st.runs == 1:
                    st.start_failed = True  # the command fails as given: nothing can be compared
                    return None
            else:
                vals[v][-1] = got
                if got is None:
                    record(v, Outcome.FAILED)
        if not looks.is_look(k + 1):
            continue
        for v in [v for v in todo if v not in done]:
            pairs = [(b, c) for b, c in zip(base, vals[v], strict=True) if b is not None and c is not None]
            change = compare_runs([b for b, _ in pairs], [c for _, c in pairs], settings=settings,
                                  higher_is_better=higher)
            verdict = change.verdict
            if verdict is Verdict.FASTER:
                record(v, Outcome.BETTER, change)
            elif verdict is Verdict.SLOWER:
                record(v, Outcome.WORSE, change)
            elif verdict is Verdict.NO_SIGNIFICANT_CHANGE:
                record(v, Outcome.NO_GAIN, change)
            elif k + 1 == looks.max_pairs:
                record(v, Outcome.CANNOT_TELL, change)
            else:
                pending[v] = change
        if any(c.outcome is Outcome.BETTER for c in done.values()):
            break
    for v in live:
        if v not in done:
            record(v, Outcome.UNFINISHED, pending.get(v))
    st.comparisons.extend(done[v] for v in live)
    better = [c for v, c in done.items() if c.outcome is Outcome.BETTER]
    if not better:
        return None
    key = (lambda c: c.ratio or 0.0) if higher else (lambda c: -(c.ratio or math.inf))
    best = max(better, key=key)
    return direction[best.candidate[dim.name]], best


def _chain_gain(chain: Sequence[Comparison]) -> tuple[float | None, float | None, float | None]:
    if not chain:
        return None, None, None
    logs = [math.log(c.ratio) for c in chain if c.ratio]
    gain = math.exp(sum(logs))
    halves = [max(math.log(c.ci_high / c.ratio), math.log(c.ratio / c.ci_low)) for c in chain
              if c.ratio and c.ci_low and c.ci_high]
    if len(halves) != len(chain):
        return gain, None, None
    hw = math.sqrt(sum(h * h for h in halves))
    return gain, gain * math.exp(-hw), gain * math.exp(hw)
