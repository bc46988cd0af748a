"""The compiled reader gives the Python reader's table, column for column, on every fixture and on traces built to
be awkward; what it does not read exactly it hands back to the Python reader, whose results and errors stand."""

from __future__ import annotations

import gzip
import json
import math
import os
import random
import subprocess
import sys
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest

from stepscope.errors import TraceError
from stepscope.model.events import EventTable
from stepscope.traces import compiled
from stepscope.traces.columns import us_to_ns
from stepscope.traces.jsonstream import TraceEventSplitter
from stepscope.traces.kineto import read_trace, read_trace_partial
from tests.conftest import TRACES
from tests.traces.tracebuild import PROFILER_SPAN, tiny_trace, write

T = TypeVar("T")

pytestmark = pytest.mark.skipif(not compiled.AVAILABLE, reason="the compiled reader is not built (make setup)")

FIXTURES = sorted(p for p in TRACES.glob("*/*.json*"))


def assert_same(c: EventTable, py: EventTable) -> None:
    assert (c.names, c.cats, c.shapes, c.colls, c.optypes, c.meta) == (py.names, py.cats, py.shapes, py.colls,
                                                                       py.optypes, py.meta)
    assert list(c.cols) == list(py.cols)
    for key, col in py.cols.items():
        assert c.cols[key].dtype == col.dtype, key
        assert c.cols[key].tobytes() == col.tobytes(), key  # byte for byte: NaNs and -0.0 included
    assert list(c.flows) == list(py.flows)
    for key, col in py.flows.items():
        assert c.flows[key].dtype == col.dtype and c.flows[key].tobytes() == col.tobytes(), key
    assert sorted(c.waits) == sorted(py.waits)
    for key, col in py.waits.items():
        assert c.waits[key].dtype == col.dtype and c.waits[key].tobytes() == col.tobytes(), key


