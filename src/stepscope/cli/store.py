"""Store maintenance: where it is, and rebuilding the index from the run directories."""

from __future__ import annotations

import argparse
import sys

from stepscope.cli.common import StoreLike, add_store_args, as_store
from stepscope.errors import UserError


class StoreCommand:
    """Store maintenance. `stepscope store info` says where the store and its index are;
    `stepscope store reindex` rebuilds the index from the run directories (the truth)."""

    name = "store"
    help = "store maintenance: info, reindex"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=["info", "reindex"])
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        return store_command(args.action, store=args.store, db=args.db)


def store_command(action: str, *, store: StoreLike = None, db: str | None = None) -> int:
    """``info``: print the store's folder, index and run count; ``reindex``: rebuild the index from the run
    directories (1 when damaged runs were skipped)."""
    from stepscope.app import RunAnalysis

    if action not in ("info", "reindex"):
        raise UserError(f"unknown store action {action!r} — choose info or reindex")
    opened = as_store(store, db, create=action == "reindex")
    if action == "info":
        print(f"store: {opened.root}\nindex: {opened.db_url}\nschema: {opened.index.schema_version()}\n"
              f"runs: {len(opened.index.run_ids())}")
        return 0
    result = opened.reindex(lambda d: RunAnalysis(d).index_metrics)
    print(f"indexed {result.indexed} run(s); removed {len(result.pruned)} row(s) of missing run directories; "
          f"restored {result.groups_restored} group(s)")
    for msg in result.damaged:
        print(f"skipped: {msg}", file=sys.stderr)
    if result.damaged:
        print(f"{len(result.damaged)} damaged run(s) skipped — `stepscope rm --yes ID` removes one",
              file=sys.stderr)
    return 1 if result.damaged else 0
