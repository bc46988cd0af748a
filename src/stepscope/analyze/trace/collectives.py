"""Collectives across ranks: each collective instance's arrival skew, transfer time, algorithm and bus bandwidth.

Per rank (:func:`rank_collectives`), every communication kernel that is a collective: its type (from PyTorch's
``Collective name`` arg, else the NCCL/RCCL kernel name), process group (``Process Group Name`` / ``Process Group
Ranks``; the world for kernels without args), message size and GPU start and duration. Across ranks
(:func:`match_collectives`), the k-th collective of a process group on one rank is the k-th on every other
member (NCCL requires every member to issue a group's collectives in the same order). Ranks' profiled windows
may start a few collectives apart: each rank's sequence is aligned to the lowest rank's at the offset (up to
:data:`MAX_SHIFT`) that pairs the most calls of one type and size overlapping in time. An instance held by one
rank only, or whose types differ between ranks, is not matched.

Definitions, per instance over the ranks whose traces hold it:

- arrival: the start of the rank's collective kernel on its GPU; skew = last arrival − first arrival.
- transfer: the duration of the last-arriving rank's kernel (the others' kernels spent the skew waiting).
- message size S (NCCL-tests' convention): all_reduce, broadcast, reduce, all_to_all: the input (``In msg
  nelems`` x dtype size); all_gather: the gathered output (``Out msg nelems``); reduce_scatter: the input.
- algbw = S / transfer; busbw = algbw x 2(n−1)/n (all_reduce), (n−1)/n (all_gather, reduce_scatter,
  all_to_all), 1 (broadcast, reduce), n the group size. ``SendRecv`` kernels (point-to-point, or an
  all_to_all NCCL runs as grouped sends) carry no size and get no bandwidth.

Clocks: a collective cannot end on any rank before every rank has started it. When more than
:data:`MISALIGNED_SHARE` of the instances break that by more than :data:`CLOCK_TOLERANCE_NS`, the ranks'
clocks are not aligned (traces from different hosts, or windows that do not overlap): skew, transfer, the
bandwidths and the last-arriving rank are then not given, and a note says so.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stepscope.analyze.trace.comm import DTYPE_BYTES, KERNEL_COLLECTIVE
from stepscope.analyze.trace.gpuview import GpuView, KernelType
from stepscope.model.events import CollectiveArgs, EventKind, EventTable

CLOCK_TOLERANCE_NS = 10_000
"""How far before the last arrival a rank's kernel may end (clock noise between GPUs) before it counts against
the clocks' alignment."""
MISALIGNED_SHARE = 0.1
BUS_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0, "reduce": lambda n: 1.0}
"""NCCL's bus-bandwidth factor per collective type (nccl-tests, doc/PERFORMANCE.md), n the group size."""
_KINDS = (("allreduce", "all_reduce"), ("allgather", "all_gather"), ("reducescatter", "reduce_scatter"),
          ("alltoall", "all_to_all"), ("broadcast", "broadcast"), ("reduce", "reduce"), ("sendrecv", "sendrecv"))


def collective_kind(name: str) -> str | None:
    """all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce or sendrecv from a ``Collective
    name`` (``_allgather_base``, ``reduce_scatter_tensor_coalesced``, ...) or an NCCL kernel's word; None for
    point-to-point send / recv, barriers and anything else."""
    s = re.sub(r"base|coalesced|intotensor|tensor|single", "", name.lower().replace("_", ""))
    return next((kind for word, kind in _KINDS if s == word), None)


@dataclass(frozen=True, slots=True)
class CollectiveCall:
    """One collective kernel of one rank. group: the process group's name (else its ranks, else "world").
    group_size: members (None where not recorded). bytes: message size S (None where not recorded)."""

    kind: str
    group: str
    group_size: int | None
    start_ns: int
    dur_ns: int
    bytes: float | None


