"""Columnar tables of a run's per-rank records (steps, regions, samples, metrics, communication).

Each table declares its columns (name -> dtype, unit) once; construction checks them, so a reader never
guesses. Optional measurements are float64 with NaN meaning "not measured" (never zero). String
columns are dictionary-encoded: an int32 code column plus the list of distinct strings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:  # annotations only: a trace's event table (model.events) needs no run records
    from stepscope.model.run import RankStream, Run

Array = npt.NDArray[Any]


class Phase(IntEnum):
    TRAIN = 0
    VALIDATION = 1


@dataclass(frozen=True, slots=True)
class Column:
    dtype: str
    unit: str
    doc: str
    fill: float | int = 0
    """Value used when a record batch lacks the column (NaN for optional measurements)."""


def _batch_columns(schema: Mapping[str, Column], batches: Sequence[Mapping[str, Sequence[Any]]]) -> dict[str, Array]:
    """Columns of ``schema`` from record batches; a batch without a column gets its fill value."""
    out: dict[str, Array] = {}
    for name, col in schema.items():
        parts = []
        for b in batches:
            vals = b.get(name)
            if vals is None:
                n = len(next(iter(b.values()))) if b else 0
                parts.append(np.full(n, col.fill, dtype=col.dtype))
            else:
                parts.append(np.asarray([col.fill if v is None else v for v in vals], dtype=col.dtype))
        out[name] = np.concatenate(parts) if parts else np.empty(0, dtype=col.dtype)
    return out


class ColumnTable:
    """Base of the columnar tables: a dict of equal-length NumPy arrays with a declared schema."""

    SCHEMA: ClassVar[dict[str, Column]] = {}
    __slots__ = ("cols",)

    def __init__(self, cols: Mapping[str, Array]) -> None:
        n: int | None = None
        checked: dict[str, Array] = {}
        for name, col in self.SCHEMA.items():
            if name not in cols:
                raise ValueError(f"{type(self).__name__}: missing column {name!r}")
            arr = np.asarray(cols[name], dtype=col.dtype)
            if arr.ndim != 1:
                raise ValueError(f"{type(self).__name__}.{name}: expected 1-D, got shape {arr.shape}")
            if n is None:
                n = len(arr)
            elif len(arr) != n:
                raise ValueError(f"{type(self).__name__}.{name}: length {len(arr)} != {n}")
            checked[name] = arr
        self.cols = checked

    @classmethod
    def empty(cls) -> Self:
        return cls({k: np.empty(0, dtype=c.dtype) for k, c in cls.SCHEMA.items()})

    @classmethod
    def from_batches(cls, batches: Sequence[Mapping[str, Sequence[Any]]]) -> Any:
        """Concatenate record batches (column name -> list); missing columns take the fill value."""
        return cls(_batch_columns(cls.SCHEMA, batches))

    def __len__(self) -> int:
        return len(next(iter(self.cols.values()))) if self.cols else 0

    def __getitem__(self, name: str) -> Array:
        return self.cols[name]

    def take(self, index: Array) -> Any:
        """Rows selected by a boolean mask or an index array, as a new table of the same type."""
        new = object.__new__(type(self))
        new.cols = {k: v[index] for k, v in self.cols.items()}
        self._copy_extra(new)
        return new

    def _copy_extra(self, new: Any) -> None:
        """Subclasses with dictionaries copy them here."""

    def to_pylist(self) -> list[dict[str, Any]]:
        names = list(self.cols)
        return [dict(zip(names, row, strict=True)) for row in zip(*(self.cols[n].tolist() for n in names), strict=True)]

    def code_dictionaries(self) -> dict[str, tuple[str, Sequence[str]]]:
        """Code columns and what they decode to: code column -> (decoded column name, its strings).

        A code of -1 (or any code outside the strings) decodes to missing. Subclasses with
        dictionary-encoded or enum columns list them here; :meth:`to_pandas` and :meth:`decoded` read it."""
        return {}

    def decoded(self, column: str) -> list[str | None]:
        """One code column decoded, one string (None where not recorded) per row."""
        _, strings = self.code_dictionaries()[column]
        return decode_codes(self.cols[column], strings)

    def to_pandas(self) -> Any:
        """A pandas DataFrame of the table: one column per declared column, in schema order, with code columns
        decoded into categoricals (``path_code`` -> ``path``, ``phase`` 0/1 -> "train"/"validation"). Units stay
        in the column names (``*_ns``: nanoseconds); NaN: not measured. Needs ``pip install 'stepscope[pandas]'``."""
        pd = import_pandas()
        dicts = self.code_dictionaries()
        out: dict[str, Any] = {}
        for name, arr in self.cols.items():
            if name in dicts:
                new, strings = dicts[name]
                out[new] = categorical(pd, arr, strings)
            else:
                out[name] = arr
        return pd.DataFrame(out, copy=False)


PANDAS_HINT = "pip install 'stepscope[pandas]'"
PANDAS_MISSING = f"DataFrames need pandas, which is not installed — {PANDAS_HINT}"


def import_pandas() -> Any:
    """pandas, or an ImportError whose one line says how to install it (pandas is an optional extra; the
    notebook API turns this into a UserError)."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError(PANDAS_MISSING) from None
    return pd


