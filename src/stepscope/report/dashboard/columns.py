"""Compact column tables for the dashboard's embedded JSON.

A page listing 10,000 runs as one object per row repeats every key 10,000 times and makes the browser
build 10,000 objects before it draws anything. Instead a table is one object of columns (equal-length
arrays); columns whose values repeat (run name, status, branch, commit, subject, parameters) are
dictionary-encoded: the column holds small integers indexing ``dict[column]``. The page's JS reads a
cell as ``dict[k] ? dict[k][cols[k][i]] : cols[k][i]``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any


def dictionary(values: Sequence[Any]) -> tuple[list[int], list[Any]]:
    """(codes, distinct values in first-seen order): ``distinct[codes[i]] == values[i]``. Dict values are
    compared by their sorted items."""
    index: dict[Hashable, int] = {}
    distinct: list[Any] = []
    codes: list[int] = []
    for v in values:
        key: Hashable = _dict_key(v) if isinstance(v, dict) else v
        code = index.get(key)
        if code is None:
            code = index[key] = len(distinct)
            distinct.append(v)
        codes.append(code)
    return codes, distinct


def _dict_key(d: dict[Any, Any]) -> Hashable:
    """A dict's identity as a key: its sorted items when keys and values are all strings (parameters and
    tags: the cheap case), else its sorted JSON."""
    if all(type(k) is str and type(v) is str for k, v in d.items()):
        return tuple(sorted(d.items()))
    return json.dumps(d, sort_keys=True)


def finite(values: Sequence[float | None], *, digits: int | None = None) -> list[float | None]:
    """Floats with NaN / inf as None (JSON has neither); with ``digits``, rounded to that many significant
    digits (a 20-character float costs a page of 10,000 rows 200 kB more than a 6-digit one)."""
    if digits is None:
        return [v if v is not None and math.isfinite(v) else None for v in values]
    fmt = f".{digits}g"
    return [float(format(v, fmt)) if v is not None and math.isfinite(v) else None for v in values]


def table(columns: Mapping[str, Sequence[Any]], *, encoded: Sequence[str] = ()) -> dict[str, Any]:
    """``{"n": rows, "cols": {name: column}, "dict": {name: distinct values}}`` with the ``encoded`` columns
    dictionary-encoded. Every column must have the same length."""
    lengths = {len(c) for c in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"columns of different lengths: {sorted(lengths)}")
    cols: dict[str, Any] = {}
    dicts: dict[str, list[Any]] = {}
    for name, col in columns.items():
        if name in encoded:
            cols[name], dicts[name] = dictionary(col)
        else:
            cols[name] = list(col)
    return {"n": lengths.pop() if lengths else 0, "cols": cols, "dict": dicts}