def _from_args(a: CollectiveArgs, world: int | None) -> tuple[str, str, int | None, float | None] | None:
    kind = collective_kind(a.name)
    if kind is None:
        return None
    size = DTYPE_BYTES.get(a.dtype or "")
    n = len(a.group_ranks) if a.group_ranks else a.group_size
    nelems = a.out_nelems if kind == "all_gather" else a.in_nelems
    if kind == "all_gather" and nelems is None and a.in_nelems is not None and n:
        nelems = a.in_nelems * n
    group = a.group_name or (",".join(map(str, a.group_ranks)) if a.group_ranks else "world")
    return kind, group, n or world, None if nelems is None or size is None else float(nelems * size)


def rank_collectives(table: EventTable, gpu: GpuView) -> tuple[CollectiveCall, ...]:
    """The collective kernels of one rank, in start order."""
    rows = gpu.rows[(gpu.ktype == KernelType.COMMUNICATION) & (gpu.kind == EventKind.KERNEL)]
    world = table.meta.world_size
    out = []
    for code, name, ts, dur in zip(table["coll"][rows].tolist(), table["name"][rows].tolist(),
                                   table["ts_ns"][rows].tolist(), table["dur_ns"][rows].tolist(), strict=True):
        if code >= 0:
            got = _from_args(table.colls[code], world)
        else:
            m = KERNEL_COLLECTIVE.match(table.names[name])
            kind = collective_kind(m.group(1)) if m else None
            got = None if kind is None else (kind, "world", world, None)
        if got is not None:
            out.append(CollectiveCall(got[0], got[1], got[2], ts, dur, got[3]))
    return tuple(sorted(out, key=lambda c: c.start_ns))


@dataclass(frozen=True, slots=True)
class CollectiveInstance:
    """One collective across the ranks whose traces hold it (``ranks``, in rank order; ``starts_ns``: their
    arrivals). skew_ns, last_rank, transfer_ns, algbw_gbps, busbw_gbps (GB/s = bytes per ns): see the module
    docstring; None where clocks are not aligned, the size is not recorded, or the type has no bus factor."""

    kind: str
    group: str
    ordinal: int
    ranks: tuple[int, ...]
    starts_ns: tuple[int, ...]
    bytes: float | None
    group_size: int | None
    skew_ns: int | None
    last_rank: int | None
    transfer_ns: int | None
    algbw_gbps: float | None
    busbw_gbps: float | None

    def to_dict(self) -> dict[str, Any]:
        return {k: (list(v) if isinstance(v, tuple) else v) for k in self.__slots__ for v in [getattr(self, k)]}


@dataclass(frozen=True, slots=True)
class RankArrivals:
    """One rank over the matched instances: how many it took part in, how often it arrived last (skew above
    the clock tolerance), and the time its kernels waited for the last arrival (sum and median, ns; None where
    no skew is measured)."""

    rank: int
    instances: int
    last: int
    wait_ns: int | None
    wait_median_ns: float | None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass(frozen=True, slots=True)
class SizeBucket:
    """Instances of one type whose message size lies in [bytes_lo, 2 x bytes_lo) (bytes_lo 0: size not
    recorded): count and medians of skew, transfer, algbw and busbw (None where none has the figure)."""

    kind: str
    bytes_lo: int
    count: int
    skew_median_ns: float | None
    transfer_median_ns: float | None
    algbw_median_gbps: float | None
    busbw_median_gbps: float | None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass(frozen=True, slots=True)
class CollectiveSet:
    """Collectives matched across a set of ranks' traces. clocks_aligned: None below two ranks with matched
    instances. last_rank / last_count: the rank that arrived last most often and how often (None: no skew
    measured). unmatched: instances held by one rank only, or whose types differ between ranks."""

    ranks: tuple[int, ...]
    instances: tuple[CollectiveInstance, ...]
    clocks_aligned: bool | None
    per_rank: tuple[RankArrivals, ...]
    by_size: tuple[SizeBucket, ...]
    last_rank: int | None
    last_count: int
    unmatched: int
    notes: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"ranks": list(self.ranks), "clocks_aligned": self.clocks_aligned, "last_rank": self.last_rank,
                "last_count": self.last_count, "unmatched": self.unmatched, "notes": list(self.notes),
                "per_rank": [r.to_dict() for r in self.per_rank], "by_size": [b.to_dict() for b in self.by_size],
                "instances": [i.to_dict() for i in self.instances]}


