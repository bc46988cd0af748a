"""The declared schema of every exported table: column name -> type, the same for every run.

Types: ``int64`` / ``int32`` / ``int16`` / ``int8``, ``float64`` (NaN or empty: not measured), ``string``,
``bool`` and ``timestamp`` (a Unix-epoch wall-clock instant in ns; Arrow ``timestamp[ns, tz=UTC]`` in
Parquet, the integer ns in CSV and JSON). Durations stay integers (or float64 where the measurement is
optional) in nanoseconds, named ``*_ns``: every reader handles int64, few handle Arrow's duration type.

A column that a run did not measure keeps its declared type and holds nulls; a table a run has none of
(no profiled window: no kernels) is written with no rows. The run's system samples have one column per
metric the sampler knows (:data:`SAMPLE_METRICS`) plus, per GPU the run saw, ``gpu<i>_*`` columns (so two
runs on the same hardware have the same schema). Tables not declared here (``stacks``) keep the types
of their values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stepscope.analyze.trace.steps import CATEGORIES
from stepscope.model.tables import (
    ColumnTable,
    CommTable,
    MetricTable,
    RegionTable,
    StepTable,
)

Columns = dict[str, list[Any]]
Schema = dict[str, str]

TYPES = ("int8", "int16", "int32", "int64", "float64", "string", "bool", "timestamp")


def _from_model(table: type[ColumnTable], *, derived: Mapping[str, str] | None = None) -> Schema:
    """A model table's declared columns: code columns become their decoded string column, Unix-epoch ns
    columns timestamps; ``rank`` first."""
    out: Schema = {"rank": "int64"}
    for name, col in table.SCHEMA.items():
        if name.endswith("_code"):
            out[name.removesuffix("_code")] = "string"
        elif col.unit == "ns" and "Unix epoch" in col.doc:
            out[name] = "timestamp"
        else:
            out[name] = col.dtype
    out.update(derived or {})
    return out


SAMPLE_METRICS = ("cpu_process_pct", "cpu_system_pct", "rss_bytes", "mem_system_used_bytes", "mem_system_total_bytes",
                  "disk_read_bps", "disk_write_bps", "net_recv_bps", "net_sent_bps", "threads", "cpu_energy_j",
                  "run_queue_wait_pct", "main_thread_cpu_pct", "main_thread_slices", "load_avg_1m")
"""The host metrics of a run's system samples (collect/system/sampler.py), in export order."""

_KERNEL_STATS: Schema = {"rank": "int64", "key": "string", "component": "string", "count": "int64", "sum_ns": "int64",
                         "mean_ns": "float64", "min_ns": "int64", "max_ns": "int64", "std_ns": "float64",
                         "pct": "float64"}

TABLE_SCHEMAS: dict[str, Schema] = {
    "steps": _from_model(StepTable, derived={"phase": "string", "duration_ns": "int64", "role": "string"}),
    "regions": _from_model(RegionTable),
    "samples": {"rank": "int64", "t_ns": "timestamp", **dict.fromkeys(SAMPLE_METRICS, "float64")},
    "metrics": _from_model(MetricTable),
    "comm": _from_model(CommTable),
    "region_stats": {"rank": "int64", "path": "string", "count": "int64", "total_ns": "float64", "mean_ns": "float64",
                     "p50_ns": "float64", "p95_ns": "float64", "std_ns": "float64", "min_ns": "float64",
                     "max_ns": "float64", "share_of_steps": "float64"},
    "system_stats": {"rank": "int64", "metric": "string", "mean": "float64", "peak": "float64", "min": "float64",
                     "last": "float64", "samples": "int64"},
    "ranks": {"rank": "int64", "role": "string", "host": "string", "steps": "int64", "warmup_steps": "int64",
              "step_time_p50_ns": "float64", "step_time_p95_ns": "float64", "samples_per_s": "float64",
              "data_wait_share": "float64", "peak_rss_bytes": "float64", "complete": "bool"},
    "components": _KERNEL_STATS,
    "kernels": _KERNEL_STATS,
    "operators": {"rank": "int64", "name": "string", "component": "string", "calls": "int64",
                  "cpu_total_ns": "int64", "cpu_self_ns": "int64", "device_self_ns": "int64",
                  "device_total_ns": "int64", "shapes": "string"},
    "modules": {"rank": "int64", "path": "string", "depth": "int64", "calls": "int64", "cpu_ns": "int64",
                "device_ns": "int64"},
    "temporal": {"rank": "int64", "window_ns": "int64", "busy_ns": "int64", "idle_ns": "int64", "compute_ns": "int64",
                 "non_compute_ns": "int64", "communication_ns": "int64", "memory_ns": "int64",
                 "idle_pct": "float64", "compute_pct": "float64", "non_compute_pct": "float64",
                 "communication_pct": "float64", "memory_pct": "float64", "busy_pct": "float64"},
    "idle": {"rank": "int64", "stream": "int64", "host_wait_ns": "int64", "kernel_wait_ns": "int64",
             "other_ns": "int64", "idle_ns": "int64"},
    "overlap": {"rank": "int64", "communication_ns": "int64", "computation_ns": "int64", "overlap_ns": "int64",
                "exposed_ns": "int64", "overlap_pct": "float64"},
    "utilization": {"rank": "int64", "window_ns": "int64", "utilization_pct": "float64",
                    "sm_efficiency_pct": "float64", "achieved_occupancy_pct": "float64",
                    "covered_kernel_pct": "float64"},
    "trace_steps": {"rank": "int64", "step": "int64", "start_ns": "int64", "dur_ns": "int64",
                    **{f"{c}_ns": "int64" for c in CATEGORIES}},
}
"""Every declared table, by export name. docs/reference.md lists what each column means."""