def read_by_c_only(path: Path, block: int = 256 * 1024) -> None:
    """Read with the compiled reader and no fallback (raises Unsupported where it would fall back)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as stream:
        splitter = TraceEventSplitter(stream, block)
        compiled.read_columns(splitter, stream, block, allow_truncated=False)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_reads_the_same_by_c_without_falling_back(path: Path) -> None:
    read_by_c_only(path)
    c = read_trace(path, reader="c")
    assert len(c) > 0
    assert_same(c, read_trace(path, reader="python"))


@pytest.mark.parametrize("block", [1, 7, 113])
def test_tiny_blocks_give_the_same_table(block: int) -> None:
    path = TRACES / "mi250_1rank" / "rank0.json.gz"
    assert_same(read_trace(path, reader="c", block_bytes=block), read_trace(path, reader="python"))


AWKWARD = (
    '{"schemaVersion": 1, "traceEvents": [\n'
    '{"ph": "X", "cat": "cpu_op", "name": "caf\\u00e9 \\ud83d\\ude00 \\"q\\" \\\\ \\/ \\n\\t\\b\\f\\r", '
    '"pid": 1, "tid": 2, "ts": 1712195495519689.047, "dur": 63.813, '
    '"args": {"External id": 5, "Input Dims": [[2, 3], [], [[1]], true, null, -4], "x": {"y": [1, {"z": "}"}]}}},\n'
    '  {"ph":"X","cat":"cpu_op","name":"café 😀 \\"q\\" \\\\ / \\n\\t\\b\\f\\r","pid":"0x10","tid":" 7 ",'
    '"ts":1.5e3,"dur":2E-1,"args":{"Input Dims":[[2,3],[],[[1]],true,null,-4]}},\n'
    '{"ph": "X", "cat": "kernel", "name": "ncclKernel", "pid": 0, "tid": "0b111", "ts": 100, "dur": 0.0000125, '
    '"args": {"stream": 7, "device": 0, "correlation": 9, "grid": [4, 2, 1], "block": [], "blocks per SM": 1, '
    '"warps per SM": null, "est. achieved occupancy %": 1e39, "Collective name": "allreduce", '
    '"In msg nelems": 10, "Process Group Ranks": "[0, 1]", "dtype": "Float", "Group size": 2}},\n'
    '{"ph": "X", "cat": "kernel", "name": "ncclKernel", "pid": 0, "tid": 7, "ts": 101, "dur": 1, '
    '"args": {"stream": 7, "device": 0, "correlation": 10, "grid": 5, "block": [32, 4], "Collective name":'
    '"allreduce",   "In msg nelems" : 10, "Process Group Ranks": "[0, 1]", "dtype": "Float", "Group size": 2.0}},\n'
    '{"ph": "X", "cat": "Kernel", "name": "k3", "pid": 0, "tid": 7, "ts": 102, "dur": 1, '
    '"args": {"stream": "0x7", "device": 0, "Collective name": ["odd", {"a": 1}]}},\n'
    '{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 9, "ts": 103, "dur": 2, '
    '"args": {"device": 0, "bytes": 1000, "correlation": 11}},\n'
    '{"ph": "X", "cat": "my_accel", "name": "accel work", "pid": 0, "tid": 9, "ts": 104, "dur": 2, '
    '"args": {"device": 1, "stream": 3, "correlation": 12}},\n'
    '{"ph": "X", "cat": "my_accel", "name": "not device work", "pid": 0, "tid": 9, "ts": 104, "dur": 2, '
    '"args": {"device": "1", "stream": 3, "correlation": 12}},\n'
    '{"ph": "X", "cat": "cpu_op", "name": "no ts", "pid": 1, "tid": 2, "dur": 2},\n'
    '{"ph": "X", "cat": "cpu_op", "name": "null ts", "pid": 1, "tid": 2, "ts": null, "dur": 2},\n'
    '{"ph": "X", "cat": "cpu_op", "name": "huge", "pid": 1, "tid": 2, "ts": 5e15, "dur": 2},\n'
    '{"ph": "X", "cat": "cpu_op", "name": "-0", "pid": -3, "tid": null, "ts": -0.0, "dur": -0, "args": null},\n'
    '{"ph": "X", "name": "no cat", "ts": 99.9995, "dur": 0.0005, "args": [1, 2]},\n'
    '{"ph": "X", "cat": "", "ts": 1e2, "dur": 1},\n'
    '{"ph": "s", "id": 9, "pid": 1, "tid": 2, "ts": 95, "cat": "ac2g", "name": "flow", "bp": "e"},\n'
    '{"ph": "f", "id": "10", "pid": 0, "tid": 7, "ts": 101, "cat": "ac2g", "name": "flow", "bp": "e"},\n'
    '{"ph": "f", "id": 11, "pid": 0, "tid": 9, "cat": "async_cpu_to_gpu"},\n'
    '{"ph": "s", "id": 12, "pid": 0, "tid": 9, "ts": 1, "cat": "other_flow"},\n'
    '{"ph": "M", "name": "process_name", "pid": "Spans", "ts": "not a number", "args": {"name": "python"}},\n'
    '{"ph": "i", "s": "t", "name": "instant", "ts": [1], "dur": {"a": 1}, "cat": 5},\n'
    '{"ph": 7, "cat": "cpu_op", "name": "ph not a string", "ts": 5, "dur": 1},\n'
    '{"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans", "tid": "PyTorch Profiler",'
    ' "ts": 0, "dur": 300, "args": {}},\n'
    '{}\n'
    '], "deviceProperties": [{"id": 0, "name": "GPU \\u0041"}], "distributedInfo": {"rank": 3}}'
).encode()


def test_awkward_trace_reads_the_same_by_c_without_falling_back(tmp_path: Path) -> None:
    path = tmp_path / "awkward.json"
    path.write_bytes(AWKWARD)
    json.loads(AWKWARD)  # valid JSON, so the test checks the reading and not an error path
    read_by_c_only(path)
    c, py = read_trace(path, reader="c"), read_trace(path, reader="python")
    assert_same(c, py)
    assert c.meta.dropped_events == 3 and "my_accel" not in c.meta.unknown_categories
    assert "café 😀 \"q\" \\ / \n\t\b\f\r" in c.names and len(c.shapes) == 1 and len(c.colls) == 2


def test_every_cut_of_a_block_gives_the_same_columns(tmp_path: Path) -> None:
    """Feed the awkward events cut at every byte (inside strings, escapes, numbers, literals, UTF-8 sequences):
    whatever the cut, the builder ends with the columns of one whole feed."""
    body = AWKWARD[AWKWARD.index(b"[") + 1:AWKWARD.index(b'], "deviceProperties"') + 1]
    columns = ("ts", "dur", "cat", "name", "pid", "tid", "correlation", "external_id", "stream", "device", "bytes",
               "flags", "blocks_per_sm", "warps_per_sm", "occupancy", "grid", "block", "dims", "coll", "wrong",
               "flow_id", "flow_start", "flow_ts", "flow_pid", "flow_tid")

    def raw(cut: int) -> tuple[object, ...]:
        builder = compiled._kineto_reader.Builder()
        consumed, ended = builder.feed(body[:cut])
        assert not ended
        more, ended = builder.feed(body[consumed:])
        assert ended and consumed + more == len(body)
        return (builder.counts(), *(bytes(memoryview(builder.take(c))) for c in columns),
                *(builder.strings(t) for t in ("name", "cat", "dims", "coll")))

    whole = raw(0)
    assert whole[0] == (12, 3, 3, 0)  # events, flows, dropped, strings cut
    for cut in range(1, len(body)):
        assert raw(cut) == whole, cut


FALLBACKS = {
    "string ts": '{"ph": "X", "cat": "cpu_op", "name": "a", "ts": "12.5", "dur": 1}',
    "bool correlation": '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, '
                        '"args": {"correlation": true, "stream": 7}}',
    "float pid": '{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "pid": 1.5}',
    "duplicate key": '{"ph": "X", "cat": "cpu_op", "name": "a", "name": "b", "ts": 1, "dur": 1}',
    "escaped key": '{"ph": "X", "cat": "cpu_op", "n\\u0061me": "b", "ts": 1, "dur": 1}',
    "int beyond 64 bits": '{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, '
                          '"args": {"External id": 123456789012345678901}}',
    "null cat": '{"ph": "X", "cat": null, "name": "a", "ts": 1, "dur": 1}',
    "string in dims": '{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "args": {"Input Dims": ["x"]}}',
    "float grid": '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": {"grid": [1.5]}}',
    "string blocks per SM": '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, '
                            '"args": {"blocks per SM": "2"}}',
    "decimal id with a leading zero": '{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "tid": "07"}',
    "trailing comma": '{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1},',
}


@pytest.mark.parametrize("case", FALLBACKS)
def test_what_c_leaves_is_read_by_python(tmp_path: Path, case: str) -> None:
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "z", "ts": 0, "dur": 5},\n'
                    + FALLBACKS[case] + "]}")
    with pytest.raises(compiled.Unsupported):
        read_by_c_only(path)
    assert_same(read_trace(path, reader="c"), read_trace(path, reader="python"))


BROKEN = {
    "missing comma": b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": 1} {"ph": "X"}]}',
    "bad literal": b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": nul}]}',
    "not an object": b'{"traceEvents": [{"ph": "X", "cat": "a", "ts": 1, "dur": 1}, 5]}',
    "bad utf-8": b'{"traceEvents": [{"ph": "X", "cat": "\xff", "ts": 1, "dur": 1}]}',
    "control character": b'{"traceEvents": [{"ph": "X", "cat": "a\x01", "ts": 1, "dur": 1}]}',
    "no end": b'{"traceEvents": [{"ph": "X", "cat": "a", "ts": 1, "dur": 1}, {"ph": "X", "cat"',
    "bad header": b'{"traceEvents": [{"ph": "X", "cat": "a", "ts": 1, "dur": 1}], "x": }',
    "negative duration": b'{"traceEvents": [{"ph": "X", "cat": "a", "name": "n", "ts": 1, "dur": -1}]}',
}


@pytest.mark.parametrize("case", BROKEN)
def test_broken_files_fail_as_the_python_reader_fails(tmp_path: Path, case: str) -> None:
    path = tmp_path / "t.json"
    path.write_bytes(BROKEN[case])
    messages = []
    for reader in ("c", "python"):
        with pytest.raises(TraceError) as err:
            read_trace(path, reader=reader)
        messages.append(str(err.value))
    assert messages[0] == messages[1] and "\n" not in messages[0]


@pytest.mark.parametrize("gz", [False, True])
def test_truncated_files_read_the_same(tmp_path: Path, gz: bool) -> None:
    data = json.dumps({"schemaVersion": 1, "traceEvents": [PROFILER_SPAN, *tiny_trace()] * 3}).encode()
    for cut in range(40, len(data) - 30, 97):
        path = tmp_path / ("t.json.gz" if gz else "t.json")
        path.write_bytes(gzip.compress(data[:cut]) if gz else data[:cut])
        c, py = _by_each_reader(read_trace_partial, path)
        if isinstance(py, str):
            assert c == py
        else:
            assert not isinstance(c, str)
            assert_same(c[0], py[0])
            assert c[1] == py[1]


def test_the_reader_is_chosen_by_argument_or_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(compiled.READER_ENV, raising=False)
    assert compiled.use_compiled()
    monkeypatch.setenv(compiled.READER_ENV, "python")
    assert not compiled.use_compiled() and compiled.use_compiled("c")
    monkeypatch.setenv(compiled.READER_ENV, "rust")
    path = write(tmp_path / "t.json", tiny_trace())
    with pytest.raises(TraceError, match="trace reader 'rust': expected one of auto, c, python"):
        read_trace(path)


@pytest.mark.parametrize("oddity", [
    None, {"tid": "stream 7"}, {"tid": "0x1F"}, {"tid": "1_000"}, {"pid": "-3"}, {"ts": "81.5"}, {"args": None},
    {"args": {"correlation": True}}, {"args": {"External id": 3.0}}, {"name": 12}, {"ts": 81.123456789012345678},
    {"ts": 1e2}, {"dur": 12345678901234567}, {"args": {"correlation": -(2**62)}}, {"args": {"stream": None}},
], ids=str)
def test_odd_values_read_as_the_python_reader_reads_them(oddity: dict[str, object] | None, tmp_path: Path) -> None:
    events = [*tiny_trace(), {"ph": "f", "cat": "ac2g", "id": 4, "pid": 0, "tid": 7, "ts": 160, "bp": "e"}]
    if oddity:
        events.append({"ph": "X", "cat": "kernel", "name": "odd", "pid": 0, "tid": 7, "ts": 90.0, "dur": 1.0,
                       "args": {"stream": 7, "device": 0}, **oddity})
    path = write(tmp_path / "t.json", events)
    assert_same(read_trace(path, reader="c"), read_trace(path, reader="python"))


STALE = "types.SimpleNamespace(LAYOUT=1, Builder=None)"
"""A build of the reader before its columns held the table's types (it has no LAYOUT: 1)."""


