"""The timeline's rows and per-pixel decimation (analyze/trace/timeline.py), checked against the fixtures' raw
JSON read here with the standard library: rows are the streams and threads the trace names, every drawn event is
either exact or counted in exactly one merged run, and a level paints the columns the events paint."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepscope.analyze.trace.timeline import critical_items, level, timeline_rows
from stepscope.traces.kineto import read_trace
from tests.conftest import TRACES

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
FIXTURES = ("v100_1rank/rank0.json.gz", "a100_alexnet/rank0.json.gz", "sampled_128rank/rank0.json.gz")


def _raw_gpu(path: Path) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """(device, stream) -> [(ts ns, dur ns)] of the GPU work in the file, read with json (µs -> ns rounded)."""
    doc: dict[str, Any] = json.loads(gzip.decompress(path.read_bytes()))
    out: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() in GPU_CATS:
            a = e.get("args", {})
            out[(int(a.get("device", e["pid"])), int(a.get("stream", e["tid"])))].append(
                (round(float(e["ts"]) * 1000), round(float(e["dur"]) * 1000)))
    return out


@pytest.mark.parametrize("name", FIXTURES)
def test_gpu_rows_are_the_trace_s_streams_with_all_their_work(name: str) -> None:
    raw = _raw_gpu(TRACES / name)
    tl = timeline_rows(read_trace(TRACES / name))
    gpu_rows = [(i, r) for i, r in enumerate(tl.rows) if r.kind == "gpu"]
    assert sorted((r.pid, r.tid) for _, r in gpu_rows) == sorted(raw)
    for i, r in gpu_rows:
        on = tl.events.row == i
        assert int(on.sum()) == len(raw[(r.pid, r.tid)])
        assert int((tl.events.end[on] - tl.events.ts[on]).sum()) == pytest.approx(
            sum(d for _, d in raw[(r.pid, r.tid)]), abs=len(raw[(r.pid, r.tid)]))


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("columns", [500, 2000, 32000])
def test_every_event_is_exact_or_in_one_run_and_the_level_paints_the_events_columns(name: str, columns: int) -> None:
    tl = timeline_rows(read_trace(TRACES / name))
    lv = level(tl, columns)
    width = tl.window_ns / columns
    ts, end = tl.events.ts - tl.start_ns, tl.events.end - tl.start_ns
    for r in range(len(tl.rows)):
        on = np.flatnonzero(tl.events.row == r)
        x = slice(lv.exact_at[r], lv.exact_at[r + 1])
        runs = slice(lv.runs_at[r], lv.runs_at[r + 1])
        # counts: exact events plus the events merged into runs are the row's events, once each
        assert (lv.exact_at[r + 1] - lv.exact_at[r]) + int(lv.run_count[runs].sum()) == on.size
        # exact events are those at least a column wide, with their own start and duration
        wide = on[(end[on] - ts[on]) >= width]
        assert sorted(zip(lv.exact_ts[x].tolist(), lv.exact_dur[x].tolist(), strict=True)) == \
            sorted(zip(ts[wide].tolist(), (end[wide] - ts[wide]).tolist(), strict=True))
        # the columns holding the middle of a narrow event are exactly the runs' columns
        narrow = on[(end[on] - ts[on]) < width]
        want = set(np.minimum(((ts[narrow] + end[narrow]) / 2 // width).astype(int), columns - 1).tolist())
        got = {c for c0, n in zip(lv.run_col[runs].tolist(), lv.run_len[runs].tolist(), strict=True)
               for c in range(c0, c0 + n)}
        assert got == want
    assert ((lv.run_busy >= 1) & (lv.run_busy <= 10)).all()


def test_busy_share_and_dominant_style_of_a_column() -> None:
    """A hand-made column: three narrow items, 15 + 20 ns of gemm and 40 ns of memcpy in a 100 ns column."""
    tl = timeline_rows(read_trace(TRACES / "a100_alexnet" / "rank0.json.gz"))
    from dataclasses import replace

    from stepscope.analyze.trace.timeline import Events

    gemm, memcpy = tl.styles.index("gemm"), tl.styles.index("memcpy")
    ev = Events(row=np.array([0, 0, 0, 0]), ts=np.array([0, 10, 50, 950]), end=np.array([15, 30, 90, 1000]),
                style=np.array([gemm, gemm, memcpy, gemm]), name=np.zeros(4, dtype=np.int64),
                event=np.arange(4))
    small = replace(tl, events=ev, start_ns=0, end_ns=1000, rows=tl.rows[:1])
    lv = level(small, 10)  # 100 ns columns
    assert lv.run_col.tolist() == [0, 9] and lv.run_count.tolist() == [3, 1]
    assert lv.run_style.tolist() == [memcpy, gemm]  # 40 ns of memcpy beats 15 + 20 of gemm
    assert lv.run_busy.tolist() == [8, 5]  # 75 of 100 ns up to the next tenth, 50 of 100 ns


def test_critical_items_keep_the_drawn_events_given() -> None:
    t = read_trace(TRACES / "a100_alexnet" / "rank0.json.gz")
    tl = timeline_rows(t)
    gpu_rows = np.flatnonzero(np.isin(t["kind"], [3]))[:5].tolist()
    row, start, dur = critical_items(tl, [*gpu_rows, len(t) + 10, -3])
    assert len(row) == 5
    assert sorted((start + tl.start_ns).tolist()) == sorted(t["ts_ns"][gpu_rows].tolist())
    assert sorted(dur.tolist()) == sorted(t["dur_ns"][gpu_rows].tolist())
