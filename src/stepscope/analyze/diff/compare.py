"""The whole diff of two inputs: :func:`diff` returns a :class:`RunDiff` (``to_dict()`` for JSON)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from stepscope.analyze.diff.breakdown import BreakdownRow, breakdown_diff
from stepscope.analyze.diff.overview import ContextItem, OverviewRow, context_diff, run_overview
from stepscope.analyze.diff.series import MetricRow, TrendPair, logged_diff, step_trends, system_diff
from stepscope.analyze.diff.sides import DiffSide, StepSample, region_per_step, step_sample
from stepscope.analyze.diff.significance import Change, DiffSettings, Verdict, compare_samples
from stepscope.analyze.diff.traces import TraceDiff, trace_diff, trace_overview
from stepscope.analyze.summary import summarize_run

DIFF_SCHEMA = "stepscope.diff/1"


@dataclass(frozen=True, slots=True)
class SideInfo:
    """What one side is: ``kind`` "run", "run+traces" or "traces"; run id / name / status when a run."""

    label: str
    kind: str
    run_id: str | None
    name: str | None
    status: str | None
    world_size: int | None


@dataclass(frozen=True, slots=True)
class RankRow:
    """Median step time (ns, warm-up excluded) of one rank in each run; None where the run lacks the rank."""

    rank: int
    baseline_ns: float | None
    experiment_ns: float | None
    change: Change | None


@dataclass(frozen=True, slots=True)
class Finding:
    """One line of "what changed", in the order reports show them (the change named first).

    ``kind``: "step_time", "throughput", "setup" (a set-up difference: device, world size, command, model,
    parameter; ``baseline_text``/``experiment_text`` hold it), "phase", "region", "module", "component",
    "kernel", "operator". ``unit``: unit of ``baseline``/``experiment``/``delta`` ("ns" per step for
    phases and regions, "ns per profiled step" for window parts). ``verdict``: None where no per-step test
    exists (trace windows hold a few steps and are shown without a verdict).
    """

    kind: str
    name: str
    unit: str
    baseline: float | None
    experiment: float | None
    delta: float | None
    delta_pct: float | None
    verdict: Verdict | None
    baseline_text: str | None = None
    experiment_text: str | None = None


@dataclass(frozen=True, slots=True)
class RunDiff:
    """Baseline vs experiment. Every part is empty (with a message) where an input lacks the data.

    ``world``: how runs of different world sizes were compared ("same" or "per_rank_and_totals");
    ``messages``: plain-language notes (comparing a run with itself, world sizes, not profiled...).
    """

    baseline: SideInfo
    experiment: SideInfo
    settings: DiffSettings
    world: str
    findings: tuple[Finding, ...]
    context: tuple[ContextItem, ...]
    overview: tuple[OverviewRow, ...]
    ranks: tuple[RankRow, ...]
    breakdown: tuple[BreakdownRow, ...]
    trends: tuple[TrendPair, ...]
    system: tuple[MetricRow, ...]
    logged: tuple[MetricRow, ...]
    traces: TraceDiff | None
    trace_note: str | None
    messages: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        d = _clean(asdict(self))
        for row, src in zip(d["breakdown"], self.breakdown, strict=True):
            row["presence"] = src.presence
        for row, src in ((r, s) for part in ("overview", "breakdown") for r, s in zip(d[part], getattr(self, part),
                                                                                     strict=True)):
            if src.change is not None:
                row["change"]["delta_pct"] = src.change.delta_pct
        return {"schema": DIFF_SCHEMA, **d, "settings": self.settings.to_dict()}


def _clean(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, Verdict):
        return obj.value
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _info(side: DiffSide) -> SideInfo:
    if side.data is None:
        return SideInfo(side.label, side.kind, None, None, None, _trace_world(side))
    r = side.data.run
    return SideInfo(side.label, side.kind, r.id, r.name, r.status.value, r.world_size)


def _trace_world(side: DiffSide) -> int | None:
    ov = trace_overview(side.traces) if side.traces is not None else None
    return ov.world_size if ov else None


def _samples(side: DiffSide) -> list[StepSample]:
    if side.data is None:
        return []
    return [step_sample(r, warmup=side.effective_warmup()) for r in side.data.ranks]


def _rank_rows(base: list[StepSample], exp: list[StepSample], settings: DiffSettings) -> list[RankRow]:
    if len(base) < 2 and len(exp) < 2:
        return []
    by_b, by_e = {s.rank: s for s in base}, {s.rank: s for s in exp}
    rows = []
    for r in sorted(set(by_b) | set(by_e)):
        b, e = by_b.get(r), by_e.get(r)
        med = [None if s is None or not len(s) else float(np.median(s.duration_ns)) for s in (b, e)]
        ch = compare_samples(b.duration_ns, e.duration_ns, settings=settings) if b and e else None
        rows.append(RankRow(r, med[0], med[1], ch))
    return rows


def _setup_findings(overview: list[OverviewRow], context: list[ContextItem]) -> list[Finding]:
    out = []
    for row in overview:
        if row.key in ("device", "world_size") and row.baseline != row.experiment:
            out.append(Finding("setup", row.label, "text", None, None, None, None, None,
                               str(row.baseline), str(row.experiment)))
    for c in context[:4]:
        out.append(Finding("setup", c.key, "text", None, None, None, None, None, c.baseline, c.experiment))
    return out


def _findings(overview: list[OverviewRow], breakdown: list[BreakdownRow], traces: TraceDiff | None,
              world: str, context: list[ContextItem]) -> list[Finding]:
    out = []
    for row in overview:
        if row.key in ("step_time_median_ns",) or (world != "same" and row.key == "samples_per_s"):
            ch = row.change
            out.append(Finding("step_time" if row.key.startswith("step") else "throughput", row.label, row.unit,
                               _num(row.baseline), _num(row.experiment), row.delta, row.delta_pct,
                               ch.verdict if ch else None))
    out += _setup_findings(overview, context)
    sig = [r for r in breakdown if r.change is None or r.change.verdict is not Verdict.NO_SIGNIFICANT_CHANGE]
    for r in sig[:4]:
        out.append(Finding(r.kind, r.name, "ns", r.baseline_ns, r.experiment_ns, r.delta_ns, r.delta_pct,
                           r.change.verdict if r.change else None))
    if traces is not None:
        out.extend(traces.findings())
    return out


def _num(v: float | str | None) -> float | None:
    return v if isinstance(v, (int, float)) else None


def diff(base: DiffSide, exp: DiffSide, *, settings: DiffSettings | None = None) -> RunDiff:
    """Compare two loaded inputs (runs, trace sets, or runs with their profiled windows analysed)."""
    s = settings or DiffSettings()
    messages: list[str] = []
    if base.data is not None and exp.data is not None and base.data.path == exp.data.path:
        messages.append(f"comparing run {base.data.run.id} with itself: every difference is zero by construction")
    bs, es = _samples(base), _samples(exp)
    overview: list[OverviewRow] = []
    context: list[ContextItem] = []
    breakdown: list[BreakdownRow] = []
    trends: list[TrendPair] = []
    system: list[MetricRow] = []
    logged: list[MetricRow] = []
    if base.data is not None and exp.data is not None:
        sb = summarize_run(base.data, warmup=base.effective_warmup())
        se = summarize_run(exp.data, warmup=exp.effective_warmup())
        overview = run_overview(sb, se, bs, es, base.data, exp.data, s)
        context = context_diff(sb, se)
        b0, e0 = (bs[0] if bs else None), (es[0] if es else None)
        rb = base.data.ranks[0] if base.data.ranks else None
        re_ = exp.data.ranks[0] if exp.data.ranks else None
        breakdown = breakdown_diff(b0, e0, region_per_step(rb, b0) if rb and b0 else {},
                                   region_per_step(re_, e0) if re_ and e0 else {}, s)
        trends = step_trends(b0, e0)
        system, sys_trends = system_diff(rb, re_)
        logged, log_trends = logged_diff(rb, re_)
        trends += log_trends + sys_trends
        for side, samples in (("baseline", bs), ("experiment", es)):
            if not samples or not len(samples[0]):
                messages.append(f"the {side} has no measured training step: step time, phases and regions "
                                "cannot be compared")
    elif base.data is not None or exp.data is not None:
        messages.append("one input is a trace set without a run: only the profiled windows are compared")
    tdiff, tnote = trace_diff(base, exp, settings=s)
    if base.data is None or exp.data is None:
        overview = trace_overview_rows(base, exp, s) or overview
    wb, we = _info(base).world_size, _info(exp).world_size
    world = "same" if wb == we else "per_rank_and_totals"
    if world != "same":
        messages.append(f"world sizes differ ({wb} vs {we}): step time, phases, regions, modules, operators and "
                        "kernels compare one rank of each (per rank); throughput and energy compare totals over "
                        "all ranks, and throughput per rank divides them by the world size")
    return RunDiff(
        baseline=_info(base), experiment=_info(exp), settings=s, world=world,
        findings=tuple(_findings(overview, breakdown, tdiff, world, context)), context=tuple(context),
        overview=tuple(overview), ranks=tuple(_rank_rows(bs, es, s)), breakdown=tuple(breakdown),
        trends=tuple(trends), system=tuple(system), logged=tuple(logged), traces=tdiff, trace_note=tnote,
        messages=tuple(messages),
    )


def trace_overview_rows(base: DiffSide, exp: DiffSide, settings: DiffSettings) -> list[OverviewRow]:
    """Overview rows from the profiled windows alone (when an input is a bare trace set)."""
    from stepscope.analyze.diff.traces import overview_rows_from_traces

    return overview_rows_from_traces(base, exp, settings)
