"""`stepscope trace analyze`: the queue, bandwidth, memory, sequence and annotation sections (terminal and JSON)
and the kernel-sequence options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope.cli import main
from tests.analyze.trace.test_counters_handbuilt import memory_trace
from tests.traces.tracebuild import PROFILER_SPAN, kernel, launch, write


def _trace(tmp_path: Path) -> Path:
    """A (1 µs) B (1 µs) three times on stream 7, each launched 5 µs before it starts, and the memory records of
    :func:`memory_trace` (peak 7596 B in aten::relu)."""
    events = [PROFILER_SPAN, *memory_trace()]
    for i, name in enumerate("ABABAB"):
        events += [launch(1000 + 10 * i, 1, i + 1), kernel(name, 1005 + 10 * i, 1, i + 1)]
    return write(tmp_path / "rank0.json", events)


def test_sections_in_json_and_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _trace(tmp_path)
    assert main(["trace", "analyze", str(path), "--json", "--seq-min", "2", "--seq-max", "2", "--seq-top", "1"]) == 0
    rank = json.loads(capsys.readouterr().out)["ranks"][0]
    (seq,) = rank["sequences"]["sequences"]
    assert (seq["names"], seq["count"], seq["total_ns"]) == (["A", "B"], 3, 6_000)
    (q,) = rank["queues"]["streams"]
    assert q["max"] == 1 and q["series"]["length"] == [1, 0] * 6
    cpu = rank["memory"]["devices"][0]
    assert (cpu["peak_bytes"], cpu["peak_owner"]) == (7596, "aten::relu")
    assert rank["annotations"]["rows"][0]["name"] == "## fwd ##"
    assert main(["trace", "analyze", str(path)]) == 0
    out = capsys.readouterr().out
    for title in ("launch queue per stream", "memory (allocator totals", "most frequent GPU kernel sequences",
                  "time by annotation", "## fwd ##", "A → B"):
        assert title in out


@pytest.mark.parametrize("flags", [["--seq-min", "4", "--seq-max", "3"], ["--seq-top", "0"], ["--seq-min", "0"]])
def test_bad_sequence_options_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           flags: list[str]) -> None:
    assert main(["trace", "analyze", str(_trace(tmp_path)), *flags]) == 2
    err = capsys.readouterr().err
    assert "--seq-min" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
