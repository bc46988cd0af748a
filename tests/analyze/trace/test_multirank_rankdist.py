"""Distributions across ranks (min / quartiles / max, outlying ranks named) and their views past 64 ranks."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from stepscope.analyze.ranks.ranks import RankAnalysis, RankTimes
from stepscope.analyze.trace.analysis import TraceAnalysis, analyze_trace
from stepscope.analyze.trace.multirank import combine
from stepscope.analyze.trace.rankdist import NAMED_OUTLIERS, RANK_ROWS_MAX, distribution, traceset_distributions
from stepscope.report.ranks_terminal import rank_table, traceset_distribution_view
from stepscope.traces.kineto import read_trace
from tests.conftest import ROOT
from tests.traces.tracebuild import tiny_trace, write


def test_quartiles_and_tukey_outliers_by_hand() -> None:
    values = {r: float(r) for r in range(1, 10)} | {42: 100.0, 43: -50.0, 44: None}
    d = distribution("x", "ns", values)
    assert d is not None and d.ranks == 11
    # sorted: -50, 1..9, 100 (11 values) -> q1 at position 2.5 = 2.5, median 5, q3 at 7.5 = 7.5; fences -5 and 15
    assert (d.min, d.q1, d.median, d.q3, d.max) == (-50.0, 2.5, 5.0, 7.5, 100.0)
    assert d.high == ((42, 100.0),) and d.low == ((43, -50.0),)
    assert d.high_count == d.low_count == 1
    assert distribution("x", "ns", {0: None}) is None


def test_at_most_named_outliers_most_extreme_first() -> None:
    values = {r: 1.0 for r in range(100)} | {100 + i: 10.0 + i for i in range(8)}
    d = distribution("x", "ns", values)
    assert d is not None and d.high_count == 8 and len(d.high) == NAMED_OUTLIERS
    assert [r for r, _ in d.high] == [107, 106, 105, 104, 103]


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory: pytest.TempPathFactory) -> TraceAnalysis:
    p = write(tmp_path_factory.mktemp("t") / "rank0.json", tiny_trace(), distributedInfo={"rank": 0})
    return analyze_trace(read_trace(p))


def _ranks(a: TraceAnalysis, n: int, slow: int) -> list[TraceAnalysis]:
    t = a.temporal
    assert t is not None
    out = []
    for r in range(n):
        idle = t.idle_ns * (20 if r == slow else 1)  # one rank idles 20x as long
        out.append(replace(a, rank=r, path=f"rank{r}.json",
                           temporal=replace(t, idle_ns=idle, window_ns=t.window_ns - t.idle_ns + idle)))
    return out


def test_trace_set_of_4096_ranks_renders_distributions_naming_the_outlier(one_rank: TraceAnalysis) -> None:
    s = combine(_ranks(one_rank, 4096, slow=1234))
    dists = {d.name: d for d in traceset_distributions(s)}
    idle = dists["GPU idle"]
    assert idle.ranks == 4096 and idle.median == 32_000 and idle.max == 20 * 32_000
    assert idle.high == ((1234, 20 * 32_000.0),) and idle.high_count == 1
    out = io.StringIO()
    Console(file=out, width=160, force_terminal=False).print(traceset_distribution_view(s, tuple(dists.values())))
    text = out.getvalue()
    assert "4096 ranks: distribution across ranks" in text and "high: 1234 (640.0 µs)" in text
    assert len(text.splitlines()) < 30  # not one row per rank
    assert RANK_ROWS_MAX < 4096


def _times(rank: int, step_ns: float, cpu_wait: float | None = None) -> RankTimes:
    return RankTimes(rank=rank, role=None, host="h", complete=True, steps=10, step_ns=step_ns,
                     step_median_ns=step_ns, useful_ns=step_ns / 2, compute_ns=step_ns / 2, comm_ns=None,
                     data_wait_ns=0.0, transfer_ns=None, sync_ns=None, samples_per_s=None, cpu_wait_share=cpu_wait)


@pytest.mark.parametrize("n", [RANK_ROWS_MAX, RANK_ROWS_MAX + 1])
def test_show_ranks_table_switches_to_distributions_past_64_ranks(n: int) -> None:
    ranks = tuple(_times(r, 1e6 * (3 if r == 7 else 1), 0.4 if r == 7 else 0.01 + r / 1e4) for r in range(n))
    a = RankAnalysis(world_size=n, window=(5, 14), ranks=ranks, pop=None, pop_note="x", stragglers=(),
                     balanced=None, comm_split=None)
    out = io.StringIO()
    Console(file=out, width=160, force_terminal=False).print(rank_table(a))
    text = out.getvalue()
    if n <= RANK_ROWS_MAX:
        assert "distribution" not in text and len(text.splitlines()) > n
    else:
        assert f"{n} ranks (steps 5-14" in text and "high: 7 (3.00 ms)" in text
        assert "high: 7 (40.0%)" in text  # the rank its host starved stands out in CPU wait too
        assert len(text.splitlines()) < 20


def test_trace_analyze_cli_prints_distributions_for_65_ranks(tmp_path: Path) -> None:
    events = tiny_trace()
    for r in range(RANK_ROWS_MAX + 1):
        slow = 10.0 if r == 9 else 1.0  # rank 9's GPU work lasts ten times as long
        write(tmp_path / f"rank{r}.json", [dict(e, dur=e["dur"] * slow) if e.get("cat") == "kernel" else e
                                           for e in events], distributedInfo={"rank": r, "world_size": 65})
    proc = subprocess.run([sys.executable, "-m", "stepscope", "trace", "analyze", str(tmp_path), "--workers", "1"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert "65 ranks: distribution across ranks" in proc.stdout
    assert "rank 3 —" not in proc.stdout  # no per-rank tables
    compute = next(line for line in proc.stdout.splitlines() if line.startswith("GPU compute"))
    assert "high: 9 (" in compute
