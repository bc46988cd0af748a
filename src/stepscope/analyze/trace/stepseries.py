"""Step functions built from +/- change events per group (a stream, a copy kind), shared by the queue-length
and bandwidth series: one vectorised sort and cumulative sum for all groups at once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]

SERIES_POINTS = 2_000
"""Most points (about) of one series written to JSON (a chart has fewer pixels)."""
SERIES_KEEP = 12_000
"""Most points (about) of one series kept in a result (:func:`keep_index`): a rank's result stays small when it
travels back from a worker; summaries are computed from every change first. ``max_points=None`` keeps all."""


@dataclass(frozen=True, slots=True)
class Changes:
    """Change events sorted by (group, time, delta): at equal times decrements come first, so an item that ends
    (or starts running) at t leaves before one that arrives at t is counted. ``value``: the running sum after
    each event; ``active``: the running count of open items (0 where the sum must be exactly 0)."""

    group: Array
    ts_ns: Array
    value: Array


def changes(group: Array, ts_ns: Array, delta: Array, *, count: Array | None = None) -> Changes:
    """Running sums of ``delta`` per group in time order. Every group's deltas must sum to zero (each item adds
    and removes its own amount), so one cumulative sum over the group-sorted events serves every group.
    ``count``: +1/-1 per event; where the open count is 0 the value is set to exactly 0 (float sums leave
    residues such as 1e-13 GB/s after every copy has ended)."""
    order = np.lexsort((delta, ts_ns, group))
    value = np.cumsum(delta[order])
    if count is not None:
        value[np.cumsum(count[order]) == 0] = 0
    return Changes(group=group[order], ts_ns=ts_ns[order], value=value)


def collapsed(ch: Changes, sel: Array | slice) -> tuple[Array, Array]:
    """The step function of the events ``sel`` (one group, in order; a slice reads views, not copies): one point
    per distinct time, holding the value after every change at that time."""
    ts, v = ch.ts_ns[sel], ch.value[sel]
    if not ts.size:
        return ts, v
    last = np.ones(ts.size, dtype=bool)
    last[:-1] = ts[1:] != ts[:-1]
    return ts[last], v[last]


def group_slices(group: Array) -> list[tuple[Any, slice]]:
    """(group value, slice) of each run of equal values in a sorted group column."""
    if not group.size:
        return []
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    ends = np.r_[starts[1:], group.size]
    return [(group[s].item(), slice(int(s), int(e))) for s, e in zip(starts.tolist(), ends.tolist())]


def describe(values: Array) -> dict[str, float]:
    """pandas ``describe`` of a sample (count, mean, sample std, min, quartiles, max), as HTA summarises."""
    v = values.astype(np.float64)
    n = v.size
    mean = float(v.mean()) if n else float("nan")
    std = float(v.std(ddof=1)) if n > 1 else float("nan")
    v.sort()  # in place: the mean and std above keep NumPy's summation order
    q = [_sorted_quantile(v, p) for p in (0.25, 0.5, 0.75)] if n else [float("nan")] * 3
    return {"count": float(n), "mean": mean, "std": std, "min": float(v.min()) if n else float("nan"),
            "p25": q[0], "p50": q[1], "p75": q[2], "max": float(v.max()) if n else float("nan")}


def _sorted_quantile(s: Array, q: float) -> float:
    """``np.percentile(s, 100 * q)`` (linear) of a sorted, non-empty float64 array, figure for figure: NumPy's
    virtual index, neighbours and interpolation (its own call imports numpy.ma on first use, which a worker's
    first rank would keep for good)."""
    n = s.size
    if np.isnan(s[-1]):  # NaN sorts last; NumPy's quantile of a sample with NaN is NaN
        return float("nan")
    vi = n * q + (1 - q) - 1  # NumPy's _compute_virtual_index for alpha = beta = 1
    lo = min(max(int(np.floor(vi)), 0), n - 1)
    hi = min(lo + 1, n - 1)
    gamma = vi - lo
    below, above = s[lo], s[hi]
    diff = above - below
    if gamma >= 0.5:
        return float(above - diff * (1 - gamma))
    return float(below + diff * gamma)


def distinct(a: Array) -> Array:
    """``np.unique(a)`` of an integer array (sorted distinct values), without NumPy's import of numpy.ma."""
    s = np.sort(a)
    if s.size < 2:
        return s
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def time_weighted_mean(ts: Array, v: Array) -> float | None:
    """Mean of a step function over [first point, last point]; None when that span is empty."""
    if ts.size < 2 or ts[-1] <= ts[0]:
        return None
    return float((v[:-1] * np.diff(ts)).sum() / (ts[-1] - ts[0]))


def keep_index(v: Array, points: int) -> Array:
    """Indices of at most about ``points`` of a series' points that keep its shape: per bucket of consecutive
    points its first, smallest and largest (a peak or a drop to zero is never lost), and the last point."""
    n = v.size
    if n <= points:
        return np.arange(n)
    buckets = max(1, points // 3)
    edges = (np.arange(buckets + 1) * n) // buckets
    bucket = np.repeat(np.arange(buckets), np.diff(edges))
    order = np.lexsort((v, bucket))  # within each bucket (a range of indices) by value
    sel = np.concatenate([edges[:-1], order[edges[:-1]], order[edges[1:] - 1], [n - 1]])
    return distinct(sel)


def decimated(ts: Array, v: Array, points: int = SERIES_POINTS) -> tuple[list[int], list[float]]:
    """At most about ``points`` points of a step function for JSON and charts (:func:`keep_index`)."""
    sel = keep_index(v, points)
    return ts[sel].tolist(), v[sel].astype(np.float64).tolist()


__all__ = ["SERIES_KEEP", "SERIES_POINTS", "Changes", "changes", "collapsed", "decimated", "describe",
           "distinct", "group_slices", "keep_index", "time_weighted_mean"]
