"""Collectives across ranks in the run report: the built 3-rank set of tests/analyze/trace/test_collectives.py
(skew, transfer and bandwidths derived by hand there) rendered per type and size and per rank; the real 2-rank
sampled_128rank import says its clocks are not aligned; the report takes the critical paths RunAnalysis computed
once instead of computing them while rendering."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from stepscope.analyze.advisor import Advice
from stepscope.app import RunAnalysis
from stepscope.executor.traceset import analyze_traceset
from stepscope.report import format as f
from stepscope.report.html import gpu_sections
from stepscope.report.html.collectives import NO_SKEW
from stepscope.report.html.gpu_sections import gpu_section
from stepscope.report.html.run_report import render_run_report
from tests.analyze.trace.test_collectives import _trace_set
from tests.conftest import TRACES, load, stepscope_cmd
from tests.report.html.test_run_report_gpu import _tables, stacks_store, two_rank_store  # noqa: F401

ADVICE = Advice(findings=(), checked=(), notes=())


def test_collectives_by_type_size_and_rank_derived_by_hand(tmp_path: Path) -> None:
    s = analyze_traceset(_trace_set(tmp_path), workers=1)
    html = gpu_section({a.rank: a for a in s.ranks}, [], ADVICE, collectives=s.collectives)
    assert "Collectives across ranks" in html
    # rank 1 arrived last at both all-reduces (skews 30 and 50 µs), rank 2 at the all-gather; 4 instances
    assert "rank 1 arrived last most often: 2 of 4 collectives" in html
    t = _tables(html)
    sizes = {(row[0], row[1]): row[2:] for row in t["collectives-sizes"][1:]}
    # all_reduce of 4,194,304 bytes (bucket [4 MiB, 8 MiB)): 2 instances, skews 30 / 50 µs, transfers 100 / 50 µs,
    # algbw 41.94 / 83.89 GB/s (median 62.91), busbw x 4/3 (median 83.89)
    ar = sizes[("all_reduce", f"{f.nbytes(2**22)} – {f.nbytes(2**23)}")]
    assert ar == ["2", f.duration_ns(40_000), f.duration_ns(75_000), "62.9 GB/s", "83.9 GB/s"]
    # all_gather 1,572,864 bytes in [1 MiB, 2 MiB): algbw 1,572,864 / 60,000 ns = 26.2 GB/s, busbw x 2/3 = 17.5
    ag = sizes[("all_gather", f"{f.nbytes(2**20)} – {f.nbytes(2**21)}")]
    assert ag == ["1", f.duration_ns(40_000), f.duration_ns(60_000), "26.2 GB/s", "17.5 GB/s"]
    ranks = {row[0]: row[1:] for row in t["collectives-ranks"][1:]}
    # waits for the last arrival: rank 0 30 + 40 + 50 µs + 5 ns, rank 1 35 µs; rank 1 last twice, rank 2 once
    assert ranks["0"][:3] == ["4", "0", f.duration_ns(120_005)]
    assert ranks["1"][:3] == ["4", "2", f.duration_ns(35_000)]
    assert ranks["2"][:2] == ["4", "1"]


def test_misaligned_clocks_say_no_skew(tmp_path: Path) -> None:
    s = analyze_traceset(_trace_set(tmp_path, {2: 10_000.0}), workers=1)  # rank 2 10 ms late
    html = gpu_section({a.rank: a for a in s.ranks}, [], ADVICE, collectives=s.collectives)
    assert NO_SKEW in html and "arrived last most often" not in html
    skew_col = [row[3] for row in _tables(html)["collectives-sizes"][1:]]
    assert skew_col and set(skew_col) == {f.DASH}


def test_run_report_shows_the_imported_ranks_collectives_and_renders_without_analysing(
        two_rank_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    ra = RunAnalysis(load(two_rank_store))
    assert ra.trace_set is not None and ra.trace_set.collectives is not None
    # computed once, before rendering: the paths `trace analyze --critical-path` gives for the same files
    res = subprocess.run(stepscope_cmd("trace", "analyze", "--json", "--critical-path",
                                       *[str(TRACES / "sampled_128rank" / f"rank{r}.json.gz") for r in (0, 1)]),
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    want = {a["rank"]: a["critical_path"]["length_ns"] for a in json.loads(res.stdout)["ranks"]}
    got = ra.critical_paths
    assert {r: p.length_ns for r, p in got.items() if p is not None} == want and len(want) == 2

    def no_path(*_: object, **__: object) -> None:
        raise AssertionError("the report computed a critical path while rendering")

    monkeypatch.setattr(gpu_sections, "critical_path", no_path)
    html = render_run_report(ra)
    # sampled_128rank's ranks 0 and 1 come from different hosts: 6 of 10 SendRecv end before the other begins
    assert "Collectives across ranks" in html and NO_SKEW in html
    rows = _tables(html)["collectives-sizes"][1:]
    assert [row[:3] for row in rows] == [["sendrecv", "not recorded", "10"]]
    assert "cp-kinds-0" in html and "cp-kinds-1" in html  # each rank's path, from RunAnalysis
