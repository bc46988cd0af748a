"""Inline HTML for Jupyter (``_repr_html_``): a run's headline numbers and top advice, a trace set's per-rank
figures, a diff's overview and what changed. Small, self-contained, every value escaped."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from stepscope.analyze.advisor import Advice
from stepscope.analyze.diff import RunDiff
from stepscope.analyze.run.summary import RunSummary
from stepscope.analyze.trace.analysis import TraceAnalysis
from stepscope.report.format import duration_ns, metric_value, nbytes, rate, share

TOP_ADVICE = 3
"""Findings shown inline (the largest estimated savings); ``advice_df()`` has them all."""

_STYLE = "border-collapse:collapse;margin:4px 0"
_CELL = "padding:2px 10px;text-align:left;border-bottom:1px solid #ddd"


def table(rows: Sequence[Sequence[Any]], header: Sequence[str] = ()) -> str:
    head = "".join(f"<th style='{_CELL}'>{escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td style='{_CELL}'>{escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table style='{_STYLE}'>{f'<tr>{head}</tr>' if head else ''}{body}</table>"


def run_overview(summary: RunSummary, advice: Advice, problems: Sequence[str] = (), *,
                 caveat: str | None = None) -> str:
    """The run's identity, the measurement-quality ``caveat`` where it fires (Quality.caveat), headline numbers
    and its top advice."""
    r, h = summary.run, summary.headline
    title = f"stepscope run {r.id} — {r.name or '(unnamed)'} ({r.status.value})"
    rows = [("steps (warm-up excluded)", f"{h.steps} ({h.warmup_steps})"),
            ("step time median / p95", f"{duration_ns(h.step_time_median_ns)} / {duration_ns(h.step_time_p95_ns)}"),
            ("throughput", rate(h.samples_per_s, "samples")),
            ("data wait", share(h.data_wait_share)),
            ("GPU utilisation", metric_value("gpu_util_pct", h.gpu_util_pct)),
            ("peak RSS", nbytes(h.peak_rss_bytes)),
            ("peak GPU memory", nbytes(h.peak_gpu_mem_bytes))]
    parts = [f"<div><b>{escape(title)}</b>"]
    if caveat:
        parts.append(f"<p><b>⚠ {escape(caveat)}</b></p>")
    parts.append(table(rows))
    parts.append(advice_html(advice))
    parts += [f"<p>⚠ {escape(p)}</p>" for p in (*problems, *summary.warnings)]
    return "".join(parts) + "</div>"


def advice_html(advice: Advice) -> str:
    if not advice.findings:
        return f"<p>No advice: none of {len(advice.checked)} rules triggered.</p>"
    top = advice.findings[:TOP_ADVICE]
    rows = [(f.title, "—" if f.saving_s_per_step is None else f"{f.saving_s_per_step * 1e3:.3g} ms/step",
             f.suggestion) for f in top]
    more = len(advice.findings) - len(top)
    tail = f"<p>… {more} more: <code>advice_df()</code></p>" if more > 0 else ""
    return f"<p><b>Top advice</b></p>{table(rows, ('finding', 'saving (est.)', 'what to do'))}{tail}"


def traces_overview(analyses: Sequence[TraceAnalysis], problems: Sequence[str] = ()) -> str:
    """One row per rank: events, GPU window, idle share, exposed communication."""
    rows = []
    for a in analyses:
        t = a.temporal
        rows.append((a.rank, a.events, duration_ns(t.window_ns) if t else "—",
                     share(t.idle_ns / t.window_ns) if t and t.window_ns else "—",
                     duration_ns(a.overlap.communication_ns - a.overlap.overlap_ns) if a.overlap else "—"))
    parts = [f"<div><b>stepscope trace set — {len(analyses)} rank(s)</b>",
             table(rows, ("rank", "events", "GPU window", "GPU idle", "exposed comm"))]
    parts += [f"<p>⚠ {escape(p)}</p>" for p in problems]
    return "".join(parts) + "</div>"


def diff_overview(result: RunDiff) -> str:
    """A RunDiff's headline rows and its first findings."""
    b, e = result.baseline, result.experiment
    verdict = result.verdict.value if result.verdict is not None else "no verdict"
    rows = [(r.label, _value(r.baseline, r.unit), _value(r.experiment, r.unit),
             "—" if r.delta_pct is None else f"{r.delta_pct:+.1f}%",
             r.change.verdict.value if r.change is not None else "") for r in result.overview]
    found = [(f.kind, f.name, "—" if f.delta_pct is None else f"{f.delta_pct:+.1f}%",
              f.verdict.value if f.verdict is not None else "") for f in result.findings[:5]]
    parts = [f"<div><b>{escape(b.label)} → {escape(e.label)}: {escape(verdict)}</b>",
             table(rows, ("", "baseline", "experiment", "change", "verdict"))]
    if found:
        parts.append(f"<p><b>What changed</b></p>{table(found, ('kind', 'name', 'change', 'verdict'))}")
    parts += [f"<p>{escape(m)}</p>" for m in result.messages]
    return "".join(parts) + "</div>"


def _value(v: float | str | None, unit: str) -> str:
    if v is None:
        return "—"
    if isinstance(v, str):
        return v
    if unit == "ns":
        return duration_ns(v)
    if unit == "bytes":
        return nbytes(v)
    if unit == "share":
        return share(v)
    return f"{v:.4g} {unit}".strip()
