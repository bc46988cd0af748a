"""The HTML run report: overview (what ran, headline numbers, recommendations), speed, time, flame graph
(when stacks were sampled), system, memory, GPU and operators (every trace-engine figure per rank, with a
rank selector), model, logged metrics. Renders a RunSummary, the Advice and the run's
records; every number is computed in analyze/ (per-step series are only read off the step table)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np

from stepscope.analyze.advisor import Advice, Finding
from stepscope.analyze.advisor.verify import Outcome
from stepscope.analyze.run.summary import RankSummary, RunSummary
from stepscope.app import RunAnalysis
from stepscope.model.tables import RankData, StepTable
from stepscope.report import format as f
from stepscope.report.html.charts import Axis, Band, Series, xy_chart
from stepscope.report.html.flamegraph import CSS as FLAME_CSS
from stepscope.report.html.flamegraph import FLAME_JS, flamegraph_section
from stepscope.report.html.gpu_sections import RANK_CSS, RANK_JS, gpu_section
from stepscope.report.html.page import Section, heading, kv_table, notice, paragraph, render_page, tiles
from stepscope.report.html.run_sections import (
    memory_section,
    metrics_section,
    model_section,
    system_section,
    time_section,
)
from stepscope.report.html.tables import Col, table
from stepscope.report.labels import software_line

MAX_POINTS = 4000
"""Per-step series longer than this are thinned (every k-th step) to keep the file small."""

STATUS_TEXT = {
    "running": ("This run is still running: the report shows the data flushed so far.", "warn"),
    "incomplete": ("This run is incomplete (killed, or a rank ended without its end record): the data stops "
                   "at the last flush.", "warn"),
    "failed": ("This run failed (non-zero exit code or an exception): the report shows what was recorded "
               "before the failure.", "bad"),
}


def render_run_report(ra: RunAnalysis, verifications: Sequence[tuple[str, Sequence[Outcome]]] = ()) -> str:
    """The whole report of one run analysis as one self-contained HTML string (the measurement-quality
    verdict first); ``verifications``: the run's stored `advise --verify` results (group, outcomes)."""
    from stepscope.report.html.advice_verify import overrides_html, verification_html

    data, summary, advice, quality = ra.data, ra.summary, ra.advice, ra.quality
    traces, trace_problems = ra.traces.tables, ra.traces.problems
    run = summary.run
    r0 = data.ranks[0] if data.ranks else None
    s0 = summary.ranks[0] if summary.ranks else None
    sections = [
        Section("overview", "Overview", notice(quality.headline(), "warn" if quality.noisy else "info")
                + overrides_html(r.extra for r in data.ranks) + overview(summary, advice)
                + verification_html(verifications)),
        Section("speed", "Speed", speed_section(r0, s0, summary),
                note="Step time is CPU wall clock between step boundaries unless noted; warm-up steps are shaded "
                     "and excluded from statistics."),
        Section("time", "Time", time_section(summary)),
        *([flame] if (flame := flamegraph_section(data)) is not None else []),
        Section("system", "System", system_section(data, summary)),
        Section("memory", "Memory", memory_section(summary, traces or {})),
        Section("kernels", "GPU and operators", gpu_section(
            ra.trace_analyses, trace_problems, advice, traces,
            collectives=ra.trace_set.collectives if ra.trace_set is not None else None, paths=ra.critical_paths),
                note="From each rank's profiled window (torch.profiler trace), the figures of stepscope trace analyze; "
                     "times are totals over the window unless noted."),
        Section("model", "Model", model_section(summary)),
        Section("metrics", "User metrics", metrics_section(data)),
    ]
    when = datetime.fromtimestamp(run.start_ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return render_page(f"{run.name} — stepscope run {run.id}", sections, badge=run.status.value,
                       extra_css=RANK_CSS + FLAME_CSS, extra_js=RANK_JS + FLAME_JS,
                       subtitle=f"started {when} · duration {f.duration_ns(run.duration_ns)} · "
                                f"world size {run.world_size}",
                       footer=f"stepscope {run.software.stepscope} · self-contained report, no network access")


def overview(s: RunSummary, advice: Advice) -> str:
    run, h = s.run, s.headline
    parts = []
    if run.status.value in STATUS_TEXT:
        text, level = STATUS_TEXT[run.status.value]
        if run.exit_code not in (None, 0):
            text += f" Exit code {run.exit_code}."
        parts.append(notice(text, level))
    if h.steps == 0:
        parts.append(notice("No training step was recorded, so there are no step statistics: " + (
            s.warnings[0] if s.warnings else "the script never reached an optimizer step."), "bad"))
    parts += [notice(w, "warn") for w in s.warnings if h.steps > 0]
    parts.append(tiles(headline_tiles(s)))
    parts.append(heading("What ran"))
    parts.append(kv_table(what_ran(s)))
    if len(s.ranks) > 1:
        parts.append(heading("Ranks"))
        parts.append(ranks_html(s))
    parts.append(heading("Top recommendations"))
    parts.append(findings_html(advice, limit=5))
    return "".join(parts)


def headline_tiles(s: RunSummary) -> list[tuple[str, str, str | None]]:
    h = s.headline
    out: list[tuple[str, str, str | None]] = [
        ("step time median", f.duration_ns(h.step_time_median_ns), f"p95 {f.duration_ns(h.step_time_p95_ns)}"),
        ("throughput", f.rate(h.samples_per_s, "samples"), "all ranks" if len(s.ranks) > 1 else None),
        ("steps recorded", f"{h.steps:,}",
         f"{s.ranks[0].steps.measured_steps:,} measured ({h.warmup_steps} warm-up)" if s.ranks else None),
        ("data wait", f.share(h.data_wait_share), "of step time"),
    ]
    if h.tokens_per_s is not None:
        out.append(("tokens", f.rate(h.tokens_per_s, "tokens"), None))
    out.append(("GPU busy", "—" if h.gpu_util_pct is None else f"{h.gpu_util_pct:.1f}%",
                "NVML utilisation" if h.gpu_util_pct is not None else "no GPU measured"))
    out.append(("peak memory", f.nbytes(h.peak_gpu_mem_bytes if h.peak_gpu_mem_bytes is not None else h.peak_rss_bytes),
                "GPU" if h.peak_gpu_mem_bytes is not None else "process RSS"))
    if h.energy_per_step_j is not None:
        out.append(("energy per step", f"{h.energy_per_step_j:.2f} J", None))
    return out


def what_ran(s: RunSummary) -> list[tuple[str, object]]:
    run = s.run
    hw = run.host
    gpus = ", ".join(f"{g.name} ({f.nbytes(g.memory_bytes)})" for g in hw.gpus) or "no GPU"
    rows: list[tuple[str, object]] = [
        ("run", f"{run.id} ({run.name})"), ("status", run.status.value + (
            f", exit code {run.exit_code}" if run.exit_code not in (None, 0) else "")),
        ("command", " ".join(run.command)), ("working directory", run.cwd),
    ]
    if run.git:
        rows.append(("git", f"{run.git.commit[:12]}{' (dirty)' if run.git.dirty else ''} "
                            f"{run.git.branch or '(detached)'} — {run.git.subject or ''}"))
    rows += [
        ("host", f"{hw.hostname}, {hw.os}"),
        ("CPU", f"{hw.cpu_model or 'unknown'}, {hw.cpu_cores_physical} cores / {hw.cpu_cores_logical} threads, "
                f"{f.nbytes(hw.memory_bytes)}"),
        ("GPUs", gpus),
        ("software", software_line(s, libraries=True)),  # torch only where a process imported it
        ("world size", run.world_size),
    ]
    if run.params:
        rows.append(("parameters", " ".join(f"{k}={v}" for k, v in sorted(run.params.items()))))
    if run.tags:
        rows.append(("tags", " ".join(f"{k}={v}" for k, v in sorted(run.tags.items()))))
    return rows


def finding_html(fd: Finding, index: int) -> str:
    from stepscope.report.advice import change_text, evidence_text, saving_text
    from stepscope.report.html.escape import esc

    ev = ", ".join(f"{k} = {evidence_text(v)}" for k, v in fd.evidence.items())
    return (f'<div class="ss-finding" data-rule="{esc(fd.rule_id)}"><h4>{index}. {esc(fd.title)} '
            f'<span class="ss-note mono">[{esc(fd.rule_id)}]</span></h4>'
            f"<div>{esc(fd.explanation)}</div>"
            f'<div class="ev"><b>evidence</b> ({esc(fd.measured_from or fd.source)}): {esc(ev)}</div>'
            f'<div class="ev"><b>threshold</b>: {esc(fd.threshold)}</div>'
            f"<div><b>try</b>: {esc(fd.suggestion)}</div>"
            f'<div class="ev"><b>change</b>: {esc(change_text(fd))}</div>'
            f'<div class="ev"><b>{esc(saving_text(fd))}</b> — {esc(fd.saving_basis)}</div></div>')


def findings_html(advice: Advice, *, limit: int | None = None) -> str:
    if not advice.findings:
        body = paragraph(f"No rule fired ({len(advice.checked)} rules checked: {', '.join(advice.checked)}).", "")
    else:
        body = "".join(finding_html(fd, i + 1) for i, fd in enumerate(advice.findings[:limit]))
    return body + "".join(paragraph("note: " + n) for n in advice.notes)


def _thin(n: int) -> np.ndarray:
    step = max(1, int(np.ceil(n / MAX_POINTS)))
    return np.arange(0, n, step)


def rolling_window(n: int) -> int:
    """The rolling-median window (odd, 5 to 51 points) for a per-step series of ``n`` values; 0 when too short."""
    return (max(5, min(51, n // 25)) | 1) if n >= 10 else 0


def speed_section(r: RankData | None, s: RankSummary | None, summary: RunSummary) -> str:
    if r is None or s is None or not len(r.steps):
        return paragraph("No steps were recorded: nothing to plot.")
    steps = r.steps
    train = steps.take(steps["phase"] == 0)
    x = train["index"].astype(float)
    dur = train.duration_ns.astype(float)
    warm = s.steps.warmup_steps
    bands = [Band(float(x[0]), float(train["index"][min(warm, len(train) - 1)]), "warm-up")] if warm and len(x) else []
    step_axis = Axis("step")
    parts = [xy_chart("Step time", x, [Series("step time", dur)], x_axis=step_axis, y_axis=Axis("step time", "ns"),
                      shades=bands, chart_id="plot-step-time")]
    phases = [Series(name.replace("_", " "), train[f"{name}_ns"].astype(float))
              for name in ("data_wait", "forward", "backward", "optimizer", "comm")
              if np.isfinite(train[f"{name}_ns"]).any()]
    if phases:
        measured = np.sum([np.nan_to_num(np.asarray(p.y, dtype=float)) for p in phases], axis=0)
        phases.append(Series("other", np.clip(dur - measured, 0, None)))
        parts.append(xy_chart("Step time by phase (stacked)", x, phases, x_axis=step_axis,
                              y_axis=Axis("time per step", "ns"), stacked=True, shades=bands, chart_id="plot-phases"))
    samples = train["samples"].astype(float)
    if np.isfinite(samples).any():
        t = (train["end_ns"] - steps["start_ns"][0]) / 1e9
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = np.where(dur > 0, samples / (dur / 1e9), np.nan)
        parts.append(xy_chart("Throughput over time (rolling median, raw steps faint)", t,
                              [Series("samples per second", rate, smooth=rolling_window(len(rate)))],
                              x_axis=Axis("time since the first step", "s"), y_axis=Axis("throughput", "samples/s"),
                              chart_id="plot-throughput"))
    val = steps.take(steps["phase"] == 1)
    if len(val) and len(train):
        parts.append(_train_val(train, val))
    return "".join(parts)


def _train_val(train: StepTable, val: StepTable) -> str:
    """Training and validation step times on one time axis, each its own continuous line (its own x)."""
    t0 = min(int(train["start_ns"][0]), int(val["start_ns"][0]))
    ti, vi = _thin(len(train)), _thin(len(val))
    xt, xv = (train["end_ns"][ti] - t0) / 1e9, (val["end_ns"][vi] - t0) / 1e9
    return xy_chart("Training and validation step time over time", np.concatenate([xt, xv]),
                    [Series("training step", train.duration_ns[ti].astype(float), x=xt),
                     Series("validation step", val.duration_ns[vi].astype(float), x=xv)],
                    x_axis=Axis("time since the first step", "s"), y_axis=Axis("step time", "ns"), chart_id="plot-val")


def ranks_html(summary: RunSummary) -> str:
    cols = [Col("rank", "rank"), Col("role", "role", "text"), Col("host", "host", "text"),
            Col("steps", "steps", "count"), Col("p50", "step p50", "ns"), Col("rate", "samples/s"),
            Col("wait", "data wait", "share")]
    rows = [{"rank": r.rank, "role": r.role, "host": r.host, "steps": r.steps.steps,
             "p50": r.steps.step_time.p50 if r.steps.step_time else None, "rate": r.steps.samples_per_s,
             "wait": r.steps.data_wait_share} for r in summary.ranks]
    return table(cols, rows, table_id="ranks")
