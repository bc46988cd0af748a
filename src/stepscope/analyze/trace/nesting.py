"""Parent of each host event on its thread (the innermost enclosing event), by a stack walk."""

from __future__ import annotations

from typing import Any

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
    p, t, s, e = pid[order].tolist(), tid[order].tolist(), ts[order].tolist(), end[order].tolist()
    idx = order.tolist()
    is_leaf = leaf[order].tolist() if leaf is not None else [False] * n
    res = out
    stack: list[int] = []
    key: Any = None
    for j in range(n):
        k = (p[j], t[j])
        if k != key:
            stack, key = [], k
        sj, ej = s[j], e[j]
        while stack and e[stack[-1]] <= sj:
            stack.pop()
        if stack and ej <= e[stack[-1]]:
            res[idx[j]] = idx[stack[-1]]
        if not is_leaf[j]:
            stack.append(j)
    return res
