"""Options and helpers shared by subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stepscope.errors import UserError
from stepscope.store import Store, open_store
from stepscope.store.index import RunRow

if TYPE_CHECKING:
    from stepscope.app import RunAnalysis


def add_store_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("store")
    g.add_argument("--store", metavar="DIR", help="store folder (default: ./.stepscope, or STEPSCOPE_HOME)")
    g.add_argument("--db", metavar="URL", help="index database: a SQLite path or postgresql://... (or STEPSCOPE_DB)")


def store_from(args: argparse.Namespace, *, create: bool = False) -> Store:
    return open_store(args.store, args.db, create=create)


def width(text: str) -> int:
    """argparse type of --width: a terminal width of 20 to 10,000 columns (0 printed nothing and exited 0)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of columns") from None
    if not 20 <= value <= 10_000:
        raise argparse.ArgumentTypeError(f"{value}: a width is 20 to 10000 columns")
    return value


def parse_pairs(values: list[str] | None, what: str) -> dict[str, str]:
    """KEY=VALUE options (--param, --tag) into a dict; a one-line error for a malformed one."""
    out: dict[str, str] = {}
    for v in values or []:
        key, sep, value = v.partition("=")
        if not sep or not key:
            raise UserError(f"--{what} {v!r}: expected KEY=VALUE, e.g. --{what} batch_size=64")
        out[key.strip()] = value.strip()
    return out


def print_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True, default=_default) + "\n")


def _default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def ensure_metrics(store: Store, rows: list[RunRow]) -> dict[str, dict[str, float | None]]:
    """Compute and index summary metrics for finished runs that lack them (standalone sessions). Returns the
    metrics computed. Storing them is a courtesy: a read-only or full store, or an index another process
    holds locked, leaves them unstored (the command still shows them) instead of failing or waiting."""
    from stepscope.app import RunAnalysis
    from stepscope.store.rundir import read_run

    have = store.index.metrics([r.id for r in rows])
    computed: dict[str, dict[str, float | None]] = {}
    can_write = True
    for row in rows:
        if row.id not in have and row.status != "running":
            try:
                data = read_run(store.run_path(row.id))
                metrics = RunAnalysis(data).index_metrics
            except UserError:
                continue
            computed[row.id] = dict(metrics)
            if can_write:
                try:
                    store.index.upsert_run(data.run, row.path, metrics, wait=False)
                except UserError:
                    can_write = False
    return computed


# Commands callable from code. Each command is a typed function (``show(run, *, store=..., json=...)``) that
# does the work and returns the exit status; its argparse class only maps the parsed options onto it. A
# function takes ``store`` as an open Store, a folder path, or None (./.stepscope or STEPSCOPE_HOME), and
# ``db`` (an index URL) as --db does; it opens the store only when it needs it (after checking its options).

StoreLike = Store | str | Path | None


def as_store(store: StoreLike = None, db: str | None = None, *, create: bool = False) -> Store:
    """An open store from what a command function was given."""
    if isinstance(store, Store):
        return store
    return open_store(None if store is None else str(store), db, create=create)


def load_analysis(run: str, store: StoreLike = None, *, db: str | None = None,
                  warmup: int | None = None) -> RunAnalysis:
    """The RunAnalysis of run ``run`` (a reference into the store, or a run directory), its trace notes printed
    once on stderr (every command prints the same lines for the same run)."""
    from stepscope.app import RunAnalysis

    path = Path(run)
    if len(run) < 4096 and path.is_dir() and (path / "manifest.json").is_file():
        ra = RunAnalysis.from_dir(path, warmup=warmup)
    else:
        ra = RunAnalysis.from_store(as_store(store, db), run, warmup=warmup)
    ra.print_notes()
    return ra
