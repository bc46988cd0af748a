"""The frame of `stepscope top`: a running run's recent figures, phases, system, ranks and advice.
Renderers only render: every figure comes computed (analyze/run/live.py, analyze/run/summary.py, the advisor)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from stepscope.analyze.advisor import Advice
from stepscope.analyze.run.live import STRAGGLER_RATIO, LiveState
from stepscope.analyze.run.summary import RunSummary
from stepscope.model.run import RunStatus
from stepscope.report import format as f
from stepscope.report.advice import saving_text
from stepscope.report.terminal import STATUS_STYLE

LIVE_FINDINGS = 3
SYSTEM_SHOWN = ("cpu_system_pct", "cpu_process_pct", "rss_bytes")
"""Sampled metrics shown besides every GPU's utilisation and memory."""


def _header(summary: RunSummary, elapsed_ns: float, interval_s: float) -> Text:
    run = summary.run
    t = Text()
    t.append("stepscope top", style="bold")
    t.append(f"  {run.id}  {run.name}  ")
    t.append(run.status.value, style=STATUS_STYLE.get(run.status.value, ""))
    t.append(f"  {f.duration_ns(elapsed_ns)}")
    if run.status == RunStatus.RUNNING:
        t.append(f"  (every {interval_s:g} s; Ctrl-C quits)", style="dim")
    else:
        code = "" if run.exit_code is None else f", exit code {run.exit_code}"
        t.append(f"\nthe run has finished ({run.status.value}{code}): its final state", style="bold")
    return t


def _steps(state: LiveState, summary: RunSummary) -> Table:
    h = summary.headline
    t = Table.grid(padding=(0, 2))
    t.add_column(no_wrap=True)
    t.add_column(no_wrap=True, justify="right")
    t.add_column(no_wrap=True)
    t.add_column(no_wrap=True, justify="right")
    t.add_row("steps (rank 0)", f.number(state.steps), "step rate", f.rate(state.recent_steps_per_s, " steps"))
    t.add_row("last step", f.duration_ns(state.last_step_ns),
              f"median of last {state.recent_steps}", f.duration_ns(state.recent_step_median_ns))
    t.add_row("run median", f.duration_ns(h.step_time_median_ns), "samples/s (all ranks)",
              f.rate(h.samples_per_s, "").replace(" /s", ""))
    t.add_row("data wait", f.share(h.data_wait_share), "warm-up steps left out", f.number(h.warmup_steps))
    return t


def _phases(summary: RunSummary) -> RenderableType:
    if not summary.ranks:
        return Text("")
    st = summary.ranks[0].steps
    shown = [p for p in (*st.phases, st.other) if p.mean_ns is not None]
    t = Table(title="phases (rank 0, mean per measured step)", title_justify="left", show_edge=False,
              pad_edge=False)
    for p in shown:
        t.add_column(p.phase.replace("_", " "), justify="right", no_wrap=True)
    t.add_row(*(f"{f.duration_ns(p.mean_ns)}\n{f.share(p.share)}" for p in shown))
    return t if shown else Text("phases: none measured yet", style="dim")


def _system(summary: RunSummary) -> RenderableType:
    if not summary.ranks:
        return Text("")
    stats = {m.name: m for m in summary.ranks[0].system}
    names = [n for n in SYSTEM_SHOWN if n in stats]
    names += sorted(n for n in stats if n.startswith("gpu") and n.endswith(("_util_pct", "_mem_used_bytes")))
    if not names:
        return Text("system: no samples yet", style="dim")
    t = Table(title="system (rank 0's host)", title_justify="left", show_edge=False, pad_edge=False)
    for c in ("metric", "last sample", "run mean"):
        t.add_column(c, justify="left" if c == "metric" else "right", no_wrap=True)
    for n in names:
        t.add_row(n, f.metric_value(n, stats[n].last), f.metric_value(n, stats[n].mean))
    return t


def _ranks(state: LiveState) -> Table:
    t = Table(title="ranks (median of the last 10 steps: step time, useful time = step - comm)",
              title_justify="left", show_edge=False, pad_edge=False)
    for c in ("rank", "steps", "last step", "step", "useful", "since", "straggler"):
        t.add_column(c, justify="left" if c == "straggler" else "right", no_wrap=c != "straggler")
    for r in state.ranks:
        flag = Text(r.straggler, style="bold red") if r.straggler else Text("—", style="green")
        t.add_row(str(r.rank), f.number(r.steps), f.duration_ns(r.last_step_ns),
                  f.duration_ns(r.recent_step_median_ns), f.duration_ns(r.recent_useful_median_ns),
                  "—" if r.since_last_step_s is None else f"{r.since_last_step_s:.1f} s", flag)
    return t


def live_view(state: LiveState, summary: RunSummary, advice: Advice, *, elapsed_ns: float,
              interval_s: float = 1.0) -> RenderableType:
    """One frame of `stepscope top`."""
    parts: list[RenderableType] = [_header(summary, elapsed_ns, interval_s), _steps(state, summary),
                                   _phases(summary), _system(summary), _ranks(state)]
    if state.stragglers:
        parts.append(Text(f"straggler: rank {', '.join(map(str, state.stragglers))} (useful time > "
                          f"{STRAGGLER_RATIO:g}x the others' median, or behind in steps)", style="bold red"))
    parts.append(_advice(advice, summary.run.id))
    return Group(*parts)


def _advice(advice: Advice, run_id: str) -> RenderableType:
    """One line per finding (the first LIVE_FINDINGS), most valuable first."""
    if not advice.findings:
        return Text(f"advice so far: no rule fired ({len(advice.checked)} checked)", style="green")
    lines = [Text("advice so far:", style="bold")]
    for i, finding in enumerate(advice.findings[:LIVE_FINDINGS]):
        line = Text(f"{i + 1}. {finding.title}", style="yellow")
        line.append(f" — {saving_text(finding)}", style="cyan")
        lines.append(line)
    lines.append(Text(f"details: stepscope advise {run_id}", style="dim"))
    return Group(*lines)
