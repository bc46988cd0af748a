"""Terminal rendering of the advisor's findings (rich). Renderers only render."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from stepscope.analyze.advisor import Advice, Finding


def evidence_text(value: float | int | str) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def saving_text(f: Finding) -> str:
    if f.saving_s_per_step is not None:
        per_step = f.saving_s_per_step * 1e3
        return f"could save up to {per_step:.3g} ms per step ({f.saving_s_total or 0:.3g} s over the run)"
    if f.saving_s_total is not None:
        return f"could save up to {f.saving_s_total:.3g} s per run"
    return "saving not estimated"


def finding_view(f: Finding, index: int, *, detail: bool = True) -> RenderableType:
    t = Text()
    t.append(f"{index}. {f.title}", style="bold yellow")
    t.append(f"  [{f.rule_id}]  ", style="dim")
    t.append(saving_text(f), style="cyan")
    if detail:
        t.append("\n   " + f.explanation)
    t.append("\n   evidence: ", style="dim")
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
