"""`stepscope show RUN --ranks` on a stored run with a rank that died mid-run, roles, and the profiler
window's traces of two ranks in its artifacts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from stepscope.cli import main
from tests.analyze.distdata import rank_data, run_data, write_run
from tests.conftest import TRACES


def test_show_ranks_terminal_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    ranks = [rank_data(0, 3, [100.0] * 12, comm_ms=[2.0] * 12, role="learner"),
             rank_data(1, 3, [100.0] * 12, comm_ms=[70.0] * 12, role="actor"),
             rank_data(2, 3, [100.0] * 7, comm_ms=[70.0] * 7, role="actor", complete=False)]
    run_id = write_run(store, run_data(ranks))
    traces = store / "runs" / run_id / "artifacts" / "traces"
    traces.mkdir(parents=True)
    for r in (0, 1):
        shutil.copy(TRACES / "sampled_128rank" / f"rank{r}.json.gz", traces / f"rank{r}.json.gz")

    assert main(["show", "--store", str(store), run_id, "--ranks", "--width", "220"]) == 0
    out = capsys.readouterr().out
    assert "2 (incomplete)" in out and "rank 2 ended without its end record" in out
    assert "POP metrics" in out and "straggler: rank 0" in out  # the learner computes 98 ms, the actors 30
    assert "learner is saturated" in out
    assert "Communication kernels: transfer vs sync" in out and "GPU POP metrics" in out

    assert main(["show", "--store", str(store), run_id, "--ranks", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "stepscope.ranks/1" and doc["incomplete_ranks"] == [2]
    assert [r["steps"] for r in doc["ranks"]] == [12, 12, 7]
    assert doc["pop"]["load_balance"] == pytest.approx((98 + 30 + 30) / 3 / 98)
    assert {r["role"] for r in doc["roles"]["roles"]} == {"learner", "actor"}
    assert doc["trace_split"]["ops"][0]["instances"] == 10


def test_show_ranks_says_inconclusive_when_the_host_explains_the_excess(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # rank 1 is 6% of the step slower, and each rank waited for a CPU 5% of the window (1.5 x 5% > 6%)
    store = tmp_path / "store"
    comm = (10.0, 4.0, 10.0)
    run_id = write_run(store, run_data([rank_data(r, 3, [100.0] * 12, comm_ms=[comm[r]] * 12, cpu_wait_pct=5.0)
                                        for r in range(3)]))
    assert main(["show", "--store", str(store), run_id, "--ranks", "--width", "220"]) == 0
    out = capsys.readouterr().out
    assert "inconclusive: rank 1 is slower by 6.00 ms per step (6.0% of the step" in out
    assert "waited for a CPU 5.0% of the window" in out and "straggler:" not in out and "balanced" not in out
    header = next(line for line in out.splitlines() if line.startswith("rank "))
    assert header.rstrip().endswith("CPU wait")
    rows = [line.rstrip() for line in out.splitlines() if line[:2] in ("0 ", "1 ", "2 ")]
    assert len(rows) == 3 and all(row.endswith("5.0%") for row in rows)
    assert main(["show", "--store", str(store), run_id, "--ranks", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["stragglers"] == [] and [u["rank"] for u in doc["unresolved"]] == [1]
    assert doc["balanced"] is None and doc["cpu_wait_share"] == pytest.approx(0.05)
    assert [r["cpu_wait_share"] for r in doc["ranks"]] == pytest.approx([0.05] * 3)