def decode_codes(codes: Array, strings: Sequence[str]) -> list[str | None]:
    """Codes into their strings; -1 (or a code outside ``strings``) becomes None."""
    n = len(strings)
    return [strings[c] if 0 <= c < n else None for c in np.asarray(codes).tolist()]


def categorical(pd: Any, codes: Array, strings: Sequence[str]) -> Any:
    """A pandas Categorical from codes into ``strings`` (duplicates merged; -1 or out of range: missing)."""
    cats = list(dict.fromkeys(strings))
    if len(cats) != len(strings):  # a dictionary with repeated strings: remap onto the distinct ones
        where = {s: i for i, s in enumerate(cats)}
        remap = np.asarray([where[s] for s in strings], dtype=np.int64)
    else:
        remap = np.arange(len(strings), dtype=np.int64)
    c = np.asarray(codes, dtype=np.int64)
    valid = (c >= 0) & (c < len(strings))
    mapped = np.where(valid, remap[np.where(valid, c, 0)] if len(strings) else -1, -1)
    return pd.Categorical.from_codes(mapped, categories=cats)


def _nan() -> float:
    return float("nan")


PHASE_NAMES: tuple[str, ...] = tuple(p.name.lower() for p in Phase)
"""Phase codes decoded: index = code ("train", "validation")."""


class StepTable(ColumnTable):
    """One row per step of one rank, in step order.

    A step ends when the step-marking source says so (the marking optimizer's step() returning, or the
    next ``stepscope.step()``); it starts where the previous one ended (step 0: at the first batch
    fetch or first forward). Phase columns are CPU wall-clock time inside the phase during the step,
    unless the stream's ``timing`` says ``cuda_events``. ``thread_cpu_ns`` / ``process_cpu_ns`` are CPU time
    (user + system) between the same boundaries: of the stepping thread, and of every thread of the process
    (DataLoader worker processes excluded); NaN in runs recorded before they existed, and for a step that did
    not start at a step boundary (the first one where no fetch or hook started it). NaN means not measured.
    """

    SCHEMA: ClassVar[dict[str, Column]] = {
        "index": Column("int64", "", "step index on this rank, from 0"),
        "start_ns": Column("int64", "ns", "wall clock (Unix epoch) at step start"),
        "end_ns": Column("int64", "ns", "wall clock (Unix epoch) at step end"),
        "samples": Column("float64", "samples", "samples consumed in the step", _nan()),
        "tokens": Column("float64", "tokens", "tokens consumed in the step", _nan()),
        "data_wait_ns": Column("float64", "ns", "time blocked fetching batches", _nan()),
        "forward_ns": Column("float64", "ns", "time in the model's forward", _nan()),
        "backward_ns": Column("float64", "ns", "time in autograd backward", _nan()),
        "optimizer_ns": Column("float64", "ns", "time in optimizer.step()", _nan()),
        "comm_ns": Column("float64", "ns", "time in torch.distributed calls", _nan()),
        "device_ns": Column("float64", "ns", "step time on the GPU by CUDA events", _nan()),
        "mem_allocated_peak_bytes": Column("float64", "bytes", "peak CUDA memory allocated", _nan()),
        "mem_reserved_peak_bytes": Column("float64", "bytes", "peak CUDA memory reserved", _nan()),
        "epoch": Column("int64", "", "epoch number, -1 when unknown", -1),
        "phase": Column("int8", "", "Phase: 0 train, 1 validation", 0),
        "thread_cpu_ns": Column("float64", "ns", "CPU time of the thread that marked the step, during the step",
                                _nan()),
        "process_cpu_ns": Column("float64", "ns", "CPU time of the whole process (all its threads, not its child "
                                 "processes), during the step", _nan()),
    }

    @property
    def duration_ns(self) -> Array:
        return self.cols["end_ns"] - self.cols["start_ns"]

    def code_dictionaries(self) -> dict[str, tuple[str, Sequence[str]]]:
        return {"phase": ("phase", PHASE_NAMES)}


