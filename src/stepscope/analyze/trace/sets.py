"""Set operations on integer columns by sorting (NumPy 2's ``np.unique`` and ``np.isin`` hash the values,
tens of times slower on hundreds of thousands of distinct int64 ids), and kind masks."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope.model.events import EventKind

Array = npt.NDArray[Any]


def member(values: Array, pool: Array) -> npt.NDArray[np.bool_]:
    """``np.isin(values, pool)`` for integers, by a sort of ``pool`` and a binary search."""
    if not pool.size:
        return np.zeros(values.size, dtype=bool)
    s = np.sort(pool)
    at = np.minimum(np.searchsorted(s, values), s.size - 1)
    out: npt.NDArray[np.bool_] = s[at] == values
    return out


def unique_inverse(values: Array) -> tuple[Array, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``np.unique(values, return_inverse=True, return_counts=True)`` for a 1-d array, by one stable sort."""
    order = np.argsort(values, kind="stable")
    if order.size < 2**31:
        order = order.astype(np.int32)  # half the bytes while the rest is built
    s = values[order]
    new = np.empty(s.size, dtype=bool)
    new[:1] = True
    np.not_equal(s[1:], s[:-1], out=new[1:])
    starts = np.flatnonzero(new)
    uniq = s[starts]
    del s
    at = np.cumsum(new, dtype=np.int64)
    del new
    at -= 1
    inverse = np.empty(at.size, dtype=np.int64)
    inverse[order] = at
    del at, order
    counts = np.diff(np.append(starts, values.size)).astype(np.int64)
    return uniq, inverse, counts


def kind_mask(kind: Array, kinds: Iterable[EventKind]) -> npt.NDArray[np.bool_]:
    """``np.isin(kind, kinds)`` for the kind column (a few kinds: one comparison each)."""
    out = np.zeros(kind.shape, dtype=bool)
    for k in kinds:
        out |= kind == k
    return out
