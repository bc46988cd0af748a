"""The whole diff of two inputs: :func:`diff` returns a :class:`RunDiff` (``to_dict()`` for JSON)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from stepscope.analyze.diff.breakdown import BreakdownRow, breakdown_diff
from stepscope.analyze.diff.contention import LOAD_FACTOR, Contention, LoadShift, load_shift, side_contention
from stepscope.analyze.diff.drift import PairDrift, pair_drift
from stepscope.analyze.diff.floor import measured_floor
from stepscope.analyze.diff.metric import StepMetric, step_metric
from stepscope.analyze.diff.overview import ContextItem, OverviewRow, context_diff, run_overview
from stepscope.analyze.diff.runlevel import RunValues, run_values
from stepscope.analyze.diff.series import MetricRow, TrendPair, logged_diff, step_trends, system_diff
from stepscope.analyze.diff.sides import DiffSide
from stepscope.analyze.diff.significance import Change, DiffSettings, Verdict, compare_runs
from stepscope.analyze.diff.traces import TraceDiff, trace_diff, trace_overview
from stepscope.analyze.run.quality import Quality
from stepscope.analyze.stats import NoiseFloor

DIFF_SCHEMA = "stepscope.diff/2"
"""2: run-level verdicts (``change.method``, ``mde``, ``noise_floor``; verdict ``inconclusive``), ``runs`` per
side, ``quality`` and ``noise_floor``; the per-step Mann-Whitney test no longer decides a verdict. Added since,
compatibly: ``metric`` (the clock the verdict is decided on) and the CPU-time overview rows."""


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
    """Median step time (ns, warm-up excluded) of one rank on each side (the tested value: geometric mean over a
    side's runs); None where the side lacks the rank."""

    rank: int
    baseline_ns: float | None
    experiment_ns: float | None
    change: Change | None


@dataclass(frozen=True, slots=True)
class Finding:
    """One line of "what changed", in the order reports show them (the change named first).

    ``kind``: "step_time", "step_cpu_time" / "process_cpu_time" (the clock the verdict was asked on), "throughput",
    "setup" (a set-up difference: device, world size, command, model,
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
    ``runs``: the run ids of each side (baseline, experiment); ``quality``: each run's measurement quality
    (baseline runs, then experiment runs; shown first); ``noise_floor``: the between-run noise used for one run
    a side (after inflation for noisy runs and widening for a load difference; None when every side has repeats
    or none was given). ``load``: each side's CPU contention (run-queue wait of the training thread) and the
    step-time shift their difference predicts (None when not a run on each side).
    The headline verdict (``verdict``) is the verdict of the row of ``settings.metric`` (the step-time row unless
    a CPU clock was asked for): the same test, never a second one.
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
    runs: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    quality: tuple[tuple[str, Quality], ...] = ()
    noise_floor: NoiseFloor | None = None
    load: LoadShift | None = None
    drift: PairDrift | None = None
    """Interleaved pairs: each pair's load and CPU frequency, and the widening for drift the pairing does not
    cancel (drift.py); None when the sides are not pairs."""

    @property
    def metric(self) -> StepMetric:
        """The clock the headline is decided on (``settings.metric``; step time by default)."""
        return step_metric(self.settings.metric)

    @property
    def headline(self) -> Change | None:
        """The change that decides the headline: the row of ``settings.metric`` (the step-time row by default)."""
        key = self.metric.row_key
        row = next((r for r in self.overview if r.key == key), None)
        return row.change if row is not None else None

    @property
    def verdict(self) -> Verdict | None:
        ch = self.headline
        return ch.verdict if ch is not None else None

    @property
    def noisy(self) -> list[tuple[str, Quality]]:
        return [(rid, q) for rid, q in self.quality if q.noisy]

    def to_dict(self) -> dict[str, Any]:
        d = _clean(asdict(self))
        for row, src in zip(d["breakdown"], self.breakdown, strict=True):
            row["presence"] = src.presence
        for row, src in ((r, s) for part in ("overview", "breakdown") for r, s in zip(d[part], getattr(self, part),
                                                                                     strict=True)):
            if src.change is not None:
                row["change"]["delta_pct"] = src.change.delta_pct
        d["quality"] = [{"run_id": rid, **q.to_dict()} for rid, q in self.quality]
        d["noise_floor"] = self.noise_floor.to_dict() if self.noise_floor else None
        d["load"] = self.load.to_dict() if self.load else None
        d["drift"] = self.drift.to_dict() if self.drift else None
        return {"schema": DIFF_SCHEMA, **d, "verdict": self.verdict.value if self.verdict else None,
                "metric": self.metric.name, "settings": self.settings.to_dict()}


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


def _rank_rows(base: list[RunValues], exp: list[RunValues], settings: DiffSettings,
               floor: NoiseFloor | None) -> list[RankRow]:
    if len(base[0].ranks) < 2 and len(exp[0].ranks) < 2:
        return []
    rows = []
    for r in sorted({k for v in base + exp for k in v.ranks}):
        b = [v.ranks[r] for v in base if r in v.ranks]
        e = [v.ranks[r] for v in exp if r in v.ranks]
        ch = compare_runs(b, e, settings=settings, floor=floor) if b and e else None
        rows.append(RankRow(r, ch.baseline if ch else (float(np.mean(b)) if b else None),
                            ch.experiment if ch else (float(np.mean(e)) if e else None), ch))
    return rows


def _load(base: list[RunValues], exp: list[RunValues]) -> LoadShift:
    none = Contention(None, None, None, 0)
    return load_shift(side_contention([v.contention or none for v in base]),
                      side_contention([v.contention or none for v in exp]))


def _floor(base: list[RunValues], exp: list[RunValues], given: NoiseFloor | None,
           load: LoadShift) -> NoiseFloor | None:
    """The noise floor of a comparison with one run on a side: the learned (or quiet-host) spread raised to what
    the runs' own dispersion and host load measured (floor.py), then widened by the load difference
    (contention.py)."""
    if len(base) >= 2 and len(exp) >= 2:
        return None
    floor = measured_floor(given, [(v.run_id, v.quality) for v in base + exp])
    if load.shift_log is not None:
        floor = floor.with_load(load.shift_log, LOAD_FACTOR, load.reason())
    return floor


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
              world: str, context: list[ContextItem], metric: StepMetric) -> list[Finding]:
    out = []
    for row in overview:
        kind = "step_time" if row.key == "step_time_median_ns" else metric.name if row.key == metric.row_key else \
            "throughput" if world != "same" and row.key == "samples_per_s" else None
        if kind is not None:
            ch = row.change
            out.append(Finding(kind, row.label, row.unit, _num(row.baseline), _num(row.experiment), row.delta,
                               row.delta_pct, ch.verdict if ch else None))
    out += _setup_findings(overview, context)
    quiet = (Verdict.NO_SIGNIFICANT_CHANGE, Verdict.INCONCLUSIVE)
    sig = [r for r in breakdown if r.change is None or r.change.verdict not in quiet]
    for r in sig[:4]:
        out.append(Finding(r.kind, r.name, "ns", r.baseline_ns, r.experiment_ns, r.delta_ns, r.delta_pct,
                           r.change.verdict if r.change else None))
    if traces is not None:
        out.extend(traces.findings())
    return out


def _num(v: float | str | None) -> float | None:
    return v if isinstance(v, (int, float)) else None


def diff(base: DiffSide, exp: DiffSide, *, settings: DiffSettings | None = None,
         noise_floor: NoiseFloor | None = None) -> RunDiff:
    """Compare two loaded inputs (runs with their repeats, trace sets, or runs with their profiled windows).

    ``noise_floor``: between-run noise of this command (from ``stats.pooled_noise_floor`` over repeats in the
    store), used when a side has one run; None: the stated default (``stats.DEFAULT_RUN_SIGMA``)."""
    s = settings or DiffSettings()
    messages: list[str] = []
    if base.data is not None and exp.data is not None and base.data.path == exp.data.path:
        messages.append(f"comparing run {base.data.run.id} with itself: every difference is zero by construction")
    overview: list[OverviewRow] = []
    context: list[ContextItem] = []
    breakdown: list[BreakdownRow] = []
    trends: list[TrendPair] = []
    system: list[MetricRow] = []
    logged: list[MetricRow] = []
    ranks: list[RankRow] = []
    floor: NoiseFloor | None = None
    load: LoadShift | None = None
    quality: list[tuple[str, Quality]] = []
    drift: PairDrift | None = None
    if base.data is not None and exp.data is not None:
        bv = [run_values(d, warmup=base.warmup) for d in base.runs]
        ev = [run_values(d, warmup=exp.warmup) for d in exp.runs]
        quality = [(v.run_id, v.quality) for v in bv + ev if v.quality is not None]
        load = _load(bv, ev)
        floor = _floor(bv, ev, noise_floor, load)
        if s.paired and len(bv) == len(ev) and len(bv) >= 2:
            drift = pair_drift(bv, ev)
            if (text := drift.message()) is not None:
                messages.append(text)
        if s.paired and len(bv) != len(ev):
            messages.append(f"paired test asked for, but the sides have {len(bv)} and {len(ev)} runs: tested as "
                            "independent repeats")
        if floor is not None and floor.load_reason:
            messages.append(f"{floor.load_reason.removeprefix('inconclusive: ')}: the noise floor is widened by "
                            f"{math.expm1(floor.load_allowance()):.0%}")
        if len(bv) < 2 or len(ev) < 2:
            messages.append(f"{'one run' if min(len(bv), len(ev)) == 1 else 'too few runs'} on a side: verdicts "
                            f"need the change to clear the between-run noise floor ({floor.source if floor else ''});"
                            " for an interval, repeat with `stepscope bench --repeat N` or `stepscope bench --ab`")
        overview = run_overview(bv, ev, base.data, exp.data, s, floor, drift.widen_log if drift else 0.0)
        context = context_diff(bv[0].summary, ev[0].summary, base_code=bv[0].code, exp_code=ev[0].code)
        b0 = bv[0].samples[0] if bv[0].samples else None
        e0 = ev[0].samples[0] if ev[0].samples else None
        step = next((r for r in overview if r.key == "step_time_median_ns"), None)
        if step is not None and isinstance(step.baseline, float) and isinstance(step.experiment, float):
            breakdown = breakdown_diff([v.parts for v in bv], [v.parts for v in ev], step.baseline, step.experiment,
                                       s, floor)
        ranks = _rank_rows(bv, ev, s, floor)
        rb = base.data.ranks[0] if base.data.ranks else None
        re_ = exp.data.ranks[0] if exp.data.ranks else None
        trends = step_trends(b0, e0)
        system, sys_trends = system_diff(rb, re_)
        logged, log_trends = logged_diff(rb, re_)
        trends += log_trends + sys_trends
        for side, vals in (("baseline", bv), ("experiment", ev)):
            if vals[0].step_ns is None:
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
        findings=tuple(_findings(overview, breakdown, tdiff, world, context, step_metric(s.metric))),
        context=tuple(context),
        overview=tuple(overview), ranks=tuple(ranks), breakdown=tuple(breakdown),
        trends=tuple(trends), system=tuple(system), logged=tuple(logged), traces=tdiff, trace_note=tnote,
        messages=tuple(messages), runs=(tuple(d.run.id for d in base.runs), tuple(d.run.id for d in exp.runs)),
        quality=tuple(quality), noise_floor=floor, load=load, drift=drift,
    )


def trace_overview_rows(base: DiffSide, exp: DiffSide, settings: DiffSettings) -> list[OverviewRow]:
    """Overview rows from the profiled windows alone (when an input is a bare trace set)."""
    from stepscope.analyze.diff.traces import overview_rows_from_traces

    return overview_rows_from_traces(base, exp, settings)