class _DictTable(ColumnTable):
    """A table with one dictionary-encoded string column: ``<key>_code`` plus ``self.names``."""

    KEY: ClassVar[str] = "name"
    __slots__ = ("names",)

    def __init__(self, cols: Mapping[str, Array], names: Sequence[str] = ()) -> None:
        super().__init__(cols)
        self.names: list[str] = list(names)

    @classmethod
    def empty(cls) -> Any:
        return cls({k: np.empty(0, dtype=c.dtype) for k, c in cls.SCHEMA.items()}, [])

    @classmethod
    def from_batches(cls, batches: Sequence[Mapping[str, Sequence[Any]]]) -> Any:
        """Batches carry the key column as strings; they are interned here."""
        codes: dict[str, int] = {}
        recoded = []
        key = cls.KEY
        for b in batches:
            strs = b.get(key, [])
            nb = dict(b)
            nb[f"{key}_code"] = [codes.setdefault(s, len(codes)) for s in strs]
            nb.pop(key, None)
            recoded.append(nb)
        return cls(_batch_columns(cls.SCHEMA, recoded), list(codes))

    def _copy_extra(self, new: Any) -> None:
        new.names = self.names

    def code_dictionaries(self) -> dict[str, tuple[str, Sequence[str]]]:
        return {f"{self.KEY}_code": (self.KEY, self.names)}

    def column_strings(self) -> list[str]:
        """The key column decoded, one string per row."""
        names = self.names
        return [names[c] for c in self.cols[f"{self.KEY}_code"].tolist()]

    def mask_of(self, value: str) -> Array:
        try:
            code = self.names.index(value)
        except ValueError:
            return np.zeros(len(self), dtype=bool)
        mask: Array = self.cols[f"{self.KEY}_code"] == code
        return mask


class RegionTable(_DictTable):
    """One row per completed region instance. ``path`` is the nesting path, names joined by '/'."""

    KEY = "path"
    SCHEMA: ClassVar[dict[str, Column]] = {
        "path_code": Column("int32", "", "index into names: 'outer/inner' nesting path"),
        "step": Column("int64", "", "step index when the region started, -1 before the first step", -1),
        "start_ns": Column("int64", "ns", "wall clock (Unix epoch) at region entry"),
        "duration_ns": Column("int64", "ns", "CPU wall-clock time inside the region"),
        "depth": Column("int16", "", "nesting depth, 0 for a top-level region", 0),
    }


class MetricTable(_DictTable):
    """User-logged values (``stepscope.log``): one row per value."""

    SCHEMA: ClassVar[dict[str, Column]] = {
        "name_code": Column("int32", "", "index into names"),
        "step": Column("int64", "", "step index at logging time, -1 before the first step", -1),
        "t_ns": Column("int64", "ns", "wall clock (Unix epoch) when logged"),
        "value": Column("float64", "", "the logged value"),
    }


