"""Remove runs from the store."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from stepscope.cli.common import StoreLike, add_store_args, as_store
from stepscope.errors import UserError


def _size(path: Path) -> int:
    """Bytes under ``path`` (links not followed)."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


class RmCommand:
    """Remove runs: their directories inside the store and their index rows. RUN is a run id, an id
    prefix, a name or latest~N of this store, never a path. Shows what it will delete and asks; without
    a terminal (scripts, CI) pass --yes."""

    name = "rm"
    help = "remove runs"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("runs", nargs="+", metavar="RUN", help="runs to remove (ids, names, latest~N)")
        parser.add_argument("-y", "--yes", action="store_true", help="remove without asking")
        add_store_args(parser)

    def run(self, args: argparse.Namespace) -> int:
        return rm(args.runs, store=as_store(args.store, args.db), yes=args.yes)


def rm(runs: Sequence[str], *, store: StoreLike = None, yes: bool = False) -> int:
    """Remove runs (directory and index row); without ``yes`` asks on the terminal (1: declined)."""
    from stepscope.report.format import nbytes as fmt_bytes

    opened = as_store(store)
    plan: dict[str, Path | None] = {}
    for ref in runs:  # resolve all first: nothing removed on a typo
        run_id, path = opened.removal(ref)
        plan[run_id] = path
    for run_id, path in plan.items():
        where = f"{path}  ({fmt_bytes(_size(path))})" if path is not None else "(index row only; no directory)"
        print(f"will remove {run_id}  {where}", file=sys.stderr)
    if not yes:
        if not sys.stdin.isatty():
            raise UserError(f"not removing {len(plan)} run(s) without confirmation: stdin is not a terminal — "
                            "pass --yes")
        print(f"remove {len(plan)} run(s)? [y/N] ", end="", file=sys.stderr, flush=True)
        answer = sys.stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            print("nothing removed", file=sys.stderr)
            return 1
    for run_id in plan:
        opened.remove(run_id)
        print(f"removed {run_id}")
    return 0
