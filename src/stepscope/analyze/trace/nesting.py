"""Parent of each host event on its thread (the innermost enclosing event), by a stack walk.

The stack walk is computed with NumPy (:func:`parents`): where a thread's events nest properly (every
two either disjoint or one inside the other, as operators, annotations and Python functions are), the
stack before an event holds exactly the earlier events still open at its start, so the innermost is the
last one pushed at the stack depth counted for it. Threads where some events only partly overlap an
open one take the exact Python walk (:func:`parents_walk`), which defines the result.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]


def parents(pid: Ints, tid: Ints, ts: Ints, end: Ints, leaf: npt.NDArray[np.bool_] | None = None) -> Ints:
    """Index of the innermost event enclosing each event on the same (pid, tid), -1 for roots.

    Events that only partly overlap their predecessor are treated as siblings (never as children).
    ``leaf`` marks events that get a parent but are never one (runtime calls placed among operators); on
    equal bounds the earlier index encloses the later.
    """
    n = ts.size
    out = np.full(n, -1, dtype=np.int64)
    if not n:
        return out
    order = np.lexsort((-end, ts, tid, pid))
    p, t, s, e = pid[order], tid[order], ts[order], end[order]
    pushed = ~leaf[order] if leaf is not None else np.ones(n, dtype=bool)
    new = np.empty(n, dtype=bool)
    new[0] = True
    new[1:] = (p[1:] != p[:-1]) | (t[1:] != t[:-1])
    g = np.cumsum(new) - 1  # thread of each position
    first = np.flatnonzero(new)
    # times shifted so that threads lie one after another on one axis: (thread, time) as one int64
    base = s[first]
    last_end = np.maximum.reduceat(np.maximum(e, s), first)
    off = np.concatenate([[0], np.cumsum(last_end - base + 1)[:-1]])
    shift = (off - base)[g]
    s2, e2 = s + shift, e + shift
    pos = np.arange(n, dtype=np.int64)
    # open(j): pushed events before j on its thread still open at its start (end > start of j)
    before = np.cumsum(pushed) - pushed  # pushed events before j (all threads)
    before_in_thread = before - before[first][g]
    ended = np.sort(e2[pushed])  # pushed events by (thread, end)
    ended_le = np.searchsorted(ended, s2, side="right") - before[first][g]
    # zero-length pushed events at j's start that come at or after j (ends <= start, yet not before j)
    zero = pushed & (s == e)
    opened = before_in_thread - ended_le
    if zero.any():
        zc = np.cumsum(zero)
        grp_last = np.searchsorted(s2, s2, side="right") - 1  # last position with the same (thread, start)
        opened += zc[grp_last] - (zc - zero)
    # the top of the stack: the last pushed event before j whose own depth on pushing was opened(j)
    depth = opened + 1
    levels = int(depth.max()) + 2
    key = np.sort((g[pushed] * levels + depth[pushed]) * n + pos[pushed])
    if not key.size:
        return out
    at = np.searchsorted(key, (g * levels + opened) * n + pos, side="left") - 1
    hit = key[np.maximum(at, 0)]
    ok = (opened > 0) & (at >= 0) & (hit // n == g * levels + opened)
    top = np.full(n, -1, dtype=np.int64)
    top[ok] = hit[ok] % n
    inside = ok.copy()
    inside[ok] = e[ok] <= e[top[ok]]
    # where an event partly overlaps the open one (or the count found no open event), the walk decides:
    # from the last point before it where every earlier event on the thread had ended (empty stack) to
    # the next such point
    bad = (ok != (opened > 0)) | (pushed & ok & ~inside)
    if bad.any():
        reach = np.maximum.accumulate(np.where(pushed, e2, np.iinfo(np.int64).min))
        clear = new.copy()
        clear[1:] |= s2[1:] >= reach[:-1]
        seg = np.cumsum(clear)
        marked = np.zeros(int(seg[-1]) + 1, dtype=bool)  # seg counts up from 1: mark the segments with a bad event
        marked[seg[bad]] = True
        walk = marked[seg]
        inside &= ~walk
        sel = np.sort(order[walk])
        sub = parents_walk(pid[sel], tid[sel], ts[sel], end[sel], leaf[sel] if leaf is not None else None)
        out[sel] = np.where(sub >= 0, sel[np.maximum(sub, 0)], -1)
    out[order[inside]] = order[top[inside]]
    return out


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
