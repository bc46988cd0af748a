"""Parent of each host event on its thread (the innermost enclosing event), as a stack walk defines it.

The walk (:func:`parents_walk`, the definition) visits a thread's events by start (longest first on equal
starts), pops the stack while its top has ended by the event's start, makes the top the event's parent if
the event ends within it, then pushes the event. Its result has a closed form that :func:`parents` computes
with NumPy: the top of the stack after the pops is **the last pushed event before it (in that order) whose
end is after its start**. (That event cannot have been popped earlier: it had not ended at any earlier
start; and every event pushed after it has ended by this start, so the pops remove them all and stop at it.)
So each pushed event j is the candidate of the events that follow it up to the first one starting at or
after its end, a range of positions [j + 1, K_j) found by one ``searchsorted``, and each event's candidate is
the latest j whose range covers it: the largest value painted over a point by intervals, computed level by
level as in a sparse table (:func:`_latest_cover`). This holds for any overlap, so there is no fallback.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Positions = npt.NDArray[np.signedinteger[Any]]
"""Positions into a column: int32 where they fit (half the bytes), else int64."""


def parents(pid: Ints, tid: Ints, ts: Ints, end: Ints, leaf: npt.NDArray[np.bool_] | None = None) -> Ints:
    """Index of the innermost event enclosing each event on the same (pid, tid), -1 for roots.

    Events that only partly overlap their predecessor are treated as siblings (never as children).
    ``leaf`` marks events that get a parent but are never one (runtime calls placed among operators); on
    equal bounds the earlier index encloses the later.
    """
    n = ts.size
    if not n:
        return np.full(n, -1, dtype=np.int64)
    order = thread_order(pid, tid, ts, end)
    first = _thread_starts(pid, tid, order)
    del pid, tid  # a caller that passed temporaries without keeping them frees them here
    # K_j: the first position on j's thread starting at or after j's end (threads laid one after another
    # on one time axis, so that one searchsorted stays inside the thread; a thread's events all move by
    # the same shift, so comparing shifted ends within a thread compares the ends)
    s, e = ts[order], end[order]
    del ts, end
    if first.size > 1:
        base = s[first]
        span = np.maximum.reduceat(np.maximum(e, s), first) - base + 1
        shift = np.repeat(np.concatenate([[0], np.cumsum(span)[:-1]]) - base, np.diff(np.append(first, n)))
        s += shift
        e += shift
        del shift
    small = np.int32 if n < 2**31 else np.int64  # positions: half the bytes where they fit
    pushed = np.flatnonzero(~leaf[order]).astype(small) if leaf is not None else np.arange(n, dtype=small)
    stop = np.searchsorted(s, e[pushed], side="left").astype(small)
    del s
    covers = stop > pushed + 1
    if not covers.any():
        return np.full(n, -1, dtype=np.int64)
    lo, hi = pushed[covers], stop[covers]
    del pushed, stop, covers
    lo += 1
    top = _latest_cover(lo, hi, n)
    del lo, hi
    ok = top >= 0
    ok[ok] = e[ok] <= e[top[ok]]
    out = np.full(n, -1, dtype=np.int64)
    out[order[ok]] = order[top[ok]]
    return out


def _thread_starts(pid: Ints, tid: Ints, order: Ints) -> Ints:
    """Positions in ``order`` where a new (pid, tid) begins (0 first)."""
    n = order.size
    new = np.empty(n, dtype=bool)
    new[0] = True
    p = pid[order]
    np.not_equal(p[1:], p[:-1], out=new[1:])
    del p
    t = tid[order]
    new[1:] |= t[1:] != t[:-1]
    return np.flatnonzero(new)


def thread_order(pid: Ints, tid: Ints, ts: Ints, end: Ints) -> Positions:
    """``np.lexsort((-end, ts, tid, pid))`` (int32 where the positions fit): by thread, start, longest first,
    then index. Sorted by start
    first (quick on the nearly sorted columns of a trace), equal starts put longest first, then a stable sort
    by thread where there is more than one."""
    order: Positions = np.argsort(ts, kind="stable").astype(np.int32 if ts.size < 2**31 else np.int64)
    s = ts[order]
    tie = np.zeros(s.size, dtype=bool)
    eq = s[1:] == s[:-1]
    del s
    tie[1:] |= eq
    tie[:-1] |= eq
    del eq
    if tie.any():  # runs of equal starts, each sorted by end descending (stable) in place
        at = np.flatnonzero(tie)
        sub = order[at]
        order[at] = sub[np.lexsort((-end[sub], ts[sub]))]
    del tie
    if order.size and not ((pid == pid[0]).all() and (tid == tid[0]).all()):
        p, t = pid[order], tid[order]
        by_thread = np.lexsort((t, p))
        del p, t
        order = order[by_thread]
    return order


def _latest_cover(start: Ints, stop: Ints, n: int) -> Ints:
    """For each position k in [0, n), the largest ``start - 1`` over the ranges [start, stop) that hold k
    (-1 where none does); ranges non-empty.

    Each range is covered by two blocks of length 2^L (L = floor(log2(length))), one at each end. Blocks
    are pushed down level by level (a block of 2^L is two of 2^(L-1)) keeping the maximum value, as
    (position, value) lists while they are few and as one array of n once they are not.
    """
    level = np.frexp(stop - start)[1] - 1  # floor(log2(length)), exact below 2^53
    top = int(level.max())
    few_at, few_value = start[:0], start[:0]
    dense: Ints | None = None
    for lv in range(top, -1, -1):
        sel = np.flatnonzero(level == lv)  # this level's blocks: one at each end of each range
        at = np.concatenate([start[sel], stop[sel] - (1 << lv)])
        val = start[sel] - 1  # the value of a range: start - 1
        val = np.concatenate([val, val])
        del sel
        if dense is not None:  # blocks of 2^(lv+1) at i become blocks of 2^lv at i and i + 2^lv
            h = 1 << lv
            np.maximum(dense[h:], dense[:n - h], out=dense[h:])  # overlapping: NumPy reads before writing
            np.maximum.at(dense, at, val)
            continue
        few_at = np.concatenate([few_at, at])
        few_value = np.concatenate([few_value, val])
        if lv == 0 or few_at.size > n // 8:
            dense = np.full(n, -1, dtype=np.int32 if n < 2**31 else np.int64)  # values below n
            np.maximum.at(dense, few_at, few_value)
            del few_at, few_value
        else:
            few_at = np.concatenate([few_at, few_at + (1 << (lv - 1))])
            few_value = np.concatenate([few_value, few_value])
    assert dense is not None
    return dense


def parents_walk(pid: Ints, tid: Ints, ts: Ints, end: Ints, leaf: npt.NDArray[np.bool_] | None = None) -> Ints:
    """:func:`parents` by an explicit stack walk in Python (the definition; any nesting)."""
    n = ts.size
    out = np.full(n, -1, dtype=np.int64)
    if not n:
        return out
    order = np.lexsort((-end, ts, tid, pid))
    p, t = pid[order], tid[order]
    new = np.empty(n, dtype=bool)
    new[0] = True
    new[1:] = (p[1:] != p[:-1]) | (t[1:] != t[:-1])  # first event of its (pid, tid): the stack starts empty
    pushed = ~leaf[order] if leaf is not None else np.ones(n, dtype=bool)
    found: list[int] = [-1] * n  # parent of each position, as a position in ``order``
    at: list[int] = []  # the stack: positions, and their ends alongside
    ends: list[int] = []
    for j, sj, ej, first, push in zip(range(n), ts[order].tolist(), end[order].tolist(), new.tolist(),
                                      pushed.tolist()):
        if first:
            at, ends = [], []
        while ends and ends[-1] <= sj:
            ends.pop()
            at.pop()
        if ends and ej <= ends[-1]:
            found[j] = at[-1]
        if push:
            at.append(j)
            ends.append(ej)
    par = np.asarray(found, dtype=np.int64)
    has = par >= 0
    out[order[has]] = order[par[has]]
    return out
