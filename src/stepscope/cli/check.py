"""The CI gate: `stepscope check --baseline main --max-regression 5%` exits 0 / 1 / 2."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stepscope.cli.common import StoreLike, add_store_args, as_store, print_json
from stepscope.cli.history import add_history_args
from stepscope.errors import UserError

if TYPE_CHECKING:
    from stepscope.analyze.runs.history import RunPoint
    from stepscope.store.store import Store

GATE_METRICS = ("step_time_median_s",)
"""Metrics that can fail the gate by default: step time decides; throughput and regions are reported with their own
verdicts and fail the gate only when named with --metric."""
REPORTED_METRICS = ("samples_per_s", "tokens_per_s")
CPU_REPORTED = ("step_cpu_time_median_s",)
"""The training thread's CPU time per step, shown beside step time (with its own verdict) where the runs measured
it; it fails the gate only when named (``--metric step_cpu_time``)."""


def parse_fraction(text: str) -> float:
    """'5%' or '0.05' -> 0.05."""
    try:
        v = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise UserError(f"--max-regression {text!r}: expected a percentage like 5% or a fraction like 0.05") from None
    if v < 0:
        raise UserError(f"--max-regression {text!r}: must not be negative")
    return v


class CheckCommand:
    """Compare the current commit's runs (or --run's benchmark) with a baseline window (the runs of the
    --window newest earlier commits, or --baseline's) on one value per run, and exit 0 when there is no
    significant regression beyond --max-regression, 1 when there is (naming the commit where it started, and
    the diff to look at), and 2 when the data cannot tell (too few repeats, no runs on one side), saying why.
    Gradual creep is caught against an older anchor (--creep-window commits back)."""

    name = "check"
    help = "CI gate: exit 1 on a significant regression against a baseline, 2 when it cannot tell"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--run", metavar="REF", help="candidate run or benchmark (default: runs at HEAD)")
        parser.add_argument("--max-regression", default="5%", metavar="PCT", help="tolerated slowdown (default: 5%%)")
        parser.add_argument("--metric", "-m", action="append", metavar="NAME",
                            help="metric to gate (repeatable; default: step time; throughput, the training thread's "
                                 "CPU time and main regions are reported without failing the gate); step_time_mean "
                                 "gates on the mean step (total time); step_cpu_time / process_cpu_time gate on CPU "
                                 "time per step, which a busy runner barely moves")
        parser.add_argument("--min-repeats", type=int, default=3, metavar="N",
                            help="fewest runs per side for a verdict (default: 3)")
        parser.add_argument("--window", type=int, default=3, metavar="N",
                            help="baseline: the runs of the N newest earlier commits (default: 3)")
        parser.add_argument("--creep-window", type=int, default=10, metavar="N",
                            help="also compare with the commits N back, to catch gradual creep (default: 10; 0: off)")
        parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
        add_history_args(parser)
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        return check(args.run, store=as_store(args.store, args.db), max_regression=args.max_regression,
                     metrics=args.metric or (), min_repeats=args.min_repeats, window=args.window,
                     creep_window=args.creep_window, name=args.name, branch=args.branch, since=args.since,
                     baseline=args.baseline, json=args.json)


@dataclass(frozen=True, slots=True)
class GateOptions:
    """What the gate compares: the metrics named (none: step time gated, throughput and regions shown), the
    fewest runs per side, the baseline window and the creep window (commits)."""

    metrics: tuple[str, ...] = ()
    min_repeats: int = 3
    window: int = 3
    creep_window: int = 10


def check(run: str | None = None, *, store: StoreLike = None, max_regression: str = "5%",
          metrics: Sequence[str] = (), min_repeats: int = 3, window: int = 3, creep_window: int = 10,
          name: str | None = None, branch: str | None = None, since: str | None = None, baseline: str | None = None,
          json: bool = False) -> int:
    """The CI gate: 0 no significant regression, 1 a regression, 2 the data cannot tell (a UserError says why)."""
    from stepscope.cli.historydata import default_name, load_points, parse_since
    from stepscope.report.history import check_view, console

    threshold = parse_fraction(max_regression)
    if min_repeats < 1 or window < 1 or creep_window < 0:
        raise UserError(f"--min-repeats {min_repeats} / --window {window} / --creep-window "
                        f"{creep_window}: need at least 1 run per side, a window of 1 or more commits and "
                        "a creep window of 0 (off) or more")
    opened = as_store(store)
    name = default_name(opened, name)
    points = load_points(opened, name=name, branch=branch, since_s=parse_since(since))
    cand_key, cand = candidate_runs(opened, points, run)
    base_key, base = baseline_runs(points, baseline, cand_key, window=window)
    for m in metrics:
        cpu_metric(m, base)  # the baseline's runs must carry a CPU clock gated on, as the candidate's
    options = GateOptions(tuple(metrics), min_repeats, window, creep_window)
    outcome = gate(opened, points, cand_key, cand, base_key, base, options, threshold)
    if json:
        print_json(outcome.to_dict())
    else:
        console(file=sys.stdout).print(check_view(outcome.result, baseline=outcome.baseline_label,
                                                  candidate=cand_key[:16], threshold=threshold, step=outcome.step,
                                                  quality=outcome.quality))
    return int(outcome.result.verdict.exit_code)


def gate(store: Store, points: list[RunPoint], cand_key: str, cand: list[RunPoint], base_key: str,
         base: list[RunPoint], options: GateOptions, threshold: float) -> Any:
    """The gate's outcome: checks against the window (and the creep anchor), the commit named, quality."""
    from stepscope.analyze.run.quality import measurement_quality
    from stepscope.analyze.runs.history import metric_history
    from stepscope.analyze.runs.regression import (
        CheckVerdict,
        GateOutcome,
        MetricVerdict,
        check_regression,
        locate_step,
        name_commit,
    )
    from stepscope.errors import StepscopeError

    gated, metrics = gate_metrics(options.metrics, cand)

    def values(runs: Sequence[RunPoint]) -> dict[str, list[float | None]]:
        return {m: [r.metrics.get(m) for r in runs if r.status == "completed"] for m in metrics}

    def commits(runs: Sequence[RunPoint]) -> list[str]:
        return [_key(r) for r in runs if r.status == "completed"]

    anchor_key, anchor = creep_anchor(points, cand_key, window=options.window, back=options.creep_window)
    between = {m: b for m in gated if (b := between_commit_spread(points, m, cand_key)) is not None}
    result = check_regression(values(base), values(cand), metrics, threshold=threshold, min_repeats=options.min_repeats,
                              gated=gated, creep=values(anchor) if anchor else None, between=between,
                              baseline_commits=commits(base), creep_commits=commits(anchor))
    step = None
    for c in result.checks:
        if c.verdict is MetricVerdict.REGRESSED and c.gated and step is None:
            after = anchor_key if c.against == "creep" else base_key
            h = metric_history(points, c.metric)
            step = locate_step(h, after=after, upto=cand_key) or name_commit(h, after=after, upto=cand_key)
    quality = []
    for p in cand:
        try:
            quality.append((p.run_id, measurement_quality(store.load(p.run_id))))
        except StepscopeError:  # quality is a note: a run that cannot be read has none
            continue
    if result.verdict is CheckVerdict.CANNOT_TELL and "MDE" in result.reason:
        result = dataclasses.replace(result, reason=result.reason + load_note(quality))
    label = base_key[:16] if len({_key(p) for p in base}) == 1 else f"{len({_key(p) for p in base})} commits " \
        f"up to {base_key[:10]}"
    return GateOutcome(result=result, baseline=base_key, baseline_commits=tuple(dict.fromkeys(_key(p) for p in base)),
                       candidate=cand_key, creep_anchor=anchor_key, step=step, quality=tuple(quality),
                       baseline_label=label)


def between_commit_spread(points: list[RunPoint], metric: str, cand_key: str) -> Any:
    """The between-commit variance of ``metric`` over the clean commits before the candidate (None: too short a
    history to tell it from the runs' own spread; the gate then treats runs as independent)."""
    from stepscope.analyze.runs.history import metric_history
    from stepscope.analyze.stats import between_commits

    keys = set(_earlier_commits(points, cand_key))
    hist = [p for p in metric_history(points, metric).points if p.key in keys]
    return between_commits([p.values for p in hist])


def load_note(quality: Sequence[tuple[str, Any]]) -> str:
    """The candidate runs' host load, as the cause of a spread too wide to tell ("" when not sampled)."""
    others = [q.others_cores for _, q in quality if q.others_cores is not None]
    busy = [q.system_cpu_pct for _, q in quality if q.system_cpu_pct is not None]
    cv = [q.step_cv for _, q in quality if q.step_cv is not None]
    if not others and not cv:
        return ""
    parts = [f"other processes held {min(others):.1f}-{max(others):.1f} cores"] if others else []
    parts += [f"host CPU {min(busy):.0f}-{max(busy):.0f}% busy"] if busy else []
    parts += [f"step-time CV {min(cv):.0%}-{max(cv):.0%}"] if cv else []
    return f" (the candidate's runs: {', '.join(parts)})"


def _key(p: RunPoint) -> str:  # a RunPoint's commit point key
    return "(no commit)" if p.commit is None else p.commit + ("+dirty" if p.dirty else "")


def candidate_runs(store: Store, points: list[RunPoint], ref: str | None) -> tuple[str, list[RunPoint]]:
    """The candidate's commit key and runs: --run's benchmark group (or commit), else the runs at HEAD."""
    from stepscope.cli.historydata import head_commit

    if ref is not None:
        run_id = store.resolve(ref)
        me = next((p for p in points if p.run_id == run_id), None)
        if me is None:
            raise UserError(f"run {ref!r} is not among the selected runs — check --name / --branch / --since")
        same = [p for p in points if (me.group and p.group == me.group) or (not me.group and _key(p) == _key(me))]
        return _key(me), same
    head = head_commit(Path.cwd())
    if head is None:
        if not points:
            raise UserError("no runs in the store to check — record some with `stepscope bench`", exit_code=2)
        head = points[-1].commit or "(no commit)"
    at = [p for p in points if p.commit == head] or [p for p in points if _key(p) == head]
    clean = [p for p in at if not p.dirty]
    if not at:
        raise UserError(f"no runs at the current commit {head[:10]} — run `stepscope bench --repeat 3 -- ...` first, "
                        "or pass --run", exit_code=2)
    return _key((clean or at)[0]), clean or at


def _earlier_commits(points: list[RunPoint], cand_key: str) -> list[str]:
    """Keys of the clean commits with runs before the candidate, newest first."""
    cand_first = min((p.commit_time_s or p.start_s) for p in points if _key(p) == cand_key)
    earlier = [p for p in points if p.commit and not p.dirty and _key(p) != cand_key
               and (p.commit_time_s or p.start_s) <= cand_first]
    order = sorted(earlier, key=lambda p: (p.commit_time_s or p.start_s, p.start_s), reverse=True)
    return list(dict.fromkeys(_key(p) for p in order))


def creep_anchor(points: list[RunPoint], cand_key: str, *, window: int, back: int) -> tuple[str | None, list[RunPoint]]:
    """The runs of the ``window`` commits ending ``back`` commits before the candidate (pooled), when that lies
    wholly before the baseline window; (None, []) otherwise."""
    if back <= window:
        return None, []
    keys = _earlier_commits(points, cand_key)
    if len(keys) < back:
        return None, []
    chosen = keys[back - window:back]
    return chosen[-1], [p for p in points if _key(p) in chosen]


def baseline_runs(points: list[RunPoint], ref: str | None, cand_key: str, *,
                  window: int = 1) -> tuple[str, list[RunPoint]]:
    """The baseline's runs: --baseline resolved (that commit's runs), else the runs of the ``window`` newest
    earlier commits with runs, pooled (the key is the newest of them)."""
    from stepscope.cli.historydata import resolve_baseline

    if ref is not None:
        sha = resolve_baseline(ref, points, Path.cwd())
        runs = [p for p in points if p.commit == sha and not p.dirty] or [p for p in points if p.commit == sha]
        if not runs:
            raise UserError(f"the baseline {ref!r} ({sha[:10]}) has no runs — run `stepscope bench` on it", exit_code=2)
        return _key(runs[0]), runs
    keys = _earlier_commits(points, cand_key)[:window]
    if not keys:
        raise UserError("no earlier commit with runs to compare with — pass --baseline", exit_code=2)
    return keys[0], [p for p in points if _key(p) in keys]


def gate_metrics(named: Sequence[str], cand: list[RunPoint]) -> tuple[list[str], list[str]]:
    """(gated metrics, all metrics shown): --metric's, else step time gated and throughput / main regions shown."""
    from stepscope.analyze.runs.history import tracked_metrics
    from stepscope.cli.historydata import resolve_metric

    available = {k for p in cand for k, v in p.metrics.items() if v}
    if named:
        chosen = [cpu_metric(m, cand) or resolve_metric(m, available) for m in named]
        return chosen, chosen
    shown = [m for m in tracked_metrics(cand) if m in GATE_METRICS + REPORTED_METRICS
             or (m.startswith("region.") and m in available)]
    shown += [m for m in CPU_REPORTED if m in available and all(p.metrics.get(m) for p in cand)]
    return [m for m in shown if m in GATE_METRICS], shown


def cpu_metric(name: str, runs: Sequence[RunPoint]) -> str | None:
    """The index metric of a clock named by ``--metric`` (step_time_mean, step_cpu_time, process_cpu_time or their
    index names); None for other names. A UserError (exit 2, "not measured") when some of ``runs`` lack it: runs
    recorded before stepscope measured per-step CPU time (or indexed before it kept the mean step time) have no
    figure, and a gate on fewer runs than asked would not say so."""
    from stepscope.analyze.diff.metric import DEFAULT_METRIC, METRICS, not_measured_message

    m = next((x for x in METRICS.values() if x.name != DEFAULT_METRIC and name in (x.name, x.index_key)), None)
    if m is None:
        return None
    missing = [p.run_id for p in runs if p.status == "completed" and not p.metrics.get(m.index_key)]
    if missing:
        raise UserError(not_measured_message(m, missing), exit_code=2)
    return m.index_key
