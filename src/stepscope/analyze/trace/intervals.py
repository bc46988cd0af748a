"""Interval arithmetic on NumPy arrays of [start, end) nanosecond intervals."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]


def merge(starts: npt.ArrayLike, ends: npt.ArrayLike) -> tuple[Ints, Ints]:
    """Union of intervals as sorted, disjoint [start, end) pairs (touching intervals are joined)."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    if not s.size:
        return s.copy(), e.copy()
    if not bool((s[1:] >= s[:-1]).all()):  # rows of a table come sorted by start: no sorted copies then
        order = np.argsort(s, kind="stable")
        s, e = s[order], e[order]
        del order
    reach = np.maximum.accumulate(e)
    new = np.ones(s.size, dtype=bool)
    np.greater(s[1:], reach[:-1], out=new[1:])
    del reach
    idx = np.flatnonzero(new)
    del new
    return s[idx], np.maximum.reduceat(e, idx)


def unique_sorted(values: npt.ArrayLike) -> npt.NDArray[Any]:
    """Sorted distinct values, as ``np.unique`` gives them, by a sort (NumPy 2's hash-based unique is
    tens of times slower on millions of distinct int64 values)."""
    s = np.sort(np.asarray(values), kind="stable")
    if s.size < 2:
        return s
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def length(starts: Ints, ends: Ints) -> int:
    """Total length of merged intervals."""
    return int((ends - starts).sum())


def intersection(a: tuple[Ints, Ints], b: tuple[Ints, Ints]) -> int:
    """Length of the intersection of two merged interval sets."""
    (as_, ae), (bs, be) = a, b
    if not as_.size or not bs.size:
        return 0
    starts = np.concatenate([as_, bs])
    ends = np.concatenate([ae, be])
    ms, me = merge(starts, ends)
    return length(as_, ae) + length(bs, be) - length(ms, me)


def clip(merged: tuple[Ints, Ints], lo: int, hi: int) -> tuple[Ints, Ints]:
    s, e = merged
    s2, e2 = np.maximum(s, lo), np.minimum(e, hi)
    keep = e2 > s2
    return s2[keep], e2[keep]


def group_stats(codes: npt.NDArray[Any], values: npt.NDArray[Any], n_groups: int) -> dict[str, npt.NDArray[Any]]:
    """count, sum, min, max, mean, std (sample, ddof=1; 0 for one value) of values per group code."""
    v = values.astype(np.float64)
    count = np.bincount(codes, minlength=n_groups)
    total = np.bincount(codes, weights=v, minlength=n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, total / np.maximum(count, 1), 0.0)
        sq = np.bincount(codes, weights=(v - mean[codes]) ** 2, minlength=n_groups)
        std = np.where(count > 1, np.sqrt(sq / np.maximum(count - 1, 1)), 0.0)
    mn = np.full(n_groups, np.inf)
    mx = np.full(n_groups, -np.inf)
    np.minimum.at(mn, codes, v)
    np.maximum.at(mx, codes, v)
    return {"count": count, "sum": total, "min": mn, "max": mx, "mean": mean, "std": std}
