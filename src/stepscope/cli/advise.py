"""Show a run's recommendations."""

from __future__ import annotations

import argparse

from stepscope.cli.common import StoreLike, add_store_args, load_analysis, print_json, width


def advise(run: str = "latest", *, store: StoreLike = None, db: str | None = None, warmup: int | None = None,
           json: bool = False, width: int | None = None) -> int:
    """Print run ``run``'s recommendations (terminal tables, or JSON schema stepscope.advice/1)."""
    ra = load_analysis(run, store, db=db, warmup=warmup)
    if json:
        print_json({"run": ra.data.run.id, **ra.advice.to_dict()})
        return 0
    from stepscope.report.advice import advice_view
    from stepscope.report.terminal import console

    console(width=width).print(advice_view(ra.advice))
    return 0


class AdviseCommand:
    """Recommendations for a stored run: each rule that fired, with its evidence (the numbers), its
    threshold, the change it suggests and the time it could save, most valuable first. Rules that need
    kernels read the run's profiled window (stepscope run --profile-steps N)."""

    name = "advise"
    help = "what to change to make a run faster, with the evidence (terminal or --json)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("run", nargs="?", default="latest", help="the run (default: latest)")
        parser.add_argument("--json", action="store_true", help="machine-readable (schema stepscope.advice/1)")
        parser.add_argument("--warmup-steps", type=int, metavar="N", help="steps to exclude (default: automatic)")
        parser.add_argument("--width", type=width, help="terminal width")
        parser.add_argument("--wide", action="store_true", help="names whole, not shortened")
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        return advise(args.run, store=args.store, db=args.db, warmup=args.warmup_steps, json=args.json,
                      width=args.width)
