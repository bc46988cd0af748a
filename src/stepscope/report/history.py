"""Terminal and CSV renderers for benchmarks, metric histories and the CI gate (they only format)."""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Sequence

from rich.console import Console, Group, RenderableType
from rich.text import Text

from stepscope.analyze.run.quality import Quality
from stepscope.analyze.runs.history import CommitPoint, MetricHistory
from stepscope.analyze.runs.regression import CheckResult, CheckVerdict, MetricVerdict, StepLocation
from stepscope.report import format as fmt
from stepscope.report.tables import FitTable

SPARKS = "▁▂▃▄▅▆▇█"


def console(file: object = None, width: int | None = None) -> Console:
    """A console that is 120 columns wide when not a terminal (CI logs), so tables do not fold."""
    isatty = getattr(file, "isatty", None)
    if width is None and not (callable(isatty) and isatty()):
        width = 120
    return Console(file=file, width=width, highlight=False, soft_wrap=False)  # type: ignore[arg-type]


def value(metric: str, v: float | None) -> str:
    """A metric's value in its unit, chosen by the name's suffix."""
    if v is None:
        return fmt.DASH
    if metric.endswith("_s") and not metric.endswith("per_s"):
        return fmt.duration_ns(v * 1e9)
    if metric.endswith("_share"):
        return fmt.share(v)
    if metric.endswith("samples_per_s"):
        return fmt.rate(v, "samples")
    if metric.endswith("tokens_per_s"):
        return fmt.rate(v, "tokens")
    if metric.endswith(("_bytes", "_pct", "_j", "_w")):
        return fmt.metric_value(metric, v)
    return fmt.number(v)


def sparkline(values: Sequence[float | None]) -> str:
    """One block character per value, scaled between the finite min and max (space for None)."""
    finite = [v for v in values if v is not None]
    if not finite:
        return ""
    lo, hi = min(finite), max(finite)
    span = hi - lo
    return "".join(" " if v is None else SPARKS[0 if span == 0 else min(int((v - lo) / span * 8), 7)] for v in values)


def _date(t: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(t))


