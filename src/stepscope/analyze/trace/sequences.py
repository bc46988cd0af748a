"""Most frequent GPU kernel sequences per stream: fusion candidates.

A sequence is ``n`` consecutive GPU work items (kernels, memcpy, memset) on one stream, in start order, named by
their names. Every window of ``n`` items counts once, overlapping windows included (so a loop that runs A B C
ten times gives A B C ten times, B C A and C A B nine times each). Its total time is the summed duration of its
items over every occurrence. HTA's ``get_frequent_cuda_kernel_sequences`` differs: it takes the kernels under
each call of one named operator as one sequence; this needs no operator name and finds repeats anywhere.

Windows are hashed (a 64-bit mix of the stream and the name codes) and counted with one sort per length; the
names reported are read back from each sequence's first occurrence. Two different windows share a hash with
probability about windows² / 2^65 (1e-8 at 10^6 windows).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope.analyze.trace.sets import kind_mask, unique_inverse
from stepscope.model.events import GPU_WORK_KINDS, EventTable

Array = npt.NDArray[Any]

MIN_LENGTH = 3
MAX_LENGTH = 5
TOP = 10
_MIX = np.uint64(0x9E3779B97F4A7C15)


@dataclass(frozen=True, slots=True)
class KernelSequence:
    """One sequence: its item ``names`` in order, the ``stream`` it runs on, how many windows match it
    (``count``), and the summed duration of their items (``total_ns``; ``mean_ns`` per occurrence)."""

    names: tuple[str, ...]
    stream: int
    count: int
    total_ns: int
    mean_ns: float

    def to_dict(self) -> dict[str, Any]:
        return {"names": list(self.names), "length": len(self.names), "stream": self.stream, "count": self.count,
                "total_ns": self.total_ns, "mean_ns": self.mean_ns}


@dataclass(frozen=True, slots=True)
class KernelSequences:
    """The ``top`` most frequent sequences of each length from ``min_length`` to ``max_length`` that occur at
    least twice, most frequent first (ties: larger total time first), all lengths in one list."""

    sequences: tuple[KernelSequence, ...]
    min_length: int
    max_length: int
    top: int

    def to_dict(self) -> dict[str, Any]:
        return {"sequences": [s.to_dict() for s in self.sequences], "min_length": self.min_length,
                "max_length": self.max_length, "top": self.top}


def kernel_sequences(table: EventTable, *, min_length: int = MIN_LENGTH, max_length: int = MAX_LENGTH,
                     top: int = TOP) -> KernelSequences | None:
    """The most frequent sequences per length; None without GPU work.

    Raises:
        ValueError: ``min_length`` below 1 or above ``max_length``, or ``top`` below 1.
    """
    if not 1 <= min_length <= max_length or top < 1:
        raise ValueError(f"sequence lengths {min_length}..{max_length} and top {top}: need 1 <= min <= max, top >= 1")
    rows = np.flatnonzero(kind_mask(table["kind"], GPU_WORK_KINDS))
    if not rows.size:
        return None
    stream = table["stream"][rows]
    order = np.lexsort((table["ts_ns"][rows], stream))
    rows, stream = rows[order], stream[order]
    codes = table["name"][rows].astype(np.uint64)
    dur = table["dur_ns"][rows]
    csum = np.concatenate([[0], np.cumsum(dur)])
    # position of each item within its stream: a window may not cross into the next stream
    first = np.r_[True, stream[1:] != stream[:-1]]
    run_start = np.maximum.accumulate(np.where(first, np.arange(rows.size), 0))
    pos = np.arange(rows.size) - run_start
    run_len = np.diff(np.r_[np.flatnonzero(first), rows.size])
    left = np.repeat(run_len, run_len) - pos  # items from here to the end of the stream, this one included
    out: list[KernelSequence] = []
    h = stream.astype(np.uint64) * _MIX
    for n in range(1, max_length + 1):
        m = rows.size - n + 1
        if m <= 0:
            break
        with np.errstate(over="ignore"):
            h = h[:m] * _MIX ^ (codes[n - 1:n - 1 + m] + np.uint64(n))
            h ^= h >> np.uint64(29)
        if n < min_length:
            continue
        valid = np.flatnonzero(left[:m] >= n)
        if not valid.size:
            continue
        uniq, inverse, counts = unique_inverse(h[valid])
        repeated = np.flatnonzero(counts >= 2)
        if not repeated.size:
            continue
        totals = np.bincount(inverse, weights=(csum[valid + n] - csum[valid]).astype(np.float64),
                             minlength=uniq.size)
        best = repeated[np.lexsort((-totals[repeated], -counts[repeated]))][:top]
        first_at = np.full(uniq.size, valid.size, dtype=np.int64)
        np.minimum.at(first_at, inverse, np.arange(valid.size))
        for b in best.tolist():
            start = int(valid[first_at[b]])
            names = tuple(table.names[c] for c in codes[start:start + n].astype(np.int64).tolist())
            out.append(KernelSequence(names=names, stream=int(stream[start]), count=int(counts[b]),
                                      total_ns=int(totals[b]), mean_ns=float(totals[b]) / int(counts[b])))
    return KernelSequences(sequences=tuple(out), min_length=min_length, max_length=max_length, top=top)


__all__ = ["MAX_LENGTH", "MIN_LENGTH", "TOP", "KernelSequence", "KernelSequences", "kernel_sequences"]
