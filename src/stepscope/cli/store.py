"""Store maintenance: where it is, and rebuilding the index from the run directories."""

from __future__ import annotations

import argparse
import sys

from stepscope.cli.common import add_store_args, store_from


class StoreCommand:
    """Store maintenance. `stepscope store info` says where the store and its index are;
    `stepscope store reindex` rebuilds the index from the run directories (the truth)."""

    name = "store"
    help = "store maintenance: info, reindex"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=["info", "reindex"])
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        from stepscope.app import RunAnalysis

        store = store_from(args, create=args.action == "reindex")
        if args.action == "info":
            print(f"store: {store.root}\nindex: {store.db_url}\nschema: {store.index.schema_version()}\n"
                  f"runs: {len(store.index.run_ids())}")
            return 0
        result = store.reindex(lambda d: RunAnalysis(d).index_metrics)
        print(f"indexed {result.indexed} run(s); removed {len(result.pruned)} row(s) of missing run directories; "
              f"restored {result.groups_restored} group(s)")
        for msg in result.damaged:
            print(f"skipped: {msg}", file=sys.stderr)
        if result.damaged:
            print(f"{len(result.damaged)} damaged run(s) skipped — `stepscope rm --yes ID` removes one",
                  file=sys.stderr)
        return 1 if result.damaged else 0
