"""Columnar event table of one rank's profiler trace (Kineto / Chrome trace JSON).

One row per complete ("X") event. Times are int64 nanoseconds on the trace's own clock (the Kineto
timestamp in µs times 1000). Names, categories and input shapes are dictionary-encoded: an int32 code
column plus a tuple of distinct strings, so a trace of millions of events is a handful of NumPy arrays,
never millions of Python objects. -1 (or NaN for float columns) means "not recorded".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from stepscope.model.tables import Column, ColumnTable

Array = npt.NDArray[Any]


class EventKind(IntEnum):
    """Closed set of event kinds; the raw category string is kept in the ``cat`` column."""

    CPU_OP = 0
    USER_ANNOTATION = 1
    RUNTIME = 2
    KERNEL = 3
    MEMCPY = 4
    MEMSET = 5
    GPU_USER_ANNOTATION = 6
    PYTHON_FUNCTION = 7
    SYNC = 8
    OTHER = 9


EVENT_KIND_NAMES: tuple[str, ...] = tuple(k.name.lower() for k in EventKind)
"""EventKind codes decoded (index = code): "cpu_op", "user_annotation", ..., "other"."""

GPU_WORK_KINDS = (EventKind.KERNEL, EventKind.MEMCPY, EventKind.MEMSET)
"""Kinds that occupy a GPU stream (what HTA calls GPU kernels, cuda_sync excluded)."""

CATEGORY_KINDS: dict[str, EventKind] = {
    "cpu_op": EventKind.CPU_OP,
    "operator": EventKind.CPU_OP,
    "user_annotation": EventKind.USER_ANNOTATION,
    "cuda_runtime": EventKind.RUNTIME,
    "cuda_driver": EventKind.RUNTIME,
    "runtime": EventKind.RUNTIME,
    "hip_runtime": EventKind.RUNTIME,
    "kernel": EventKind.KERNEL,
    "gpu_memcpy": EventKind.MEMCPY,
    "memcpy": EventKind.MEMCPY,
    "gpu_memset": EventKind.MEMSET,
    "memset": EventKind.MEMSET,
    "gpu_user_annotation": EventKind.GPU_USER_ANNOTATION,
    "python_function": EventKind.PYTHON_FUNCTION,
    "cuda_sync": EventKind.SYNC,
    "mtia_runtime": EventKind.RUNTIME,
    "mtia_ccp_events": EventKind.KERNEL,
    "xpu_runtime": EventKind.RUNTIME,
    "privateuse1_runtime": EventKind.RUNTIME,
    "privateuse1_driver": EventKind.RUNTIME,
}
"""Lower-cased Kineto category -> kind. Unknown categories become OTHER and are reported, not dropped.
``mtia_ccp_events`` are MTIA on-device work (Kineto aliases the activity type to CONCURRENT_KERNEL)."""

DEVICE_WORK_SUFFIX = "_ccp_events"
"""Any other accelerator's on-device events named like MTIA's (``<device>_ccp_events``) are device work too."""


def category_kind(cat: str) -> EventKind:
    """The kind of a Kineto category: :data:`CATEGORY_KINDS`, else KERNEL for ``*_ccp_events``, else OTHER."""
    low = cat.lower()
    kind = CATEGORY_KINDS.get(low)
    if kind is not None:
        return kind
    return EventKind.KERNEL if low.endswith(DEVICE_WORK_SUFFIX) else EventKind.OTHER


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """One GPU from the trace's ``deviceProperties`` block. None: not recorded."""

    id: int
    name: str
    num_sms: int | None
    max_threads_per_sm: int | None
    warp_size: int | None
    total_memory_bytes: int | None
    compute_capability: str | None
    memory_clock_khz: int | None = None
    """``memoryClockRate`` where the trace records it (with the bus width: the peak memory bandwidth)."""
    memory_bus_bits: int | None = None
    """``memoryBusWidth`` where the trace records it."""


@dataclass(frozen=True, slots=True)
class TraceMeta:
    """What the trace says about itself, plus how stepscope read it."""

    path: str
    rank: int
    rank_source: str
    """Where ``rank`` came from: "distributedInfo", "file name", "given" or "default"."""
    world_size: int | None = None
    backend: str | None = None
    devices: tuple[DeviceInfo, ...] = ()
    schema_version: int | None = None
    dropped_events: int = 0
    """Complete events dropped at parsing because they lack a timestamp."""
    unknown_categories: tuple[str, ...] = ()
    wrong_type_values: int = 0
    """Values read as not measured because their type is wrong (an array where a number belongs)."""
    cut_strings: int = 0
    """Event names and categories cut to the reader's cap (``stepscope.traces.columns.MAX_NAME_CHARS``)."""

    def device(self, device_id: int) -> DeviceInfo | None:
        return next((d for d in self.devices if d.id == device_id), None)


