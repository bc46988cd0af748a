"""Turn chunks of parsed trace events (lists of dicts) into the NumPy columns of an EventTable.

Each column is extracted with one list comprehension over the chunk and converted to NumPy at once;
launch arguments are read only for the events that carry them (GPU events, kernels, operators).
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Sequence
from itertools import compress
from math import prod
from operator import attrgetter
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from stepscope.model.events import CollectiveArgs, EventKind, EventTable, TraceMeta, category_kind
from stepscope.traces import typed
from stepscope.traces.notes import MAX_NAME_CHARS

Array = npt.NDArray[Any]
_EMPTY: dict[str, Any] = {}
_FLOW_CATS = frozenset({"ac2g", "async_cpu_to_gpu"})
_ON_STREAM = np.asarray([EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET, EventKind.SYNC,
                         EventKind.GPU_USER_ANNOTATION], dtype=np.int8)
_IS_ON_STREAM = np.isin(np.arange(len(EventKind)), _ON_STREAM)
"""Indexed by kind code: whether the kind is on a stream (a lookup, cheaper than ``np.isin`` per chunk)."""
_IS_GPU_WORK = np.isin(np.arange(len(EventKind)), _ON_STREAM[:3])


class NotTraceEvents(ValueError):
    """traceEvents holds something other than event objects."""


_I64 = 2**63
_CONTAINERS = (list, dict)
_MAX_US = 4.5e15
"""Largest |ts| or |dur| in µs kept (~142 years): ts + dur in ns then always fits int64; beyond is damage."""


class _DictArgs:
    """Reads launch arguments from parsed dicts (``orjson``)."""

    typed = False

    @staticmethod
    def col(args: Sequence[Any], key: str, default: Any) -> list[Any]:
        return [a.get(key, default) for a in args]

    @staticmethod
    def device_args(a: Any) -> bool:
        return _device_args(a)

    @staticmethod
    def coll_key(a: Any) -> tuple[Any, ...] | None:
        return tuple(a.get(k) for k in COLLECTIVE_ARGS) if "Collective name" in a else None


_ATTR = {"correlation": "correlation", "External id": "external_id", "stream": "stream", "device": "device",
         "bytes": "bytes", "blocks per SM": "blocks_per_sm", "warps per SM": "warps_per_sm",
         "est. achieved occupancy %": "occupancy", "memory bandwidth (GB/s)": "bandwidth", "grid": "grid",
         "block": "block", "Input Dims": "input_dims", "Bytes Delta": "mem_delta", "Bytes": "mem_bytes",
         "Total Allocated": "total_allocated", "Total Reserved": "total_reserved", "Device Id": "device_id",
         "Device Type": "device_type", "Addr": "addr",
         "Input type": "input_type", "Concrete Inputs": "concrete_inputs", "wait_on_stream": "wait_stream",
         "wait_on_cuda_event_record_corr_id": "wait_record"}
_COLL_ATTRS = attrgetter("coll_name", "in_nelems", "out_nelems", "group_size", "dtype", "group_ranks", "group_name",
                         "src_rank", "dst_rank")


class _StructArgs:
    """Reads launch arguments from :class:`stepscope.traces.typed.Args` Structs (same values, same defaults;
    absent integer args hold :data:`~stepscope.traces.typed.MISSING` until the column is built)."""

    typed = True

    @staticmethod
    def col(args: Sequence[Any], key: str, default: Any) -> list[Any]:
        return list(map(attrgetter(_ATTR[key]), args))

    @staticmethod
    def device_args(a: Any) -> bool:
        return all(v.__class__ is int and v != typed.MISSING for v in (a.device, a.stream, a.correlation))

    @staticmethod
    def coll_key(a: Any) -> tuple[Any, ...] | None:
        return None if a.coll_name is typed.UNSET else _COLL_ATTRS(a)


_PH = attrgetter("ph")
_CAT = attrgetter("cat")
_FLOW_PHS = frozenset({"s", "f"})
_FLOW_FIELDS = attrgetter("ph", "ts", "pid", "tid", "id")
_MEM_FIELDS = attrgetter("ts", "pid", "tid", "args")
MEMORY_EVENT = "[memory]"
"""Name (PyTorch 2.x; category in older traces) of the allocation records of ``profile_memory=True``."""
_TOP = tuple(map(attrgetter, ("ts", "dur", "cat", "name", "pid", "tid", "args")))
_Access = type[_DictArgs] | type[_StructArgs]


def _ints(values: Sequence[Any], default: int = -1) -> Array:
    """int64 column; values that are not integers (or do not fit int64) go through :func:`_to_int`
    (``default`` if hopeless)."""
    return _ints_counted(values, default)[0]


def _ints_counted(values: Sequence[Any], default: int = -1) -> tuple[Array, int]:
    """:func:`_ints`, and how many values were of the wrong type (an array or object: ``default``)."""
    try:
        return np.fromiter(values, dtype=np.int64, count=len(values)), 0
    except (TypeError, ValueError, OverflowError):
        wrong = sum(1 for v in values if v.__class__ in _CONTAINERS)
        return np.asarray([_to_int(v, default) for v in values], dtype=np.int64), wrong


def _to_int(v: Any, default: int) -> int:
    if isinstance(v, bool):
        return default
    if isinstance(v, float) and -_I64 < v < _I64:
        v = int(v)
    elif isinstance(v, str):
        try:
            v = int(v, 0)
        except ValueError:
            return default
    return v if isinstance(v, int) and -_I64 <= v < _I64 else default


def _floats(values: Sequence[Any]) -> Array:
    return _floats_counted(values)[0]


def _floats_counted(values: Sequence[Any]) -> tuple[Array, int]:
    """float64 column and how many values were of the wrong type: NaN (not measured) for an array, an object or
    a string that is not a number; ``null`` is NaN too (absent, not counted); numbers written as strings read."""
    try:
        return np.fromiter(values, dtype=np.float64, count=len(values)), 0
    except (TypeError, ValueError, OverflowError):
        pass
    out = np.empty(len(values), dtype=np.float64)
    wrong = 0
    for i, v in enumerate(values):  # a chunk holding a hostile value only: each value checked on its own
        if v is None:
            out[i] = np.nan
            continue
        try:
            out[i] = float(v) if v.__class__ not in _CONTAINERS else np.nan
        except (TypeError, ValueError, OverflowError):
            out[i] = np.nan
        wrong += v.__class__ in _CONTAINERS or (np.isnan(out[i]) and not _is_nan_text(v))
    return out, wrong


def _is_nan_text(v: Any) -> bool:
    """A float NaN, or a string that reads as one ("NaN"): a value, not a wrong type."""
    return (v.__class__ is float) or (v.__class__ is str and v.strip().lower().lstrip("+-") == "nan")


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


def value_text(v: Any) -> str:
    """A name or category that is not a string, read as its text (a value nested too deep for ``str``: a fixed
    text, the same every time)."""
    try:
        return str(v)
    except RecursionError:
        return "(a value nested too deep to show)"


def _shape_text(dims: Any) -> str:
    """Input Dims as compact JSON; a value orjson cannot write (an integer beyond 64 bits, read by the typed
    decoder) is damage and reads as no shape."""
    try:
        return orjson.dumps(dims).decode()
    except TypeError:
        return "null"


class ChunkColumns:
    """Accumulates columns chunk by chunk; :meth:`finish` builds the sorted EventTable.

    Speed comes from touching each event dict once: one list comprehension reads every top-level field
    of a chunk into tuples (the dicts are scattered in memory, so each extra pass costs a cache miss per
    event), ``zip(*rows)`` transposes them, and ``np.fromiter`` converts each field in C. Launch and
    copy arguments are read only for the GPU rows that can carry them.
    """

    def __init__(self) -> None:
        self.name_codes: dict[str, int] = {}
        self.cat_codes: dict[str, int] = {}
        self.shape_codes: dict[str, int] = {}
        self.coll_codes: dict[tuple[Any, ...], int] = {}
        self.optype_codes: dict[str, int] = {}
        self.parts: dict[str, list[Array]] = defaultdict(list)
        self.flow_parts: dict[str, list[Array]] = defaultdict(list)
        self.memory_parts: dict[str, list[Array]] = defaultdict(list)
        """Allocation records (``[memory]`` instant events), columns of ``EventTable.memory``."""
        self.wait_parts: dict[str, list[Array]] = defaultdict(list)
        """Sync records' waited-for CUDA events, columns of ``EventTable.waits``."""
        self.dropped = 0
        self.wrong_types = 0
        """Values read as not measured because of their type (``TraceMeta.wrong_type_values``)."""
        self.cut_strings = 0
        """Names and categories cut to :data:`MAX_NAME_CHARS` (``TraceMeta.cut_strings``)."""
        self.device_cats: set[str] = set()
        """Categories unknown by name whose events were taken as device work (they carry a device and stream)."""

    def add(self, events: list[Any]) -> None:
        """Add one chunk of events: parsed dicts or :class:`stepscope.traces.typed.Event` Structs."""
        if typed.is_typed(events):
            self._add_typed(events)
            return
        try:
            rows = [(e.get("ph"), e.get("ts"), e.get("dur"), e.get("cat", ""), e.get("name", ""), e.get("pid", -1),
                     e.get("tid", -1), e.get("args"), e.get("id", -1)) for e in events]
        except AttributeError:
            raise NotTraceEvents("traceEvents holds a value that is not an event object") from None
        xs = [r for r in rows if r[0] == "X"]
        if len(xs) < len(rows):
            flows = [(r[0], r[1], r[5], r[6], r[8]) for r in rows
                     if (r[0] == "s" or r[0] == "f") and r[3].__class__ is str and r[3] in _FLOW_CATS]
            if flows:
                self._add_flows(list(zip(*flows)))
            mem = [(r[1], r[5], r[6], r[7] if r[7].__class__ is dict else _EMPTY) for r in rows
                   if (r[0] == "i" or r[0] == "I") and (r[4] == MEMORY_EVENT or r[3] == MEMORY_EVENT)]
            if mem:
                self._add_memory(list(zip(*mem)), _DictArgs)
        del rows
        if xs:
            self._add_complete(list(zip(*xs)), _DictArgs)

    def _add_typed(self, events: list[Any]) -> None:
        """Structs: each column is read by ``attrgetter`` in C, straight from the Structs."""
        is_x = list(map("X".__eq__, map(_PH, events)))
        xs = list(compress(events, is_x))
        if len(xs) < len(events):  # flow ends and starts of the launch categories, selected without a Python loop
            rest = list(compress(events, map(operator.not_, is_x)))
            keep = map(operator.and_, map(_FLOW_PHS.__contains__, map(_PH, rest)),
                       map(_FLOW_CATS.__contains__, map(_CAT, rest)))
            flows = list(compress(rest, keep))
            if flows:
                self._add_flows(list(zip(*map(_FLOW_FIELDS, flows))))
            mem = [e for e in rest
                   if (e.ph == "i" or e.ph == "I") and (e.name == MEMORY_EVENT or e.cat == MEMORY_EVENT)]
            if mem:
                self._add_memory(list(zip(*map(_MEM_FIELDS, mem))), _StructArgs)
        if xs:
            self._add_complete([(), *(list(map(get, xs)) for get in _TOP)], _StructArgs)

    def _counted(self, col_wrong: tuple[Array, int]) -> Array:
        self.wrong_types += col_wrong[1]
        return col_wrong[0]

    def _int_arg(self, acc: _Access, args: Sequence[Any], key: str) -> Array:
        """int64 column of one launch argument, -1 where absent or of the wrong type (counted)."""
        out = self._counted(_ints_counted(acc.col(args, key, -1)))
        if acc.typed:
            out[out == typed.MISSING] = -1
        return out

    def _codes(self, table: dict[str, int], values: Sequence[Any], *, cap: bool = False) -> Array:
        """Codes of ``values`` in ``table`` (first-seen order); with ``cap``, strings past MAX_NAME_CHARS are cut
        (and counted)."""
        try:
            distinct = dict.fromkeys(values)  # distinct values in first-seen order: codes as setdefault gives
            if any(v.__class__ is not str for v in distinct):
                raise TypeError("names and categories are strings")
            if cap and any(len(v) > MAX_NAME_CHARS for v in distinct):
                raise TypeError("a string past the cap")
            for v in distinct:
                table.setdefault(v, len(table))
            return np.fromiter(map(table.__getitem__, values), dtype=np.int32, count=len(values))
        except TypeError:
            texts = [v if v.__class__ is str else value_text(v) for v in values]
            if cap:
                long = [len(t) > MAX_NAME_CHARS for t in texts]
                self.cut_strings += sum(long)
                texts = [t[:MAX_NAME_CHARS] if cut else t for t, cut in zip(texts, long)]
            return np.asarray([table.setdefault(t, len(table)) for t in texts], dtype=np.int32)

    def _add_complete(self, fields: list[Sequence[Any]], acc: _Access) -> None:
        ts_v, dur_v, cat_v, name_v, pid_v, tid_v, args_v = fields[1:8]
        ts = _floats(ts_v)  # a value that is not a number: NaN, so the event is dropped and counted
        dur = _floats(dur_v)
        ok = (np.abs(ts) < _MAX_US) & (np.abs(dur) < _MAX_US)  # NaN, inf and absurd values are dropped, counted
        if not ok.all():
            self.dropped += int((~ok).sum())
            keep = np.flatnonzero(ok).tolist()
            cat_v, name_v, pid_v, tid_v, args_v = ([col[i] for i in keep] for col in (cat_v, name_v, pid_v, tid_v,
                                                                                     args_v))
            ts, dur = ts[ok], dur[ok]
        cat = self._codes(self.cat_codes, cat_v, cap=True)
        kind_of = np.asarray([category_kind(str(c)) for c in self.cat_codes], dtype=np.int8)
        kind = kind_of[cat]
        args = args_v if acc.typed else [a if a.__class__ is dict else _EMPTY for a in args_v]
        self._device_work(kind, cat, args, acc)
        n = len(args)
        cols: dict[str, Array] = {
            "kind": kind, "cat": cat, "name": self._codes(self.name_codes, name_v, cap=True),
            "ts_ns": us_to_ns(ts), "dur_ns": np.rint(dur * 1000.0).astype(np.int64),
            "pid": self._counted(_ints_counted(pid_v)), "tid": self._counted(_ints_counted(tid_v)),
            "correlation": self._int_arg(acc, args, "correlation"),
            "external_id": self._int_arg(acc, args, "External id"),
        }
        cols.update(self._gpu_columns(kind, args, n, cols["tid"], acc))
        cols["shape"] = self._shape_column(kind, args, n, acc)
        cols["optype"] = self._optype_column(kind, args, n, acc)
        self._add_waits(kind, args, cols["correlation"], acc)
        for k, v in cols.items():
            self.parts[k].append(v)

    def _add_waits(self, kind: Array, args: Sequence[Any], corr: Array, acc: _Access) -> None:
        """Sync records with a ``wait_on_stream`` or ``wait_on_cuda_event_record_corr_id`` arg (a value that is
        not an integer reads as absent, uncounted: the compiled reader does the same)."""
        si = np.flatnonzero(kind == EventKind.SYNC)
        if not si.size:
            return
        sa = [args[i] for i in si.tolist()]
        got = {}
        for key, arg in (("stream", "wait_on_stream"), ("record_corr", "wait_on_cuda_event_record_corr_id")):
            vals = _ints(acc.col(sa, arg, -1))
            if acc.typed:
                vals[vals == typed.MISSING] = -1
            got[key] = vals
        keep = (got["stream"] >= 0) | (got["record_corr"] >= 0)
        if keep.any():
            self.wait_parts["correlation"].append(corr[si[keep]])
            for key, vals in got.items():
                self.wait_parts[key].append(vals[keep])

    def _device_work(self, kind: Array, cat: Array, args: Sequence[Any], acc: _Access) -> None:
        """Events of an unknown category that name a device, a stream and a correlation id are on-device work
        of an accelerator we have no name for (kind KERNEL), not "other"."""
        other = np.flatnonzero(kind == EventKind.OTHER)
        if not other.size:
            return
        hits = [i for i in other.tolist() if acc.device_args(args[i])]
        if hits:
            kind[hits] = EventKind.KERNEL
            names = list(self.cat_codes)
            self.device_cats.update(names[c] for c in np.unique(cat[hits]).tolist())

    def _gpu_columns(self, kind: Array, args: Sequence[Any], n: int, tid: Array, acc: _Access) -> dict[str, Array]:
        out: dict[str, Array] = {"stream": np.full(n, -1, np.int64), "device": np.full(n, -1, np.int32),
               "bytes": np.full(n, -1, np.int64), "grid_blocks": np.full(n, -1, np.int64),
               "block_threads": np.full(n, -1, np.int64), "coll": np.full(n, -1, np.int32)}
        for key in ("blocks_per_sm", "warps_per_sm", "occupancy_pct"):
            out[key] = np.full(n, np.nan, np.float32)
        out["bandwidth_gbps"] = np.full(n, np.nan, np.float64)
        gi = np.flatnonzero(_IS_ON_STREAM[kind])
        if not gi.size:
            return out
        ga = [args[i] for i in gi.tolist()]
        out["stream"][gi] = self._int_arg(acc, ga, "stream")
        no_stream = gi[(out["stream"][gi] < 0) & _IS_GPU_WORK[kind[gi]]]
        if no_stream.size:  # device work recorded without a stream arg: its trace row (tid) is its queue
            out["stream"][no_stream] = tid[no_stream]
        out["device"][gi] = self._int_arg(acc, ga, "device")
        out["bytes"][gi] = self._int_arg(acc, ga, "bytes")
        bw = self._counted(_floats_counted(acc.col(ga, "memory bandwidth (GB/s)", float("nan"))))
        out["bandwidth_gbps"][gi] = np.where(np.isfinite(bw), bw, np.nan)
        ki = np.flatnonzero(kind == EventKind.KERNEL)
        if ki.size:
            ka = [args[i] for i in ki.tolist()]
            nan = float("nan")
            for key, arg in (("blocks_per_sm", "blocks per SM"), ("warps_per_sm", "warps per SM"),
                             ("occupancy_pct", "est. achieved occupancy %")):
                vals = self._counted(_floats_counted(acc.col(ka, arg, nan)))
                out[key][ki] = np.where(np.abs(vals) < 3e38, vals, nan)  # beyond float32: not measured
            out["grid_blocks"][ki] = _products(acc.col(ka, "grid", None))
            out["block_threads"][ki] = _products(acc.col(ka, "block", None))
            comm = [(i, key) for i, a in zip(ki.tolist(), ka) for key in [acc.coll_key(a)] if key is not None]
            if comm:
                out["coll"][[i for i, _ in comm]] = [self._coll_code(key) for _, key in comm]
        return out

    def _coll_code(self, key: tuple[Any, ...]) -> int:
        try:
            return self.coll_codes.setdefault(key, len(self.coll_codes))
        except TypeError:  # an unhashable value (a list where a number or string was expected): not recorded
            key = tuple(v if v is None or isinstance(v, (str, int, float)) else None for v in key)
            return self.coll_codes.setdefault(key, len(self.coll_codes))

    def _shape_column(self, kind: Array, args: Sequence[Any], n: int, acc: _Access) -> Array:
        out = np.full(n, -1, np.int32)
        oi = np.flatnonzero(kind == EventKind.CPU_OP).tolist()
        dims = acc.col([args[i] for i in oi], "Input Dims", None)
        have = [(i, d) for i, d in zip(oi, dims) if d is not None]
        if have:
            texts = [_shape_text(d) for _, d in have]
            out[np.asarray([i for i, _ in have])] = self._codes(self.shape_codes, texts)
        return out

    def _optype_column(self, kind: Array, args: Sequence[Any], n: int, acc: _Access) -> Array:
        """Operators' ``[Input type, Concrete Inputs]`` as compact JSON (:func:`optype_text`), -1 where neither."""
        out = np.full(n, -1, np.int32)
        oi = np.flatnonzero(kind == EventKind.CPU_OP).tolist()
        sel = [args[i] for i in oi]
        pairs = zip(oi, acc.col(sel, "Input type", None), acc.col(sel, "Concrete Inputs", None), strict=True)
        have = [(i, t) for i, a, b in pairs if (a is not None or b is not None) and (t := optype_text(a, b))]
        if have:
            out[np.asarray([i for i, _ in have])] = self._codes(self.optype_codes, [t for _, t in have])
        return out

    def _add_memory(self, fields: list[tuple[Any, ...]], acc: _Access) -> None:
        """Allocation records' fields, one sequence each: ts, pid, tid, args. A record without a finite time is
        dropped (and counted); an absent figure is -1 (a delta: 0)."""
        ts_v, pid_v, tid_v, args = fields
        us = _floats(ts_v)
        ok = np.abs(us) < _MAX_US
        if not ok.all():
            self.dropped += int((~ok).sum())
        parts = self.memory_parts
        parts["ts_ns"].append(us_to_ns(us[ok]))
        parts["pid"].append(self._counted(_ints_counted(pid_v))[ok])
        parts["tid"].append(self._counted(_ints_counted(tid_v))[ok])
        delta = self._counted(_ints_counted(acc.col(args, "Bytes Delta", typed.MISSING), typed.MISSING))
        size = self._counted(_ints_counted(acc.col(args, "Bytes", typed.MISSING), typed.MISSING))
        delta = np.where(delta == typed.MISSING, size, delta)  # PyTorch 2.x writes "Bytes", 1.x "Bytes Delta"
        parts["bytes"].append(np.where(delta == typed.MISSING, 0, delta)[ok])
        for key, arg in (("allocated", "Total Allocated"), ("reserved", "Total Reserved"), ("device", "Device Id"),
                         ("device_type", "Device Type"), ("addr", "Addr")):
            vals = self._counted(_ints_counted(acc.col(args, arg, typed.MISSING), typed.MISSING))
            parts[key].append(np.where(vals == typed.MISSING, -1, vals)[ok])

    def _add_flows(self, fields: list[tuple[Any, ...]]) -> None:
        """Flow events' fields, one sequence each: ph, ts, pid, tid, id."""
        ph, ts, pid, tid, ids = fields
        self.flow_parts["id"].append(_ints(ids))
        self.flow_parts["is_start"].append(np.asarray([p == "s" for p in ph], dtype=bool))
        us = _floats(ts)
        us[~(np.abs(us) < _MAX_US)] = np.nan  # NaN, infinite or absurd: as absent (-1 µs), never an overflowing cast
        self.flow_parts["ts_ns"].append(us_to_ns(np.nan_to_num(us, nan=-1.0)))
        self.flow_parts["pid"].append(_ints(pid))
        self.flow_parts["tid"].append(_ints(tid))

    def finish(self, meta: TraceMeta) -> EventTable:
        """Concatenate and sort by start, one column at a time (peak: the columns plus one)."""
        if not self.parts:
            table: EventTable = EventTable.empty_with(meta)
            return table
        parts, self.parts = self.parts, defaultdict(list)
        dur = _joined(parts.pop("dur_ns"))
        negative = np.flatnonzero(dur < 0)
        if negative.size:
            first = list(self.name_codes)[int(_joined(parts["name"])[negative[0]])]
            raise ValueError(f"{negative.size} events have a negative duration (first: {first!r}) "
                             "— the trace is corrupt; re-record it")
        ts = _joined(parts.pop("ts_ns"))
        order = None if bool((ts[1:] >= ts[:-1]).all()) else np.argsort(ts, kind="stable")
        cols = {"ts_ns": ts, "dur_ns": dur}
        del ts, dur, negative  # cols holds the only reference: each column is freed once reordered
        for k in list(parts):
            cols[k] = _joined(parts.pop(k))
        if order is not None:
            for k in list(cols):
                cols[k] = cols[k][order]
        flows = {k: _joined(v) for k, v in self.flow_parts.items()}
        self.flow_parts = defaultdict(list)
        _fill_correlation_from_flows(cols, flows)
        memory = {k: _joined(v) for k, v in self.memory_parts.items()}
        self.memory_parts = defaultdict(list)
        if memory:
            order = np.argsort(memory["ts_ns"], kind="stable")
            memory = {k: v[order] for k, v in memory.items()}
        waits = sorted_waits({k: _joined(v) for k, v in self.wait_parts.items()})
        self.wait_parts = defaultdict(list)
        return EventTable(cols, names=tuple(map(str, self.name_codes)), cats=tuple(map(str, self.cat_codes)),
                          shapes=tuple(self.shape_codes), meta=meta, flows=flows,
                          colls=tuple(map(collective_args, self.coll_codes)), memory=memory,
                          optypes=tuple(self.optype_codes), waits=waits)


