"""Issue 19, item 11: a hostile trace costs time linear in its size. A 300 MB stretch of whitespace (300 KB
gzipped) is read in seconds (it ran past 120 s); every shape of long stretch without events stays within 2 s
per MB, and a shape that is not a trace is one line."""

from __future__ import annotations

import gzip
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from stepscope.errors import TraceError
from stepscope.traces.kineto import read_trace
from tests.faults.store_kit import ROOT

EV = b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 1, "tid": 1, "ts": 1, "dur": 2}'

SHAPES: dict[str, Callable[[int], bytes]] = {
    "whitespace-between-events": lambda n: b'{"traceEvents": [' + EV + b"," + b" " * n + EV + b"]}",
    "whitespace-inside-an-event": lambda n: b'{"traceEvents": [' + EV + b', {"ph": "X",' + b"\n" * n + b'"ts": 1}]}',
    "whitespace-before-the-key": lambda n: b"{" + b" " * n + b'"traceEvents": [' + EV + b"]}",
    "one-long-string": lambda n: b'{"traceEvents": [{"ph": "X", "name": "' + b"a" * n + b'", "ts": 1, "dur": 1}]}',
    "escaped-quotes": lambda n: b'{"traceEvents": [{"ph": "X", "name": "' + b'\\"' * (n // 2) + b'", "ts": 1}]}',
    "decoy-keys-in-a-string": lambda n: b'{"a": "' + b'\\"traceEvents\\": [' * (n // 18) + b'", "traceEvents": ['
                                        + EV + b"]}",
    "deep-brackets": lambda n: b'{"traceEvents": [' + b"[" * (n // 2) + b"]" * (n // 2) + b"]}",
    "never-ends": lambda n: b'{"traceEvents": [' + (EV + b",") * (n // (len(EV) + 1)),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_long_stretches_without_events_cost_linear_time(tmp_path: Path, shape: str) -> None:
    mb = 4
    path = tmp_path / "t.json"
    path.write_bytes(SHAPES[shape](mb * 1_000_000))
    t0 = time.perf_counter()
    try:
        read_trace(path)
    except TraceError as e:
        assert "\n" not in str(e) and len(str(e)) < 400, str(e)
    elapsed = time.perf_counter() - t0
    assert elapsed < 2.0 * mb, f"{shape}: {elapsed:.1f} s for {mb} MB"


READ = "import sys, time; from stepscope.traces.kineto import read_trace; t = time.perf_counter(); " \
       "n = len(read_trace(sys.argv[1])); print(n, round(time.perf_counter() - t, 2))"


def test_three_hundred_megabytes_of_whitespace(tmp_path: Path) -> None:
    """The reported file: 300 MB of whitespace between two events, 1.4 MB gzipped; read in a real process."""
    path = tmp_path / "ws.json.gz"
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(b'{"traceEvents": [' + EV + b",")
        block = b" " * (1 << 20)
        for _ in range(300):
            f.write(block)
        f.write(EV + b"]}")
    assert path.stat().st_size < 2_000_000
    p = subprocess.run([sys.executable, "-c", READ, str(path)], capture_output=True, text=True, timeout=120,
                       env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    events, seconds = p.stdout.split()
    assert int(events) == 2
    assert float(seconds) < 60, seconds  # ~1 s here; it ran past 120 s


def test_huge_numbers_are_dropped_and_counted_not_negative_durations(tmp_path: Path) -> None:
    """ts/dur beyond int64 nanoseconds once overflowed (NumPy warnings) into a "negative duration" refusal."""
    import json
    import warnings

    events = [json.loads(EV) for _ in range(4)]
    events[1]["dur"], events[2]["ts"], events[3]["args"] = 1e20, 2e30, {"correlation": 10**30, "bytes": -(10**25)}
    path = tmp_path / "huge.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = read_trace(path)
    assert len(table) == 2 and table.meta.dropped_events == 2
    assert int(table.cols["dur_ns"].min()) == 2000
