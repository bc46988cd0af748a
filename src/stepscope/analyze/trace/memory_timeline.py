"""Memory over time from the trace's allocation records (``torch.profiler.profile(profile_memory=True)``).

Each ``[memory]`` record is one allocation (+bytes) or free (-bytes) with the allocator's totals after it:
"Total Allocated" (bytes held by live tensors) and "Total Reserved" (bytes the caching allocator holds from the
device; 0 for the CPU allocator). The series are these totals per device as the trace writes them, not sums
of our own, so they include memory allocated before the profiler started.

The peak is the first record with the largest "Total Allocated". Its owner is the innermost host operator (or
annotation) running on the allocating thread at that moment, and its top operator the outermost
``cpu_op`` around it (``aten::linear`` rather than the ``aten::empty`` it called). The memory live at the
peak is split by the top operator that allocated it: each allocation is paired with the next free of the same
address on the same device; one not freed by the peak is live there. Allocations made before the trace began
are not in it: ``live_at_peak`` sums to the peak minus what was allocated before the first record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope.analyze.trace.nesting import parents
from stepscope.analyze.trace.stepseries import SERIES_KEEP, decimated, distinct, keep_index
from stepscope.model.events import EventKind, EventTable

Array = npt.NDArray[Any]

TOP_OWNERS = 10
DEVICE_TYPES = {0: "cpu", 1: "cuda"}


@dataclass(frozen=True, slots=True)
class OwnerBytes:
    """Bytes live at the peak that were allocated under one top operator (``count`` allocations)."""

    name: str
    bytes: int
    count: int

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "bytes": self.bytes, "count": self.count}


@dataclass(frozen=True, slots=True)
class DeviceMemory:
    """One device's allocator over the trace. ``ts_ns``/``allocated``/``reserved``: the totals after each record
    (bytes; ``reserved`` None where the trace does not record it). ``peak_*``: the first record with the largest
    allocated total, its time, the reserved total then, and the owner (innermost host event), top operator and
    innermost annotation around it on the allocating thread (None where no host event encloses it).
    ``before_bytes``: allocated before the first record; ``live_at_peak``: the peak's bytes allocated within the
    trace by top operator, largest first (at most ``TOP_OWNERS``; the rest as "other"). ``points``: records
    before the series were cut to ``max_points`` (the smallest and largest of each stretch kept)."""

    device: int
    device_type: str
    ts_ns: Array
    allocated: Array
    reserved: Array | None
    allocations: int
    frees: int
    before_bytes: int
    peak_bytes: int
    peak_ts_ns: int
    peak_reserved_bytes: int | None
    peak_owner: str | None
    peak_top_op: str | None
    peak_annotation: str | None
    live_at_peak: tuple[OwnerBytes, ...]
    points: int

    def to_dict(self) -> dict[str, Any]:
        ts, alloc = decimated(self.ts_ns, self.allocated)
        out: dict[str, Any] = {k: getattr(self, k) for k in self.__slots__
                               if k not in ("ts_ns", "allocated", "reserved", "live_at_peak")}
        out["live_at_peak"] = [o.to_dict() for o in self.live_at_peak]
        out["series"] = {"ts_ns": ts, "allocated": [int(x) for x in alloc]}
        if self.reserved is not None:
            rts, res = decimated(self.ts_ns, self.reserved)
            out["series"]["reserved"] = {"ts_ns": rts, "bytes": [int(x) for x in res]}
        return out


@dataclass(frozen=True, slots=True)
class MemoryTimeline:
    """Allocator totals per device (CPU first, then devices by id); ``records``: allocation records read."""

    devices: tuple[DeviceMemory, ...]
    records: int

    def to_dict(self) -> dict[str, Any]:
        return {"devices": [d.to_dict() for d in self.devices], "records": self.records}


def memory_timeline(table: EventTable, *, max_points: int | None = SERIES_KEEP) -> MemoryTimeline | None:
    """Memory over time per device; None when the trace has no allocation records. ``max_points``: series longer
    than this are cut to about this many points (None: every record)."""
    mem = table.memory
    if not mem or not mem["ts_ns"].size:
        return None
    owner, top, note = _owners(table)
    # one int64 per (device type, device id): type in the high half, id (-1 for the CPU) in the low half
    key = (mem["device_type"].astype(np.int64) << 32) + (mem["device"].astype(np.int64) + 1)
    out = []
    for k in distinct(key).tolist():  # (np.unique would import numpy.ma)
        dtype, dev = k >> 32, (k & 0xFFFFFFFF) - 1
        sel = np.flatnonzero(key == k)
        out.append(_device(table, sel, dtype, dev, owner, top, note, max_points))
    return MemoryTimeline(devices=tuple(out), records=int(mem["ts_ns"].size))


def _device(table: EventTable, sel: Array, dtype: int, dev: int, owner: Array, top: Array, note: Array,
            max_points: int | None) -> DeviceMemory:
    mem = table.memory
    ts, delta, alloc = mem["ts_ns"][sel], mem["bytes"][sel], mem["allocated"][sel]
    reserved = mem["reserved"][sel]
    p = int(np.argmax(alloc))
    before = int(alloc[0] - delta[0])

    def name(rows: Array, i: int) -> str | None:
        r = int(rows[sel[i]])
        return table.names[table["name"][r]] if r >= 0 else None

    points = int(ts.size)
    keep = (distinct(np.concatenate([keep_index(alloc, max_points), keep_index(reserved, max_points)]))
            if max_points is not None else slice(None))  # (np.union1d would import numpy.ma)
    return DeviceMemory(
        device=dev, device_type=DEVICE_TYPES.get(dtype, str(dtype)), ts_ns=ts[keep], allocated=alloc[keep],
        reserved=reserved[keep] if (reserved >= 0).all() else None, allocations=int((delta > 0).sum()),
        frees=int((delta < 0).sum()), before_bytes=before, peak_bytes=int(alloc[p]), peak_ts_ns=int(ts[p]),
        peak_reserved_bytes=int(reserved[p]) if reserved[p] >= 0 else None, peak_owner=name(owner, p),
        peak_top_op=name(top, p), peak_annotation=name(note, p),
        live_at_peak=_live_at(table, sel, p, top), points=points)


def _live_at(table: EventTable, sel: Array, p: int, top: Array) -> tuple[OwnerBytes, ...]:
    """Allocations among ``sel`` (time order) made at or before position ``p`` and not freed by then, by top
    operator."""
    delta, addr = table.memory["bytes"][sel], table.memory["addr"][sel]
    pos = np.arange(sel.size)
    order = np.lexsort((pos, addr))  # by address, then time
    a, d = addr[order], delta[order]
    nxt_same = np.r_[a[1:] == a[:-1], False]
    freed_at = np.full(sel.size, sel.size, dtype=np.int64)  # position of the free that ends each allocation
    ends = nxt_same & (np.r_[d[1:], 0] < 0) & (d > 0)
    freed_at[order[ends]] = order[np.flatnonzero(ends) + 1]
    live = (delta > 0) & (pos <= p) & (freed_at > p)
    rows = top[sel[live]]
    codes = np.where(rows >= 0, table["name"][np.maximum(rows, 0)], -1)
    uniq, inv = np.unique(codes, return_inverse=True)
    sizes = np.bincount(inv.reshape(-1), weights=delta[live], minlength=uniq.size).astype(np.int64)
    counts = np.bincount(inv.reshape(-1), minlength=uniq.size)
    items = sorted(((int(s), int(n), "(no operator)" if c < 0 else table.names[c])
                    for c, s, n in zip(uniq.tolist(), sizes.tolist(), counts.tolist())), key=lambda x: (-x[0], x[2]))
    out = [OwnerBytes(name=nm, bytes=s, count=n) for s, n, nm in items[:TOP_OWNERS]]
    rest = items[TOP_OWNERS:]
    if rest:
        out.append(OwnerBytes(name="other", bytes=sum(s for s, _, _ in rest), count=sum(n for _, n, _ in rest)))
    return tuple(out)


def _owners(table: EventTable) -> tuple[Array, Array, Array]:
    """Per allocation record: the table rows of its innermost enclosing host event, outermost enclosing cpu_op
    and innermost enclosing user annotation on its thread (-1 where none)."""
    mem = table.memory
    kind = table["kind"]
    host = np.flatnonzero((kind == EventKind.CPU_OP) | (kind == EventKind.USER_ANNOTATION))
    n_host, n_mem = host.size, mem["ts_ns"].size
    none = np.full(n_mem, -1, dtype=np.int64)
    if not n_host:
        return none, none.copy(), none.copy()
    parent = parents(np.r_[table["pid"][host], mem["pid"]], np.r_[table["tid"][host], mem["tid"]],
                     np.r_[table["ts_ns"][host], mem["ts_ns"]], np.r_[table.end_ns[host], mem["ts_ns"]],
                     np.r_[np.zeros(n_host, dtype=bool), np.ones(n_mem, dtype=bool)])
    is_op = np.r_[kind[host] == EventKind.CPU_OP, np.zeros(n_mem, dtype=bool)]
    is_note = np.r_[kind[host] == EventKind.USER_ANNOTATION, np.zeros(n_mem, dtype=bool)]
    first = parent[n_host:]
    top, note = np.full(n_mem, -1, dtype=np.int64), np.full(n_mem, -1, dtype=np.int64)
    cur = first.copy()
    while (cur >= 0).any():  # walk up every chain at once: as many rounds as the deepest nesting
        ok = cur >= 0
        c = np.maximum(cur, 0)
        top = np.where(ok & is_op[c], c, top)
        note = np.where(ok & is_note[c] & (note < 0), c, note)
        cur = np.where(ok, parent[c], -1)

    def rows(idx: Array) -> Array:
        return np.where(idx >= 0, host[np.maximum(idx, 0)], -1)

    return rows(first), rows(top), rows(note)


__all__ = ["DEVICE_TYPES", "TOP_OWNERS", "DeviceMemory", "MemoryTimeline", "OwnerBytes", "memory_timeline"]
