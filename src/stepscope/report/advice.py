"""Terminal rendering of the advisor's findings (rich). Renderers only render."""

from __future__ import annotations

import math

from rich.console import Group, RenderableType
from rich.text import Text

from stepscope.analyze.advisor import Advice, Finding

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
    if _measured(per_step):
        over = f"{total:.3g} s over the run" if _measured(total) else f"over the run: {NOT_MEASURABLE}"
        return f"could save up to {(per_step or 0.0) * 1e3:.3g} ms per step ({over})"
    if per_step is None and _measured(total):
        return f"could save up to {total:.3g} s per run"
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
    return t


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
