"""Exports typed by their declared schemas: two different real runs (one with a profiled window, one
without) give the same Parquet schema for every table, timestamps are UTC timestamps, unmeasured columns
keep their type, and the values are the CLI's."""

from __future__ import annotations

import csv
import json
import os
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from stepscope.report.export.schema import TABLE_SCHEMAS, TRACE_TABLES, conform
from tests.conftest import observe, stepscope_cmd


@pytest.fixture(scope="module")
def plain_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with one short run without a profiled window, regions or logged metrics."""
    store = tmp_path_factory.mktemp("plain") / "store"
    res = observe(store, "--steps", "5", name="plain")
    assert res.returncode == 0, res.stderr[-3000:]
    return store


def cli(*args: str) -> str:
    proc = subprocess.run(stepscope_cmd(*args), capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "STEPSCOPE_DB"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def export(store: Path, fmt: str, out: Path) -> Path:
    cli("export", "latest", "--store", str(store), "--format", fmt, "-o", str(out))
    return out


def test_two_different_runs_export_identical_parquet_schemas(profiled_store: Path, plain_store: Path,
                                                              tmp_path: Path) -> None:
    a = export(profiled_store, "parquet", tmp_path / "a")
    b = export(plain_store, "parquet", tmp_path / "b")
    names_a = sorted(p.name for p in a.glob("*.parquet"))
    assert names_a == sorted(p.name for p in b.glob("*.parquet"))
    assert set(names_a) >= {f"{t}.parquet" for t in TABLE_SCHEMAS}  # every declared table, rows or not
    for name in names_a:
        sa, sb = pq.read_schema(a / name), pq.read_schema(b / name)
        assert sa.equals(sb, check_metadata=False), f"{name}:\n{sa}\n---\n{sb}"
        assert not any(pa.types.is_null(f.type) for f in sa), f"{name}: a column typed null\n{sa}"
    # the plain run has no window, no regions and no logged values: typed, empty tables
    assert pq.read_table(b / "kernels.parquet").num_rows == 0 < pq.read_table(a / "operators.parquet").num_rows
    assert pq.read_table(b / "metrics.parquet").num_rows == 0 < pq.read_table(a / "metrics.parquet").num_rows


def test_parquet_types_and_values_are_the_clis(profiled_store: Path, tmp_path: Path) -> None:
    out = export(profiled_store, "parquet", tmp_path / "p")
    doc = json.loads(cli("show", "latest", "--store", str(profiled_store), "--json"))
    steps = pq.read_table(out / "steps.parquet")
    utc_ns = pa.timestamp("ns", tz="UTC")
    assert steps.schema.field("start_ns").type == utc_ns and steps.schema.field("end_ns").type == utc_ns
    assert steps.schema.field("duration_ns").type == pa.int64()
    assert steps.schema.field("phase").type == pa.string() and set(steps["phase"].to_pylist()) == {"train"}
    assert steps.schema.field("tokens").type == pa.float64() and steps["tokens"].null_count == steps.num_rows
    assert steps.num_rows == doc["headline"]["steps"]
    durations = steps["duration_ns"].to_pylist()
    assert durations[0] == doc["headline"]["first_step_ns"]
    starts = steps["start_ns"].cast(pa.int64()).to_pylist()
    ends = steps["end_ns"].cast(pa.int64()).to_pylist()
    assert [e - s for s, e in zip(starts, ends, strict=True)] == durations
    ranks = pq.read_table(out / "ranks.parquet").to_pylist()
    assert ranks[0]["step_time_p50_ns"] == doc["ranks"][0]["steps"]["step_time"]["p50"]
    stats = {r["path"]: r for r in pq.read_table(out / "region_stats.parquet").to_pylist()}
    for reg in doc["ranks"][0]["regions"]:
        assert stats[reg["path"]]["count"] == reg["time"]["count"]
        assert stats[reg["path"]]["p95_ns"] == pytest.approx(reg["time"]["p95"])
    samples = pq.read_table(out / "samples.parquet")
    assert samples.schema.field("t_ns").type == utc_ns
    for m in doc["ranks"][0]["system"]:
        col = samples[m["name"]]
        assert len(col) - col.null_count == m["samples"], m["name"]


def test_trace_tables_match_trace_analyze(profiled_store: Path, tmp_path: Path) -> None:
    out = export(profiled_store, "parquet", tmp_path / "t")
    run_dir = next((profiled_store / "runs").iterdir())
    [trace] = list(run_dir.rglob("rank0.json.gz"))
    doc = json.loads(cli("trace", "analyze", str(trace), "--json"))["ranks"][0]
    ops = {r["name"]: r for r in pq.read_table(out / "operators.parquet").to_pylist()}
    for o in doc["operators"]:
        assert (ops[o["name"]]["calls"], ops[o["name"]]["cpu_self_ns"]) == (o["calls"], o["cpu_self_ns"])
    for name in TRACE_TABLES:  # a CPU-only window: no GPU work, so the GPU tables have no rows
        table = pq.read_table(out / f"{name}.parquet")
        assert table.schema.names == list(TABLE_SCHEMAS[name])


def test_csv_has_the_declared_columns_and_integer_times(profiled_store: Path, plain_store: Path,
                                                        tmp_path: Path) -> None:
    a = export(profiled_store, "csv", tmp_path / "a")
    b = export(plain_store, "csv", tmp_path / "b")
    for name in TABLE_SCHEMAS:
        ha = (a / f"{name}.csv").read_text().splitlines()[0]
        hb = (b / f"{name}.csv").read_text().splitlines()[0]
        assert ha == hb == ",".join(TABLE_SCHEMAS[name]), name
    with (a / "steps.csv").open() as fh:
        row = next(csv.DictReader(fh))
    assert row["start_ns"].isdigit() and row["tokens"] == "" and row["phase"] == "train"


def test_a_table_with_an_undeclared_column_is_a_code_error() -> None:
    with pytest.raises(ValueError, match="undeclared columns"):
        conform("steps", {"rank": [0], "surprise": [1]})


def test_samples_keep_every_host_metric_and_add_the_gpus_seen_in_index_order() -> None:
    from stepscope.report.export.schema import SAMPLE_METRICS, arrow_table, schema_of

    cols = {"rank": [0, 0], "t_ns": [1, 2], "rss_bytes": [1.0, float("nan")], "gpu10_util_pct": [1.0, 2.0],
            "gpu2_power_w": [3.0, 4.0], "gpu2_util_pct": [5.0, 6.0]}
    schema = schema_of("samples", cols)
    assert list(schema) == ["rank", "t_ns", *SAMPLE_METRICS, "gpu2_power_w", "gpu2_util_pct", "gpu10_util_pct"]
    table = arrow_table("samples", cols)
    assert table["rss_bytes"].to_pylist() == [1.0, None]  # NaN (not measured) is null, never 0
    assert table["cpu_energy_j"].type == pa.float64() and table["cpu_energy_j"].null_count == 2
    assert table["t_ns"].cast(pa.int64()).to_pylist() == [1, 2]
