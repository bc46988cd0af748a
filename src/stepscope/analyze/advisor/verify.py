"""``advise --verify``: a suggestion's predicted saving against the saving interleaved A/B pairs realised.

The realised change is a verdict like any other: the paired run-level test of `bench --ab` (``diff``'s row of the
metric decided on: the median step time by default, or ``--metric``'s, e.g. the mean step time, which the advisor's
per-step savings are estimated on; decided by ``pair_verdict``), said in the words of advice: *confirmed* (B
faster), *not confirmed* (no change of the threshold's size: one would have been seen), *worse* (B slower), *cannot
tell* (the pairs' MDE exceeds the threshold; the note names the `advise --verify --repeat N` that would tell, N
counted for verify's own sequential looks). Pure: the runs are made in cli/verify.py.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from stepscope.analyze.advisor.base import Advice, Finding
from stepscope.analyze.diff.metric import DEFAULT_METRIC
from stepscope.analyze.diff.sequential import Looks
from stepscope.analyze.diff.significance import Change as VerdictChange
from stepscope.analyze.diff.significance import DiffSettings, Verdict
from stepscope.analyze.stats import MAX_REPEATS_NEEDED, repeats_needed, t_quantile
from stepscope.model.changes import Change

VERIFY_SCHEMA = "stepscope.advice-verify/1"

CONFIRMED = "confirmed"
NOT_CONFIRMED = "not confirmed"
WORSE = "worse"
CANNOT_TELL = "cannot tell"
FAILED = "failed"
"""A run of the pairs exited with an error (a setting the program cannot run with): no verdict."""

MIN_PAIRS = 3
"""Pairs before the first look: with 2, one pair's noise decides alone and the t interval has one degree of
freedom (at a look's level it spans orders of magnitude)."""
THRESHOLD = DiffSettings().threshold
"""The practical threshold the pairs are decided at (`bench --ab`'s)."""

WORDS = {Verdict.FASTER: CONFIRMED, Verdict.NO_SIGNIFICANT_CHANGE: NOT_CONFIRMED, Verdict.SLOWER: WORSE,
         Verdict.INCONCLUSIVE: CANNOT_TELL}


@dataclass(frozen=True, slots=True)
class Suggestion:
    """What one A/B series tries: B = the recorded command with ``changes`` applied."""

    label: str
    rule_ids: tuple[str, ...]
    changes: tuple[Change, ...]
    predicted_s_per_step: float | None
    """The advisor's estimate (None: the rule gives none; a combination: none)."""
    predicted_is_upper_bound: bool = False
    """The estimate is the rule's upper bound ("up to"), not a central estimate ("about")."""

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "rule_ids": list(self.rule_ids), "changes": [c.to_dict() for c in self.changes],
                "predicted_s_per_step": self.predicted_s_per_step,
                "predicted_is_upper_bound": self.predicted_is_upper_bound}


@dataclass(frozen=True, slots=True)
class Outcome:
    """A suggestion's verification. Step times are the geometric means of the runs' values of ``metric`` (seconds:
    median step time by default); ``saving_*``: A - B per step, its interval from the paired ratio's; ``ratio``:
    B / A with ``ci_*``."""

    suggestion: Suggestion
    verdict: str
    pairs: int
    baseline_step_s: float | None = None
    experiment_step_s: float | None = None
    ratio: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    mde: float | None = None
    saving_s_per_step: float | None = None
    saving_low_s: float | None = None
    saving_high_s: float | None = None
    note: str | None = None
    runs_a: tuple[str, ...] = ()
    runs_b: tuple[str, ...] = ()
    confidence: float | None = None
    """The level of the look that decided (sequential pairs: bench's 1% split over the planned looks)."""
    metric: str = DEFAULT_METRIC
    """The clock decided on (diff/metric.py); outcomes stored before it was recorded were decided on step_time."""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["suggestion"] = self.suggestion.to_dict()
        d["runs_a"], d["runs_b"] = list(self.runs_a), list(self.runs_b)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Outcome:
        s = d["suggestion"]
        sug = Suggestion(str(s["label"]), tuple(s["rule_ids"]), tuple(Change.from_dict(c) for c in s["changes"]),
                         s.get("predicted_s_per_step"), bool(s.get("predicted_is_upper_bound", False)))
        rest = {k: v for k, v in d.items() if k not in ("suggestion", "runs_a", "runs_b")}
        return Outcome(suggestion=sug, runs_a=tuple(d.get("runs_a", ())), runs_b=tuple(d.get("runs_b", ())), **rest)


