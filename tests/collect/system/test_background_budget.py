"""The background threads' work, held to a budget without timing anything (benchmarks/_background.py counts
it with sys.setprofile; the load of the machine does not move the counts).

Before this budget a system sample made 153 Python calls, 402 C calls and 36 file/OS calls (psutil opening,
reading and closing a file per figure, an ``access`` per disk) and a flush made one C call per step row.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from benchmarks._background import flush_calls, sample_calls

from stepscope.collect.core.buffers import STEP_COLS, Buffers
from stepscope.collect.system.sampler import StopSignal
from stepscope.store.rundir import RecordWriter

SAMPLE_PY_CALLS = 60
"""Python calls per periodic system sample, the wait for it included (49 at the time of writing)."""
SAMPLE_C_CALLS = 140
"""C calls per sample (112 at the time of writing, most of them parsing /proc/diskstats' lines)."""
SAMPLE_OS_CALLS = 8
"""File/OS calls per sample: one ``pread`` for each of /proc/PID/stat, /proc/PID/statm, /proc/stat,
/proc/meminfo, /proc/diskstats, /proc/net/dev and /proc/PID/schedstat, and ``os.getloadavg``."""
FLUSH_OS_CALLS = 2
"""A flush's file/OS calls, whatever it holds: the file size (to cut a failed write back) and one write."""

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the /proc sampler is Linux's")


@linux
def test_system_sample_within_budget() -> None:
    calls, samples = sample_calls(samples=12)
    assert calls.py <= SAMPLE_PY_CALLS, calls
    assert calls.c <= SAMPLE_C_CALLS, calls
    assert 5 <= calls.os <= SAMPLE_OS_CALLS, calls  # and the host's files were read: the budget is not met by skipping
    periodic = samples[1:]
    for name in ("cpu_process_pct", "rss_bytes", "threads", "cpu_system_pct", "mem_system_used_bytes",
                 "mem_system_total_bytes", "load_avg_1m", "net_recv_bps", "net_sent_bps"):
        assert all(name in s for s in periodic), name
    assert all(s["rss_bytes"] > 1 << 20 and s["threads"] >= 1 for s in samples)
    assert all(0 <= s["cpu_system_pct"] <= 100 for s in periodic)


def test_flush_calls_do_not_grow_with_rows() -> None:
    """No Python or C call per step row on the flush thread (the rows are taken and transposed in C), and one
    write per flush."""
    few, many = flush_calls(10), flush_calls(5000)
    assert many == few
    assert many.os <= FLUSH_OS_CALLS


def test_flushed_step_records_hold_the_rows() -> None:
    """The columns a flush writes, read back as JSON, are the appended rows: perf times moved to wall clock by
    the offset, ints still ints, NaN written as null, the device and memory columns null."""
    nan = float("nan")
    off = 1_764_000_000_000_000_000
    rows = [(i, 10**13 + 7 * i, 10**13 + 7 * i + 5, 64.0, nan, 1000 + i if i % 2 else nan, 2000 + i, 3000 + i,
             400 + i, nan, 1, i % 2, 900 + i, nan if i == 0 else 950 + i) for i in range(50)]
    b = Buffers(off)
    for r in rows:
        b.add_step(r)
    with tempfile.TemporaryDirectory() as d:
        w = RecordWriter(Path(d) / "r.jsonl")
        w.append(b.drain())
        w.close()
        (line,) = (Path(d) / "r.jsonl").read_text().splitlines()
    rec = json.loads(line)
    assert rec["kind"] == "steps" and list(rec["cols"]) == list(STEP_COLS)
    cols = rec["cols"]
    assert cols["index"] == list(range(50))
    assert cols["start_ns"] == [off + 10**13 + 7 * i for i in range(50)]
    assert cols["end_ns"] == [off + 10**13 + 7 * i + 5 for i in range(50)]
    assert all(type(v) is int for v in cols["start_ns"] + cols["forward_ns"])
    assert cols["data_wait_ns"] == [1000 + i if i % 2 else None for i in range(50)]
    assert cols["samples"] == [64.0] * 50 and cols["tokens"] == [None] * 50
    assert cols["device_ns"] == cols["mem_allocated_peak_bytes"] == cols["mem_reserved_peak_bytes"] == [None] * 50
    assert cols["phase"] == [i % 2 for i in range(50)] and cols["epoch"] == [1] * 50
    assert cols["thread_cpu_ns"] == [900 + i for i in range(50)]
    assert cols["process_cpu_ns"] == [None] + [950 + i for i in range(1, 50)]
    assert not any(isinstance(v, float) and math.isnan(v) for c in cols.values() for v in c)


def test_stop_signal_wakes_the_waiter_and_stays_set() -> None:
    stop = StopSignal()
    assert stop.wait(0.01) is False and not stop.is_set()
    woke: list[float] = []

    def waiter() -> None:
        t0 = time.monotonic()
        stop.wait(60.0)
        woke.append(time.monotonic() - t0)

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.05)
    stop.set()
    stop.set()  # twice: no error
    t.join(timeout=30.0)
    assert woke and woke[0] < 30.0  # woken by set(), not by its 60 s timeout
    assert stop.is_set() and stop.wait(0.0) is True and stop.wait(5.0) is True
