"""Metrics per commit: `stepscope history [--metric step_time] [--baseline v1.2] [--since 30d]`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from stepscope.cli.common import add_store_args, print_json, store_from

if TYPE_CHECKING:
    from stepscope.analyze.history import MetricHistory


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
        from stepscope.report.history import console, history_csv, history_view

        if args.last < 1:
            from stepscope.errors import UserError

            raise UserError(f"--last {args.last}: must be 1 or more rows per metric")
        histories = build_histories(args)
        if args.json:
            print_json({"histories": [h.to_dict() for h in histories]})
        elif args.csv:
            sys.stdout.write(history_csv(histories))
        else:
            out = console(file=sys.stdout)
            if not histories:
                out.print("no runs with metrics in the store yet — record some with `stepscope bench`")
            for h in histories:
                out.print(history_view(h, last=args.last))
        return 0


def build_histories(args: argparse.Namespace) -> list[MetricHistory]:
    """Selected runs -> one MetricHistory per requested (or tracked) metric."""
    from stepscope.analyze.history import Order, metric_history, tracked_metrics
    from stepscope.cli.historydata import default_name, load_points, parse_since, resolve_baseline, resolve_metric

    store = store_from(args)
    name = default_name(store, args.name)
    points = load_points(store, name=name, branch=args.branch, since_s=parse_since(args.since))
    available = {k for p in points for k, v in p.metrics.items() if v is not None}
    metrics = [resolve_metric(m, available) for m in args.metric] if args.metric else tracked_metrics(points)
    baseline = resolve_baseline(args.baseline, points, Path.cwd()) if args.baseline else None
    if baseline and not any(p.commit == baseline for p in points):
        from stepscope.errors import UserError

        raise UserError(f"baseline {args.baseline!r} ({baseline[:10]}) has no runs named {name!r} — "
                        "run `stepscope bench` on it, or pick a commit that has runs (`stepscope history`)")
    return [metric_history(points, m, order=Order(args.order), baseline=baseline) for m in metrics]
