"""Writers of table sets: one file per table (CSV, Parquet) or one JSON document."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stepscope.errors import UserError
from stepscope.report.export.collapsed import write_collapsed

Columns = dict[str, list[Any]]


def _rows(cols: Columns) -> tuple[list[str], list[list[Any]]]:
    names = list(cols)
    n = max((len(v) for v in cols.values()), default=0)
    return names, [[cols[c][i] if i < len(cols[c]) else None for c in names] for i in range(n)]


def write_csv(tables: dict[str, Columns], out: Path) -> list[Path]:
    paths = []
    for name, cols in tables.items():
        p = out / f"{name}.csv"
        names, rows = _rows(cols)
        with p.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(names)
            for row in rows:
                w.writerow(["" if v is None else v for v in row])
        paths.append(p)
    return paths


def write_json(tables: dict[str, Columns], out: Path) -> list[Path]:
    p = out / "tables.json"

    def clean(v: Any) -> Any:
        return None if isinstance(v, float) and not math.isfinite(v) else v

    doc = {"schema": "stepscope.tables/1",
           "tables": {k: {c: [clean(v) for v in vals] for c, vals in cols.items()} for k, cols in tables.items()}}
    p.write_text(json.dumps(doc, sort_keys=True))
    return [p]


def write_parquet(tables: dict[str, Columns], out: Path) -> list[Path]:
    """One file per table, typed by its declared schema (report/export/schema.py): the same schema for
    every run, timestamps as ``timestamp[ns, tz=UTC]``, unmeasured values null in their declared type."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError("Parquet export needs pyarrow — pip install 'stepscope[parquet]'") from None
    from stepscope.report.export.schema import arrow_table

    paths = []
    for name, cols in tables.items():
        p = out / f"{name}.parquet"
        pq.write_table(arrow_table(name, cols), p)
        paths.append(p)
    return paths


WRITERS: dict[str, Callable[[dict[str, Columns], Path], list[Path]]] = {
    "collapsed": write_collapsed,
    "csv": write_csv,
    "json": write_json,
    "parquet": write_parquet,
}


def write_tables(tables: dict[str, Columns], fmt: str, out: Path) -> list[Path]:
    if fmt not in WRITERS:
        raise UserError(f"unknown format {fmt!r} — choose one of {', '.join(sorted(WRITERS))}")
    try:
        out.mkdir(parents=True, exist_ok=True)
        return WRITERS[fmt](tables, out)
    except OSError as e:
        raise UserError(f"cannot write to {out}: {e.strerror or e} — choose another -o folder") from None
