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


MERGE_BLOCK = 1 << 15
"""Rows merged at a time by :func:`merge_rows`."""


def merge_rows(ts: Ints, dur: Ints, mask: npt.NDArray[np.bool_]) -> tuple[Ints, Ints]:
    """:func:`merge` of ``[ts, ts + dur)`` over the rows where ``mask`` holds, a block of rows at a time, so
    that only one block's starts and ends exist at once. On rows sorted by start (a table's), each block's
    union is stitched to the previous ones: where none of its starts is before an earlier block's, only its
    intervals starting within the last one so far join it (that one ends last); otherwise the blocks' unions
    are merged again at the end."""
    rows = np.flatnonzero(mask)
    if rows.size < 2**31:
        rows = rows.astype(np.int32)  # half the bytes, held while the blocks are merged
    starts: list[Ints] = []
    ends: list[Ints] = []
    sorted_rows, last_start = True, None
    for i in range(0, rows.size, MERGE_BLOCK):
        at = rows[i:i + MERGE_BLOCK]
        start = ts[at]
        end = dur[at]
        end += start
        del at
        bs, be = merge(start, end)
        sorted_rows &= last_start is None or bool(bs[0] >= last_start)  # no start before an earlier one
        last_start = start.max() if last_start is None else max(last_start, start.max())
        del start, end
        if starts and sorted_rows:
            j = int(np.searchsorted(bs, ends[-1][-1], side="right"))  # they start within the last interval
            if j:
                ends[-1][-1] = max(ends[-1][-1], be[j - 1])
                bs, be = bs[j:], be[j:]
        if bs.size:
            starts.append(bs)
            ends.append(be)
    del rows
    if len(starts) <= 1:
        return (starts[0], ends[0]) if starts else (ts[:0].copy(), ts[:0].copy())
    s, e = np.concatenate(starts or [ts[:0]]), np.concatenate(ends or [ts[:0]])
    del starts, ends
    return (s, e) if sorted_rows else merge(s, e)


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