def suggestions(advice: Advice, *, rule: str | None = None) -> tuple[list[Suggestion], list[Finding]]:
    """The findings whose remedy is a setting, as suggestions (``rule``: that rule's only), and the findings
    whose remedy needs a code change (never applied)."""
    chosen = [f for f in advice.findings if rule is None or f.rule_id == rule]
    out = [Suggestion(f.change.label, (f.rule_id,), (f.change,), f.saving_s_per_step, f.saving_is_upper_bound)
           for f in chosen if f.change is not None]
    return out, [f for f in chosen if f.change is None]


def combined(confirmed: list[Outcome]) -> Suggestion | None:
    """The confirmed suggestions together (``--all``), when there are two or more."""
    if len(confirmed) < 2:
        return None
    return Suggestion(" + ".join(o.suggestion.label for o in confirmed),
                      tuple(r for o in confirmed for r in o.suggestion.rule_ids),
                      tuple(c for o in confirmed for c in o.suggestion.changes), None)


def pair_spread(base: list[float | None], exp: list[float | None]) -> float | None:
    """The standard deviation of the per-pair log ratios exp / base (pair i = base[i], exp[i]; pairs with a value
    missing or not positive are left out, as the paired test leaves them); None for fewer than 2 pairs."""
    logs = [math.log(e / b) for b, e in zip(base, exp, strict=True) if b is not None and e is not None
            and b > 0 and e > 0 and math.isfinite(b) and math.isfinite(e)]
    if len(logs) < 2:
        return None
    mean = sum(logs) / len(logs)
    return math.sqrt(sum((v - mean) ** 2 for v in logs) / (len(logs) - 1))


def pairs_to_tell(spread_log: float, *, target_log: float, widen_log: float = 0.0) -> int | None:
    """The fewest ``--repeat N`` whose last look detects a change of ``target_log`` (|log ratio|) with 80% power
    at a per-pair spread of ``spread_log``, the interval widened by ``widen_log`` for load drift (drift.py: more
    pairs do not shrink it). None: not even ``MAX_REPEATS_NEEDED``, or the widening alone is as large. More pairs
    mean more looks, each at a stricter level, so N is found where the pairs needed at N's look level are N."""
    room = target_log - widen_log
    if room <= 0:
        return None
    n = MIN_PAIRS
    while n < MAX_REPEATS_NEEDED:
        need = repeats_needed(spread_log, math.expm1(room), confidence=Looks(MIN_PAIRS, n).look_confidence,
                              paired=True)
        if need <= n:
            return n
        n = need
    return None


