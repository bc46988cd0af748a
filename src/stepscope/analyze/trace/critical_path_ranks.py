"""The critical path across the ranks of a trace set: where the slowest rank's path runs through a collective,
which rank arrived last at that collective and how long the slowest rank waited for it.

A collective instance is matched across ranks by its process group and collective name and its order within
that group on each rank (every member calls a group's collectives in the same order). A rank's arrival is
the start of its communication kernel; the slowest rank waited ``last arrival - its own arrival`` for the
rank that arrived last. The ranks' trace clocks are taken as one clock (Kineto writes the host's wall clock;
hosts synchronised by NTP/PTP agree to well under a millisecond) unless they contradict it: a collective cannot
end on one rank before another has started it. When more than a tenth of the matched instances on the path
break this by more than 10 µs, no wait is given (the collectives analysis applies the same rule to every
instance).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stepscope.analyze.trace.critical_path import CriticalPath

TOP_WAITS = 10
CLOCK_SLACK_NS = 10_000
"""A later rank's start may pass this rank's end by this much before the clocks are taken to disagree."""
CLOCK_BREAK_SHARE = 0.1


@dataclass(frozen=True, slots=True)
class CollectiveWait:
    """The slowest rank's wait in one collective instance on its critical path."""

    rank: int
    waited_for: int
    group: str
    name: str
    instance: int
    wait_ns: int
    on_path_ns: int
    """The collective kernel's time on the slowest rank's path."""

    def text(self) -> str:
        return (f"rank {self.rank} waited {self.wait_ns / 1e6:.3f} ms for rank {self.waited_for} in "
                f"{self.name} #{self.instance}")

    def to_dict(self) -> dict[str, Any]:
        return {"rank": self.rank, "waited_for": self.waited_for, "group": self.group, "name": self.name,
                "instance": self.instance, "wait_ns": self.wait_ns, "on_path_ns": self.on_path_ns,
                "text": self.text()}


@dataclass(frozen=True, slots=True)
class CrossRankPath:
    """slowest_rank: the rank with the longest critical path; lengths: every rank's path length (ns).
    waits: the slowest rank's waits for a later rank in collectives on its path, longest first (top 10).
    collectives_on_path: collective kernels on its path; unmatched: those no other rank's trace holds.
    clock_breaks: matched instances where a rank started after the slowest rank's kernel had ended (by more than
    10 µs); clocks_aligned: False when they are more than a tenth of the matched: then no waits are given."""

    slowest_rank: int
    lengths: dict[int, int]
    collectives_on_path: int
    unmatched: int
    waits: tuple[CollectiveWait, ...]
    wait_total_ns: int
    clock_breaks: int = 0
    clocks_aligned: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"slowest_rank": self.slowest_rank, "lengths_ns": {str(k): v for k, v in self.lengths.items()},
                "collectives_on_path": self.collectives_on_path, "unmatched": self.unmatched,
                "clock_breaks": self.clock_breaks, "clocks_aligned": self.clocks_aligned,
                "wait_total_ns": self.wait_total_ns, "waits": [w.to_dict() for w in self.waits]}


def cross_rank_path(paths: Mapping[int, CriticalPath | None]) -> CrossRankPath | None:
    """None below two ranks with a critical path."""
    have = {r: p for r, p in paths.items() if p is not None}
    if len(have) < 2:
        return None
    slow = max(have, key=lambda r: (have[r].length_ns, -r))
    path = have[slow]
    waits, unmatched, breaks = [], 0, 0
    for c in path.collectives:
        key = f"{c.group}|{c.name}"
        arrivals = {r: int(p.collective_starts[key][c.instance]) for r, p in have.items()
                    if r != slow and key in p.collective_starts and p.collective_starts[key].size > c.instance}
        if not arrivals:
            unmatched += 1
            continue
        last = max(arrivals, key=lambda r: (arrivals[r], -r))
        breaks += arrivals[last] > c.end_ns + CLOCK_SLACK_NS
        if arrivals[last] > c.start_ns:
            waits.append(CollectiveWait(rank=slow, waited_for=last, group=c.group, name=c.name, instance=c.instance,
                                        wait_ns=arrivals[last] - c.start_ns, on_path_ns=c.time_ns))
    aligned = breaks <= CLOCK_BREAK_SHARE * (len(path.collectives) - unmatched)
    if not aligned:
        waits = []
    waits.sort(key=lambda w: -w.wait_ns)
    return CrossRankPath(slowest_rank=slow, lengths={r: p.length_ns for r, p in sorted(have.items())},
                         collectives_on_path=len(path.collectives), unmatched=unmatched,
                         waits=tuple(waits[:TOP_WAITS]), wait_total_ns=sum(w.wait_ns for w in waits),
                         clock_breaks=breaks, clocks_aligned=aligned)
