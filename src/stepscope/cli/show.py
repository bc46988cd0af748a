"""Show a run's reports in the terminal, or as JSON."""

from __future__ import annotations

import argparse

from stepscope.cli.common import StoreLike, add_store_args, load_analysis, print_json, width
from stepscope.cli.views import VIEWS, add_view_args, chosen_view, view_function


def show(run: str = "latest", *, store: StoreLike = None, db: str | None = None, warmup: int | None = None,
         json: bool = False, width: int | None = None, view: str | None = None) -> int:
    """Print run ``run``'s reports (or one extra ``view``: one of VIEWS) to stdout; returns the exit status."""
    fn = view_function(view) if view is not None else None
    ra = load_analysis(run, store, db=db, warmup=warmup)
    if fn is not None:
        return int(fn(ra, json=json, width=width))
    if json:
        print_json(ra.summary.to_dict())
        return 0
    from stepscope.report.terminal import console, full_report

    console(width=width).print(full_report(ra.summary, ra.advice, quality=ra.quality))
    return 0


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
        parser.add_argument("--wide", action="store_true", help="names whole, not shortened")
        add_view_args(parser)
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        return show(args.run, store=args.store, db=args.db, warmup=args.warmup_steps, json=args.json,
                    width=args.width, view=chosen_view(args))


__all__ = ["VIEWS", "ShowCommand", "show"]