class CommTable(_DictTable):
    """One row per torch.distributed or mpi4py call made from Python on this rank."""

    KEY = "op"
    SCHEMA: ClassVar[dict[str, Column]] = {
        "op_code": Column("int32", "", "index into names: all_reduce, broadcast, send, barrier, ..."),
        "step": Column("int64", "", "step index at call time", -1),
        "start_ns": Column("int64", "ns", "wall clock (Unix epoch) at call"),
        "duration_ns": Column("int64", "ns", "time until the call (or its wait()) returned"),
        "bytes": Column("float64", "bytes", "payload bytes on this rank", _nan()),
        "peer": Column("int32", "", "peer rank for point-to-point, -1 otherwise", -1),
        "group_size": Column("int32", "", "ranks in the process group", -1),
        "seq": Column("int64", "", "per-rank sequence number of the call", -1),
        "tag": Column("int32", "", "MPI message tag of a point-to-point call (mpi4py), -1 otherwise", -1),
    }


@dataclass(frozen=True, slots=True)
class SampleTable:
    """System samples of one rank's process: ``t_ns`` plus one float64 column per metric (NaN = absent).

    Metric names: cpu_process_pct, cpu_system_pct, rss_bytes, mem_system_used_bytes,
    mem_system_total_bytes, disk_read_bps, disk_write_bps, net_recv_bps, net_sent_bps, threads,
    cpu_energy_j (RAPL, cumulative), and per GPU ``gpu{i}_util_pct``, ``gpu{i}_mem_used_bytes``,
    ``gpu{i}_mem_total_bytes``, ``gpu{i}_power_w``, ``gpu{i}_energy_j`` (cumulative),
    ``gpu{i}_sm_clock_mhz``, ``gpu{i}_temp_c``. A column exists only if its source was readable.
    """

    t_ns: Array
    columns: dict[str, Array] = field(default_factory=dict)

    @classmethod
    def from_batches(cls, batches: Sequence[Mapping[str, Sequence[Any]]]) -> SampleTable:
        names: list[str] = []
        for b in batches:
            names.extend(k for k in b if k != "t_ns" and k not in names)
        t = [np.asarray(b.get("t_ns", []), dtype="int64") for b in batches]
        cols: dict[str, Array] = {}
        for name in names:
            parts = []
            for b, tb in zip(batches, t, strict=True):
                v = b.get(name)
                parts.append(np.full(len(tb), np.nan) if v is None
                             else np.asarray([np.nan if x is None else x for x in v], dtype="float64"))
            cols[name] = np.concatenate(parts)
        return cls(np.concatenate(t) if t else np.empty(0, dtype="int64"), cols)

    def __len__(self) -> int:
        return len(self.t_ns)

    def to_pandas(self) -> Any:
        """A pandas DataFrame: ``t_ns`` then one float64 column per metric (NaN: absent). Needs pandas."""
        pd = import_pandas()
        return pd.DataFrame({"t_ns": self.t_ns, **self.columns}, copy=False)

    def gpu_indices(self) -> list[int]:
        out = sorted({int(k[3:].split("_", 1)[0]) for k in self.columns if k.startswith("gpu") and k[3:4].isdigit()})
        return out


@dataclass(frozen=True, slots=True)
class RankData:
    """Everything stored for one rank stream."""

    stream: RankStream
    steps: StepTable
    regions: RegionTable
    samples: SampleTable
    metrics: MetricTable
    comm: CommTable
    model: dict[str, Any] | None = None
    """Model summary: see collect/torch/modelsummary.py for its fields."""
    notes: tuple[str, ...] = ()
    """Warnings raised by collection on this rank (a hook that failed and was turned off, ...)."""
    extra: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Other record kinds by kind name (dataloader configs, flops, ...), in write order."""


@dataclass(frozen=True, slots=True)
class RunData:
    """A run loaded from the store: the manifest and one RankData per rank stream, by rank."""

    run: Run
    ranks: tuple[RankData, ...]
    path: str
    """The run directory."""
    artifacts: tuple[str, ...] = ()
    """Artifact paths relative to the run directory (traces/rank0.json.gz, report.html, ...)."""

    def rank(self, rank: int) -> RankData:
        for r in self.ranks:
            if r.stream.rank == rank:
                return r
        raise KeyError(rank)
