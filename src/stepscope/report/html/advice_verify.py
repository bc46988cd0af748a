"""HTML of `advise --verify` results and of the settings a run ran with that were not in its code (overrides):
used by the run report and the dashboard's run page. Renderers only render."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from stepscope.analyze.advisor.verify import Outcome
from stepscope.analyze.diff.metric import METRICS
from stepscope.report.html.escape import esc

VERDICT_CLASS = {"confirmed": "good", "not confirmed": "warn", "worse": "bad", "cannot tell": "warn",
                 "failed": "bad"}


def verification_html(verifications: Sequence[tuple[str, Sequence[Outcome]]]) -> str:
    """The latest stored verification of the run: per suggestion, predicted vs realised saving and the verdict."""
    from stepscope.report.advice import diff_command, outcome_lines

    if not verifications:
        return ""
    group, outcomes = verifications[-1]
    rows = []
    for o in outcomes:
        predicted, realised, verdict, note = outcome_lines(o)
        rows.append(f'<tr data-verdict="{esc(verdict)}"><td>{esc(o.suggestion.label)}</td>'
                    f'<td class="mono">{esc(", ".join(o.suggestion.rule_ids))}</td><td>{esc(predicted)}</td>'
                    f"<td>{esc(realised)}</td><td>{o.pairs}</td><td>{esc(_decided_on(o.metric))}</td>"
                    f'<td class="ss-{VERDICT_CLASS.get(verdict, "warn")}"><b>{esc(verdict)}</b></td>'
                    f'<td class="ss-note">{esc(note)}<br><span class="mono">{esc(diff_command(o))}</span></td></tr>')
    return (f'<div class="ss-verify" data-group="{esc(group)}"><h4>Verified advice</h4>'
            f'<p class="ss-note">Interleaved A/B pairs of the recorded command, B with the suggestion applied '
            f'(stepscope advise --verify; group <span class="mono">{esc(group)}</span>; every table of a '
            "suggestion's pairs: stepscope diff --paired A_RUNS B_RUNS, as in its row).</p>"
            "<table><thead><tr><th>suggestion</th><th>rule</th><th>predicted</th><th>realised (interval)</th>"
            "<th>pairs</th><th>decided on</th><th>verdict</th><th>note</th></tr></thead><tbody>" + "".join(rows) +
            "</tbody></table></div>")


def _decided_on(metric: str) -> str:
    """The clock a verification was decided on, as the diff labels it (the name itself if unknown)."""
    m = METRICS.get(metric)
    return m.label if m is not None else metric


def overrides_html(ranks: Iterable[Mapping[str, Any]]) -> str:
    """One line per setting stepscope applied (or could not) in the run's processes: ``override`` records."""
    seen: dict[tuple[str, str, str], str] = {}
    for extra in ranks:
        for o in extra.get("override", []) or []:
            key = (str(o.get("target")), str(o.get("key")), repr(o.get("value")))
            what = f"{key[0]} {key[1]} = {o.get('value')!r}"
            if o.get("applied"):
                was = sorted({repr(w) for w in o.get("was") or []})
                seen[key] = f"{what}: applied" + (f" (the code's: {', '.join(was)})" if was else "")
            else:
                seen.setdefault(key, f"{what}: not applied — {o.get('refused') or 'not applied'}")
    if not seen:
        return ""
    items = "".join(f"<li>{esc(v)}</li>" for v in seen.values())
    return ('<div class="ss-overrides"><p><b>Settings applied by stepscope, not in the code</b> '
            f"(advise --verify / tune):</p><ul>{items}</ul></div>")
