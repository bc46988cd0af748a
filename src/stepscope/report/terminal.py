"""Terminal rendering of a run summary with rich: speed, time, system, memory, model, metrics.

Renderers only render: every number comes computed in the RunSummary.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from stepscope.analyze.run.lost import partial_label, records_lost
from stepscope.analyze.run.quality import Quality
from stepscope.analyze.run.summary import RankSummary, RunSummary
from stepscope.report import format as f
from stepscope.report.console import console as console  # the reports' one console, re-exported
from stepscope.report.flops import flops_table
from stepscope.report.labels import software_line
from stepscope.report.tables import FitTable

if TYPE_CHECKING:  # the advisor and the trace engine are imported where shown: the end-of-run summary uses neither
    from stepscope.analyze.advisor import Advice
    from stepscope.analyze.trace.ops import ModuleNode

STATUS_STYLE = {"completed": "green", "failed": "red", "incomplete": "yellow", "running": "cyan"}


SAMPLES_GUESS = "samples per step: "
"""How the note of a guessed batch dimension begins (collect/torch/modules.py: a sequence-first model's input)."""


def _table(title: str, *cols: str) -> FitTable:
    t = FitTable(title=title, title_justify="left", title_style="bold", show_edge=False, pad_edge=False, expand=False)
    for i, c in enumerate(cols):
        t.add_column(c, justify="left" if i == 0 else "right", no_wrap=i != 0)
    return t


def header(s: RunSummary) -> RenderableType:
    r = s.run
    when = datetime.fromtimestamp(r.start_ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    lines = Text()
    lines.append(f"run {r.id}", style="bold")
    lines.append(f"  {r.name}  ")
    lines.append(r.status.value, style=STATUS_STYLE.get(r.status.value, ""))
    lost = records_lost(n for rank in s.ranks for n in rank.notes)
    if lost:  # a partial run: its figures come from what was kept
        lines.append(partial_label("", lost), style="yellow")
    if r.exit_code not in (None, 0):
        lines.append(f" (exit code {r.exit_code})", style="red")
    lines.append(f"\n{when}  duration {f.duration_ns(r.duration_ns)}  world size {r.world_size}")
    lines.append(f"\ncommand: {' '.join(r.command)}")
    if r.git:
        dirty = " (dirty)" if r.git.dirty else ""
        lines.append(f"\ngit: {r.git.commit[:10]}{dirty} {r.git.branch or '(detached)'} {r.git.subject or ''}")
    hw = r.host
    gpus = ", ".join(sorted({g.name for g in hw.gpus})) or "no GPU"
    lines.append(f"\nhost: {hw.hostname}, {hw.cpu_model or 'CPU'} ({hw.cpu_cores_logical} threads), "
                 f"{f.nbytes(hw.memory_bytes)}, {gpus}")
    lines.append(f"\nsoftware: {software_line(s)}")
    if s.framework:
        lines.append(f"\nframework: {framework_line(s.framework)}")
    if r.params or r.tags:
        kv = [f"{k}={v}" for k, v in sorted(r.params.items())] + [f"#{k}={v}" for k, v in sorted(r.tags.items())]
        lines.append("\nparams/tags: " + " ".join(kv))
    return lines


def framework_line(fw: dict[str, Any]) -> str:
    """One line of the ``framework`` record: versions, backend, TensorFlow's thread pools, devices."""
    parts = [f"{k} {fw[k]}" for k in ("tensorflow", "keras", "jax") if fw.get(k)]
    if fw.get("backend"):
        parts.append(f"backend {fw['backend']}")
    if "inter_op_threads" in fw or "intra_op_threads" in fw:
        def threads(v: Any) -> str:
            return "default" if v in (0, None) else str(v)
        parts.append(f"threads inter-op {threads(fw.get('inter_op_threads'))} / intra-op "
                     f"{threads(fw.get('intra_op_threads'))}")
    devices = fw.get("logical_devices") or fw.get("physical_devices") or fw.get("jax_devices")
    if devices:
        parts.append("devices " + ", ".join(map(str, devices)))
    return f"{fw.get('name', '?')}: " + ", ".join(parts)


def speed(s: RunSummary) -> RenderableType:
    h = s.headline
    t = _table("Speed", "", "value")
    if not s.ranks or not s.ranks[0].steps.steps:
        t.add_row("steps recorded", "0")
        return t
    if s.ranks:
        st = s.ranks[0].steps
        left_out = st.steps - st.warmup_steps - st.measured_steps
        parts = [f"{st.warmup_steps} warm-up"] + ([f"{left_out} instrumented"] if left_out else [])
        t.add_row("steps recorded", f"{st.steps} ({', '.join(parts)}, {st.measured_steps} measured)")
        t.caption = "step times and throughputs: measured steps" + (
            " (instrumented: profiled, FLOP-counted or carrying a trace's write)" if left_out else "")
        d = st.step_time
        t.add_row("step time median / p95",
                  f"{f.duration_ns(h.step_time_median_ns)} / {f.duration_ns(h.step_time_p95_ns)}")
        t.add_row("step time mean ± std",
                  f"{f.duration_ns(d.mean if d else None)} ± {f.duration_ns(d.std if d else None)}")
        t.add_row("step time min / max",
                  f"{f.duration_ns(d.min if d else None)} / {f.duration_ns(d.max if d else None)}")
        if st.device_time:
            t.add_row("GPU step time median (CUDA events)", f.duration_ns(st.device_time.p50))
        t.add_row("first step", f.duration_ns(h.first_step_ns))
        guessed = any(n.startswith(SAMPLES_GUESS) for r in s.ranks for n in r.notes)
        t.add_row("samples per step", f.number(st.samples_per_step) + (" (a guess: see warnings)" if guessed else ""))
        if st.validation_steps:
            t.add_row("validation steps / throughput",
                      f"{st.validation_steps} / {f.rate(st.validation_samples_per_s, 'samples')}")
        if st.epochs:
            t.add_row("epochs", str(st.epochs))
    t.add_row("throughput" + (" (all ranks)" if len(s.ranks) > 1 else ""), f.rate(h.samples_per_s, "samples"))
    if h.tokens_per_s:
        t.add_row("tokens", f.rate(h.tokens_per_s, "tokens"))
    t.add_row("steps/s", f.number(h.steps_per_s))
    t.add_row("data wait", f.share(h.data_wait_share))
    if h.energy_per_step_j is not None:
        t.add_row("energy per step", f"{h.energy_per_step_j:.2f} J")
    return t


def phases(r: RankSummary) -> RenderableType | None:
    if all(p.mean_ns is None for p in (*r.steps.phases, r.steps.other)):
        return None
    t = _table("Time per step by phase" + (f" (rank {r.rank})" if r.rank else ""), "phase", "mean", "% of step")
    for p in (*r.steps.phases, r.steps.other):
        if p.mean_ns is None:
            continue
        t.add_row(p.phase.replace("_", " "), f.duration_ns(p.mean_ns), f.share(p.share))
    timing = "CUDA events" if r.timing == "cuda_events" else "CPU wall clock"
    t.caption = f"timing: {timing}; steps marked by {r.step_source or '—'}"
    return t


def regions(r: RankSummary, limit: int | None = None) -> RenderableType | None:
    if not r.regions:
        return None
    t = _table("Regions", "region", "count", "total", "mean", "p50", "p95", "std", "% of step")
    for reg in r.regions[:limit]:
        d = reg.time
        t.add_row(Text("  " * reg.depth + reg.name), f"{d.count:,}", f.duration_ns(d.total), f.duration_ns(d.mean),
                  f.duration_ns(d.p50), f.duration_ns(d.p95), f.duration_ns(d.std), f.share(reg.share_of_steps))
    if limit is not None and len(r.regions) > limit:
        t.caption = f"{len(r.regions) - limit} more: stepscope show RUN"
    return t


def system(r: RankSummary) -> RenderableType | None:
    if not r.system:
        return None
    t = _table("System" + (f" (rank {r.rank})" if r.rank else ""), "metric", "mean", "peak", "last")
    for m in r.system:
        t.add_row(m.name, f.metric_value(m.name, m.mean), f.metric_value(m.name, m.peak),
                  f.metric_value(m.name, m.last))
    return t


def memory(s: RunSummary) -> RenderableType | None:
    """Peak memory per rank; None when nothing was measured (no empty table)."""
    if not any(r.peak_rss_bytes is not None or r.peak_gpu_mem_bytes or r.memory_ops for r in s.ranks):
        return None
    t = _table("Memory", "", "peak")
    ops: list[RenderableType] = []
    for r in s.ranks:
        suffix = f" (rank {r.rank})" if len(s.ranks) > 1 else ""
        if r.peak_rss_bytes is not None:
            t.add_row("process RSS" + suffix, f.nbytes(r.peak_rss_bytes))
        for dev, v in sorted(r.peak_gpu_mem_bytes.items()):
            t.add_row(f"{dev} memory{suffix}", f.nbytes(v))
        if r.memory_ops:
            o = _table(f"Operators that allocate most{suffix} (profiled window)", "operator", "calls", "self CPU",
                       "self GPU")
            for m in r.memory_ops[:10]:
                o.add_row(m.name, f"{m.calls:,}", f.nbytes(m.self_cpu_bytes), f.nbytes(m.self_device_bytes))
            ops.append(o)
    return Group(t, *ops) if ops else t


def model(s: RunSummary, *, layers: int = 25) -> RenderableType | None:
    if not s.models:
        return None
    out: list[RenderableType] = []
    for m in s.models:
        t = _table(f"Model {m['name']}: {m['total_params']:,} parameters ({m['trainable_params']:,} trainable), "
                   f"{f.nbytes(m['param_bytes'])} parameters, {f.nbytes(m['buffer_bytes'])} buffers",
                   "layer", "type", "output shape", "params", "bytes")
        for row in m["layers"][:layers]:
            t.add_row(Text("  " * row["depth"] + row["name"]), row["type"], str(row["output_shape"] or "—"),
                      f"{row['params']:,}", f.nbytes(row["param_bytes"] + row["buffer_bytes"]))
        if len(m["layers"]) > layers:
            t.caption = f"{len(m['layers']) - layers} more layers: stepscope show RUN --json"
        out.append(t)
    return Group(*out)


def user_metrics(r: RankSummary) -> RenderableType | None:
    if not r.metrics:
        return None
    t = _table("Logged metrics", "metric", "count", "first", "last", "min", "max")
    for m in r.metrics:
        t.add_row(m.name, f"{m.count:,}", f.number(m.first), f.number(m.last), f.number(m.min), f.number(m.max))
    return t


def ranks_table(s: RunSummary) -> RenderableType | None:
    if len(s.ranks) < 2:
        return None
    t = _table("Ranks", "rank", "role", "host", "steps", "step p50", "samples/s", "data wait", "status")
    for r in s.ranks:
        t.add_row(str(r.rank), r.role or "—", r.host, str(r.steps.steps),
                  f.duration_ns(r.steps.step_time.p50 if r.steps.step_time else None),
                  f.rate(r.steps.samples_per_s, "samples"), f.share(r.steps.data_wait_share),
                  "ok" if r.complete else "no end record")
    return t


def warnings(s: RunSummary) -> RenderableType | None:
    notes = list(s.warnings) + [f"rank {r.rank}: {n}" for r in s.ranks for n in r.notes]
    if not notes:
        return None
    return Panel(Text("\n".join(notes)), title="warnings", border_style="yellow", expand=False)


def _present(items: Iterable[RenderableType | None]) -> list[RenderableType]:
    out: list[RenderableType] = []
    for it in items:
        if it is not None:
            out += [it, Text("")]
    return out


def quality_view(q: Quality | None) -> RenderableType | None:
    """The measurement-quality verdict (analyze/run/quality.py), shown first: noisy figures say so loudly."""
    if q is None:
        return None
    return caveat_view(q) or Text(q.headline(), style="dim")


def caveat_view(q: Quality | None) -> RenderableType | None:
    """The measurement-quality line where it fires (noisy figures), else nothing: the end-of-run summary."""
    line = q.caveat() if q is not None else None
    return Text(line, style="bold yellow") if line else None


def full_report(s: RunSummary, advice: Advice | None = None, *, quality: Quality | None = None) -> RenderableType:
    """The whole run; the measurement-quality verdict first (when given); with ``advice``, its top three
    recommendations after the warnings."""
    from stepscope.report.advice import advice_view

    r0 = s.ranks[0] if s.ranks else None
    return Group(*_present([
        quality_view(quality), header(s), warnings(s), advice_view(advice, limit=3, detail=False) if advice else None,
        speed(s), flops_table(s.flops), ranks_table(s),
        phases(r0) if r0 else None, regions(r0) if r0 else None,
        system(r0) if r0 else None, memory(s), model(s), user_metrics(r0) if r0 else None,
    ]))


def short_report(s: RunSummary, *, quality: Quality | None = None) -> RenderableType:
    """What `stepscope run` prints at the end: the noise caveat where it fires (``quality``), headline, phases,
    top regions, warnings."""
    r0 = s.ranks[0] if s.ranks else None
    return Group(*_present([
        caveat_view(quality), header(s), warnings(s), speed(s), flops_table(s.flops), ranks_table(s),
        phases(r0) if r0 else None,
        regions(r0, limit=8) if r0 else None,
        Text(f"full report: stepscope show {s.run.id}", style="dim"),
    ]))


def module_tree_view(modules: Iterable[ModuleNode]) -> RenderableType:
    """The nn.Module tree of a profiled window: calls, CPU and GPU time per module, indented by depth."""
    t = _table("Module tree (profiled window)", "module", "calls", "CPU time", "GPU time")
    for m in modules:
        t.add_row(Text("  " * (len(m.path) - 1) + m.path[-1]), f"{m.calls:,}", f.duration_ns(m.cpu_ns),
                  f.duration_ns(m.device_ns or None))
    return t

