"""``advise --verify``: a suggestion's predicted saving against the saving interleaved A/B pairs realised.

The realised change is a verdict like any other: the paired run-level test of `bench --ab` (``diff``'s step-time
row, decided by ``pair_verdict``), said in the words of advice: *confirmed* (B faster), *not confirmed* (no
change of the threshold's size: one would have been seen), *worse* (B slower), *cannot tell* (the pairs' MDE
exceeds the threshold; the note says how many pairs would tell). Pure: the runs are made in cli/verify.py.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from stepscope.analyze.advisor.base import Advice, Finding
from stepscope.analyze.diff.significance import Change as VerdictChange
from stepscope.analyze.diff.significance import Verdict
from stepscope.model.changes import Change

VERIFY_SCHEMA = "stepscope.advice-verify/1"

CONFIRMED = "confirmed"
NOT_CONFIRMED = "not confirmed"
WORSE = "worse"
CANNOT_TELL = "cannot tell"
FAILED = "failed"
"""A run of the pairs exited with an error (a setting the program cannot run with): no verdict."""

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

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "rule_ids": list(self.rule_ids), "changes": [c.to_dict() for c in self.changes],
                "predicted_s_per_step": self.predicted_s_per_step}


@dataclass(frozen=True, slots=True)
class Outcome:
    """A suggestion's verification. Step times are the geometric means of the runs' median step times (seconds);
    ``saving_*``: A - B per step, its interval from the paired ratio's; ``ratio``: B / A with ``ci_*``."""

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

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["suggestion"] = self.suggestion.to_dict()
        d["runs_a"], d["runs_b"] = list(self.runs_a), list(self.runs_b)
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Outcome:
        s = d["suggestion"]
        sug = Suggestion(str(s["label"]), tuple(s["rule_ids"]), tuple(Change.from_dict(c) for c in s["changes"]),
                         s.get("predicted_s_per_step"))
        rest = {k: v for k, v in d.items() if k not in ("suggestion", "runs_a", "runs_b")}
        return Outcome(suggestion=sug, runs_a=tuple(d.get("runs_a", ())), runs_b=tuple(d.get("runs_b", ())), **rest)


def suggestions(advice: Advice, *, rule: str | None = None) -> tuple[list[Suggestion], list[Finding]]:
    """The findings whose remedy is a setting, as suggestions (``rule``: that rule's only), and the findings
    whose remedy needs a code change (never applied)."""
    chosen = [f for f in advice.findings if rule is None or f.rule_id == rule]
    out = [Suggestion(f.change.label, (f.rule_id,), (f.change,), f.saving_s_per_step)
           for f in chosen if f.change is not None]
    return out, [f for f in chosen if f.change is None]


def combined(confirmed: list[Outcome]) -> Suggestion | None:
    """The confirmed suggestions together (``--all``), when there are two or more."""
    if len(confirmed) < 2:
        return None
    return Suggestion(" + ".join(o.suggestion.label for o in confirmed),
                      tuple(r for o in confirmed for r in o.suggestion.rule_ids),
                      tuple(c for o in confirmed for c in o.suggestion.changes), None)


def outcome(s: Suggestion, step: VerdictChange | None, *, runs_a: tuple[str, ...],
            runs_b: tuple[str, ...], confidence: float | None = None) -> Outcome:
    """The outcome of ``s`` from the paired step-time test (``diff``'s overview row ``step_time_median_ns``; None:
    a side measured no step, so nothing can be told) of the look that decided, at ``confidence``."""
    if step is None or step.ratio is None:
        return Outcome(s, CANNOT_TELL, len(runs_a), note="no measured training step on a side: nothing to compare",
                       runs_a=runs_a, runs_b=runs_b, confidence=confidence)
    note = step.note
    if step.verdict is Verdict.INCONCLUSIVE and note:
        note = f"after {len(runs_a)} pairs, {note}"
    a, b = step.baseline / 1e9, step.experiment / 1e9
    lo = a * (1 - step.ci_high) if step.ci_high is not None else None
    hi = a * (1 - step.ci_low) if step.ci_low is not None else None
    return Outcome(s, WORDS[step.verdict], len(runs_a), baseline_step_s=a, experiment_step_s=b, ratio=step.ratio,
                   ci_low=step.ci_low, ci_high=step.ci_high, mde=step.mde, saving_s_per_step=a - b,
                   saving_low_s=lo, saving_high_s=hi, note=note, runs_a=runs_a, runs_b=runs_b,
                   confidence=confidence)


def failed(s: Suggestion, why: str, *, runs_a: tuple[str, ...], runs_b: tuple[str, ...]) -> Outcome:
    return Outcome(s, FAILED, min(len(runs_a), len(runs_b)), note=why, runs_a=runs_a, runs_b=runs_b)
