"""`stepscope trace` through stepscope.cli.main."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope.cli import main
from tests.traces.tracebuild import tiny_trace, write


def test_analyze_json_and_kernels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "rank0.json", tiny_trace())
    assert main(["trace", "analyze", str(tmp_path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ranks"][0]["temporal"]["idle_ns"] == 32_000
    assert main(["trace", "kernels", str(tmp_path), "--by", "kernel", "--json", "--top", "1"]) == 0
    rows = json.loads(capsys.readouterr().out)["0"]
    assert rows[0]["key"] == "ampere_sgemm_128x64_tn" and len(rows) == 1
    assert main(["trace", "ops", str(tmp_path), "--sort", "cpu_self"]) == 0
    assert "aten::" in capsys.readouterr().out  # narrow test terminal wraps the name


def test_rules_explain_and_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "rules", "--explain", "ncclKernel_AllReduce_RING_LL_Sum_float", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["component"] == "communication"
    bad = tmp_path / "rank0.json"
    bad.write_text("{not json")
    assert main(["trace", "analyze", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