def _median(values: Sequence[float | None]) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.median(v)) if v else None


def _instance(kind: str, group: str, k: int, calls: list[tuple[int, CollectiveCall]],
              aligned: bool) -> CollectiveInstance:
    ranks = tuple(r for r, _ in calls)
    starts = tuple(c.start_ns for _, c in calls)
    first = calls[0][1]
    size, n = first.bytes, first.group_size
    if not aligned:
        return CollectiveInstance(kind, group, k, ranks, starts, size, n, None, None, None, None, None)
    last_at = int(np.argmax(starts))
    transfer = calls[last_at][1].dur_ns
    algbw = size / transfer if size is not None and transfer > 0 else None
    factor = BUS_FACTOR.get(kind)
    busbw = algbw * factor(n) if algbw is not None and factor is not None and n else None
    skew = max(starts) - min(starts)
    return CollectiveInstance(kind, group, k, ranks, starts, size, n, skew, ranks[last_at], transfer, algbw, busbw)


Matched = dict[tuple[str, int], list[tuple[int, CollectiveCall]]]
"""(group, ordinal) -> [(rank, call)] in rank order."""


MAX_SHIFT = 8
"""How many collectives apart two ranks' windows may start and still be aligned (:func:`_shift`)."""
SHIFT_PAIRS = 64
"""Pairs compared per offset: the windows' starts decide it, so a long sequence costs no more."""


def _shift(ref: Sequence[CollectiveCall], other: Sequence[CollectiveCall]) -> int:
    """The offset s (|s| <= MAX_SHIFT) at which ``other[i + s]`` is ``ref[i]``: the one pairing the most calls of
    one type and size, then (two points each) the most that also overlap in time; the smallest |s| on a tie
    (0 when the windows start at the same collective, or nothing tells)."""
    def score(s: int) -> int:
        total = 0
        for i in range(max(0, -s), min(len(ref), len(other) - s, max(0, -s) + SHIFT_PAIRS)):
            a, b = ref[i], other[i + s]
            if a.kind == b.kind and a.bytes == b.bytes:
                total += 1 + (min(a.start_ns + a.dur_ns, b.start_ns + b.dur_ns)
                              >= max(a.start_ns, b.start_ns) - CLOCK_TOLERANCE_NS)
        return total
    best = 2 * min(len(ref), len(other), SHIFT_PAIRS)
    if score(0) == best:  # the windows start together (the usual case): nothing to search
        return 0
    return max(range(-MAX_SHIFT, MAX_SHIFT + 1), key=lambda s: (score(s), -abs(s), s))


def _ordered(per_rank: Mapping[int, Sequence[CollectiveCall]]) -> tuple[Matched, int]:
    """The instances held by at least two ranks with one type, and how many instances could not be matched.
    Each group's calls are numbered in the lowest rank's order; another rank's window may start a few
    collectives earlier or later (:func:`_shift`)."""
    groups: dict[str, dict[int, list[CollectiveCall]]] = defaultdict(lambda: defaultdict(list))
    for rank in sorted(per_rank):
        for c in per_rank[rank]:
            groups[c.group][rank].append(c)
    by_key: Matched = defaultdict(list)
    for group, seqs in groups.items():
        ref = seqs[min(seqs)]
        for rank in sorted(seqs):
            s = 0 if seqs[rank] is ref else _shift(ref, seqs[rank])
            for j, c in enumerate(seqs[rank]):
                by_key[(group, j - s)].append((rank, c))
    unmatched = 0
    for key in list(by_key):
        calls = by_key[key]
        if len(calls) < 2 or len({c.kind for _, c in calls}) > 1:
            unmatched += len(calls) if len(calls) < 2 else 1
            del by_key[key]
    return by_key, unmatched