@pytest.mark.parametrize("extension", ["None", STALE], ids=["not built", "stale build"])
def test_without_the_extension_the_python_reader_reads(tmp_path: Path, extension: str) -> None:
    """A fresh interpreter where the extension does not import (a failed compile), or is a build of older source,
    reads with Python; asking for the compiled reader by name is then one clear line."""
    path = write(tmp_path / "t.json", tiny_trace())
    code = (f"import sys, types; sys.modules['stepscope.traces._kineto_reader'] = {extension}\n"
            "from stepscope.errors import TraceError\n"
            "from stepscope.traces import compiled; from stepscope.traces.kineto import read_trace\n"
            "assert not compiled.AVAILABLE and not compiled.use_compiled()\n"
            "print(len(read_trace(sys.argv[1])))\n"
            "try:\n    read_trace(sys.argv[1], reader='c')\nexcept TraceError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}).stdout.splitlines()
    assert out == [str(len(read_trace(path, reader="python"))),
                   f"{path}: the compiled trace reader is not built, or built from older source (run `make setup`, "
                   "or `python setup.py build_ext --inplace` in a checkout)"]


def _number_texts(seed: int) -> list[str]:
    """Numbers as traces write them (µs with 0-6 decimals, 17-25 significant digits, exponents) and the hard
    cases of decimal -> double: values on or next to the half-way point between two doubles."""
    rng = random.Random(seed)
    out = []
    for _ in range(6000):
        whole = str(rng.randrange(10 ** rng.randrange(1, 17)))
        out.append(whole + ("." + "".join(rng.choice("0123456789") for _ in range(rng.randrange(1, 7)))
                            if rng.random() < 0.8 else ""))
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randrange(17, 26))).lstrip("0") or "1"
        out.append(f"{digits[:rng.randrange(1, 10)]}.{digits[9:]}")
        out.append(f"{rng.randrange(1, 10**rng.randrange(1, 20))}e{rng.randrange(-30, 8)}")
        d = rng.uniform(0, 4e15)
        half = (Decimal(d) + Decimal(math.nextafter(d, math.inf))) / 2  # exactly half-way
        out.append(f"{half:f}"[:rng.randrange(18, 40)])
        out.append(f"{half:f}")
    return [t for t in out if float(t) < 4.5e15]  # beyond: dropped as damage


