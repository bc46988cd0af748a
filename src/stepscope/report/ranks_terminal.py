"""Terminal rendering of the per-rank analysis (`stepscope show RUN --ranks`). Renders only."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from stepscope.analyze.commsplit import CommSplit
from stepscope.analyze.ranks import RankAnalysis
from stepscope.analyze.roles import RoleAnalysis
from stepscope.report import format as f


def _table(title: str, *cols: str) -> Table:
    t = Table(title=title, title_justify="left", title_style="bold", show_edge=False, pad_edge=False)
    for i, c in enumerate(cols):
        t.add_column(c, justify="left" if i == 0 else "right", no_wrap=True)
    return t


def rank_table(a: RankAnalysis) -> RenderableType:
    window = f"steps {a.window[0]}-{a.window[1]}" if a.window else "no steps"
    t = _table(f"Ranks ({window}, mean per step, CPU wall clock)", "rank", "role", "host", "steps", "step",
               "useful", "compute", "data wait", "comm", "comm %", "transfer", "sync", "samples/s")
    slow = {s.rank for s in a.stragglers}
    for r in a.ranks:
        name = f"{r.rank}" + (" (incomplete)" if not r.complete else "") + (" straggler" if r.rank in slow else "")
        t.add_row(f"[red]{name}[/]" if r.rank in slow or not r.complete else name, r.role or "", r.host,
                  str(r.steps), f.duration_ns(r.step_ns), f.duration_ns(r.useful_ns), f.duration_ns(r.compute_ns),
                  f.duration_ns(r.data_wait_ns), f.duration_ns(r.comm_ns), f.share(r.comm_share),
                  f.duration_ns(r.transfer_ns), f.duration_ns(r.sync_ns),
                  f.rate(r.samples_per_s, "").replace(" /s", ""))
    return t


def pop_block(a: RankAnalysis) -> RenderableType:
    if a.pop is None:
        return Text(f"POP metrics: not available — {a.pop_note}", style="dim")
    p = a.pop
    t = _table("POP metrics (1 = perfect)", "metric", "value", "definition")
    t.columns[2].justify = "left"
    t.add_row("parallel efficiency", f"{p.parallel_efficiency:.3f}", "load balance × communication efficiency")
    t.add_row("  load balance", f"{p.load_balance:.3f}", "mean useful / max useful per step "
              f"({f.duration_ns(p.mean_useful_ns)} / {f.duration_ns(p.max_useful_ns)})")
    t.add_row("  communication efficiency", f"{p.communication_efficiency:.3f}",
              f"max useful / runtime ({f.duration_ns(p.max_useful_ns)} / {f.duration_ns(p.runtime_ns)})")
    return t


def verdict(a: RankAnalysis) -> RenderableType:
    lines = Text()
    if a.stragglers:
        for s in a.stragglers:
            lines.append(f"straggler: rank {s.rank} is slower by {f.duration_ns(s.excess_ns)} per step "
                         f"({f.share(s.excess_share)} of the step; p={s.p_value:.1g}); the other ranks wait for it "
                         "in their collectives\n", style="red")
    elif a.balanced:
        lines.append("balanced: no rank is slower than the others beyond noise\n", style="green")
    elif a.balanced is False and a.pop is not None:
        lines.append(f"imbalanced: load balance {a.pop.load_balance:.2f}, but no single rank stands out beyond "
                     "noise\n", style="yellow")
    for w in a.warnings:
        lines.append(f"warning: {w}\n", style="yellow")
    return lines


def split_table(split: CommSplit | None, title: str) -> RenderableType | None:
    if split is None or not split.ops:
        return None
    t = _table(title, "op", "instances", "rank-calls", "bytes/call", "time", "transfer", "sync", "sync %", "unmatched")
    for o in split.ops:
        t.add_row(o.op, str(o.instances), str(o.calls), f.nbytes(o.bytes_per_call), f.duration_ns(o.time_ns),
                  f.duration_ns(o.transfer_ns), f.duration_ns(o.sync_ns), f.share(o.sync_share), str(o.unmatched_calls))
    return t


def trace_table(a: RankAnalysis) -> RenderableType | None:
    if not a.trace_ranks:
        return None
    t = _table("Profiled window on the GPU (trace kernels, per rank)", "rank", "window", "compute", "communication",
               "idle")
    for r in a.trace_ranks:
        t.add_row(str(r.rank), f.duration_ns(r.window_ns), f.duration_ns(r.compute_ns),
                  f.duration_ns(r.communication_ns), f.duration_ns(r.idle_ns))
    if a.trace_pop is None:
        return t
    p = a.trace_pop
    return Group(t, Text(f"GPU POP metrics: load balance {p.load_balance:.3f}, communication efficiency "
                         f"{p.communication_efficiency:.3f}, parallel efficiency {p.parallel_efficiency:.3f} "
                         "(useful = computation kernels)"))


def roles_table(r: RoleAnalysis | None) -> RenderableType | None:
    if r is None or len(r.roles) < 2:
        return None
    t = _table("Roles (busy = step time outside communication and data wait)", "role", "ranks", "busy",
               "waiting", "saturated windows")
    for role in r.roles:
        t.add_row(role.role, ",".join(map(str, role.ranks)), f.share(role.busy_share), f.share(role.waiting_share),
                  f"{len(role.saturated_bins)}/{len(r.bins_ns) - 1 if r.bins_ns else 0}")
    out: list[RenderableType] = [t]
    for note in r.findings:
        out.append(Text(note, style="yellow"))
    return Group(*out)


def ranks_report(a: RankAnalysis, roles: RoleAnalysis | None = None) -> RenderableType:
    parts = [rank_table(a), Text(), pop_block(a), verdict(a),
             split_table(a.comm_split, "Collectives: transfer vs sync (per-call timings, all ranks summed)"),
             trace_table(a),
             split_table(a.trace_split, "Communication kernels: transfer vs sync (profiler traces, GPU time)"),
             roles_table(roles)]
    return Group(*(p for p in parts if p is not None))