@dataclass(frozen=True, slots=True)
class CollectiveArgs:
    """What PyTorch (2.x, ``record_param_comms``) wrote on a GPU communication kernel. None: not recorded.

    Kept once per distinct combination (the ``coll`` column is a code into ``EventTable.colls``).
    """

    name: str
    """"Collective name": allreduce, broadcast, allgather, _allgather_base, reduce_scatter, send, recv, ..."""
    in_nelems: int | None
    """"In msg nelems": elements this rank brings to the call."""
    out_nelems: int | None
    """"Out msg nelems": elements this rank receives."""
    group_size: int | None
    dtype: str | None
    """PyTorch scalar type name ("Float", "BFloat16", ...)."""
    group_ranks: tuple[int, ...] | None
    """Global ranks of the process group ("Process Group Ranks"); None where absent or recorded as "[]"."""
    group_name: str | None
    src_rank: int | None
    """Point-to-point: "Src Rank" (global), where recorded."""
    dst_rank: int | None
    """Point-to-point: "Dst Rank" (global), where recorded."""


def _nan() -> float:
    return float("nan")


class EventTable(ColumnTable):
    """One row per complete event of one rank, sorted by ``ts_ns``.

    ``names``/``cats``/``shapes`` are the string dictionaries of the code columns, ``colls`` the distinct
    :class:`CollectiveArgs` of communication kernels (``coll`` column, -1 elsewhere); ``meta`` the trace's
    self-description. ``flows`` holds the CPU->GPU flow pairs ("ac2g") as ``{id, start_ts_ns, end_ts_ns}``
    arrays when the trace has them.
    """

    SCHEMA: ClassVar[dict[str, Column]] = {
        "kind": Column("int8", "", "EventKind"),
        "name": Column("int32", "", "code into names"),
        "cat": Column("int32", "", "code into cats (raw category)"),
        "ts_ns": Column("int64", "ns", "start, trace clock"),
        "dur_ns": Column("int64", "ns", "duration"),
        "pid": Column("int64", "", "process id (GPU events: device), -1 if not an integer"),
        "tid": Column("int64", "", "thread id (GPU events: stream lane), -1 if not an integer"),
        "stream": Column("int64", "", "GPU stream, -1 for host events", -1),
        "device": Column("int32", "", "GPU device id, -1 for host events", -1),
        "correlation": Column("int64", "", "runtime <-> GPU correlation id", -1),
        "external_id": Column("int64", "", "operator <-> runtime/GPU external id", -1),
        "bytes": Column("int64", "bytes", "bytes moved by a memcpy / memset", -1),
        "bandwidth_gbps": Column("float64", "GB/s", "memcpy / memset: the trace's memory bandwidth (GB/s)", _nan()),
        "blocks_per_sm": Column("float32", "blocks", "kernel launch: blocks per SM", _nan()),
        "warps_per_sm": Column("float32", "warps", "kernel launch: warps per SM", _nan()),
        "occupancy_pct": Column("float32", "%", "kernel launch: est. achieved occupancy", _nan()),
        "grid_blocks": Column("int64", "blocks", "kernel launch: grid size (product of dims)", -1),
        "block_threads": Column("int64", "threads", "kernel launch: block size (product of dims)", -1),
        "shape": Column("int32", "", "code into shapes (operator input dims as JSON)", -1),
        "coll": Column("int32", "", "code into colls (communication kernels' collective args)", -1),
        "optype": Column("int32", "", "code into optypes (operator Input type and Concrete Inputs as JSON)", -1),
    }
    __slots__ = ("cats", "colls", "flows", "memory", "meta", "names", "optypes", "shapes", "waits")

    def __init__(self, cols: Mapping[str, Array], *, names: tuple[str, ...], cats: tuple[str, ...],
                 shapes: tuple[str, ...] = (), meta: TraceMeta, flows: Mapping[str, Array] | None = None,
                 colls: tuple[CollectiveArgs, ...] = (), optypes: tuple[str, ...] = (),
                 memory: Mapping[str, Array] | None = None, waits: Mapping[str, Array] | None = None) -> None:
        super().__init__(cols)
        self.names = names
        self.cats = cats
        self.shapes = shapes
        self.colls = colls
        self.optypes = optypes
        """``[Input type, Concrete Inputs]`` of operators as compact JSON (either null where not recorded)."""
        self.meta = meta
        self.flows: dict[str, Array] = dict(flows or {})
        self.memory: dict[str, Array] = dict(memory or {})
        """Allocation records (``[memory]`` instant events of ``profile_memory=True``), sorted by time:
        ``ts_ns``, ``pid``, ``tid``, ``bytes`` (signed change), ``allocated`` and ``reserved`` (the allocator's
        totals after it, -1 where not recorded), ``device`` (-1: CPU), ``device_type`` (0 CPU, 1 CUDA) and
        ``addr``; empty when the trace has none."""
        self.waits: dict[str, Array] = dict(waits or {})
        """The CUDA event a ``Stream Wait Event`` / ``Event Sync`` record waits for (its ``wait_on_stream`` and
        ``wait_on_cuda_event_record_corr_id`` args), a row per such record, sorted by ``correlation`` (the
        record's, which names its runtime call): ``stream`` and ``record_corr`` (the ``cudaEventRecord`` call's
        correlation), -1 where absent. A side table: few events carry these args."""
        tables: tuple[tuple[str, tuple[Any, ...]], ...] = (("name", names), ("cat", cats), ("shape", shapes),
                                                           ("coll", colls), ("optype", optypes))
        for col, table in tables:
            codes = self.cols[col]
            lowest = -1 if col in ("shape", "coll", "optype") else 0
            if len(codes) and (codes.max() >= len(table) or codes.min() < lowest):
                raise ValueError(f"EventTable.{col}: code outside its dictionary of {len(table)} strings")

    @classmethod
    def empty_with(cls, meta: TraceMeta) -> EventTable:
        """A table with no events (a trace whose traceEvents is empty)."""
        return cls({k: np.empty(0, dtype=c.dtype) for k, c in cls.SCHEMA.items()}, names=(), cats=(), meta=meta)

    def _copy_extra(self, new: Any) -> None:
        new.names, new.cats, new.shapes, new.meta, new.flows = self.names, self.cats, self.shapes, self.meta, self.flows
        new.colls, new.optypes, new.memory, new.waits = self.colls, self.optypes, self.memory, self.waits

    def code_dictionaries(self) -> dict[str, tuple[str, Sequence[str]]]:
        """kind -> its EventKind name (lower case), name/cat/shape -> their strings, coll -> collective name."""
        return {"kind": ("kind", EVENT_KIND_NAMES), "name": ("name", self.names), "cat": ("cat", self.cats),
                "shape": ("shape", self.shapes), "coll": ("collective", tuple(c.name for c in self.colls)),
                "optype": ("optype", self.optypes)}

    @property
    def end_ns(self) -> Array:
        return self.cols["ts_ns"] + self.cols["dur_ns"]

    def of_kind(self, *kinds: EventKind) -> EventTable:
        """Rows of the given kinds (a new table sharing the dictionaries)."""
        result: EventTable = self.take(np.isin(self.cols["kind"], np.asarray(kinds, dtype=np.int8)))
        return result

    def shape_value(self, code: int) -> Any:
        """An operator's Input Dims (shape code ``code``) as lists; None for -1."""
        return json.loads(self.shapes[code]) if code >= 0 else None

    def optype_value(self, code: int) -> tuple[Any, Any]:
        """An operator's (Input type, Concrete Inputs) (optype code ``code``); (None, None) for -1."""
        if code < 0:
            return None, None
        types, concrete = json.loads(self.optypes[code])
        return types, concrete

    def name_of(self, codes: Array) -> list[str]:
        return [self.names[c] for c in codes.tolist()]

    def name_lookup(self, values: Mapping[str, Any], default: Any, dtype: str) -> Array:
        """Per-row value from a per-name mapping, computed once per distinct name."""
        per_name = np.asarray([values.get(n, default) for n in self.names], dtype=dtype)
        return per_name[self.cols["name"]] if len(self.names) else np.empty(len(self), dtype=dtype)

    @property
    def has_gpu(self) -> bool:
        return bool(np.isin(self.cols["kind"], np.asarray(GPU_WORK_KINDS, dtype=np.int8)).any())


__all__ = ["CATEGORY_KINDS", "GPU_WORK_KINDS", "CollectiveArgs", "DeviceInfo", "EventKind", "EventTable", "TraceMeta"]
