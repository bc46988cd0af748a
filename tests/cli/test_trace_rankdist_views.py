"""`trace kernels`, `trace ops` and `show --traces` past 64 ranks: distributions across ranks (min / quartiles /
max, outlying ranks named) instead of one table per rank, on a 66-rank set built from the 128-rank fixture.

Rank r's durations are the fixture's times 1 + r/100, except rank 5's, times 3 (the outlier); so every
expected figure below comes from the fixture's raw JSON and those factors, not from the analysis."""

from __future__ import annotations

import gzip
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from stepscope.analyze.trace.multirank import TraceSetAnalysis
from stepscope.analyze.trace.rankdist import (
    RANK_ROWS_MAX,
    as_distributions,
    kernel_distributions,
    operator_distributions,
)
from stepscope.cli import main
from stepscope.executor.traceset import analyze_traceset
from tests.analyze.distdata import rank_data, run_data, write_run
from tests.executor.rankset import FIXTURE, small, stretch, write_rank_set

RANKS = RANK_ROWS_MAX + 2
SLOW, SLOW_K = 5, 3.0
SECONDS = 0.05
"""Of the fixture's first step kept (545 events a rank): 66 ranks analyse in seconds."""


def factor(rank: int) -> float:
    return SLOW_K if rank == SLOW else stretch(rank)


@pytest.fixture(scope="module")
def raw() -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = small(orjson.loads(gzip.decompress(FIXTURE.read_bytes())), SECONDS)["traceEvents"]
    return events


@pytest.fixture(scope="module")
def rank_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ranks66")
    write_rank_set(out, RANKS, slow={SLOW: SLOW_K}, seconds=SECONDS)
    return out


@pytest.fixture(scope="module")
def result(rank_set: Path) -> TraceSetAnalysis:
    return analyze_traceset([rank_set], workers=2)


def test_the_threshold_is_one_rule() -> None:
    assert not as_distributions(RANK_ROWS_MAX) and as_distributions(RANK_ROWS_MAX + 1)


def test_kernel_distribution_names_the_slow_rank(result: TraceSetAnalysis, raw: list[dict[str, Any]]) -> None:
    sums: Counter[str] = Counter()
    for e in raw:
        if e.get("cat") == "kernel":
            sums[e["name"]] += e["dur"]
    name, base_us = sums.most_common(1)[0]
    top = kernel_distributions(result, by="kernel", top=3)
    assert len(top) == 3 and top[0].name == name and top[0].unit == "ns" and top[0].ranks == RANKS
    d = top[0]
    assert d.min == pytest.approx(1000 * base_us, rel=1e-4)  # rank 0: the fixture's durations
    assert d.max == pytest.approx(1000 * base_us * SLOW_K, rel=1e-4)
    expected_median = statistics.median(factor(r) for r in range(RANKS))
    assert d.median == pytest.approx(1000 * base_us * expected_median, rel=1e-4)
    assert [r for r, _ in d.high] == [SLOW] and d.high_count == 1 and d.low_count == 0


def test_a_rank_without_a_kernel_counts_zero(result: TraceSetAnalysis) -> None:
    from dataclasses import replace

    first = result.ranks[0]
    stripped = replace(first, kernels=replace(first.kernels, by_kernel=first.kernels.by_kernel[1:]))
    s = replace(result, ranks=(stripped, *result.ranks[1:]))
    d = kernel_distributions(s, by="kernel", top=1)[0]
    assert d.ranks == RANKS and d.min == 0.0 and d.low == ((0, 0.0),)


def test_operator_calls_are_equal_on_every_rank(result: TraceSetAnalysis, raw: list[dict[str, Any]]) -> None:
    calls = Counter(e["name"] for e in raw if e.get("cat") == "cpu_op" and e.get("ph") == "X")
    name, n = calls.most_common(1)[0]
    d = next(x for x in operator_distributions(result, sort="calls", top=50) if x.name == name)
    assert (d.min, d.median, d.max) == (n, n, n) and d.unit == "calls" and not d.high_count
    with pytest.raises(ValueError, match="sort 'nonsense'"):
        operator_distributions(result, sort="nonsense")


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


def test_trace_kernels_and_ops_print_distributions(rank_set: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    for argv, title in ((["kernels", "--by", "kernel", "--top", "5"], "GPU time by kernel across ranks (top 5"),
                        (["ops", "--sort", "cpu_total", "--top", "5"], "operators' cpu total across ranks (top 5")):
        out = _run(["trace", argv[0], str(rank_set), *argv[1:], "--workers", "2"], capsys)
        assert f"{RANKS} ranks: {title}" in out
        assert "rank 3:" not in out and "rank 3 " not in out  # no table per rank
        assert f"high: {SLOW} (" in out
        assert len(out.splitlines()) < 30
        if argv[0] == "kernels":  # templated kernel names are cut, so the figures keep their columns
            assert "…" in out and max(map(len, out.splitlines())) <= 250


def test_show_traces_past_64_ranks_prints_distributions(cli: Any, store: Path, rank_set: Path) -> None:
    run_id = write_run(store, run_data([rank_data(0, 1, [10.0] * 5)]))  # a stored run, its traces imported
    assert cli("import", run_id, str(rank_set), "--accept-misfit").rc == 0
    r = cli("show", run_id, "--traces", "--width", "250")
    assert r.rc == 0, r.err
    assert f"{RANKS} ranks: distribution across ranks" in r.out
    assert f"{RANKS} ranks: GPU time by component across ranks" in r.out
    assert f"{RANKS} ranks: operators' CPU total across ranks" in r.out
    assert f"high: {SLOW} (" in r.out and "rank 3:" not in r.out and "Module tree" not in r.out
