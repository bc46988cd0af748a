"""Trace terminal tables read right (issue 41, item 9): the all-streams idle rows say they sum over streams,
durations print in the HTML's units (ns / µs / ms / s, never raw µs with ".0"), and no rank is called slowest
when the ranks' spread is within noise."""

from __future__ import annotations

import dataclasses
import gzip
import re
from pathlib import Path

import orjson
from rich.console import Console

from stepscope.analyze.trace.analysis import TraceAnalysis, analyze_trace
from stepscope.analyze.trace.multirank import combine
from stepscope.report import ranks_terminal
from stepscope.report import trace_terminal as view
from stepscope.traces.kineto import read_trace

TRACES = Path(__file__).parents[1] / "data" / "traces"
NCCL = TRACES / "a100_2rank_nccl" / "rank0.json.gz"
DURATION = re.compile(r"^(—|\d[\d,]*(\.\d+)? (ns|µs|ms|s|min))$")


def _text(renderable: object, width: int = 200) -> str:
    c = Console(width=width, record=True, color_system=None)
    c.print(renderable)
    return c.export_text()


def _rows(out: str) -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for ln in out.splitlines():
        if ln.startswith("│"):
            cells = [c.strip() for c in ln.strip().strip("│").split("│")]
            rows[cells[0]] = cells[1:]
    return rows


def test_summary_names_the_idle_sum_and_uses_the_html_units() -> None:
    doc = orjson.loads(gzip.decompress(NCCL.read_bytes()))
    gpu = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") in
           ("kernel", "gpu_memcpy", "gpu_memset")]
    streams = {e["tid"] for e in gpu}
    window_ms = (max(e["ts"] + e["dur"] for e in gpu) - min(e["ts"] for e in gpu)) / 1e3
    out = _text(view.summary_view(analyze_trace(read_trace(NCCL))))
    rows = _rows(out.split("└")[0])  # the summary table only
    assert rows["GPU window"][0] == f"{window_ms:.2f} ms"  # 660.55 ms, where it was "660,551.0" µs
    label = f"idle: host wait (sum over {len(streams)} streams)"
    assert label in rows, out
    assert len(streams) == 2 and rows[label][0].endswith(" s")  # 1.12 s of per-stream gaps, over a 0.66 s window
    for name, cells in rows.items():
        if name.startswith(("GPU ", "idle", "median step", "communication")) and "utilisation" not in name:
            assert DURATION.match(cells[0]), (name, cells, out)
    kernels = _rows(_text(view.kernel_view(analyze_trace(read_trace(NCCL)).kernels.by_kernel, top=5, title="k")))
    whole = [r for r in kernels.values() if r[1]]  # wrapped names continue on lines with empty number cells
    assert len(whole) == 5 and all(DURATION.match(c) for r in whole for c in r[2:7]), kernels


def _as_rank(a: TraceAnalysis, rank: int) -> TraceAnalysis:
    return dataclasses.replace(a, rank=rank)


def test_no_slowest_rank_among_identical_ranks(tmp_path: Path) -> None:
    a = analyze_trace(read_trace(NCCL))
    same = combine([_as_rank(a, r) for r in range(64)])
    assert same.slowest_rank is None
    assert "slowest rank" not in _text(ranks_terminal.traceset_distribution_view(same, ()))
    assert "(slowest)" not in _text(view.traceset_view(combine([_as_rank(a, r) for r in range(3)])))
    # one rank whose steps take 1.5x as long (its trace's times scaled, a real file read back) is named
    doc = orjson.loads(gzip.decompress(NCCL.read_bytes()))
    for e in doc["traceEvents"]:
        for k in ("ts", "dur"):
            if isinstance(e.get(k), (int, float)):
                e[k] = e[k] * 1.5
    slow_path = tmp_path / "rank0.json"
    slow_path.write_bytes(orjson.dumps(doc))
    slow = _as_rank(analyze_trace(read_trace(slow_path)), 5)
    mixed = combine([_as_rank(a, r) for r in range(5)] + [slow])
    assert mixed.slowest_rank == 5
    assert "5 (slowest)" in _text(view.traceset_view(mixed))
