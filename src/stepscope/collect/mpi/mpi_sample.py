"""Which mpi4py calls get a timed CommTable row, and the exact counts of all of them (collect/mpi/mpi.py).

A timed row costs a few µs of Python per call (the row, the communicator and peer lookups, the sequence
number, the status read); a same-host round trip costs 2-6 µs. So rows are rationed:

* every call is **counted** exactly, per method: calls, bytes (bytes that cannot be known without a row,
  those of an untimed ``Irecv``/``irecv``, are counted as ``bytes_unknown`` calls instead);
* the first ``FREE_ROWS`` calls of a flush interval (the process's budget, refilled by the flush thread)
  are all **timed**, so a program making fewer calls than that, most training loops, gets a row for every
  call as before. An interval that follows one with more calls gets no free rows (only the sample): a
  steady fast loop pays full rows in its first interval only (a row costs 2-4 µs, and on a loaded host a
  rank busy that long between calls makes its spinning partner give the CPU away: benchmarks/RESULTS.md);
  a loop that slows down gets them back one interval later;
* past the budget, each call is timed with probability 1/``SAMPLE_EVERY``: point-to-point calls by a
  random gap (geometric, from stepscope's own generator: the user's ``random`` state is untouched) drawn
  after each timed call; collectives by their index on the communicator, through a hash that every rank
  computes alike, so the ranks time the same collectives and the transfer/sync split can still match them.

A sampled row stands for ``SAMPLE_EVERY`` calls: its blocked time is added to the step's comm phase
multiplied by that weight (an unbiased estimate), and the rank's ``mpi_calls`` record says how many rows
were sampled; the first sampled call writes a note, so reports say that this rank's MPI times are estimated.
"""

from __future__ import annotations

import math
import random
from typing import Any

FREE_ROWS = 500
"""Timed rows per flush interval before sampling starts (250/s at the default 2 s interval)."""
SAMPLE_EVERY = 64
_GOLDEN = 0x9E3779B1  # 2^32 / golden ratio: consecutive indices spread evenly (no aliasing with loop periods)
_MASK = 0xFFFFFFFF


class Budget:
    """The process's free timed rows for the current flush interval, and the sampling rule past them."""

    __slots__ = ("_log_q", "_rng", "free", "per_interval", "sample_every", "sampled", "threshold")

    def __init__(self, per_interval: int = FREE_ROWS, sample_every: int = SAMPLE_EVERY, seed: int = 0) -> None:
        self.per_interval = per_interval
        self.free = per_interval
        self.sample_every = sample_every
        self.threshold = (_MASK + 1) // sample_every
        """A collective of index n is timed past the budget when hash(n) < threshold."""
        self._rng = random.Random(seed)
        self._log_q = math.log1p(-1.0 / sample_every) if sample_every > 1 else -math.inf
        self.sampled = 0
        """Timed rows written past the budget (each stands for ``sample_every`` calls)."""

    def refill(self, busy: bool = False) -> None:
        """At each flush (the flush thread): a new interval's free rows; none after a ``busy`` interval (one
        with more calls than the budget)."""
        self.free = 0 if busy else self.per_interval

    def take(self) -> int:
        """A call about to be timed: its weight (1 within the budget, ``sample_every`` past it)."""
        if self.free > 0:
            self.free -= 1
            return 1
        self.sampled += 1
        return self.sample_every

    def gap(self) -> int:
        """Point-to-point: untimed calls before the next timed one (0 while rows are free; past the budget a
        geometric gap, so that every call is timed with probability 1/sample_every, independently)."""
        if self.free > 0 or self.sample_every <= 1:
            return 0
        u = self._rng.random()
        return int(math.log1p(-u) / self._log_q)

    def collective_untimed(self, index: int) -> bool:
        """Collective number ``index`` on its communicator goes untimed (the same answer on every rank)."""
        return self.free <= 0 and ((index * _GOLDEN) & _MASK) >= self.threshold


class Counts:
    """Exact per-method totals of one wrapped method (plain attributes: the hot path adds to them)."""

    __slots__ = ("bytes", "bytes_unknown", "calls", "estimated_ns", "timed", "timed_ns")

    def __init__(self) -> None:
        self.calls = 0
        self.bytes = 0.0
        self.bytes_unknown = 0
        self.timed = 0
        self.timed_ns = 0
        self.estimated_ns = 0
        """Sum over timed rows of duration x weight: the estimated total time of all calls."""

    def add_bytes(self, n: float) -> None:
        if n == n:
            self.bytes += n
        else:
            self.bytes_unknown += 1

    def as_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "bytes": self.bytes, "bytes_unknown": self.bytes_unknown,
                "timed": self.timed, "timed_ns": self.timed_ns, "estimated_ns": self.estimated_ns}
