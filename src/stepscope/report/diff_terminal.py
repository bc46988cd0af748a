"""Terminal rendering of a run diff (rich): verdict and the biggest changes first, then the tables.

Renderers only render: every number and verdict comes computed in the RunDiff.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from stepscope.analyze.diff import Change, Finding, RunDiff, Verdict
from stepscope.analyze.diff.breakdown import BreakdownRow
from stepscope.analyze.diff.overview import OverviewRow
from stepscope.analyze.diff.series import MetricRow
from stepscope.analyze.diff.traces import DeltaRow, TraceDiff
from stepscope.report import format as f
from stepscope.report.tables import FitTable, Words

VERDICT_STYLE = {Verdict.FASTER: "bold green", Verdict.SLOWER: "bold red", Verdict.NO_SIGNIFICANT_CHANGE: "dim",
                 Verdict.INCONCLUSIVE: "yellow"}
VERDICT_TEXT = {Verdict.FASTER: "faster", Verdict.SLOWER: "slower",
                Verdict.NO_SIGNIFICANT_CHANGE: "no significant change", Verdict.INCONCLUSIVE: "inconclusive"}
HEADLINE_TEXT = {Verdict.FASTER: "FASTER", Verdict.SLOWER: "SLOWER", Verdict.NO_SIGNIFICANT_CHANGE:
                 "NO SIGNIFICANT CHANGE", Verdict.INCONCLUSIVE: "INCONCLUSIVE"}
METHOD_TEXT = {"welch_log": "Welch t, runs", "paired_log": "paired t, A/B pairs", "noise_floor": "vs noise floor",
               "per_step": "per-step, one window"}


def value(v: float | str | None, unit: str) -> str:
    """A value in its unit ('ns', 'bytes', 'share', '%', 'samples/s', 'J', '' or 'text')."""
    if v is None or isinstance(v, str):
        return f.DASH if v is None else v
    if unit.startswith("ns"):
        return f.duration_ns(v)
    if unit == "bytes":
        return f.nbytes(v)
    if unit == "share":
        return f.share(v)
    if unit == "%":
        return f"{v:.1f}%"
    if unit.endswith("/s"):
        return f.rate(v, unit[:-2])
    if unit == "J":
        return f"{v:.2f} J"
    return f.number(v)


def signed(v: float | None, unit: str) -> str:
    if v is None:
        return f.DASH
    if unit == "share":
        return f"{100 * v:+.1f} pp"
    text = value(v, unit)
    return text if text.startswith("-") or v == 0 else "+" + text


def pct(v: float | None) -> str:
    return f.DASH if v is None else f"{v:+.1f}%"


def evidence(ch: Change) -> str:
    """The tested ratio, its interval and what it rests on: ``x1.07 [1.02, 1.12], 3 v 3 runs, p=0.01``."""
    parts = []
    if ch.ratio is not None:
        iv = f" [{ch.ci_low:.3f}, {ch.ci_high:.3f}]" if ch.ci_low is not None and ch.ci_high is not None else ""
        parts.append(f"x{ch.ratio:.3f}{iv}")
    if ch.method in METHOD_TEXT:
        parts.append(f"{ch.n_baseline} v {ch.n_experiment} run(s), {METHOD_TEXT[ch.method]}")
    if ch.p_value is not None:
        parts.append(f"p={ch.p_value:.2g}")
    if ch.mde is not None and ch.verdict in (Verdict.NO_SIGNIFICANT_CHANGE, Verdict.INCONCLUSIVE):
        parts.append(f"detects >= {100 * ch.mde:.1f}%")
    return ", ".join(parts)


def verdict_text(ch: Change | None, *, notes: bool = True) -> Text:
    if ch is None:
        return Text(f.DASH, style="dim")
    t = Text(VERDICT_TEXT[ch.verdict], style=VERDICT_STYLE[ch.verdict])
    ev = evidence(ch)
    if ev:
        t.append(f"  {ev}", style="dim")
    if ch.note and notes and ch.method not in ("noise_floor",):
        t.append(f"  ({ch.note})", style="dim")
    return t


def _table(title: str, *cols: str, wrap: bool = False) -> FitTable:
    """A diff table (report/tables.py's rule): the first column names, the verdict column (and every column but
    the first of a text table, ``wrap``) prose wrapped between words, the others numbers, never cut."""
    t = FitTable(title=title, title_style="bold")
    for i, c in enumerate(cols):
        prose = i > 0 and (wrap or c == "verdict")
        t.add_column(c, justify="left" if i == 0 or prose else "right", prose=prose)
    return t


def header(d: RunDiff) -> RenderableType:
    t = Text()
    for role, s, ids in (("baseline  ", d.baseline, d.runs[0]), ("experiment", d.experiment, d.runs[1])):
        t.append(f"{role} ", style="bold")
        what = f"run {s.run_id} {s.name}" if s.run_id else f"trace set {s.label}"
        if len(ids) > 1:
            what = f"{len(ids)} runs of {s.name} ({', '.join(ids)})"
        t.append(f"{what}  ({s.kind}{', ' + s.status if s.status else ''}, world size {s.world_size or '?'})\n")
    return t


def _finding_line(fd: Finding) -> Text:
    t = Text("• ")
    label = {"step_time": "", "step_time_mean": "", "step_cpu_time": "", "process_cpu_time": "", "throughput": "",
             "setup": ""}.get(fd.kind, f"{fd.kind} ")
    t.append(f"{label}{fd.name}: ", style="bold")
    if fd.kind == "setup":
        t.append(f"{fd.baseline_text or f.DASH} → {fd.experiment_text or f.DASH}")
        return t
    if fd.baseline is None or fd.experiment is None:
        only = "only in experiment" if fd.baseline is None else "only in baseline"
        t.append(f"{value(fd.baseline if fd.baseline is not None else fd.experiment, fd.unit)} ({only})")
    else:
        t.append(f"{value(fd.baseline, fd.unit)} → {value(fd.experiment, fd.unit)} "
                 f"({signed(fd.delta, fd.unit)}, {pct(fd.delta_pct)})")
    if "per" in fd.unit or fd.kind in ("phase", "region"):
        t.append("  per step" if fd.kind in ("phase", "region") else "  " + fd.unit.removeprefix("ns "), style="dim")
    if fd.verdict is not None:
        t.append("  " + VERDICT_TEXT[fd.verdict], style=VERDICT_STYLE[fd.verdict])
    return t


def quality_lines(d: RunDiff) -> list[Text]:
    """The measurement-quality verdict, first: which runs were measured on a noisy host, and why."""
    noisy = d.noisy
    if not noisy:
        return [Text("measurement quality: no sign of noise in " + (f"the {len(d.quality)} runs" if d.quality
                                                                    else "these inputs"), style="dim")]
    return [Text(f"run {rid}: {q.headline()}", style="bold yellow") for rid, q in noisy]


def verdict_panel(d: RunDiff) -> RenderableType:
    lines: list[RenderableType] = [*quality_lines(d)]
    ch = d.headline
    if ch is not None:
        word = HEADLINE_TEXT[ch.verdict]
        if ch.verdict is Verdict.INCONCLUSIVE:
            # the note names the command that would decide, with its N computed from the measured spread
            word += f" — {ch.note.removeprefix('cannot tell: ')}" if ch.note else \
                " — repeat with `stepscope bench --repeat N` (or `bench --ab`)"
        t = Text(f"experiment vs baseline: {word}", style=VERDICT_STYLE[ch.verdict])
        ev = evidence(ch)
        if ev:
            t.append(f"  ({d.metric.label.partition(' (')[0]} {ev})", style="dim")
        lines.append(t)
        if ch.method == "noise_floor" and d.noise_floor is not None:
            lines.append(Text(f"one run a side: a change must exceed the between-run noise floor, here "
                              f"{100 * (ch.mde or 0):.1f}% ({d.noise_floor.source})", style="dim"))
    lines += [_finding_line(x) for x in d.findings] or [Text("nothing to compare", style="dim")]
    lines.append(Text(f"test: {d.settings.describe()}; xR [a, b]: ratio experiment / baseline of the tested "
                      "values and its interval", style="dim"))
    head = d.headline
    style = "red" if head and head.verdict is Verdict.SLOWER else "green" if head and head.verdict is Verdict.FASTER \
        else "blue"
    return Panel(Group(*lines), title="what changed (biggest first)", border_style=style, expand=False)


def messages(d: RunDiff) -> RenderableType | None:
    notes = list(d.messages) + ([f"module / operator / kernel diff: {d.trace_note}"] if d.trace_note else [])
    notes += list(d.traces.notes) if d.traces else []
    if not notes:
        return None
    return Panel(Text("\n".join(notes)), title="notes", border_style="yellow", expand=False)


def context(d: RunDiff) -> RenderableType:
    if not d.context:
        if d.baseline.run_id and d.experiment.run_id:
            return Text("set-up: same command, parameters, code (verified), host, model and data loader",
                        style="dim")
        return Text("")
    t = _table("Set-up differences", "", "baseline", "experiment", wrap=True)
    for c in d.context:
        t.add_row(Text(c.key), Text(c.baseline or f.DASH), Text(c.experiment or f.DASH))
    return t


def overview(rows: Iterable[OverviewRow]) -> RenderableType:
    t = _table("Overview", "", "baseline", "experiment", "delta", "delta %", "verdict")
    for r in rows:
        label = r.label + (", all ranks" if r.scope.startswith("all ranks") else "")
        cell = Words if r.unit == "text" else str  # a device name shortens; figures never do
        t.add_row(Text(label), cell(value(r.baseline, r.unit)), cell(value(r.experiment, r.unit)),
                  signed(r.delta, r.unit) if r.unit != "text" else "", pct(r.delta_pct), verdict_text(r.change))
    return t


def ranks(d: RunDiff) -> RenderableType | None:
    if not d.ranks:
        return None
    t = _table("Step time per rank (median)", "rank", "baseline", "experiment", "delta %", "verdict")
    for r in d.ranks:
        p = None if r.baseline_ns is None or r.experiment_ns is None or not r.baseline_ns else \
            100 * (r.experiment_ns - r.baseline_ns) / r.baseline_ns
        t.add_row(str(r.rank), value(r.baseline_ns, "ns"), value(r.experiment_ns, "ns"), pct(p), verdict_text(r.change))
    return t


def _presence(b: float | None, e: float | None, unit: str) -> tuple[str, str]:
    return (value(b, unit) if b is not None else "(only in experiment)",
            value(e, unit) if e is not None else "(only in baseline)")


def breakdown(rows: Iterable[BreakdownRow], limit: int | None) -> RenderableType | None:
    rows = list(rows)
    if not rows:
        return None
    t = _table("Phases and regions (mean per step, rank 0), biggest change first", "", "baseline", "experiment",
               "delta", "delta %", "verdict")
    for r in rows[:limit]:
        b, e = _presence(r.baseline_ns, r.experiment_ns, "ns")
        t.add_row(Text(f"{r.kind} {r.name}"), b, e, signed(r.delta_ns, "ns"), pct(r.delta_pct),
                  verdict_text(r.change))
    if limit is not None and len(rows) > limit:
        t.caption = f"{len(rows) - limit} more: --all"
    return t


def delta_table(title: str, rows: Iterable[DeltaRow], limit: int | None, ops: bool) -> RenderableType | None:
    rows = list(rows)
    if not rows:
        return None
    device = rows[0].sort_key == "device"
    cols = ["", "component", "calls b/e"] + (["self CPU b", "self CPU e", "total CPU b", "total CPU e"] if ops else
                                             [] if device else ["self CPU b", "self CPU e"])
    cols += ["device b", "device e"] if device or ops else []
    t = _table(title, *cols, "delta", "delta %")
    for r in rows[:limit]:
        cells: list[RenderableType] = [Text(r.name[:100]), "" if r.name == r.component else r.component,
                 f"{f.number(r.calls_baseline)} / {f.number(r.calls_experiment)}"]
        if ops or not device:
            cells += list(_presence(r.self_baseline, r.self_experiment, "ns"))
        if ops:
            cells += [value(r.total_baseline, "ns"), value(r.total_experiment, "ns")]
        if device or ops:
            cells += [value(r.device_baseline, "ns"), value(r.device_experiment, "ns")] if ops else \
                list(_presence(r.device_baseline, r.device_experiment, "ns"))
        cells += [signed(r.delta, "ns"), pct(r.delta_pct)]
        t.add_row(*cells)
    if limit is not None and len(rows) > limit:
        t.caption = f"{len(rows) - limit} more: --all, or --json"
    return t


def module_tree(td: TraceDiff, limit: int | None) -> RenderableType | None:
    if not td.modules:
        return None
    kind = "GPU" if td.time_kind == "gpu" else "CPU"
    t = _table(f"Module tree ({kind} time {'per profiled step' if td.per_step else 'in window'})", "module", "type",
               "baseline", "experiment", "delta", "delta %")
    for m in td.modules[:limit]:
        b, e = _presence(m.baseline_ns, m.experiment_ns, "ns")
        t.add_row(Text("  " * m.depth + m.name), Text(m.type or ""), b, e, signed(m.delta_ns, "ns"), pct(m.delta_pct))
    if td.module_overlap is not None:
        t.caption = f"tree similarity {td.module_overlap:.0%} (time on shared paths, weighted Jaccard)"
    return t


def metrics(rows: Iterable[MetricRow], title: str, mean: str, peak: str) -> RenderableType | None:
    rows = list(rows)
    if not rows:
        return None
    t = _table(title, "", f"{mean} b", f"{mean} e", f"{peak} b", f"{peak} e", "delta %")
    for r in rows:
        fmt = (lambda v: f.metric_value(r.name, v)) if r.kind == "system" else f.number  # noqa: B023
        t.add_row(Text(r.name), fmt(r.baseline_mean), fmt(r.experiment_mean), fmt(r.baseline_peak),
                  fmt(r.experiment_peak), pct(r.delta_pct))
    return t


def diff_report(d: RunDiff, *, limit: int | None = 15) -> RenderableType:
    """The whole terminal diff. ``limit``: rows per long table (None: all)."""
    parts: list[RenderableType | None] = [header(d), verdict_panel(d), messages(d), context(d), overview(d.overview),
                                          ranks(d), breakdown(d.breakdown, limit)]
    if d.traces is not None:
        td = d.traces
        unit = "per profiled step" if td.per_step else "in window"
        parts += [delta_table(f"Components ({unit})", td.components, None, ops=False), module_tree(td, limit),
                  delta_table(f"Operators ({unit}), biggest change first", td.operators, limit, ops=True),
                  delta_table(f"Kernels ({unit}), biggest change first", td.kernels, limit, ops=False)]
    parts += [metrics(d.system, "System metrics (rank 0)", "mean", "peak"),
              metrics(d.logged, "Logged metrics (rank 0)", "last", "min")]
    out: list[RenderableType] = []
    for p in parts:
        if p is not None:
            out += [p, Text("")]
    return Group(*out)
