"""`stepscope trace analyze` shows the roofline per operator and the collectives across ranks, in tables and JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stepscope.cli import main
from tests.analyze.trace.test_collectives import _trace_set
from tests.analyze.trace.test_roofline import A100_40, _roofline_trace


def test_roofline_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "220")
    path = _roofline_trace(tmp_path / "rank0.json", A100_40)
    assert main(["trace", "analyze", "--workers", "1", str(path)]) == 0
    out = capsys.readouterr().out
    assert "rank 0: operators on the roofline (3 of 3 by GPU time)" in out
    mm = next(line for line in out.splitlines() if "aten::mm" in line)
    # 137.44 TFLOP/s, 0.1007 TB/s, 1365 FLOP/B, 44.1% of 312, 6.5% of 1.555 TB/s (hand-derived in test_roofline)
    assert all(f in mm for f in ("bf16", "1.00 ms", "137", "0.101", "1.37e+03", "44.1%", "6.5%", "compute"))
    cumsum = next(line for line in out.splitlines() if "aten::cumsum" in line)
    assert "no model" in cumsum and "operator not modelled" in cumsum
    assert "A100 40GB" in out and "nvidia-a100-datasheet" in out
    assert main(["trace", "analyze", "--json", "--workers", "1", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    r = doc["ranks"][0]["roofline"]
    assert r["peaks"]["label"] == "A100 40GB" and r["memory_tbps"] == 1.555
    assert [o["name"] for o in r["ops"]] == ["aten::mm", "aten::add", "aten::cumsum"]
    assert r["ops"][0]["bound"] == "compute" and r["ops"][2]["no_model"] == "no model for aten::cumsum"


def test_collectives_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    paths = [str(p) for p in _trace_set(tmp_path)]
    assert main(["trace", "analyze", "--workers", "1", *paths]) == 0
    out = capsys.readouterr().out
    assert "collectives across ranks 0, 1, 2 (4 instances) by message size" in out
    assert "rank 1 arrived last most often: 2 of 4 collectives" in out
    ar = next(line for line in out.splitlines() if "all_reduce" in line and "4.0 MiB" in line)
    # 2 instances, skews 30 and 50 µs (median 40), transfers 100 and 50 µs (median 75), algbw median 62.9 GB/s
    assert all(f in ar for f in ("40.0 µs", "75.0 µs", "62.9", "83.9"))
    assert main(["trace", "analyze", "--json", "--workers", "1", *paths]) == 0
    c = json.loads(capsys.readouterr().out)["collectives"]
    assert (c["clocks_aligned"], c["last_rank"], c["last_count"]) == (True, 1, 2)
    assert [i["skew_ns"] for i in c["instances"]] == [30_000, 40_000, 50_000, 5]


def test_many_ranks_show_the_collectives_with_the_late_ranks_first(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """70 ranks (the distributions view): rank 41 starts every all_reduce 20 µs after the others."""
    monkeypatch.setenv("COLUMNS", "160")
    from tests.traces.tracebuild import kernel, write

    args: dict[str, Any] = {"Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024,
                            "Group size": 70, "dtype": "Float", "Process Group Name": "0"}
    paths = []
    for rank in range(70):
        late = 20 if rank == 41 else 0
        events = [kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 100.0 * i + late, 50 - late, i + 1, **args)
                  for i in range(3)]
        info = {"rank": rank, "world_size": 70}
        paths.append(str(write(tmp_path / f"rank{rank}.json", events, distributedInfo=info)))
    assert main(["trace", "analyze", "--workers", "1", *paths]) == 0
    out = capsys.readouterr().out
    assert "rank 41 arrived last most often: 3 of 3 collectives" in out
    assert "arrivals: the 20 of 70 ranks arriving last most often" in out
    row = next(line for line in out.splitlines() if line.strip("│ ").startswith("41 "))
    assert "3" in row.split("│")[3]  # its arrived-last count
