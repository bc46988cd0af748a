"""Remove runs from the store."""

from __future__ import annotations

import argparse

from stepscope.cli.common import add_store_args, store_from


class RmCommand:
    """Remove runs (their directories and index rows)."""

    name = "rm"
    help = "remove runs"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("runs", nargs="+", metavar="RUN", help="runs to remove")
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        store = store_from(args)
        ids = [store.resolve(r) for r in args.runs]  # resolve all first: nothing removed on a typo
        for run_id in ids:
            store.remove(run_id)
            print(f"removed {run_id}")
        return 0
