"""Time by user annotation (``record_function`` ranges and the profiler's own), HolisticTraceAnalysis'
``get_gpu_user_annotation_breakdown`` and more.

Where the trace holds ``gpu_user_annotation`` events (Kineto's copy of each annotation onto the GPU stream,
spanning the annotation's GPU work) the breakdown is theirs: count, total, mean, min and max duration per name,
as HTA reports it. Where it does not, each CPU ``user_annotation`` range gets the GPU work launched inside it:
an item belongs to a range when its launching runtime call (paired by correlation id) starts within the range
on the same thread. Nested ranges each get the item, so totals of nested names overlap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope.analyze.trace.intervals import merge
from stepscope.analyze.trace.launches import launch_calls, pair_calls
from stepscope.analyze.trace.sets import kind_mask, unique_inverse
from stepscope.analyze.trace.stepseries import distinct
from stepscope.model.events import GPU_WORK_KINDS, EventKind, EventTable

Array = npt.NDArray[Any]

_THREAD_SHIFT = 44
"""Times relative to the trace start fit in 44 bits of ns (4.9 hours): thread index above them packs
(thread, time) into one sortable int64."""


@dataclass(frozen=True, slots=True)
class AnnotationTime:
    """One annotation name. ``count``/``total_ns``/``mean_ns``/``min_ns``/``max_ns``: its ranges' durations
    (on the GPU stream for GPU annotations, on the host otherwise). ``gpu_ns``: summed duration of the GPU work
    launched inside its host ranges and ``items`` how many (None / 0 for GPU annotations, whose span is the
    GPU time, and for a trace without launched GPU work)."""

    name: str
    count: int
    total_ns: int
    mean_ns: float
    min_ns: int
    max_ns: int
    gpu_ns: int | None
    items: int

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass(frozen=True, slots=True)
class Annotations:
    """Annotation breakdown of one rank, largest total first. ``on_gpu``: from ``gpu_user_annotation`` events
    (HTA's figures); otherwise from host ranges with the GPU work they launched."""

    on_gpu: bool
    rows: tuple[AnnotationTime, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"on_gpu": self.on_gpu, "rows": [r.to_dict() for r in self.rows]}


def gpu_annotations(table: EventTable) -> Annotations | None:
    """The breakdown by annotation; None when the trace has no annotations of either kind."""
    kind = table["kind"]
    on_gpu = np.flatnonzero(kind == EventKind.GPU_USER_ANNOTATION)
    if on_gpu.size:
        return Annotations(on_gpu=True, rows=_durations(table, on_gpu, None, None))
    host = np.flatnonzero(kind == EventKind.USER_ANNOTATION)
    if not host.size:
        return None
    gpu_ns, items = _launched_inside(table, host)
    return Annotations(on_gpu=False, rows=_durations(table, host, gpu_ns, items))


def has_gpu_work(a: Annotations) -> bool:
    """Whether the rows say how much GPU work ran inside (host ranges of a trace with launched GPU work)."""
    return any(r.gpu_ns is not None for r in a.rows)


def _durations(table: EventTable, rows: Array, gpu_ns: Array | None, items: Array | None) -> tuple[AnnotationTime, ...]:
    codes, inverse, counts = unique_inverse(table["name"][rows])
    dur = table["dur_ns"][rows]
    total = np.bincount(inverse, weights=dur, minlength=codes.size)
    lo = np.full(codes.size, np.iinfo(np.int64).max)
    hi = np.full(codes.size, np.iinfo(np.int64).min)
    np.minimum.at(lo, inverse, dur)
    np.maximum.at(hi, inverse, dur)
    out = [AnnotationTime(name=table.names[c], count=int(n), total_ns=int(t), mean_ns=float(t) / int(n),
                          min_ns=int(a), max_ns=int(b), gpu_ns=None if gpu_ns is None else int(gpu_ns[i]),
                          items=0 if items is None else int(items[i]))
           for i, (c, n, t, a, b) in enumerate(zip(codes.tolist(), counts.tolist(), total.tolist(), lo.tolist(),
                                                   hi.tolist()))]
    out.sort(key=lambda r: (-r.total_ns, r.name))
    return tuple(out)


def _launched_inside(table: EventTable, ann: Array) -> tuple[Array | None, Array | None]:
    """Per distinct annotation name (codes ascending): GPU time and items launched inside its ranges; None
    without launched GPU work in the trace (not measurable, rather than zero)."""
    names = distinct(table["name"][ann])  # (np.unique would import numpy.ma)
    gpu_ns, counts = np.zeros(names.size, dtype=np.int64), np.zeros(names.size, dtype=np.int64)
    work = np.flatnonzero(kind_mask(table["kind"], GPU_WORK_KINDS) & (table["correlation"] >= 0))
    call = pair_calls(table, work, launch_calls(table))
    work, call = work[call >= 0], call[call >= 0]
    if not work.size:
        return None, None
    t0 = int(min(table["ts_ns"][ann].min(), table["ts_ns"][call].min()))
    thread_keys = np.concatenate([_thread_key(table, ann), _thread_key(table, call)])
    _, thread = np.unique(thread_keys, return_inverse=True)
    thread = thread.reshape(-1).astype(np.int64)
    ann_thread, call_thread = thread[:ann.size], thread[ann.size:]
    span = int(max(table.end_ns[ann].max(), table["ts_ns"][call].max())) - t0
    if span >= 1 << _THREAD_SHIFT or thread.max() >= 1 << (62 - _THREAD_SHIFT):
        raise ValueError("trace too long to map annotations (over 4.9 hours)")
    at = (call_thread << _THREAD_SHIFT) + (table["ts_ns"][call] - t0)
    dur = table["dur_ns"][work]
    name_of = np.searchsorted(names, table["name"][ann])
    for i in range(names.size):  # few names; each a vectorised search of every launch
        mine = ann[name_of == i]
        base = ann_thread[name_of == i] << _THREAD_SHIFT
        starts, ends = merge(base + table["ts_ns"][mine] - t0, base + table.end_ns[mine] - t0)
        j = np.searchsorted(starts, at, side="right") - 1
        inside = (j >= 0) & (at < ends[np.maximum(j, 0)])
        gpu_ns[i], counts[i] = int(dur[inside].sum()), int(inside.sum())
    return gpu_ns, counts


def _thread_key(table: EventTable, rows: Array) -> Array:
    """One int per (pid, tid) pair (structured view, so any int64 values work)."""
    pair = np.empty(rows.size, dtype=[("pid", np.int64), ("tid", np.int64)])
    pair["pid"], pair["tid"] = table["pid"][rows], table["tid"][rows]
    return pair


__all__ = ["AnnotationTime", "Annotations", "gpu_annotations", "has_gpu_work"]
