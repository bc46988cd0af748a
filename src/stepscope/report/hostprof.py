"""Terminal rendering of a host profile (analyze/run/hostprof.py): hottest functions per process, phase and
region."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from stepscope.analyze.run.hostprof import FunctionCost, HostProfile, ProcessProfile
from stepscope.report import format as f
from stepscope.report.tables import FitTable


def _functions(title: str, funcs: tuple[FunctionCost, ...]) -> FitTable:
    t = FitTable(title=title, title_justify="left", title_style="bold", show_edge=False, pad_edge=False)
    t.add_column("function", overflow="fold")
    for c in ("self", "self %", "total", "total %"):
        t.add_column(c, justify="right", no_wrap=True)
    for fc in funcs:
        t.add_row(fc.function, f.duration_ns(fc.self_s * 1e9), f.share(fc.self_share), f.duration_ns(fc.total_s * 1e9),
                  f.share(fc.total_share))
    return t


def process_view(p: ProcessProfile, *, groups: int) -> RenderableType:
    what = "main thread" if p.process == "main" else "DataLoader workers"
    head = Text(f"rank {p.rank}, {what}: {p.samples:,} samples at {p.hz:g} Hz over {p.sampled_s:.2f} s", style="bold")
    if p.period_s:
        head.append(f" (one sample ≈ {f.duration_ns(p.period_s * 1e9)})", style="dim")
    if p.dropped:
        head.append(f"\n{p.dropped:,} samples dropped (too many distinct stacks)", style="yellow")
    phases = FitTable(title="Samples by step phase", title_justify="left", title_style="bold", show_edge=False,
                   pad_edge=False)
    phases.add_column("phase")
    phases.add_column("samples", justify="right")
    phases.add_column("share", justify="right")
    for name, n, share in p.phases:
        phases.add_row(name, f"{n:,}", f.share(share))
    parts: list[RenderableType] = [head, phases, _functions("Hottest functions (by self time)", p.functions)]
    for g in p.groups[:groups]:
        parts.append(_functions(f"region {g.region} · phase {g.phase}: {g.samples:,} samples ({f.share(g.share)})",
                                g.functions[:5]))
    return Group(*parts)


def host_view(profile: HostProfile, *, groups: int = 6) -> RenderableType:
    parts: list[RenderableType] = []
    for p in profile.processes:
        parts += [process_view(p, groups=groups), Text("")]
    for n in profile.notes:
        parts.append(Text(f"note: {n}", style="yellow"))
    return Group(*parts)
