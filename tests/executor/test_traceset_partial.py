"""A rank file cut mid-write (a still-running job) is analysed up to its last whole event, with a note."""

from __future__ import annotations

import gzip
from pathlib import Path

import orjson
import pytest

from stepscope.errors import TraceError
from stepscope.executor.traceset import analyze_traceset
from stepscope.traces.kineto import read_trace, read_trace_partial
from tests.executor.rankset import FIXTURE, rank_doc, small


def _doc() -> dict[str, object]:
    return small(orjson.loads(gzip.decompress(FIXTURE.read_bytes())))


def _cut_mid_event(data: bytes, whole: int) -> bytes:
    """``data`` cut inside the event after the first ``whole`` events of its traceEvents array."""
    start = data.index(b'"traceEvents":[') + len(b'"traceEvents":[')
    pos = start
    for _ in range(whole):
        pos = data.index(b'},{"', pos) + 1
    return data[:pos + 20]  # part of the next event only


@pytest.mark.parametrize("gz", [False, True])
def test_truncated_rank_is_read_up_to_its_last_whole_event(tmp_path: Path, gz: bool) -> None:
    doc = rank_doc(_doc(), 1, 2)
    events = doc["traceEvents"]
    assert isinstance(events, list)
    # the metadata keys come first, as Kineto writes them, so the header survives the cut
    data = orjson.dumps({"schemaVersion": 1, "distributedInfo": doc["distributedInfo"], "traceEvents": events})
    whole = 500
    cut = _cut_mid_event(data, whole)
    p = tmp_path / ("rank1.json.gz" if gz else "rank1.json")
    p.write_bytes(gzip.compress(cut) if gz else cut)
    with pytest.raises(TraceError, match="never ends"):
        read_trace(p)
    table, note = read_trace_partial(p)
    complete = [e for e in events[:whole] if e.get("ph") == "X"]
    assert len(table) == len(complete)
    assert table.meta.rank == 1 and table.meta.world_size == 2
    assert note is not None and f"{len(complete)} events" in note and str(p) in note


def test_trace_set_with_a_truncated_rank_notes_it_and_analyses_all(tmp_path: Path) -> None:
    base = _doc()
    for r in range(2):
        (tmp_path / f"rank{r}.json").write_bytes(orjson.dumps(rank_doc(base, r, 3)))
    data = orjson.dumps({"distributedInfo": {"rank": 2, "world_size": 3}, "traceEvents": base["traceEvents"]})
    (tmp_path / "rank2.json").write_bytes(_cut_mid_event(data, 800))
    s = analyze_traceset([tmp_path], workers=1)
    assert [a.rank for a in s.ranks] == [0, 1, 2] and not s.errors
    assert len(s.notes) == 1 and "rank2.json: truncated" in s.notes[0]
    assert s.ranks[2].events < s.ranks[0].events


def test_truncated_before_any_event_is_an_error_naming_the_file(tmp_path: Path) -> None:
    p = tmp_path / "rank0.json"
    p.write_bytes(b'{"distributedInfo": {"rank": 0}, "traceEvents": [{"ph": "X", "na')
    with pytest.raises(TraceError, match="truncated before its first whole event"):
        read_trace_partial(p)
