"""Show a run's reports in the terminal, or as JSON."""

from __future__ import annotations

import argparse

from stepscope.cli.common import add_store_args, print_json, store_from, width
from stepscope.cli.views import add_view_args, chosen_view


class ShowCommand:
    """Show a stored run: speed, time (phases and regions), system, memory, model summary and logged
    metrics. RUN is an id, id prefix, name, `latest` or `latest~N`."""

    name = "show"
    help = "show a run's reports (terminal or --json)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("run", nargs="?", default="latest", help="the run (default: latest)")
        parser.add_argument("--json", action="store_true",
                            help="the same, machine-readable (schema stepscope.summary/1)")
        parser.add_argument("--warmup-steps", type=int, metavar="N", help="steps to exclude (default: automatic)")
        parser.add_argument("--width", type=width, help="terminal width for the tables")
        add_view_args(parser)
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        from stepscope.app import RunAnalysis

        ra = RunAnalysis.from_store(store_from(args), args.run, warmup=args.warmup_steps)
        data, summary = ra.data, ra.summary
        view = chosen_view(args)
        if view is not None:
            return int(view(data, summary, args))
        if args.json:
            print_json(summary.to_dict())
            return 0
        from stepscope.report.terminal import console, full_report

        console(width=args.width).print(full_report(summary, ra.advice, quality=ra.quality))
        return 0
