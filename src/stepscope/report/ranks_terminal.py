"""Terminal rendering of the per-rank analysis (`stepscope show RUN --ranks`). Renders only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.text import Text

from stepscope.analyze.trace.multirank import TraceSetAnalysis
from stepscope.analyze.trace.rankdist import (
    RANK_ROWS_MAX,
    Distribution,
    rank_time_distributions,
    trace_rank_distributions,
)
from stepscope.report import format as f
from stepscope.report.tables import FitTable

if TYPE_CHECKING:  # types only: `stepscope trace` prints with this module and needs none of the run analyses
    from stepscope.analyze.ranks.commsplit import CommSplit
    from stepscope.analyze.ranks.ranks import PopMetrics, RankAnalysis
    from stepscope.analyze.ranks.roles import RoleAnalysis


def _table(title: str, *cols: str) -> FitTable:
    t = FitTable(title=title, title_justify="left", title_style="bold", show_edge=False, pad_edge=False)
    for i, c in enumerate(cols):
        t.add_column(c, justify="left" if i == 0 else "right", numeric=i > 0 or c == "rank")  # rank ids whole
    return t


def _value(v: float, unit: str) -> str:
    if unit == "ns":
        return f.duration_ns(v)
    if unit == "%":
        return f"{v:.1f}%"
    return f"{v:,.1f}"


def _outliers(d: Distribution) -> str:
    def side(named: tuple[tuple[int, float], ...], count: int, word: str) -> str:
        if not count:
            return ""
        listed = ", ".join(f"{r} ({_value(v, d.unit)})" for r, v in named)
        return f"{word}: {listed}" + (f" +{count - len(named)} more" if count > len(named) else "")
    return "; ".join(x for x in (side(d.high, d.high_count, "high"), side(d.low, d.low_count, "low")) if x) or "—"


def distribution_table(title: str, dists: tuple[Distribution, ...]) -> FitTable:
    """One row per figure: min / quartiles / max across ranks and the outlying ranks (Tukey's fences)."""
    t = _table(title, "figure", "ranks", "min", "q1", "median", "q3", "max", "outlier ranks")
    t.columns[-1].numeric, t.columns[-1].prose = False, True  # ranks with their values: wraps between words
    for d in dists:
        t.add_row(d.name, str(d.ranks), *(_value(v, d.unit) for v in (d.min, d.q1, d.median, d.q3, d.max)),
                  _outliers(d))
    return t


def rank_table(a: RankAnalysis) -> RenderableType:
    if len(a.ranks) > RANK_ROWS_MAX:
        window = f"steps {a.window[0]}-{a.window[1]}" if a.window else "no steps"
        return distribution_table(f"{len(a.ranks)} ranks ({window}, mean per step, CPU wall clock): distribution "
                                  "across ranks", rank_time_distributions(a))
    window = f"steps {a.window[0]}-{a.window[1]}" if a.window else "no steps"
    t = _table(f"Ranks ({window}, mean per step, CPU wall clock)", "rank", "role", "host", "steps", "step",
               "useful", "compute", "data wait", "comm", "comm %", "transfer", "sync", "samples/s", "CPU wait")
    slow = {s.rank for s in a.stragglers}
    for r in a.ranks:
        name = f"{r.rank}" + (" (incomplete)" if not r.complete else "") + (" straggler" if r.rank in slow else "")
        t.add_row(f"[red]{name}[/]" if r.rank in slow or not r.complete else name, r.role or "", r.host,
                  str(r.steps), f.duration_ns(r.step_ns), f.duration_ns(r.useful_ns), f.duration_ns(r.compute_ns),
                  f.duration_ns(r.data_wait_ns), f.duration_ns(r.comm_ns), f.share(r.comm_share),
                  f.duration_ns(r.transfer_ns), f.duration_ns(r.sync_ns),
                  f.rate(r.samples_per_s, "").replace(" /s", ""), f.share(r.cpu_wait_share))
    return t


def pop_block(a: RankAnalysis) -> RenderableType:
    if a.pop is None:
        return Text(f"POP metrics: not available — {a.pop_note}", style="dim")
    p = a.pop
    t = _table("POP metrics (1 = perfect)", "metric", "value", "definition")
    t.columns[2].numeric, t.columns[2].prose = False, True
    t.add_row("parallel efficiency", f"{p.parallel_efficiency:.3f}", "load balance × communication efficiency")
    t.add_row("  load balance", f"{p.load_balance:.3f}", "mean useful / max useful per step "
              f"({f.duration_ns(p.mean_useful_ns)} / {f.duration_ns(p.max_useful_ns)})")
    t.add_row("  communication efficiency", f"{p.communication_efficiency:.3f}",
              f"max useful / runtime ({f.duration_ns(p.max_useful_ns)} / {f.duration_ns(p.runtime_ns)})")
    return t


def verdict(a: RankAnalysis) -> RenderableType:
    lines = Text()
    for s in a.stragglers:
        lines.append(f"straggler: rank {s.rank} is slower by {f.duration_ns(s.excess_ns)} per step "
                     f"({f.share(s.excess_share)} of the step; p={s.p_value:.1g}); the other ranks wait for it "
                     "in their collectives\n", style="red")
    for s in a.unresolved:
        lines.append(f"inconclusive: rank {s.rank} is slower by {f.duration_ns(s.excess_ns)} per step "
                     f"({f.share(s.excess_share)} of the step; p={s.p_value:.1g}), but a rank's main thread waited "
                     f"for a CPU {f.share(a.cpu_wait_share)} of the window: on an oversubscribed host twin ranks "
                     "differ by that much. To decide, rerun with no more busy processes than cores on the host\n",
                     style="yellow")
    if a.balanced and not a.stragglers:
        lines.append("balanced: no rank is slower than the others beyond noise\n", style="green")
    elif a.balanced is False and not a.stragglers and a.pop is not None:
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


def gpu_pop_line(p: PopMetrics) -> Text:
    return Text(f"GPU POP metrics: load balance {p.load_balance:.3f}, communication efficiency "
                f"{p.communication_efficiency:.3f}, parallel efficiency {p.parallel_efficiency:.3f} "
                "(useful = computation kernels)")


def trace_table(a: RankAnalysis) -> RenderableType | None:
    if not a.trace_ranks:
        return None
    if len(a.trace_ranks) > RANK_ROWS_MAX:
        t = distribution_table(f"Profiled window on the GPU ({len(a.trace_ranks)} ranks): distribution across "
                               "ranks", trace_rank_distributions(a))
    else:
        t = _table("Profiled window on the GPU (trace kernels, per rank)", "rank", "window", "compute",
                   "communication", "idle")
        for r in a.trace_ranks:
            t.add_row(str(r.rank), f.duration_ns(r.window_ns), f.duration_ns(r.compute_ns),
                      f.duration_ns(r.communication_ns), f.duration_ns(r.idle_ns))
    return t if a.trace_pop is None else Group(t, gpu_pop_line(a.trace_pop))


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


def traceset_extras(s: TraceSetAnalysis) -> RenderableType:
    """What a trace set adds below its per-rank tables: GPU POP metrics and notes on partly read files."""
    parts: list[RenderableType] = [gpu_pop_line(s.gpu_pop)] if s.gpu_pop is not None else []
    parts += [Text(f"note: {n}", style="yellow") for n in s.notes]
    return Group(*parts)


def traceset_distribution_view(s: TraceSetAnalysis, dists: tuple[Distribution, ...]) -> RenderableType:
    """A trace set past RANK_ROWS_MAX ranks: distributions instead of one table per rank."""
    parts: list[RenderableType] = [distribution_table(f"{len(s.ranks)} ranks: distribution across ranks", dists)]
    if s.slowest_rank is not None:
        parts.append(Text(f"slowest rank: {s.slowest_rank} (highest median step, else longest GPU window)"))
    parts.append(traceset_extras(s))
    parts += [Text(f"error: {e}", style="red") for e in s.errors]
    parts += [Text(f"warning: {w}", style="yellow") for w in s.warnings]
    return Group(*parts)
