"""Parser: fixtures, hand-built traces, and bad input (one-line TraceError naming the file)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import orjson
import pytest

from stepscope.errors import TraceError
from stepscope.model.events import EventKind
from stepscope.traces.kineto import read_trace
from tests.traces.tracebuild import ev, fixture_files, tiny_trace, write

FILES = fixture_files()


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_parses_to_the_raw_event_count(path: Path) -> None:
    raw = orjson.loads(gzip.decompress(path.read_bytes()))
    complete = [e for e in raw["traceEvents"] if e.get("ph") == "X" and "dur" in e and "ts" in e]
    table = read_trace(path)
    assert len(table) == len(complete)
    assert (np.diff(table["ts_ns"]) >= 0).all()
    dist = raw.get("distributedInfo") or {}
    if "rank" in dist:
        assert table.meta.rank == dist["rank"] and table.meta.rank_source == "distributedInfo"
    kernels = sum(e.get("cat") == "kernel" for e in complete)
    assert int((table["kind"] == EventKind.KERNEL).sum()) == kernels


def test_ns_resolution_timestamps_keep_their_fraction() -> None:
    table = read_trace(FILES[[p.parent.name for p in FILES].index("v100_1rank")])
    durs = table["dur_ns"][table["kind"] == EventKind.KERNEL]
    assert (durs % 1000 != 0).any()  # e.g. 4.928 µs -> 4928 ns, not rounded to whole µs


def test_plain_gzip_and_chunked_reads_agree(tmp_path: Path) -> None:
    events = tiny_trace() * 200
    plain = write(tmp_path / "rank2.json", events)
    gz = write(tmp_path / "rank2.json.gz", events, gz=True)
    a, b, c = read_trace(plain), read_trace(gz), read_trace(plain, block_bytes=997)
    assert len(a) == len(b) == len(c) == 10 * 200
    for col in ("ts_ns", "dur_ns", "correlation", "name", "bytes"):
        assert (a[col] == b[col]).all() and (a[col] == c[col]).all()
    assert a.meta.rank == 2 and a.meta.rank_source == "file name"


def test_bare_array_and_trailing_keys(tmp_path: Path) -> None:
    p = tmp_path / "t.json"
    p.write_text(json.dumps([ev("cpu_op", "a{\"}, {\"b", 1, 2)]))
    assert read_trace(p, rank=5).meta.rank == 5
    q = tmp_path / "u.json"
    q.write_text('{"traceEvents": [' + json.dumps(ev("cpu_op", "x", 1, 2)) + '], "distributedInfo": {"rank": 9}}')
    t = read_trace(q)
    assert t.meta.rank == 9 and t.names == ("x",)


def test_units_and_strings(tmp_path: Path) -> None:
    t = read_trace(write(tmp_path / "a.json", tiny_trace()))
    mm = t.names.index("aten::mm")
    row = np.flatnonzero(t["name"] == mm)[0]
    assert t["ts_ns"][row] == 94_000 and t["dur_ns"][row] == 49_000
    assert t.shapes[t["shape"][row]] == "[[2,3],[3,4]]"
    cp = np.flatnonzero(t["kind"] == EventKind.MEMCPY)[0]
    assert t["bytes"][cp] == 1000 and t["stream"][cp] == 7


BAD = {
    "truncated_gzip": lambda p: p.write_bytes(gzip.compress(json.dumps({"traceEvents": tiny_trace()}).encode())[:60]),
    "invalid_json": lambda p: p.write_text('{"traceEvents": [{"ph": "X", "ts": 1,, }]}'),
    "not_a_trace": lambda p: p.write_text('{"hello": "world"}'),
    "a_number": lambda p: p.write_text("42"),
    "truncated_json": lambda p: p.write_text(json.dumps({"traceEvents": tiny_trace()})[:-40]),
    "negative_duration": lambda p: write(p, [ev("cpu_op", "a", 10, -5)]),
    "events_not_objects": lambda p: p.write_text('{"traceEvents": [1, 2]}'),
    "binary": lambda p: p.write_bytes(b"\xff\xfe\x00garbage"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_naming_the_file(tmp_path: Path, case: str) -> None:
    p = tmp_path / f"{case}.json"
    BAD[case](p)
    with pytest.raises(TraceError) as err:
        read_trace(p)
    msg = str(err.value)
    assert str(p) in msg and "\n" not in msg and " — " in msg


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such trace file"):
        read_trace(tmp_path / "nope.json")


def test_empty_trace_and_unknown_categories(tmp_path: Path) -> None:
    assert len(read_trace(write(tmp_path / "e.json", []))) == 0
    t = read_trace(write(tmp_path / "u.json", [ev("mystery_cat", "x", 1, 2), {"ph": "X", "name": "no ts"}]))
    assert t.meta.unknown_categories == ("mystery_cat",)
    assert t["kind"][0] == EventKind.OTHER and t.meta.dropped_events == 1
