"""pandas DataFrames of the exported tables (report/export/schema.py): the same columns, types and values
as ``stepscope export``, so a notebook and a Parquet file never disagree.

Columns are typed from the declared schema. A timestamp column ``x_ns`` (Unix-epoch ns) stays an int64 and
is followed by ``x``, the same instant as ``datetime64[ns, UTC]``; a duration column ``y_ns`` is followed
by ``y_s``, the same duration in seconds (float64). Integer columns with unmeasured values are pandas'
nullable ``Int64``; float columns hold NaN where not measured; string columns are ``object`` (None: absent).
"""

from __future__ import annotations

from typing import Any

from stepscope.errors import UserError
from stepscope.model.tables import PANDAS_MISSING, import_pandas
from stepscope.report.export.schema import schema_of

Columns = dict[str, list[Any]]


def require_pandas() -> Any:
    """pandas, or a one-line UserError: ``pip install 'stepscope[pandas]'``."""
    try:
        return import_pandas()
    except ImportError:
        raise UserError(PANDAS_MISSING) from None


INSTANTS = ("start_ns", "end_ns", "ts_ns", "t_ns")
"""Columns that are instants, not durations (a trace's ``start_ns`` is on the trace's own clock)."""


def is_duration(column: str, kind: str) -> bool:
    return column.endswith("_ns") and column not in INSTANTS and kind in ("int64", "float64")


def table_frame(name: str, cols: Columns) -> Any:
    """Export table ``name`` (its plain columns) as a DataFrame typed by its declared schema."""
    pd = require_pandas()
    schema = schema_of(name, cols)
    out: dict[str, Any] = {}
    for col, kind in schema.items():
        values = cols.get(col, [None] * _length(cols))
        if kind == "timestamp":
            ints = pd.array(values, dtype="Int64")
            out[col] = ints if ints.isna().any() else ints.astype("int64")
            out[col.removesuffix("_ns")] = pd.to_datetime(ints, unit="ns", utc=True)
        elif kind == "float64":
            out[col] = pd.array([float("nan") if v is None else v for v in values], dtype="float64")
        elif kind.startswith("int"):
            ints = pd.array(values, dtype="Int64")
            out[col] = ints if ints.isna().any() else ints.to_numpy(dtype=kind)
        elif kind == "bool":
            out[col] = pd.array(values, dtype="boolean")
        else:
            out[col] = pd.Series(values, dtype=object)
        if is_duration(col, kind):
            out[col.removesuffix("_ns") + "_s"] = pd.array(values, dtype="Float64").astype("float64") / 1e9
    return pd.DataFrame(out)


def _length(cols: Columns) -> int:
    return max((len(v) for v in cols.values()), default=0)


def events_frame(table: Any) -> Any:
    """Raw events of one rank's trace (an EventTable): every declared column, code columns decoded (kind,
    name, cat, shape, collective), ``end_ns`` and ``dur_s`` added. Times are on the trace's own clock."""
    require_pandas()
    df = table.to_pandas()
    df.insert(df.columns.get_loc("dur_ns") + 1, "end_ns", table.end_ns)
    df.insert(df.columns.get_loc("dur_ns") + 1, "dur_s", table["dur_ns"] / 1e9)
    return df