@pytest.mark.parametrize("seed", range(2))
def test_numbers_round_as_python_floats(seed: int) -> None:
    texts = _number_texts(seed)
    body = ",".join(f'{{"ph": "X", "ts": {t}, "dur": -{t}}}' for t in texts) + "]"
    parse = compiled._kineto_reader.parse_float
    wrong = [t for t in texts for got in [parse(f"{t},".encode())] if got != float(t) or str(got) != str(float(t))]
    assert not wrong, wrong[:5]
    builder = compiled._kineto_reader.Builder()
    assert builder.feed(body.encode()) == (len(body), True)
    want = np.asarray([float(t) for t in texts])
    assert builder.counts()[0] == len(texts)
    ts = np.frombuffer(memoryview(builder.take("ts")), dtype=np.int64)
    dur = np.frombuffer(memoryview(builder.take("dur")), dtype=np.int64)
    assert np.array_equal(ts, us_to_ns(want))  # the Python reader's rules, from Python's floats
    assert np.array_equal(dur, np.rint(-want * 1000.0).astype(np.int64))


_POOL: list[object] = [
    None, True, False, 0, -1, 7, 1.5, -0.0, "07", "0x1f", "abc", "", " 7", [], [1, 2], [[1], [2, 3]], {}, {"a": 1},
    2**62, -(2**62), 2**63 - 1, 2**63, 1e300, "1e3", "\u0663", 4.5e15, 1e-300, 123.456789, "X", "s", "f", "ac2g",
    "kernel", "cpu_op", [1.5], [True], ["x"], [2**40, 2**40], "[0, 1]", [-0.0]]
