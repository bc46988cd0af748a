"""Terminal rendering of the advisor's findings (rich). Renderers only render."""

from __future__ import annotations

import math

from rich.console import Group, RenderableType
from rich.text import Text

from stepscope.analyze.advisor import Advice, Finding
from stepscope.analyze.advisor.changes import NEEDS_CODE_CHANGE
from stepscope.analyze.advisor.verify import CONFIRMED, NOT_CONFIRMED, WORSE, Outcome

NOT_MEASURABLE = "not measurable"


def evidence_text(value: float | int | str) -> str:
    if isinstance(value, float):
        return f"{value:.3g}" if math.isfinite(value) else NOT_MEASURABLE
    return str(value)


def _measured(v: float | None) -> bool:
    """A saving worth printing: a zero or NaN estimate is no measurement of a saving ("up to 0 ms")."""
    return v is not None and math.isfinite(v) and v > 0


def saving_text(f: Finding) -> str:
    per_step, total = f.saving_s_per_step, f.saving_s_total
    if per_step is None and total is None:
        return "saving not estimated"
    how = "up to" if f.saving_is_upper_bound else "about"
    if _measured(per_step):
        over = f"{total:.3g} s over the run" if _measured(total) else f"over the run: {NOT_MEASURABLE}"
        return f"could save {how} {(per_step or 0.0) * 1e3:.3g} ms per step ({over})"
    if per_step is None and _measured(total):
        return f"could save {how} {total:.3g} s per run"
    return f"saving {NOT_MEASURABLE}"


def finding_view(f: Finding, index: int, *, detail: bool = True) -> RenderableType:
    t = Text()
    t.append(f"{index}. {f.title}", style="bold yellow")
    t.append(f"  [{f.rule_id}]  ", style="dim")
    t.append(saving_text(f), style="cyan")
    if detail:
        t.append("\n   " + f.explanation)
    t.append("\n   evidence" + (f" ({f.measured_from})" if f.measured_from else "") + ": ", style="dim")
    t.append(", ".join(f"{k}={evidence_text(v)}" for k, v in f.evidence.items()))
    if detail:
        t.append("\n   threshold: ", style="dim")
        t.append(f.threshold)
    t.append("\n   try: ", style="green")
    t.append(f.suggestion)
    t.append("\n   change: ", style="dim")
    t.append(change_text(f))
    return t


def change_text(f: Finding) -> str:
    """The finding's remedy as a setting stepscope applies (``advise --verify`` measures it), or why not."""
    if f.change is None:
        return f"{NEEDS_CODE_CHANGE} (not applied by advise --verify)"
    return f"{f.change.label} (stepscope applies it without editing the code: advise --verify measures it)"


VERDICT_STYLE = {CONFIRMED: "green", NOT_CONFIRMED: "yellow", WORSE: "red"}


def _ms(v: float | None) -> str:
    return f"{v * 1e3:.3g} ms" if v is not None and math.isfinite(v) else NOT_MEASURABLE


def outcome_lines(o: Outcome) -> tuple[str, str, str, str]:
    """(predicted, realised with its interval, verdict, note) of one verified suggestion, as words."""
    s = o.suggestion
    how = "up to" if s.predicted_is_upper_bound else "about"
    predicted = (f"{how} {_ms(s.predicted_s_per_step)} per step" if s.predicted_s_per_step is not None
                 and math.isfinite(s.predicted_s_per_step) and s.predicted_s_per_step > 0 else "not estimated")
    if o.saving_s_per_step is None:
        realised = "not measured"
    else:
        pct = f" ({abs(1 - o.ratio):.1%} of the step)" if o.ratio is not None else ""
        realised = (f"saved {_ms(o.saving_s_per_step)} per step{pct}" if o.saving_s_per_step >= 0
                    else f"lost {_ms(-o.saving_s_per_step)} per step{pct}")
        if o.saving_low_s is not None and o.saving_high_s is not None:
            level = "" if o.confidence is None else f"{100 * o.confidence:.4g}% "  # the deciding look's level
            realised += f", {level}interval {_ms(o.saving_low_s)} to {_ms(o.saving_high_s)}"
    note = o.note or ""
    if o.mde is not None and math.isfinite(o.mde):
        note = f"MDE {o.mde:.1%} at {o.pairs} pairs" + (f"; {note}" if note else "")
    return predicted, realised, o.verdict, note


def diff_command(o: Outcome) -> str:
    """The `stepscope diff` of a suggestion's pairs (paired, as the verdict was decided)."""
    on = "" if o.metric == "step_time" else f" --metric {o.metric}"
    return f"stepscope diff --paired{on} {','.join(o.runs_a)} {','.join(o.runs_b)}"


def verification_view(run_id: str, group: str, outcomes: list[Outcome]) -> RenderableType:
    """Each suggestion's predicted saving, the realised one with its interval, and the verdict."""
    rows: list[RenderableType] = [Text(f"Verified advice of run {run_id} (group {group}, runs tagged "
                                       f"verify={run_id})", style="bold")]
    for i, o in enumerate(outcomes, 1):
        predicted, realised, verdict, note = outcome_lines(o)
        t = Text()
        t.append(f"{i}. {o.suggestion.label}", style="bold")
        t.append(f"  [{', '.join(o.suggestion.rule_ids)}]  ", style="dim")
        t.append(verdict, style=VERDICT_STYLE.get(verdict, "magenta"))
        on = "" if o.metric == "step_time" else f", {o.metric}"  # the clock decided on, where not the median step
        t.append(f"\n   predicted: {predicted}\n   realised ({o.pairs} A/B pairs{on}): {realised}")
        if note:
            t.append("\n   " + note, style="dim")
        if o.runs_a and o.runs_b:
            t.append("\n   all tables: " + diff_command(o), style="dim")
        rows.append(t)
    if not outcomes:
        rows.append(Text("no suggestion of this run is a setting stepscope can apply", style="yellow"))
    return Group(*rows)


def advice_view(advice: Advice, *, limit: int | None = None, detail: bool = True) -> RenderableType:
    """The ranked findings (the first ``limit``), or a line saying no rule fired, plus the advisor's notes."""
    title = Text("Recommendations", style="bold")
    if not advice.findings:
        body: list[RenderableType] = [Text(f"no rule fired ({len(advice.checked)} checked)", style="green")]
    else:
        body = [finding_view(f, i + 1, detail=detail) for i, f in enumerate(advice.findings[:limit])]
        if limit is not None and len(advice.findings) > limit:
            body.append(Text(f"{len(advice.findings) - limit} more: stepscope advise RUN", style="dim"))
    notes = [Text("note: " + n, style="dim") for n in advice.notes]
    return Group(title, *body, *notes)