def sorted_waits(waits: dict[str, Array]) -> dict[str, Array]:
    """``EventTable.waits`` sorted by the sync record's correlation (empty: no such records)."""
    if not waits or not waits["correlation"].size:
        return {}
    order = np.argsort(waits["correlation"], kind="stable")
    return {k: v[order] for k, v in waits.items()}


def optype_text(types: Any, concrete: Any) -> str | None:
    """``[Input type, Concrete Inputs]`` as compact JSON; None where both are absent or a value cannot be written
    (an integer beyond 64 bits: damage, as for Input Dims)."""
    if types is None and concrete is None:
        return None
    try:
        return orjson.dumps([types, concrete]).decode()
    except TypeError:
        return None


def _joined(parts: list[Array]) -> Array:
    """The parts of a column as one array (a single part as it is: no copy)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


COLLECTIVE_ARGS = ("Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype", "Process Group Ranks",
                   "Process Group Name", "Src Rank", "Dst Rank")
"""Kineto args of a communication kernel kept in :class:`CollectiveArgs` (in its field order)."""


def collective_args(key: tuple[Any, ...]) -> CollectiveArgs:
    """The typed record of one interned tuple of :data:`COLLECTIVE_ARGS` values."""
    name, in_n, out_n, size, dtype, ranks, group, src, dst = key
    return CollectiveArgs(name=str(name), in_nelems=_opt_int(in_n), out_nelems=_opt_int(out_n),
                          group_size=_opt_int(size), dtype=dtype if isinstance(dtype, str) else None,
                          group_ranks=_rank_list(ranks), group_name=None if group is None else str(group),
                          src_rank=_opt_int(src), dst_rank=_opt_int(dst))


def _opt_int(v: Any) -> int | None:
    out = _to_int(v, -1) if v is not None else -1
    return out if out >= 0 else None


def _rank_list(v: Any) -> tuple[int, ...] | None:
    """ "[0, 1]" (or a list) -> (0, 1); None when absent, empty or not a list of integers."""
    if isinstance(v, str):
        try:
            v = orjson.loads(v)
        except orjson.JSONDecodeError:
            return None
    if not isinstance(v, list) or not v or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return None
    return tuple(v)


def _device_args(a: dict[str, Any]) -> bool:
    return all(a.get(k).__class__ is int for k in ("device", "stream", "correlation"))


def _products(dims: list[Any]) -> Array:
    """Product of each launch dimension list (grid or block), -1 where absent or not numbers."""
    try:
        return _ints([prod(d) if d.__class__ is list and d else -1 for d in dims])
    except TypeError:
        return np.asarray([_product(d) for d in dims], dtype=np.int64)


def _fill_correlation_from_flows(cols: dict[str, Array], flows: dict[str, Array]) -> None:
    """GPU events without a correlation arg take the id of the flow that ends on them (pid, tid, ts)."""
    missing = np.flatnonzero(_IS_GPU_WORK[cols["kind"]] & (cols["correlation"] < 0))
    if not missing.size or not flows:
        return
    ends = ~flows["is_start"]
    by_key = {k: i for k, i in zip(zip(flows["pid"][ends].tolist(), flows["tid"][ends].tolist(),
                                       flows["ts_ns"][ends].tolist()), flows["id"][ends].tolist())}
    keys = zip(cols["pid"][missing].tolist(), cols["tid"][missing].tolist(), cols["ts_ns"][missing].tolist())
    cols["correlation"][missing] = [by_key.get(k, -1) for k in keys]
