"""The advisor's records: its input bundle, the Rule protocol, a Finding, and the Advice result."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Protocol

from stepscope.analyze.advisor.changes import Change
from stepscope.analyze.advisor.commfacts import CommFacts
from stepscope.analyze.advisor.tracefacts import TraceFacts
from stepscope.analyze.run.summary import RankSummary, RunSummary

ADVICE_SCHEMA = "stepscope.advice/1"


@dataclass(frozen=True, slots=True)
class AdvisorInput:
    """Everything the rules read. Built outside analyze/ (the CLI or the report reads the files).

    ``traces``: facts of each rank's profiled window (empty when none was recorded or readable);
    ``trace_problems``: one line per trace artifact that could not be read (named, not fatal);
    ``comm``: the run's torch.distributed calls over its analysed steps (None: none recorded).
    """

    summary: RunSummary
    traces: tuple[TraceFacts, ...] = ()
    trace_problems: tuple[str, ...] = ()
    comm: CommFacts | None = None

    @property
    def rank0(self) -> RankSummary | None:
        return self.summary.ranks[0] if self.summary.ranks else None


@dataclass(frozen=True, slots=True)
class Finding:
    """One triggered rule.

    ``evidence``: the measured numbers that triggered it, by name (units in the names: ``_s``, ``_share``,
    ``_bytes``, ...). ``threshold``: the condition, in words with its numbers. ``saving_s_per_step``: an
    estimate of the step time the change could save, None when the rule cannot estimate it;
    ``saving_s_total``: the same over the run's measured steps (for ranking); ``saving_is_upper_bound``: the
    estimate is a bound the realised saving should not exceed ("up to"), not a central estimate ("about").
    """

    rule_id: str
    title: str
    explanation: str
    threshold: str
    evidence: dict[str, float | int | str]
    suggestion: str
    saving_s_per_step: float | None
    saving_s_total: float | None
    saving_basis: str
    """How the saving was estimated (what it assumes)."""
    source: str
    """What the evidence comes from: 'steps', 'samples', 'trace', 'ranks' or 'metadata'."""
    measured_from: str = ""
    """The measurement behind the evidence, in words (:func:`evidence_source`): shown with the evidence."""
    change: Change | None = None
    """The suggestion as a setting stepscope can apply without editing the code (``advise --verify``, ``tune``);
    None: the remedy needs a code change and is never applied automatically."""
    saving_is_upper_bound: bool = False
    """The saving is a bound (all of a cause removed), not an estimate of what the change realises."""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["evidence"] = {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                         for k, v in self.evidence.items()}
        return d


class Rule(Protocol):
    """An advice rule: identity and documentation as class attributes, one pure ``evaluate``."""

    id: ClassVar[str]
    title: ClassVar[str]
    explanation: ClassVar[str]
    threshold: ClassVar[str]
    suggestion: ClassVar[str]

    def evaluate(self, inp: AdvisorInput) -> Finding | None:
        """A finding when the rule's condition holds, else None (also when the data cannot tell)."""
        ...


def finding(rule: Rule, inp: AdvisorInput, evidence: dict[str, float | int | str], *, per_step_s: float | None,
            total_s: float | None = None, basis: str, source: str, suggestion: str | None = None,
            title: str | None = None, measured_from: str | None = None, change: Change | None = None,
            upper_bound: bool = False) -> Finding:
    """A Finding from a rule's class attributes (``suggestion`` / ``title`` override them where the evidence
    calls for other advice); the total defaults to per-step × measured steps. Both are capped by what the run
    measured (:func:`cap_saving`). ``measured_from`` defaults to the words for ``source``."""
    if total_s is None and per_step_s is not None:
        r0 = inp.rank0
        total_s = per_step_s * (r0.steps.measured_steps if r0 else 0)
    per_step_s, total_s, capped = cap_saving(inp, per_step_s, total_s)
    if capped:
        basis = f"{basis}; {capped}"
    return Finding(rule_id=rule.id, title=title or rule.title, explanation=rule.explanation, threshold=rule.threshold,
                   evidence=evidence, suggestion=suggestion or rule.suggestion, saving_s_per_step=per_step_s,
                   saving_s_total=total_s, saving_basis=basis, source=source,
                   measured_from=measured_from if measured_from is not None else evidence_source(inp, source),
                   change=change, saving_is_upper_bound=upper_bound)


def evidence_source(inp: AdvisorInput, source: str) -> str:
    """What a ``source`` means for this run, in words with its numbers (sample period, traced steps)."""
    if source == "samples":
        period = inp.summary.run.options.get("sample_interval_s")
        every = f"{period:g} s samples" if isinstance(period, (int, float)) else "periodic samples"
        return f"from the system sampler, {every} over the run"
    if source == "trace":
        steps = max((t.steps_in_window for t in inp.traces), default=0)
        return (f"from the profiled window's trace ({steps} step{'s' if steps != 1 else ''})" if steps
                else "from the profiled window's trace")
    if source == "steps":
        r0 = inp.rank0
        n = r0.steps.measured_steps if r0 else 0
        return f"from the step timings of the {n} measured steps (warm-up excluded)"
    if source == "ranks":
        return "from every rank's step timings"
    if source == "metadata":
        return "from the run's recorded settings (torch threads, DataLoader arguments), not a timing"
    return f"from the run's {source}"


def cap_saving(inp: AdvisorInput, per_step_s: float | None,
               total_s: float | None) -> tuple[float | None, float | None, str]:
    """A saving no larger than the run's measured time: per step at most its mean measured step (the savings
    are per-step averages), in all at most the run's duration. A trace from another job (attached with
    ``import --accept-misfit``) or a window slower than the run's steps would otherwise promise more time than
    the run took. The third value says what was capped ("" when nothing was)."""
    r0, said = inp.rank0, []
    if per_step_s is not None and r0 is not None and r0.steps.measured_steps > 0 and r0.steps.wall_ns > 0:
        step_s = r0.steps.wall_ns / r0.steps.measured_steps / 1e9
        if per_step_s > step_s:
            per_step_s = step_s
            said.append(f"capped at the run's mean step ({step_s:.3g} s)")
    run_ns = inp.summary.run.duration_ns
    if total_s is not None and run_ns is not None and total_s > run_ns / 1e9:
        total_s = run_ns / 1e9
        said.append(f"capped at the run's duration ({total_s:.3g} s)")
    return per_step_s, total_s, "; ".join(said)


def worst_trace(inp: AdvisorInput, share: Callable[[TraceFacts], float | None],
                at_least: float) -> TraceFacts | None:
    """The rank's trace with the largest ``share`` (None where the trace cannot tell), if it reaches
    ``at_least``; None otherwise (ties: the first rank)."""
    scored = [(v, t) for t in inp.traces if (v := share(t)) is not None]
    best = max(scored, key=lambda vt: vt[0], default=None)
    return best[1] if best is not None and best[0] >= at_least else None


def per_step_s(t: TraceFacts, ns: float) -> float:
    """A window total (ns) as seconds per profiled step."""
    return ns / t.steps_in_window / 1e9


@dataclass(frozen=True, slots=True)
class Advice:
    """Findings ranked by ``saving_s_total`` (largest first; findings without an estimate last, by rule
    order). ``checked``: ids of every rule evaluated; ``notes``: what limited the advice (no trace, ...)."""

    findings: tuple[Finding, ...]
    checked: tuple[str, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": ADVICE_SCHEMA, "findings": [f.to_dict() for f in self.findings],
                "checked": list(self.checked), "notes": list(self.notes)}