def cannot_tell_note(pairs: int, spread_log: float | None, rerun: str, *, ratio: float = 1.0,
                     widen_log: float = 0.0, threshold: float = THRESHOLD) -> str:
    """Why ``pairs`` pairs cannot tell, and the command the user runs to tell: ``rerun`` (the `advise --verify`
    of this suggestion) with the ``--repeat`` that would, at the spread the pairs measured, for a change of the
    threshold's size or, when larger, of the size seen (``ratio``, B / A)."""
    if spread_log is None:
        return f"cannot tell from {pairs} pairs: more pairs may tell (`{rerun} --repeat N`)"
    seen = abs(math.log(ratio)) if ratio > 0 else 0.0
    what = f"the change seen (x{ratio:.2f})" if seen > math.log1p(threshold) else f"a {threshold:.0%} change"
    target = max(seen, math.log1p(threshold))
    at = f"at this per-pair spread ({spread_log:.1%} over {pairs} pairs)"
    n = pairs_to_tell(spread_log, target_log=target, widen_log=widen_log)
    if n is None and widen_log > 0 and (widen_log >= target or pairs_to_tell(spread_log, target_log=target)):
        return (f"cannot tell: the interval is widened by {math.expm1(widen_log):.1%} for load that followed one "
                f"side, too close to {what} for more pairs to tell ({spread_log:.1%} per-pair spread over "
                f"{pairs} pairs) — verify on a steadier host")
    if n is None:
        return f"cannot tell {what} {at}: not even {MAX_REPEATS_NEEDED} pairs would — verify on a quieter host"
    widened = f", its interval widened by {math.expm1(widen_log):.1%} for load drift" if widen_log >= 5e-4 else ""
    return f"cannot tell {what} {at}{widened}: `{rerun} --repeat {max(n, pairs + 1)}` would"


def drift_widening(step: VerdictChange, spread_log: float, pairs: int, confidence: float) -> float:
    """How much (log) the paired interval was widened for load drift: its half-width beyond the t interval's at
    the pairs' spread (0 when none)."""
    if step.ci_low is None or step.ci_high is None or step.ci_low <= 0 or pairs < 2:
        return 0.0
    t = t_quantile(0.5 + confidence / 2, pairs - 1) * spread_log / math.sqrt(pairs)
    widen = math.log(step.ci_high / step.ci_low) / 2 - t
    return widen if widen > 1e-9 else 0.0  # rounding, not a widening


def outcome(s: Suggestion, step: VerdictChange | None, *, runs_a: tuple[str, ...], runs_b: tuple[str, ...],
            confidence: float | None = None, spread_log: float | None = None,
            rerun: str = "stepscope advise RUN --verify", metric: str = DEFAULT_METRIC) -> Outcome:
    """The outcome of ``s`` from the paired test of ``metric`` (``diff``'s overview row of it, by default
    ``step_time_median_ns``; None: a side measured no step, so nothing can be told) of the look that decided, at
    ``confidence``. ``spread_log``:
    the per-pair spread (``pair_spread`` of the runs' tested step times) and ``rerun``: the command that verifies
    ``s`` again, for a "cannot tell" note that says how many pairs would tell."""
    if step is None or step.ratio is None:
        return Outcome(s, CANNOT_TELL, len(runs_a), note="no measured training step on a side: nothing to compare",
                       runs_a=runs_a, runs_b=runs_b, confidence=confidence, metric=metric)
    note = step.note
    if step.verdict is Verdict.INCONCLUSIVE:  # the shared note names bench's command; the user runs advise's
        widen = 0.0 if spread_log is None or confidence is None else \
            drift_widening(step, spread_log, len(runs_a), confidence)
        note = cannot_tell_note(len(runs_a), spread_log, rerun, ratio=step.ratio, widen_log=widen)
    a, b = step.baseline / 1e9, step.experiment / 1e9
    lo = a * (1 - step.ci_high) if step.ci_high is not None else None
    hi = a * (1 - step.ci_low) if step.ci_low is not None else None
    return Outcome(s, WORDS[step.verdict], len(runs_a), baseline_step_s=a, experiment_step_s=b, ratio=step.ratio,
                   ci_low=step.ci_low, ci_high=step.ci_high, mde=step.mde, saving_s_per_step=a - b,
                   saving_low_s=lo, saving_high_s=hi, note=note, runs_a=runs_a, runs_b=runs_b,
                   confidence=confidence, metric=metric)


def failed(s: Suggestion, why: str, *, runs_a: tuple[str, ...], runs_b: tuple[str, ...],
           metric: str = DEFAULT_METRIC) -> Outcome:
    return Outcome(s, FAILED, min(len(runs_a), len(runs_b)), note=why, runs_a=runs_a, runs_b=runs_b, metric=metric)
