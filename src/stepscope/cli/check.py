"""The CI gate: `stepscope check --baseline main --max-regression 5%` exits 0 / 1 / 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from stepscope.cli.common import add_store_args, print_json, store_from
from stepscope.cli.history import add_history_args
from stepscope.errors import UserError

if TYPE_CHECKING:
    from stepscope.analyze.history import RunPoint
    from stepscope.store.store import Store

GATE_METRICS = ("step_time_median_s", "samples_per_s", "tokens_per_s")


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
    """Compare the current commit's runs (or --run's benchmark) with the baseline's and exit 0 when there
    is no significant regression beyond --max-regression, 1 when there is (with a table of what regressed
    and by how much, and the step where it started), and 2 when the data cannot tell (too few repeats, no
    runs on one side), saying why."""

    name = "check"
    help = "CI gate: exit 1 on a significant regression against a baseline, 2 when it cannot tell"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--run", metavar="REF", help="candidate run or benchmark (default: runs at HEAD)")
        parser.add_argument("--max-regression", default="5%", metavar="PCT", help="tolerated slowdown (default: 5%%)")
        parser.add_argument("--metric", "-m", action="append", metavar="NAME",
                            help="metric to gate (repeatable; default: step time, throughput, main regions)")
        parser.add_argument("--min-repeats", type=int, default=2, metavar="N",
                            help="fewest runs per side for a verdict (default: 2)")
        parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
        add_history_args(parser)
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        from stepscope.analyze.history import metric_history
        from stepscope.analyze.regression import check_regression, locate_step
        from stepscope.cli.historydata import default_name, load_points, parse_since
        from stepscope.report.history import check_view, console

        threshold = parse_fraction(args.max_regression)
        if args.min_repeats < 1:
            raise UserError(f"--min-repeats {args.min_repeats}: must be 1 or more runs per side")
        store = store_from(args)
        name = default_name(store, args.name)
        points = load_points(store, name=name, branch=args.branch, since_s=parse_since(args.since))
        cand_key, cand = candidate_runs(store, points, args.run)
        base_key, base = baseline_runs(points, args.baseline, cand_key)
        metrics = gate_metrics(args, cand)

        def values(runs: Sequence[RunPoint]) -> dict[str, list[float | None]]:
            return {m: [r.metrics.get(m) for r in runs if r.status == "completed"] for m in metrics}

        result = check_regression(values(base), values(cand), metrics, threshold=threshold,
                                  min_repeats=args.min_repeats)
        step = None
        for c in result.checks:
            if c.verdict.value == "regressed" and step is None:
                step = locate_step(metric_history(points, c.metric), after=base_key, upto=cand_key)
        if args.json:
            print_json({**result.to_dict(), "baseline": base_key, "candidate": cand_key,
                        "step": step.to_dict() if step else None})
        else:
            console(file=sys.stdout).print(check_view(result, baseline=base_key[:16], candidate=cand_key[:16],
                                                      threshold=threshold, step=step))
        return result.verdict.exit_code


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


def baseline_runs(points: list[RunPoint], ref: str | None, cand_key: str) -> tuple[str, list[RunPoint]]:
    """The baseline commit's runs: --baseline resolved, else the newest earlier commit with runs."""
    from stepscope.cli.historydata import resolve_baseline

    if ref is not None:
        sha = resolve_baseline(ref, points, Path.cwd())
        runs = [p for p in points if p.commit == sha and not p.dirty] or [p for p in points if p.commit == sha]
        if not runs:
            raise UserError(f"the baseline {ref!r} ({sha[:10]}) has no runs — run `stepscope bench` on it", exit_code=2)
        return _key(runs[0]), runs
    cand_first = min((p.commit_time_s or p.start_s) for p in points if _key(p) == cand_key)
    earlier = [p for p in points if p.commit and not p.dirty and _key(p) != cand_key
               and (p.commit_time_s or p.start_s) <= cand_first]
    if not earlier:
        raise UserError("no earlier commit with runs to compare with — pass --baseline", exit_code=2)
    last = max(earlier, key=lambda p: (p.commit_time_s or p.start_s, p.start_s))
    return _key(last), [p for p in earlier if _key(p) == _key(last)]


def gate_metrics(args: argparse.Namespace, cand: list[RunPoint]) -> list[str]:
    from stepscope.analyze.history import tracked_metrics
    from stepscope.cli.historydata import resolve_metric

    available = {k for p in cand for k, v in p.metrics.items() if v}
    if args.metric:
        return [resolve_metric(m, available) for m in args.metric]
    return [m for m in tracked_metrics(cand) if m in GATE_METRICS or (m.startswith("region.") and m in available)]
