"""Memory-copy bandwidth over time per copy kind (HtoD, DtoH, DtoD, memset, ...), HolisticTraceAnalysis'
definition (``TraceCounters.get_memory_bw_time_series``).

Each memcpy / memset adds its bandwidth while it runs: +bw at its start, -bw at its end, summed per kind, so
two copies of one kind that overlap add up. An item's bandwidth is the trace's own "memory bandwidth (GB/s)"
(Kineto divides the bytes by the duration in ns, before the trace rounds times to µs); where the trace has no
such arg it is bytes / duration (1 GB = 10^9 bytes); an item with neither is left out. A copy of duration 0 is
taken to last 1 µs (as HTA). The kind is the name's first 11 characters ("Memcpy HtoD") for a memcpy,
"Memset" for a memset, "Memcpy Unknown" for a memcpy not named "Memcpy ...".

The summary is HTA's: statistics over the series' values above zero, one per change. Where every copy of a kind
has ended the value is exactly 0 (HTA's running float sum leaves residues like 1e-13 GB/s, which it counts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from stepscope.analyze.trace.intervals import merge
from stepscope.analyze.trace.stepseries import (
    SERIES_KEEP,
    changes,
    collapsed,
    decimated,
    describe,
    group_slices,
    keep_index,
)
from stepscope.model.events import EventKind, EventTable

Array = npt.NDArray[Any]

ZERO_DURATION_NS = 1_000
"""A copy recorded with duration 0 is taken to last this long (HTA rounds it up to 1 µs)."""


@dataclass(frozen=True, slots=True)
class CopyBandwidth:
    """One copy kind. ``ts_ns``/``gbps``: the summed bandwidth of its running copies as a step function (one
    point per distinct time, trace clock, GB/s = 10^9 bytes/s). Summary (HTA's): count, mean, std, min,
    quartiles and max of the values above zero at each change. ``items``: copies counted; ``bytes``: their
    bytes (-1 values left out); ``busy_ns``: time with at least one copy of this kind running (union);
    ``average_gbps``: bytes / busy time (None without bytes). ``points``: the step function's points before it
    was cut to ``max_points``."""

    kind: str
    ts_ns: Array
    gbps: Array
    items: int
    bytes: int
    busy_ns: int
    average_gbps: float | None
    count: int
    mean: float
    std: float
    min: float
    p25: float
    p50: float
    p75: float
    max: float
    points: int

    def to_dict(self) -> dict[str, Any]:
        ts, v = decimated(self.ts_ns, self.gbps)
        out = {k: getattr(self, k) for k in self.__slots__ if k not in ("ts_ns", "gbps")}
        out["series"] = {"ts_ns": ts, "gbps": v}
        return out


@dataclass(frozen=True, slots=True)
class Bandwidth:
    """Copy bandwidth of one rank per kind (sorted by kind). ``from_bytes``: copies whose bandwidth was
    computed from bytes / duration (the trace had no bandwidth arg for them)."""

    kinds: tuple[CopyBandwidth, ...]
    from_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {"kinds": [k.to_dict() for k in self.kinds], "from_bytes": self.from_bytes}


def copy_kind_names(names: tuple[str, ...], is_memset: Array) -> list[str]:
    """HTA's copy kind of each distinct name (``is_memset`` per name code)."""
    out = []
    for n, memset in zip(names, is_memset.tolist()):
        if memset or n.startswith("Memset"):
            out.append("Memset")
        else:
            out.append(n[:11] if n.startswith("Memcpy") else "Memcpy Unknown")
    return out


def bandwidth(table: EventTable, *, max_points: int | None = SERIES_KEEP) -> Bandwidth | None:
    """Bandwidth series and summary per copy kind; None when no copy has a bandwidth or bytes. ``max_points``:
    series longer than this are cut to about this many points (None: every change)."""
    kind = table["kind"]
    rows = np.flatnonzero((kind == EventKind.MEMCPY) | (kind == EventKind.MEMSET))
    if not rows.size:
        return None
    dur = table["dur_ns"][rows]
    nbytes = table["bytes"][rows]
    bw = table["bandwidth_gbps"][rows].copy()
    derived = np.isnan(bw) & (nbytes > 0) & (dur > 0)
    bw[derived] = nbytes[derived] / dur[derived]  # bytes per ns = GB/s
    keep = ~np.isnan(bw)
    rows, dur, nbytes, bw = rows[keep], dur[keep], nbytes[keep], bw[keep]
    if not rows.size:
        return None
    codes, inverse = np.unique(table["name"][rows], return_inverse=True)
    memset_code = np.zeros(codes.size, dtype=bool)
    np.logical_or.at(memset_code, inverse, kind[rows] == EventKind.MEMSET)
    labels = copy_kind_names(tuple(table.names[c] for c in codes.tolist()), memset_code)
    label_names, label_of_code = np.unique(np.asarray(labels, dtype=object), return_inverse=True)
    group = label_of_code.reshape(-1)[inverse]
    ts = table["ts_ns"][rows]
    end = ts + np.where(dur == 0, ZERO_DURATION_NS, dur)
    n = rows.size
    ch = changes(np.concatenate([group, group]), np.concatenate([ts, end]), np.concatenate([bw, -bw]),
                 count=np.concatenate([np.ones(n, dtype=np.int64), -np.ones(n, dtype=np.int64)]))
    out = []
    for g, sl in group_slices(ch.group):
        mine = group == g
        t, v = collapsed(ch, sl)
        d = describe(ch.value[sl][ch.value[sl] > 0])
        b = nbytes[mine]
        starts, ends = merge(ts[mine], end[mine])
        busy = int((ends - starts).sum())
        total = int(b[b > 0].sum())
        points = int(t.size)
        if max_points is not None:
            sel = keep_index(v, max_points)
            t, v = t[sel], v[sel]
        out.append(CopyBandwidth(
            kind=str(label_names[g]), ts_ns=t, gbps=v, items=int(mine.sum()), bytes=total, busy_ns=busy,
            average_gbps=total / busy if total and busy else None, count=int(d["count"]), mean=d["mean"],
            std=d["std"], min=d["min"], p25=d["p25"], p50=d["p50"], p75=d["p75"], max=d["max"], points=points))
    return Bandwidth(kinds=tuple(out), from_bytes=int(derived[keep].sum()))


__all__ = ["ZERO_DURATION_NS", "Bandwidth", "CopyBandwidth", "bandwidth", "copy_kind_names"]
