"""Turn chunks of parsed trace events (lists of dicts) into the NumPy columns of an EventTable.

Each column is extracted with one list comprehension over the chunk and converted to NumPy at once;
launch arguments are read only for the events that carry them (GPU events, kernels, operators).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from stepscope.model.events import CATEGORY_KINDS, EventKind, EventTable, TraceMeta

Array = npt.NDArray[Any]
_EMPTY: dict[str, Any] = {}
_FLOW_CATS = frozenset({"ac2g", "async_cpu_to_gpu"})
_ON_STREAM = np.asarray([EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET, EventKind.SYNC,
                         EventKind.GPU_USER_ANNOTATION], dtype=np.int8)


class NotTraceEvents(ValueError):
    """traceEvents holds something other than event objects."""


def _ints(values: list[Any], default: int = -1) -> Array:
    try:
        return np.asarray(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        fast = [v if v.__class__ is int else None for v in values]
        return np.asarray([_to_int(v, default) if f is None else f for v, f in zip(values, fast)], dtype=np.int64)


def _to_int(v: Any, default: int) -> int:
    if isinstance(v, bool):
        return default
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v == v:
        return int(v)
    if isinstance(v, str):
        try:
            return int(v, 0)
        except ValueError:
            return default
    return default


def _floats(values: list[Any], what: str) -> Array:
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise NotTraceEvents(f"{what} is not a number ({exc})") from None


def us_to_ns(us: Array) -> Array:
    """Float µs -> int64 ns without float64 rounding at epoch-sized values (ulp 256 ns at 1e18 ns)."""
    whole = np.floor(us)
    return whole.astype(np.int64) * 1000 + np.rint((us - whole) * 1000.0).astype(np.int64)


def _product(dims: Any) -> int:
    try:
        out = 1
        for d in dims:
            out *= d
        return int(out) if dims else -1
    except TypeError:
        return -1


class ChunkColumns:
    """Accumulates columns chunk by chunk; :meth:`finish` builds the sorted EventTable."""

    def __init__(self) -> None:
        self.name_codes: dict[str, int] = {}
        self.cat_codes: dict[str, int] = {}
        self.shape_codes: dict[str, int] = {}
        self.parts: dict[str, list[Array]] = defaultdict(list)
        self.flow_parts: dict[str, list[Array]] = defaultdict(list)
        self.dropped = 0

    def add(self, events: list[Any]) -> None:
        try:
            phs = [e.get("ph") for e in events]
        except AttributeError:
            raise NotTraceEvents("traceEvents holds a value that is not an event object") from None
        xs = [e for e, ph in zip(events, phs) if ph == "X"]
        self._add_flows([e for e, ph in zip(events, phs) if ph == "s" or ph == "f"])
        if xs:
            self._add_complete(xs)

    def _codes(self, table: dict[str, int], values: list[Any]) -> Array:
        try:
            return np.asarray([table.setdefault(v, len(table)) for v in values], dtype=np.int32)
        except TypeError:
            return np.asarray([table.setdefault(str(v), len(table)) for v in values], dtype=np.int32)

    def _add_complete(self, xs: list[dict[str, Any]]) -> None:
        ts = _floats([e.get("ts") for e in xs], "an event's ts")
        dur = _floats([e.get("dur") for e in xs], "an event's dur")
        ok = ~(np.isnan(ts) | np.isnan(dur))
        if not ok.all():
            self.dropped += int((~ok).sum())
            xs = [e for e, k in zip(xs, ok.tolist()) if k]
            ts, dur = ts[ok], dur[ok]
        cat = self._codes(self.cat_codes, [e.get("cat", "") for e in xs])
        kind_of = np.asarray([CATEGORY_KINDS.get(str(c).lower(), EventKind.OTHER) for c in self.cat_codes],
                             dtype=np.int8)
        kind = kind_of[cat]
        args = [e.get("args") or _EMPTY for e in xs]
        if not all(a.__class__ is dict for a in args):
            args = [a if isinstance(a, dict) else _EMPTY for a in args]
        n = len(xs)
        cols: dict[str, Array] = {
            "kind": kind, "cat": cat, "name": self._codes(self.name_codes, [e.get("name", "") for e in xs]),
            "ts_ns": us_to_ns(ts), "dur_ns": np.rint(dur * 1000.0).astype(np.int64),
            "pid": _ints([e.get("pid", -1) for e in xs]), "tid": _ints([e.get("tid", -1) for e in xs]),
            "correlation": _ints([a.get("correlation", -1) for a in args]),
            "external_id": _ints([a.get("External id", -1) for a in args]),
        }
        cols.update(self._gpu_columns(kind, args, n))
        cols["shape"] = self._shape_column(kind, args, n)
        for k, v in cols.items():
            self.parts[k].append(v)

    def _gpu_columns(self, kind: Array, args: list[dict[str, Any]], n: int) -> dict[str, Array]:
        out = {"stream": np.full(n, -1, np.int64), "device": np.full(n, -1, np.int32),
               "bytes": np.full(n, -1, np.int64), "grid_blocks": np.full(n, -1, np.int64),
               "block_threads": np.full(n, -1, np.int64)}
        for key in ("blocks_per_sm", "warps_per_sm", "occupancy_pct"):
            out[key] = np.full(n, np.nan, np.float32)
        gi = np.flatnonzero(np.isin(kind, _ON_STREAM))
        if not gi.size:
            return out
        ga = [args[i] for i in gi.tolist()]
        out["stream"][gi] = _ints([a.get("stream", -1) for a in ga])
        out["device"][gi] = _ints([a.get("device", -1) for a in ga])
        out["bytes"][gi] = _ints([a.get("bytes", -1) for a in ga])
        ki = np.flatnonzero(kind == EventKind.KERNEL)
        if ki.size:
            ka = [args[i] for i in ki.tolist()]
            nan = float("nan")
            for key, arg in (("blocks_per_sm", "blocks per SM"), ("warps_per_sm", "warps per SM"),
                             ("occupancy_pct", "est. achieved occupancy %")):
                out[key][ki] = _floats([a.get(arg, nan) for a in ka], arg)
            out["grid_blocks"][ki] = [_product(a.get("grid")) for a in ka]
            out["block_threads"][ki] = [_product(a.get("block")) for a in ka]
        return out

    def _shape_column(self, kind: Array, args: list[dict[str, Any]], n: int) -> Array:
        out = np.full(n, -1, np.int32)
        oi = np.flatnonzero(kind == EventKind.CPU_OP)
        dims = [args[i].get("Input Dims") for i in oi.tolist()]
        have = [i for i, d in zip(oi.tolist(), dims) if d is not None]
        if have:
            texts = [orjson.dumps(args[i]["Input Dims"]).decode() for i in have]
            out[np.asarray(have)] = self._codes(self.shape_codes, texts)
        return out

    def _add_flows(self, flows: list[dict[str, Any]]) -> None:
        flows = [f for f in flows if f.get("cat") in _FLOW_CATS]
        if not flows:
            return
        self.flow_parts["id"].append(_ints([f.get("id", -1) for f in flows]))
        self.flow_parts["is_start"].append(np.asarray([f.get("ph") == "s" for f in flows], dtype=bool))
        ts = _floats([f.get("ts") for f in flows], "a flow's ts")
        self.flow_parts["ts_ns"].append(us_to_ns(np.nan_to_num(ts, nan=-1.0)))
        self.flow_parts["pid"].append(_ints([f.get("pid", -1) for f in flows]))
        self.flow_parts["tid"].append(_ints([f.get("tid", -1) for f in flows]))

    def finish(self, meta: TraceMeta) -> EventTable:
        cols = {k: np.concatenate(v) for k, v in self.parts.items()} if self.parts else {}
        if not cols:
            table: EventTable = EventTable.empty_with(meta)
            return table
        negative = np.flatnonzero(cols["dur_ns"] < 0)
        if negative.size:
            first = list(self.name_codes)[int(cols["name"][negative[0]])]
            raise ValueError(f"{negative.size} events have a negative duration (first: {first!r}) "
                             "— the trace is corrupt; re-record it")
        order = np.argsort(cols["ts_ns"], kind="stable")
        cols = {k: v[order] for k, v in cols.items()}
        flows = {k: np.concatenate(v) for k, v in self.flow_parts.items()}
        _fill_correlation_from_flows(cols, flows)
        return EventTable(cols, names=tuple(map(str, self.name_codes)), cats=tuple(map(str, self.cat_codes)),
                          shapes=tuple(self.shape_codes), meta=meta, flows=flows)


def _fill_correlation_from_flows(cols: dict[str, Array], flows: dict[str, Array]) -> None:
    """GPU events without a correlation arg take the id of the flow that ends on them (pid, tid, ts)."""
    missing = np.flatnonzero(np.isin(cols["kind"], _ON_STREAM[:3]) & (cols["correlation"] < 0))
    if not missing.size or not flows:
        return
    ends = ~flows["is_start"]
    by_key = {k: i for k, i in zip(zip(flows["pid"][ends].tolist(), flows["tid"][ends].tolist(),
                                       flows["ts_ns"][ends].tolist()), flows["id"][ends].tolist())}
    keys = zip(cols["pid"][missing].tolist(), cols["tid"][missing].tolist(), cols["ts_ns"][missing].tolist())
    cols["correlation"][missing] = [by_key.get(k, -1) for k in keys]
