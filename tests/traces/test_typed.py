"""Typed (msgspec) decoding: the same EventTable as the dict (orjson) path, on every fixture and on odd values.

These test the Python reader, so they ask for it by name (the compiled reader is the default where built)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from stepscope.model.events import EventTable
from stepscope.traces import typed
from stepscope.traces.kineto import read_trace
from tests.traces.tracebuild import ev, fixture_files, kernel, launch, write

needs_msgspec = pytest.mark.skipif(not typed.AVAILABLE, reason="msgspec not installed (stepscope[fast])")


def _dict_path(path: Path, monkeypatch: pytest.MonkeyPatch) -> EventTable:
    with monkeypatch.context() as m:
        m.setattr(typed, "loads", orjson.loads)
        return read_trace(path, reader="python")


def _assert_same(a: EventTable, b: EventTable) -> None:
    assert sorted(a.cols) == sorted(b.cols)
    for k in a.cols:
        assert np.array_equal(a[k], b[k], equal_nan=a[k].dtype.kind == "f"), k
    assert (a.names, a.cats, a.shapes, a.colls, a.optypes, a.meta) == (b.names, b.cats, b.shapes, b.colls, b.optypes,
                                                                       b.meta)
    assert sorted(a.flows) == sorted(b.flows)
    for k in a.flows:
        assert np.array_equal(a.flows[k], b.flows[k]), k
    assert sorted(a.waits) == sorted(b.waits)
    for k in a.waits:
        assert np.array_equal(a.waits[k], b.waits[k]), k


@needs_msgspec
@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_tables_are_identical_to_the_dict_path(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    real = typed.loads

    def spy(data: Any) -> list[Any]:
        out = real(data)
        seen.append(typed.is_typed(out))
        return out

    with monkeypatch.context() as m:
        m.setattr(typed, "loads", spy)
        fast = read_trace(path, reader="python")
    assert seen and all(seen)  # every chunk of a real trace decodes to Structs (no silent fallback)
    _assert_same(fast, _dict_path(path, monkeypatch))


def _odd_events() -> list[dict[str, Any]]:
    coll = {"Collective name": "allreduce", "In msg nelems": 4, "Out msg nelems": 4, "Group size": 2,
            "dtype": "Float", "Process Group Ranks": "[0, 1]", "Process Group Name": "0"}
    return [
        ev("cpu_op", "aten::mm", 10.5, 5.0, **{"Input Dims": [[2, 3], [3, 4]], "External id": 7}),
        ev("cpu_op", "aten::mm", 20.0, 5.0, **{"Input Dims": [[2, 3], [3, 4]], "External id": 8}),
        launch(11.0, 1.0, corr=100, ext=7),
        kernel("k1", 30.0, 2.5, corr=100, grid=[2, 1, 1], block=[128, 1, 1], **{"blocks per SM": 0.5}),
        kernel("nccl", 40.0, 2.0, corr=101, **coll),
        {"ph": "X", "cat": "kernel", "name": "nocorr", "pid": 0, "tid": 7, "ts": 50.0, "dur": 1.0,
         "args": {"device": 0, "stream": 7}},
        {"ph": "f", "cat": "ac2g", "id": 102, "pid": 0, "tid": 7, "ts": 50.0, "bp": "e"},
        {"ph": "s", "cat": "ac2g", "id": 102, "pid": 1, "tid": 1, "ts": 12.0},
        {"ph": "X", "cat": "mystery", "name": "accel", "pid": 2, "tid": 3, "ts": 60.0, "dur": 1.0,
         "args": {"device": 1, "stream": 3, "correlation": -1}},
        {"ph": "X", "cat": "mystery", "name": "notaccel", "pid": 2, "tid": 3, "ts": 62.0, "dur": 1.0,
         "args": {"device": 1, "stream": 3}},
        {"ph": "X", "cat": "cpu_op", "name": "nodur", "pid": 1, "tid": 1, "ts": 70.0},
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}},
        {"ph": "X", "cat": "cpu_op", "name": "deep", "pid": 1, "tid": 1, "ts": 80, "dur": 1,
         "args": {"nested": {"a": [1, {"b": None}]}, "Input Dims": [[]]}},
    ]


@needs_msgspec
@pytest.mark.parametrize("oddity", [
    None,  # Structs hold everything
    {"tid": "stream 7"},  # a string thread id (int | str)
    {"ts": "81.5"},  # a string timestamp: the chunk goes through orjson
    {"args": None},  # null args
    {"args": {"correlation": True}},  # a boolean where an integer belongs
    {"args": {"External id": 3.0}},  # a float where an integer belongs
    {"name": 12},  # a number as a name
], ids=str)
def test_odd_values_give_the_dict_path_result(oddity: dict[str, Any] | None, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    events = _odd_events()
    if oddity:
        events.append(dict({"ph": "X", "cat": "cpu_op", "name": "odd", "pid": 1, "tid": 1, "ts": 90.0, "dur": 1.0},
                           **oddity))
    path = write(tmp_path / "t.json", events)
    fast = read_trace(path, reader="python")
    _assert_same(fast, _dict_path(path, monkeypatch))
    assert len(fast) == 9 + (oddity is not None)  # 10 complete events, the one without dur dropped


@needs_msgspec
def test_absent_and_present_minus_one_args_differ() -> None:
    [e] = typed.loads(b'[{"ph": "X", "args": {"stream": -1}}]')
    assert e.args.stream == -1 and e.args.correlation == typed.MISSING and e.args.coll_name is typed.UNSET


def test_malformed_json_raises_orjsons_error() -> None:
    with pytest.raises(orjson.JSONDecodeError):
        typed.loads(b'[{"ph": "X", "ts": }]')


def test_without_msgspec_the_reader_uses_orjson(tmp_path: Path) -> None:
    """A fresh interpreter where ``import msgspec`` fails reads the same table (the dict path)."""
    path = write(tmp_path / "t.json", _odd_events())
    code = ("import sys; sys.modules['msgspec'] = None\n"
            "from stepscope.traces import typed; from stepscope.traces.kineto import read_trace\n"
            "assert not typed.AVAILABLE\n"
            "t = read_trace(sys.argv[1], reader='python')\n"
            "print(len(t), int(t['correlation'].max()), t.shapes)")  # 102: from the flow
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}).stdout.split(" ", 2)
    assert out[:2] == ["9", "102"] and "[[2,3],[3,4]]" in out[2]