_TOP = ["ph", "ts", "dur", "cat", "name", "pid", "tid", "id", "args"]
_ARGS = ["correlation", "External id", "stream", "device", "bytes", "blocks per SM", "warps per SM",
         "est. achieved occupancy %", "grid", "block", "Input Dims", "Collective name", "In msg nelems", "Group size",
         "Process Group Ranks", "Src Rank"]


def _by_each_reader(read: Callable[..., T], path: Path) -> tuple[T | str, T | str]:
    """What ``read(path, reader=...)`` gives with the C reader and with the Python one: a result or its error line."""
    out: list[T | str] = []
    for reader in ("c", "python"):
        try:
            out.append(read(path, reader=reader))
        except TraceError as exc:
            out.append(str(exc))
    return out[0], out[1]


def _same_outcome(path: Path) -> None:
    """Both readers give the same table, or the same one-line error."""
    c, py = _by_each_reader(read_trace, path)
    if isinstance(c, str) or isinstance(py, str):
        assert c == py
    else:
        assert_same(c, py)


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("seed", range(3))
def test_random_values_in_the_read_fields_read_as_python_reads_them(seed: int, tmp_path: Path) -> None:
    """Fields the engine reads set to values of every type (some taken by C, some sent to Python)."""
    rng = random.Random(seed)
    base = [*json.loads(AWKWARD)["traceEvents"], PROFILER_SPAN, *tiny_trace()]
    for _ in range(60):
        events = json.loads(json.dumps(base))
        for _ in range(rng.randrange(1, 5)):
            e = rng.choice(events)
            if rng.random() < 0.5:
                e[rng.choice(_TOP)] = rng.choice(_POOL)
            else:
                args = e["args"] if isinstance(e.get("args"), dict) else e.setdefault("args", {})
                if isinstance(args, dict):
                    args[rng.choice(_ARGS)] = rng.choice(_POOL)
        path = tmp_path / "t.json"
        path.write_text(json.dumps({"traceEvents": events}, indent=1 if rng.random() < 0.5 else None,
                                   ensure_ascii=rng.random() < 0.5))
        _same_outcome(path)