def match_collectives(per_rank: Mapping[int, Sequence[CollectiveCall]], *,
                      world_size: int | None = None) -> CollectiveSet:
    """Match each rank's collectives across ranks and measure every instance (see the module docstring)."""
    ranks = tuple(sorted(r for r, calls in per_rank.items() if calls))
    by_key, unmatched = _ordered(per_rank)
    notes: list[str] = []
    if len(ranks) < 2:
        notes.append(f"{len(per_rank[ranks[0]])} collectives on rank {ranks[0]} only: skew and transfer need the "
                     "traces of at least two ranks of a group" if ranks else "no collective kernels in the traces")
        return CollectiveSet(ranks, (), None, (), (), None, 0, unmatched, tuple(notes))
    broken = sum(min(c.start_ns + c.dur_ns for _, c in calls) < max(c.start_ns for _, c in calls) - CLOCK_TOLERANCE_NS
                 for calls in by_key.values())
    aligned = bool(by_key) and broken <= MISALIGNED_SHARE * len(by_key)
    if by_key and not aligned:
        notes.append(f"clocks not aligned across ranks: in {broken} of {len(by_key)} collectives a rank's kernel "
                     "ended before another rank's began (traces from different hosts, or windows that do not "
                     "overlap); skew, transfer and bandwidth are not given")
    if world_size and len(ranks) < world_size:
        notes.append(f"{len(ranks)} of {world_size} ranks' traces: skew and the last arrival are among these ranks")
    if unmatched:
        notes.append(f"{unmatched} collectives matched no other rank's (held by one rank, or of another type at "
                     "the same place in the group's order)")
    if any(calls[0][1].kind == "sendrecv" for calls in by_key.values()):
        notes.append("SendRecv kernels carry no size (older PyTorch): no bandwidth for them")
    insts = tuple(_instance(calls[0][1].kind, g, k, calls, aligned) for (g, k), calls in sorted(by_key.items()))
    return CollectiveSet(ranks, insts, aligned if by_key else None, _per_rank(insts, ranks), _by_size(insts),
                         *_last(insts), unmatched, tuple(notes))


def _last(insts: Sequence[CollectiveInstance]) -> tuple[int | None, int]:
    lasts = Counter(i.last_rank for i in insts
                    if i.last_rank is not None and i.skew_ns is not None and i.skew_ns > CLOCK_TOLERANCE_NS)
    if not lasts:
        return None, 0
    rank, count = min(lasts.items(), key=lambda kv: (-kv[1], kv[0]))
    return rank, count


def _per_rank(insts: Sequence[CollectiveInstance], ranks: Sequence[int]) -> tuple[RankArrivals, ...]:
    waits: dict[int, list[int]] = {r: [] for r in ranks}
    last: Counter[int] = Counter()
    count: Counter[int] = Counter()
    for i in insts:
        count.update(i.ranks)
        if i.skew_ns is None:
            continue
        top = max(i.starts_ns)
        for r, s in zip(i.ranks, i.starts_ns, strict=True):
            waits[r].append(top - s)
        if i.skew_ns > CLOCK_TOLERANCE_NS and i.last_rank is not None:
            last[i.last_rank] += 1
    return tuple(RankArrivals(r, count[r], last[r], sum(waits[r]) if waits[r] else None, _median(waits[r]))
                 for r in ranks)


def _by_size(insts: Sequence[CollectiveInstance]) -> tuple[SizeBucket, ...]:
    groups: dict[tuple[str, int], list[CollectiveInstance]] = defaultdict(list)
    for i in insts:
        lo = 0 if not i.bytes or i.bytes < 1 else 2 ** math.floor(math.log2(i.bytes))
        groups[(i.kind, lo)].append(i)
    return tuple(SizeBucket(kind, lo, len(g), _median([i.skew_ns for i in g]), _median([i.transfer_ns for i in g]),
                            _median([i.algbw_gbps for i in g]), _median([i.busbw_gbps for i in g]))
                 for (kind, lo), g in sorted(groups.items()))
