"""`stepscope trace` through stepscope.cli.main."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from stepscope.cli import main
from tests.traces.tracebuild import FIXTURES, tiny_trace, write


def test_analyze_json_and_kernels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "rank0.json", tiny_trace())
    assert main(["trace", "analyze", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ranks"][0]["temporal"]["idle_ns"] == 32_000
    assert main(["trace", "kernels", str(tmp_path), "--by", "kernel", "--json", "--top", "1"]) == 0
    rows = json.loads(capsys.readouterr().out)["0"]
    assert rows[0]["key"] == "ampere_sgemm_128x64_tn" and len(rows) == 1
    assert main(["trace", "ops", str(tmp_path), "--sort", "cpu_self"]) == 0
    assert "aten::" in capsys.readouterr().out
    for action in ("kernels", "comm-matrix"):
        assert main(["trace", action, str(tmp_path), "--top", "0"]) == 2
        err = capsys.readouterr().err
        assert "--top 0" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_rules_explain_and_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "rules", "--explain", "ncclKernel_AllReduce_RING_LL_Sum_float", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["component"] == "communication"
    bad = tmp_path / "rank0.json"
    bad.write_text("{not json")
    assert main(["trace", "analyze", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


NCCL_TRACE = FIXTURES / "a100_2rank_nccl" / "rank0.json.gz"


def _rank1_copy(dst: Path) -> Path:
    doc = orjson.loads(gzip.decompress(NCCL_TRACE.read_bytes()))
    doc["distributedInfo"]["rank"] = 1
    dst.write_bytes(gzip.compress(orjson.dumps(doc), compresslevel=1))
    return dst


def test_comm_matrix_action_and_single_rank_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kernels = [e for e in orjson.loads(gzip.decompress(NCCL_TRACE.read_bytes()))["traceEvents"]
               if e.get("cat") == "kernel" and "Collective name" in e.get("args", {})]
    nbytes = sum(k["args"]["In msg nelems"] * {"Float": 4, "Long": 8}[k["args"]["dtype"]] for k in kernels)
    assert len(kernels) == 21
    assert main(["trace", "comm-matrix", str(NCCL_TRACE), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["schema"] == "stepscope.comm_matrix/1" and out["source"] == "traces"
    assert out["bytes"] == [[0.0, nbytes], [0.0, 0.0]] and out["busiest"][0]["calls"] == 21
    assert main(["trace", "comm-matrix", str(NCCL_TRACE)]) == 0
    assert "0 → 1" in capsys.readouterr().out
    alone = write(tmp_path / "rank0.json", tiny_trace())
    assert main(["trace", "comm-matrix", str(alone)]) == 2
    assert "two or more ranks" in capsys.readouterr().err


def test_show_comm_matrix_uses_the_runs_traces(tiny_store: Path, cli: Any, tmp_path: Path) -> None:
    assert cli("show", "latest", "--comm-matrix").rc == 2  # one rank, no traces: says so
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(NCCL_TRACE, folder / "rank0.json.gz")
    _rank1_copy(folder / "rank1.json.gz")
    assert cli("import", "latest", str(folder), "--accept-misfit").rc == 0
    r = cli("show", "latest", "--comm-matrix", "--json")
    assert r.rc == 0, r
    m = json.loads(r.out)
    assert m["source"] == "traces" and m["ranks"] == [0, 1] and m["bytes"][0][1] == m["bytes"][1][0] > 100e6