TRACE_TABLES = ("components", "kernels", "operators", "modules", "temporal", "idle", "overlap", "utilization",
                "trace_steps")
"""Tables from the profiled window(s): written with no rows for a run without one."""


def schema_of(name: str, cols: Columns) -> Schema:
    """The declared schema of table ``name`` as exported (samples: plus the GPU columns present); an
    undeclared table: types of its values (``string`` where none is known)."""
    declared = TABLE_SCHEMAS.get(name)
    if declared is None:
        return {c: _inferred(v) for c, v in cols.items()}
    if name == "samples":
        extra = sorted((c for c in cols if c not in declared), key=_gpu_order)
        return {**declared, **dict.fromkeys(extra, "float64")}
    return dict(declared)


def conform(name: str, cols: Columns) -> Columns:
    """``cols`` with exactly the declared columns, in declared order; a missing one all None (not measured).
    A column the schema does not declare is an error in the code that built the table."""
    schema = schema_of(name, cols)
    unknown = [c for c in cols if c not in schema]
    if unknown:
        raise ValueError(f"export table {name!r}: undeclared columns {unknown} — declare them in "
                         "report/export/schema.py")
    n = max((len(v) for v in cols.values()), default=0)
    return {c: list(cols[c]) if c in cols else [None] * n for c in schema}


def empty(name: str) -> Columns:
    return {c: [] for c in TABLE_SCHEMAS[name]}


def _gpu_order(col: str) -> tuple[int, str]:
    head, _, rest = col.partition("_")
    idx = head[3:]
    return (int(idx) if head.startswith("gpu") and idx.isdigit() else 1 << 30, rest)


def _inferred(values: list[Any]) -> str:
    for v in values:
        if v is None:
            continue
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, int):
            return "int64"
        if isinstance(v, float):
            return "float64"
        return "string"
    return "string"


def arrow_schema(schema: Schema) -> Any:
    """The pyarrow schema of a declared one (timestamps: ``timestamp[ns, tz=UTC]``)."""
    import pyarrow as pa

    def arrow_type(t: str) -> Any:
        if t == "timestamp":
            return pa.timestamp("ns", tz="UTC")
        if t == "string":
            return pa.string()
        if t == "bool":
            return pa.bool_()
        return pa.from_numpy_dtype(t)

    return pa.schema([pa.field(c, arrow_type(t)) for c, t in schema.items()])


def arrow_table(name: str, cols: Columns) -> Any:
    """Table ``name`` as a pyarrow Table with its declared schema (NaN in float columns: null)."""
    import math

    import pyarrow as pa

    schema = schema_of(name, cols)
    conformed = conform(name, cols) if name in TABLE_SCHEMAS else cols
    arrays = []
    for field in arrow_schema(schema):
        values = conformed[field.name]
        if pa.types.is_floating(field.type):
            values = [None if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in values]
        if pa.types.is_timestamp(field.type):
            arrays.append(pa.array(values, type=pa.int64()).cast(field.type))
        else:
            arrays.append(pa.array(values, type=field.type))
    return pa.Table.from_arrays(arrays, schema=arrow_schema(schema))
