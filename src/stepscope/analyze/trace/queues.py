"""Launch-queue length per GPU stream, HolisticTraceAnalysis' definition (``TraceCounters``).

The queue of a stream holds the work launched on it that has not started yet:

- +1 at the start of the runtime call that launched an item (paired by correlation id);
- -1 when the item (kernel, memcpy, memset) starts on the device.

Only items whose launching call is in the trace count. A call that launched several items (a CUDA graph launch) is
one entry, on its first item's stream, that leaves when that item starts: the launch queue holds the graph launch
as one command (counting each of its kernels put a100_8rank_diff/test_rank3's stream 7 at 1,338 pending, past the
queue's 1,024; HTA, which counts no graph launch, sees 1,013). At equal times an item's start is counted before a
launch (HTA sorts unstably, so its intermediate values at such ties are arbitrary; the value after the tie is
the same). The summary is HTA's: statistics over the values after each change (one per launch and one per
start), so a busy stretch with many changes weighs more than a long quiet one; the time-weighted mean is given
beside it. Time blocked on a full queue: how long the length stayed at or above ``FULL_QUEUE`` (HTA's 1024,
CUDA's launch-queue depth per stream), measured from the series' own change points.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope.analyze.trace.launches import launch_calls, pair_calls
from stepscope.analyze.trace.sets import kind_mask
from stepscope.analyze.trace.stepseries import (
    SERIES_KEEP,
    changes,
    collapsed,
    decimated,
    describe,
    group_slices,
    keep_index,
    time_weighted_mean,
)
from stepscope.model.events import GPU_WORK_KINDS, EventTable

Array = npt.NDArray[Any]

FULL_QUEUE = 1024
"""HTA's ``CUDA_MAX_LAUNCH_QUEUE_PER_STREAM``: pending launches at which a stream's queue is full."""
HTA_QUEUE_CALLS = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cudaMemcpyAsync", "cudaMemsetAsync",
                   "runFunction - job_prep_and_submit_for_execution", "hipLaunchKernel", "hipExtModuleLaunchKernel",
                   "hipMemsetAsync", "hipMemcpyAsync", "hipMemcpyWithStream")
"""The calls HTA 0.5 counts as launches for the queue length (graph launches are not among them)."""


@dataclass(frozen=True, slots=True)
class StreamQueue:
    """One stream's launch queue. ``ts_ns``/``length``: the step function (one point per distinct time, the
    length after every change at that time, trace clock). Summary fields are HTA's (pandas ``describe`` over
    the value after each launch and each start: ``changes`` of them); ``time_mean``: the mean over time between
    the first and the last change (None if they coincide). ``full_ns``: time at or above the threshold;
    ``full_pct``: that time as a share of the trace's span (first event start to last event end). ``points``:
    the step function's points before it was cut to ``max_points`` (first, smallest and largest per stretch kept)."""

    stream: int
    ts_ns: Array
    length: Array
    changes: int
    mean: float
    std: float
    min: float
    p25: float
    p50: float
    p75: float
    max: float
    time_mean: float | None
    full_ns: int
    full_pct: float | None
    points: int

    def to_dict(self) -> dict[str, Any]:
        ts, v = decimated(self.ts_ns, self.length)
        out = {k: getattr(self, k) for k in self.__slots__ if k not in ("ts_ns", "length")}
        out["series"] = {"ts_ns": ts, "length": [int(x) for x in v]}
        return out


@dataclass(frozen=True, slots=True)
class QueueLengths:
    """Launch-queue length of every stream with launched work (ascending stream id). ``launches``: queue entries
    (launching calls in the trace; work launched by calls outside it is in no queue);
    ``threshold``: the full-queue length used; ``calls``: None for every runtime call that launched work, else
    the call names counted (HTA's selection: :data:`HTA_QUEUE_CALLS`)."""

    streams: tuple[StreamQueue, ...]
    launches: int
    threshold: int
    calls: tuple[str, ...] | None

    def to_dict(self) -> dict[str, Any]:
        return {"streams": [s.to_dict() for s in self.streams], "launches": self.launches, "threshold": self.threshold,
                "calls": list(self.calls) if self.calls is not None else None}


def queue_lengths(table: EventTable, *, threshold: int = FULL_QUEUE, calls: Collection[str] | None = None,
                  max_points: int | None = SERIES_KEEP) -> QueueLengths | None:
    """The launch-queue length series and summary per stream; None without launched GPU work.

    calls: count only launches by runtime calls of these names (``HTA_QUEUE_CALLS`` reproduces HTA); by default
    every runtime call that launched GPU work counts (a graph launch: one entry until its first item starts).
    max_points: series longer than this are cut to about this many points (None: every change).
    """
    items = np.flatnonzero(kind_mask(table["kind"], GPU_WORK_KINDS) & (table["correlation"] >= 0))
    call = pair_calls(table, items, launch_calls(table, calls))
    hit = call >= 0
    items, call = items[hit], call[hit]
    if not items.size:
        return None
    call, first = np.unique(call, return_index=True)  # one entry per call: its first item (rows sorted by start)
    items = items[first]
    stream = table["stream"][items]
    n = items.size
    group = np.concatenate([stream, stream])
    ts = np.concatenate([table["ts_ns"][call], table["ts_ns"][items]])
    delta = np.concatenate([np.ones(n, dtype=np.int64), -np.ones(n, dtype=np.int64)])
    del items, call, stream
    ch = changes(group, ts, delta)
    del group, ts, delta  # ch holds them sorted: the loop below works on its slices (views)
    span = _span_ns(table)
    out = []
    for s, sl in group_slices(ch.group):
        values = ch.value[sl]
        t, v = collapsed(ch, sl)
        full = int(np.diff(t)[v[:-1] >= threshold].sum()) if t.size > 1 else 0
        d = describe(values)
        points, time_mean = int(t.size), time_weighted_mean(t, v)
        if max_points is not None:
            sel = keep_index(v, max_points)
            t, v = t[sel], v[sel]
        out.append(StreamQueue(
            stream=int(s), ts_ns=t, length=v, changes=int(values.size), mean=d["mean"], std=d["std"],
            min=d["min"], p25=d["p25"], p50=d["p50"], p75=d["p75"], max=d["max"],
            time_mean=time_mean, full_ns=full, full_pct=100.0 * full / span if span else None, points=points))
    return QueueLengths(streams=tuple(out), launches=int(n), threshold=threshold,
                        calls=tuple(calls) if calls is not None else None)


SPAN_BLOCK = 1 << 16
"""Rows whose ends are summed at a time for the trace's span (no column-sized temporary)."""


def _span_ns(table: EventTable) -> int:
    if not len(table):
        return 0
    ts, dur = table["ts_ns"], table["dur_ns"]
    end = max(int((ts[i:i + SPAN_BLOCK] + dur[i:i + SPAN_BLOCK]).max()) for i in range(0, len(table), SPAN_BLOCK))
    return end - int(ts.min())


__all__ = ["FULL_QUEUE", "HTA_QUEUE_CALLS", "QueueLengths", "StreamQueue", "queue_lengths"]
