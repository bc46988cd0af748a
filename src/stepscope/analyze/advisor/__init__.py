"""The advisor: rules over a run's data, each with its evidence, threshold and suggestion, ranked by the
time it could save. ``RULES`` is the explicit registry (one class per rule, one module per family);
``advise(AdvisorInput) -> Advice`` is pure. The input bundle (RunSummary + trace facts) is built
outside analyze/ by ``stepscope.report.advice_input`` style loaders (see cli/advise.py)."""

from __future__ import annotations

from stepscope.analyze.advisor.base import ADVICE_SCHEMA, Advice, AdvisorInput, Finding, Rule
from stepscope.analyze.advisor.commfacts import CommFacts, comm_facts
from stepscope.analyze.advisor.gpu import GpuIdle, LaunchBound, NoMixedPrecision, UnfusedOptimizer
from stepscope.analyze.advisor.host import CpuOversubscription, InputBound, LongFirstSteps
from stepscope.analyze.advisor.memory import MemoryHeadroom
from stepscope.analyze.advisor.parallel import CommNotOverlapped, RankImbalance
from stepscope.analyze.advisor.tracefacts import TraceFacts, trace_facts

RULES: list[type[Rule]] = [
    InputBound,
    GpuIdle,
    LaunchBound,
    NoMixedPrecision,
    CommNotOverlapped,
    UnfusedOptimizer,
    MemoryHeadroom,
    CpuOversubscription,
    LongFirstSteps,
    RankImbalance,
]
"""Every rule, in the order findings without a saving estimate are listed."""


def advise(inp: AdvisorInput, rules: list[type[Rule]] | None = None) -> Advice:
    """Evaluate every rule; findings ranked by the run time they could save (estimates first)."""
    chosen = RULES if rules is None else rules
    found = [f for f in (rule().evaluate(inp) for rule in chosen) if f is not None]
    order = {r.id: i for i, r in enumerate(chosen)}
    found.sort(key=lambda f: (f.saving_s_total is None, -(f.saving_s_total or 0.0), order[f.rule_id]))
    notes = list(inp.trace_problems)
    r0 = inp.rank0
    if not inp.traces and r0 is not None and r0.steps.steps > 0:
        notes.append("no profiled window: kernel-level rules (launch-bound, mixed precision, unfused optimizer, "
                     "overlap) need one — stepscope run --profile-steps N")
    elif not inp.traces:
        notes.append("no profiled window, and no training step was seen: kernel-level rules need a window of "
                     "steps, and a window is placed by step number, so mark steps first: stepscope.step() or "
                     "stepscope.steps(loader)")
    return Advice(findings=tuple(found), checked=tuple(r.id for r in chosen), notes=tuple(notes))


__all__ = ["ADVICE_SCHEMA", "RULES", "Advice", "AdvisorInput", "CommFacts", "Finding", "Rule", "TraceFacts", "advise",
           "comm_facts", "trace_facts"]