@pytest.mark.parametrize("seed", range(3))
def test_damaged_bytes_read_or_fail_as_python_does(seed: int, tmp_path: Path) -> None:
    """Bytes flipped, inserted or deleted anywhere: the same table or the same error from both readers."""
    rng = random.Random(seed)
    alphabet = b'{}[],:"\\ 0123456789.eE-+tfnulrsX\xc3\xa9\xff\x00\n'
    for _ in range(150):
        data = bytearray(AWKWARD)
        for _ in range(rng.randrange(1, 4)):
            pos = rng.randrange(len(data))
            op = rng.random()
            if op < 0.4:
                data[pos] = rng.choice(alphabet)
            elif op < 0.7:
                data[pos:pos] = bytes([rng.choice(alphabet)])
            else:
                del data[pos:pos + rng.randrange(1, 4)]
        path = tmp_path / "t.json"
        path.write_bytes(bytes(data))
        _same_outcome(path)


def test_a_flow_phase_event_with_a_list_category_is_not_a_flow(tmp_path: Path) -> None:
    """Was a TypeError traceback (unhashable list) in the Python reader; both readers now skip it."""
    path = write(tmp_path / "t.json", [*tiny_trace(), {"ph": "s", "cat": ["ac2g"], "id": 5, "pid": 1, "tid": 1,
                                                       "ts": 96}])
    for reader in ("c", "python"):
        assert read_trace(path, reader=reader).flows == {}


def test_sync_records_wait_args_read_alike(tmp_path: Path) -> None:
    """A Stream Wait Event / Event Sync record's wait_on_* args go to the side table ``waits``, by the record's
    correlation, in both readers; a value that is not an integer reads as absent; other events' are not kept."""
    def sync(name: str, ts: float, corr: int, **wait: object) -> dict[str, object]:
        return {"ph": "X", "cat": "cuda_sync", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": 1.0,
                "args": {"device": 0, "stream": 7, "correlation": corr, **wait}}

    events = [sync("Stream Wait Event", 30.0, 12, wait_on_stream=20, wait_on_cuda_event_record_corr_id=11),
              sync("Event Sync", 10.0, 40, wait_on_stream="0x15", wait_on_cuda_event_record_corr_id=[3]),
              sync("Stream Sync", 20.0, 5),  # no wait args: not in the table
              sync("Stream Wait Event", 40.0, 2, wait_on_cuda_event_record_corr_id=1),
              {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": 5.0, "dur": 50.0,
               "args": {"wait_on_stream": 3, "wait_on_cuda_event_record_corr_id": 4}}]
    path = write(tmp_path / "t.json", events)
    read_by_c_only(path)
    c = read_trace(path, reader="c")
    assert_same(c, read_trace(path, reader="python"))
    assert {k: v.tolist() for k, v in c.waits.items()} == {
        "correlation": [2, 12, 40], "stream": [-1, 20, 21], "record_corr": [1, 11, -1]}