def bench_table(group: str, rows: Sequence[tuple[str, CommitPoint]]) -> RenderableType:
    t = FitTable(title=f"benchmark {group}", title_justify="left", show_edge=False)
    for col in ("metric", "runs", "median", "interval", "min", "max"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for metric, p in rows:
        t.add_row(metric, str(len(p.values)), value(metric, p.median),
                  f"{value(metric, p.ci_low)} – {value(metric, p.ci_high)} ({p.interval_label})",
                  value(metric, min(p.values)), value(metric, max(p.values)))
    kinds = {p.interval for _, p in rows}
    t.caption = ("interval: 95% t interval (log scale) of the runs' centre from 3 repeats; " if "t95" in kinds else
                 "") + ("with 2 runs only their min–max range (no coverage claimed: --repeat 3 or more)"
                        if "min-max" in kinds else "")
    return t


def history_view(h: MetricHistory, *, last: int | None = None) -> RenderableType:
    """A metric's history: sparkline of medians, then one row per commit (the last ``last`` ones)."""
    points = list(h.points)
    shown = points[-last:] if last else points
    offset = len(points) - len(shown)
    bad = {b: rel for _, b, rel in h.steps}
    direction = "lower is better" if h.lower_is_better else "higher is better"
    head = Text.assemble((h.metric, "bold"), f"  ({direction}; baseline {h.baseline[:10] if h.baseline else '—'} "
                         f"= 1.00; {len(points)} commits)  ", (sparkline([p.median for p in points]), "cyan"))
    t = FitTable(show_edge=False, pad_edge=False)
    for col in ("commit", "date", "subject", "runs", "median", "interval", "relative", ""):
        t.add_column(col, justify="right" if col in ("runs", "median", "interval", "relative") else "left",
                     numeric=col != "subject")  # commit ids, dates and step marks whole; the subject shortens
    for i, p in enumerate(shown, start=offset):
        mark = ""
        if i in bad:
            rel = bad[i]
            mark = f"◆ step {'' if rel is None else f'{rel:+.1%}'}"
        rel_txt = fmt.DASH if p.relative is None else f"{p.relative:.3f}"
        t.add_row(p.short, _date(p.time_s), p.subject or "", str(len(p.values)), value(h.metric, p.median),
                  f"{value(h.metric, p.ci_low)}–{value(h.metric, p.ci_high)}"
                  + ("" if p.interval == "t95" else f" ({p.interval_label})"), rel_txt, Text(mark, style="bold red"))
    parts: list[RenderableType] = [head, t, Text("interval: 95% t interval of the runs' centre (3+ repeats); "
                                                 "fewer repeats show their min–max range, labelled", style="dim")]
    if h.no_commit is not None:
        parts.append(Text(f"{len(h.no_commit.values)} run(s) outside a git work tree, grouped as "
                          f"{h.no_commit.key}: median {value(h.metric, h.no_commit.median)}", style="yellow"))
    if any(p.dirty for p in points):
        parts.append(Text("+dirty: run from a working tree with uncommitted changes", style="dim"))
    return Group(*parts, Text(""))


def history_csv(histories: Sequence[MetricHistory]) -> str:
    """One row per (metric, commit point): every field a spreadsheet needs."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["metric", "commit", "dirty", "time_s", "subject", "runs", "median", "ci_low", "ci_high",
                "relative", "rel_low", "rel_high", "step_after", "run_id"])
    for h in histories:
        bad = {b for _, b, _ in h.steps}
        pts = list(h.points) + ([h.no_commit] if h.no_commit else [])
        for i, p in enumerate(pts):
            w.writerow([h.metric, p.commit or "", int(p.dirty), f"{p.time_s:.3f}", p.subject or "", len(p.values),
                        repr(p.median), repr(p.ci_low), repr(p.ci_high), "" if p.relative is None else repr(p.relative),
                        "" if p.rel_low is None else repr(p.rel_low), "" if p.rel_high is None else repr(p.rel_high),
                        int(i in bad), p.representative_run])
    return buf.getvalue()


def check_view(result: CheckResult, *, baseline: str, candidate: str, threshold: float,
               step: StepLocation | None, quality: Sequence[tuple[str, Quality]] = ()) -> RenderableType:
    """Measurement quality first, then the gate's table and verdict line, where the step is and the diff to see."""
    conf = result.checks[0].confidence if result.checks else 0.98
    t = FitTable(title=f"stepscope check: {candidate} vs baseline {baseline} (max regression {threshold:.1%})",
              title_justify="left", show_edge=False)
    for col in ("metric", "against", "baseline", "candidate", "change", f"{conf:.0%} CI", "runs", "verdict"):
        t.add_column(col, justify="left" if col in ("metric", "verdict") else "right", prose=col == "verdict")
    styles = {MetricVerdict.REGRESSED: "bold red", MetricVerdict.IMPROVED: "green",
              MetricVerdict.CANNOT_TELL: "yellow", MetricVerdict.NO_SIGNIFICANT_CHANGE: ""}
    for c in result.checks:
        ci = fmt.DASH if c.worse_low is None or c.worse_high is None else \
            f"{c.worse_low - 1:+.1%} … {c.worse_high - 1:+.1%}"
        change = fmt.DASH if c.change is None else f"{c.change:+.1%} worse" if c.change > 0 else \
            f"{-c.change:.1%} better"
        shown = Text(c.verdict.value.replace("_", " "), style=styles[c.verdict] if c.gated else "dim")
        if not c.gated:
            shown.append(" (not gated)", style="dim")
        t.add_row(c.metric, c.against, value(c.metric, c.baseline_median), value(c.metric, c.candidate_median),
                  change, ci, f"{c.baseline_n}/{c.candidate_n}", shown)
    t.caption = ("per-run values; baseline/candidate: geometric means of the runs; CI: Welch t interval of the "
                 "ratio on logs; only gated metrics fail the gate")
    noisy = [(rid, q) for rid, q in quality if q.noisy]
    lines: list[RenderableType] = [Text(f"run {rid}: {q.headline()}", style="bold yellow") for rid, q in noisy]
    if quality and not noisy:
        lines.append(Text(f"measurement quality: no sign of noise in the {len(quality)} candidate run(s)",
                          style="dim"))
    lines.append(t)
    verdict = {CheckVerdict.PASS: ("PASS: no significant regression beyond the threshold", "green"),
               CheckVerdict.REGRESSION: ("REGRESSION beyond the threshold", "bold red"),
               CheckVerdict.CANNOT_TELL: (f"CANNOT TELL: {result.reason}", "yellow")}[result.verdict]
    lines.append(Text(verdict[0], style=verdict[1]))
    if step is not None:
        rel = "" if step.relative_change is None else f" ({step.relative_change:+.1%} on {step.metric})"
        lines.append(Text(f"regression starts at commit {step.first_bad[:10]} {step.first_bad_subject or ''!s}{rel}; "
                          f"last good commit {step.last_good[:10]}"))
        lines.append(Text(f"see what changed: stepscope diff {step.last_good_run} {step.first_bad_run}", style="bold"))
    return Group(*lines)
