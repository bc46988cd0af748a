"""Metrics per commit: `stepscope history [--metric step_time] [--baseline v1.2] [--since 30d]`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from stepscope.cli.common import StoreLike, add_store_args, as_store, print_json

if TYPE_CHECKING:
    from stepscope.analyze.runs.history import MetricHistory
    from stepscope.store import Store


def add_history_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("selection")
    g.add_argument("--name", help="runs of this name (default: the newest run's name)")
    g.add_argument("--branch", help="only runs made on this git branch (default: all)")
    g.add_argument("--since", metavar="WHEN", help="only runs started since: 30d, 12h, 2w or a date")
    g.add_argument("--baseline", metavar="REF", help="commit, tag, branch or run that is 1.0 (default: the oldest)")


class HistoryCommand:
    """Show how the tracked metrics moved across commits (runs of one name): per commit the median of its
    repeats with a 95% interval, relative to a baseline commit (= 1.0), and the steps (change points)
    detected in the series. Runs outside a git work tree are grouped as "(no commit)"; runs from a dirty
    tree are marked +dirty."""

    name = "history"
    help = "metrics per commit, relative to a baseline, with detected steps"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--metric", "-m", action="append", metavar="NAME",
                            help="metric (repeatable): step_time, throughput, data_wait, memory, energy, "
                                 "comm_share, a region path, metric.<name>, or any index metric (default: tracked)")
        parser.add_argument("--order", choices=("commit", "date"), default="commit",
                            help="place points by commit time or by run date (default: commit)")
        parser.add_argument("--last", type=int, default=30, metavar="N", help="rows shown per metric (default: 30)")
        out = parser.add_mutually_exclusive_group()
        out.add_argument("--json", action="store_true", help="print JSON")
        out.add_argument("--csv", action="store_true", help="print CSV")
        add_history_args(parser)
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        return history(metrics=args.metric or (), store=as_store(args.store, args.db), name=args.name,
                       branch=args.branch, since=args.since, baseline=args.baseline, order=args.order,
                       last=args.last, json=args.json, csv=args.csv)


def history(metrics: Sequence[str] = (), *, store: StoreLike = None, name: str | None = None,
            branch: str | None = None, since: str | None = None, baseline: str | None = None,
            order: str = "commit", last: int = 30, json: bool = False, csv: bool = False) -> int:
    """Print the history of ``metrics`` (default: the tracked ones) of the runs named ``name`` across commits."""
    from stepscope.report.history import console, history_csv, history_view

    if last < 1:
        from stepscope.errors import UserError

        raise UserError(f"--last {last}: must be 1 or more rows per metric")
    histories = build_histories(as_store(store), metrics=metrics, name=name, branch=branch, since=since,
                                baseline=baseline, order=order)
    if json:
        print_json({"histories": [h.to_dict() for h in histories]})
    elif csv:
        sys.stdout.write(history_csv(histories))
    else:
        out = console(file=sys.stdout)
        if not histories:
            out.print("no runs with metrics in the store yet — record some with `stepscope bench`")
        for h in histories:
            out.print(history_view(h, last=last))
    return 0


def build_histories(store: Store, *, metrics: Sequence[str] = (), name: str | None = None, branch: str | None = None,
                    since: str | None = None, baseline: str | None = None,
                    order: str = "commit") -> list[MetricHistory]:
    """Selected runs -> one MetricHistory per requested (or tracked) metric."""
    from stepscope.analyze.runs.history import Order, metric_history, tracked_metrics
    from stepscope.cli.historydata import default_name, load_points, parse_since, resolve_baseline, resolve_metric

    name = default_name(store, name)
    points = load_points(store, name=name, branch=branch, since_s=parse_since(since))
    available = {k for p in points for k, v in p.metrics.items() if v is not None}
    chosen = [resolve_metric(m, available) for m in metrics] if metrics else tracked_metrics(points)
    commit = resolve_baseline(baseline, points, Path.cwd()) if baseline else None
    if commit and not any(p.commit == commit for p in points):
        from stepscope.errors import UserError

        raise UserError(f"baseline {baseline!r} ({commit[:10]}) has no runs named {name!r} — "
                        "run `stepscope bench` on it, or pick a commit that has runs (`stepscope history`)")
    return [metric_history(points, m, order=Order(order), baseline=commit) for m in chosen]
