"""Issue 44, item 5: the trace fuzz grows by 2,400 seeded inputs of the kinds that escaped before: a value of every
JSON type in every field either reader reads (top-level fields, every launch and collective argument, flows), nesting
from just under to far past the bound at every position relative to the read blocks (small blocks put the deep value
across block boundaries), and long names, categories and argument strings around the cap. Each input is read by the
C reader and by the Python one: both end in the same table or the same one-line TraceError, with NumPy warnings
turned into errors. The inputs are also written to a folder for the sanitizer build (`make sanitize`) when
STEPSCOPE_FUZZ_OUT names one."""

from __future__ import annotations

import json
import os
import random
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from stepscope.errors import TraceError
from stepscope.model.events import EventTable
from stepscope.traces import compiled
from stepscope.traces.jsonstream import MAX_DEPTH
from stepscope.traces.kineto import read_trace
from stepscope.traces.notes import MAX_NAME_CHARS

SEED = 44
TYPES, DEEP, LONG = 1600, 640, 160
READERS = ["c", "python"] if compiled.AVAILABLE else ["python"]

BASE: list[dict[str, Any]] = [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 500},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 50,
     "args": {"External id": 3, "Input Dims": [[4, 8], [8, 2]]}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 20, "dur": 5,
     "args": {"correlation": 9, "External id": 3}},
    {"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 30, "dur": 40,
     "args": {"device": 0, "stream": 7, "correlation": 9, "grid": [4, 1, 1], "block": [128, 1, 1],
              "blocks per SM": 0.5, "warps per SM": 2.0, "est. achieved occupancy %": 12}},
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "pid": 0, "tid": 7, "ts": 80, "dur": 4,
     "args": {"device": 0, "stream": 7, "correlation": 10, "bytes": 4096}},
    {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce", "pid": 0, "tid": 8, "ts": 90, "dur": 30,
     "args": {"device": 0, "stream": 8, "correlation": 11, "Collective name": "allreduce", "In msg nelems": 64,
              "Out msg nelems": 64, "Group size": 2, "dtype": "Float", "Process Group Ranks": "[0, 1]"}},
    {"ph": "s", "cat": "ac2g", "name": "launch", "id": 9, "pid": 1, "tid": 1, "ts": 20},
    {"ph": "f", "cat": "ac2g", "name": "launch", "id": 9, "pid": 0, "tid": 7, "ts": 30, "bp": "e"},
    {"ph": "i", "name": "marker", "pid": 1, "tid": 1, "ts": 40, "s": "t"},
]
TOP = ["ph", "ts", "dur", "cat", "name", "pid", "tid", "id", "args"]
ARGS = ["correlation", "External id", "stream", "device", "bytes", "blocks per SM", "warps per SM",
        "est. achieved occupancy %", "grid", "block", "Input Dims", "Collective name", "In msg nelems",
        "Out msg nelems", "Group size", "dtype", "Process Group Ranks", "Process Group Name", "Src Rank", "Dst Rank"]
VALUES: list[Any] = [None, True, False, 0, -1, 7, 2**62, -(2**62), 2**63 - 1, 1.5, -0.0, 1e300, "", "7", "0x10",
                     "07", "nan", "1e999", "x", [], {}, [1], [1.5], [[2]], [None], ["x"], [True], {"a": 1},
                     {"a": [1, {"b": []}]}, [[], [[]]], [1, [2, [3]]], "é😀", "\u0000", "[0, 1]"]


def _value(rng: random.Random) -> Any:
    v = rng.choice(VALUES)
    return rng.choice([v, [v], {"k": v}]) if rng.random() < 0.15 else v


def _wrong_types(rng: random.Random) -> tuple[str, bool | None]:
    events = json.loads(json.dumps(BASE))
    for _ in range(rng.randint(1, 4)):
        e = rng.choice(events)
        if rng.random() < 0.4:
            e[rng.choice(TOP)] = _value(rng)
        else:
            args = e.get("args")
            if not isinstance(args, dict):
                args = e["args"] = {}
            args[rng.choice(ARGS)] = _value(rng)
    return json.dumps({"schemaVersion": 1, "traceEvents": events}), None


# where a deep value goes: (a template holding V, the level V's own brackets start at; 0: in the header)
PLACES = [
    ('{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "extra": V}', 2),
    ('{"ph": "X", "cat": "cpu_op", "name": "a", "ts": V, "dur": 1}', 2),
    ('{"ph": "X", "cat": "cpu_op", "name": V, "ts": 1, "dur": 1}', 2),
    ('{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "args": V}', 2),
    ('{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "args": {"x": V}}', 3),
    ('{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": {"stream": V}}', 3),
    ('{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": {"warps per SM": V}}', 3),
    ('{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "args": {"Input Dims": V}}', 3),
    ('{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": {"grid": [2, V]}}', 4),
    ('{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "args": {"Collective name": V}}', 3),
    ('{"ph": "s", "cat": "ac2g", "id": V, "ts": 1, "pid": 0, "tid": 1}', 2),
    ('{"ph": "i", "name": "m", "args": {"x": V}}', 3),
    ("HEADER_BEFORE", 0),
    ("HEADER_AFTER", 0),
    ("HEADER_DEVICE", 3),  # a device's name: the value starts 3 levels below the top object, as an args value does
]


def _deep(rng: random.Random) -> tuple[str, bool | None]:
    """A trace with one deep value, and whether it is past the bound (its innermost level > MAX_DEPTH)."""
    template, start = rng.choice(PLACES)
    level = rng.choice([rng.randint(MAX_DEPTH - 30, MAX_DEPTH + 30), MAX_DEPTH, MAX_DEPTH + 1,
                        rng.randint(MAX_DEPTH, 20 * MAX_DEPTH)])
    opener = rng.choice("[{")
    depth = max(1, level - max(start, 1) + 1)
    value = "[" * depth + "]" * depth if opener == "[" else '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)
    events = [json.dumps(e) for e in BASE]
    too_deep = level > MAX_DEPTH
    if template == "HEADER_BEFORE":
        return '{"x": ' + value + ', "traceEvents": [' + ", ".join(events) + "]}", too_deep
    if template == "HEADER_AFTER":
        return '{"traceEvents": [' + ", ".join(events) + '], "x": ' + value + "}", too_deep
    if template == "HEADER_DEVICE":
        return ('{"deviceProperties": [{"id": 0, "name": ' + value + '}], "traceEvents": [' + ", ".join(events)
                + "]}", too_deep)
    events.insert(rng.randrange(len(events) + 1), template.replace("V", value))
    return '{"traceEvents": [' + ", ".join(events) + "]}", too_deep


def _long(rng: random.Random) -> tuple[str, bool | None]:
    events = json.loads(json.dumps(BASE))
    for _ in range(rng.randint(1, 3)):
        n = rng.choice([MAX_NAME_CHARS - 1, MAX_NAME_CHARS, MAX_NAME_CHARS + 1, 3 * MAX_NAME_CHARS])
        text = rng.choice(["n", "é", "😀", "\\"]) * n
        e = rng.choice(events)
        where = rng.random()
        if where < 0.4:
            e["name"] = text
        elif where < 0.6:
            e["cat"] = text
        else:
            args = e.setdefault("args", {})
            if isinstance(args, dict):
                args[rng.choice(["Collective name", "dtype", "x", "Input Dims", "stream"])] = text
    return json.dumps({"traceEvents": events}, ensure_ascii=rng.random() < 0.5), None


def cases() -> Iterator[tuple[str, bytes, int | None, bool | None]]:
    """(kind, file bytes, block size or None for the default, whether it nests past the bound (None: no deep
    value)) of every input, in a fixed order."""
    rng = random.Random(SEED)
    for make, count in ((_wrong_types, TYPES), (_deep, DEEP), (_long, LONG)):
        for _ in range(count):
            block = rng.choice([None, None, 64, 1000, 4096])
            text, too_deep = make(rng)
            yield make.__name__.strip("_"), text.encode(), block, too_deep


def _outcome(path: Path, reader: str, block: int | None) -> EventTable | str:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a NumPy cast or overflow warning is a failure
            return read_trace(path, reader=reader, block_bytes=block)
    except TraceError as exc:
        msg = str(exc)
        assert "\n" not in msg and len(msg) < 600, msg[:300]
        return msg


def _same(a: EventTable | str, b: EventTable | str) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return (a.names, a.cats, a.shapes, a.colls, a.optypes, a.meta) == (b.names, b.cats, b.shapes, b.colls, b.optypes,
                                                                       b.meta) and all(
        a.cols[k].tobytes() == b.cols[k].tobytes() for k in b.cols)


def test_hostile_types_depths_and_strings_end_in_a_table_or_one_line_the_same_by_both_readers(
        tmp_path: Path) -> None:
    out_dir = os.environ.get("STEPSCOPE_FUZZ_OUT")
    failures: list[str] = []
    seen = {"read": 0, "refused": 0}
    kinds: dict[str, int] = {}
    for i, (kind, data, block, too_deep) in enumerate(cases()):
        kinds[kind] = kinds.get(kind, 0) + 1
        path = tmp_path / f"case{i}.json"
        path.write_bytes(data)
        if out_dir:
            (Path(out_dir) / f"{kind}-{i:05d}.json").write_bytes(data)
        try:
            got = [_outcome(path, r, block) for r in READERS]
        except Exception as exc:  # anything but a TraceError: the failure this test exists for
            failures.append(f"case {i} ({kind}, block {block}): {type(exc).__name__}: {str(exc)[:200]}")
            continue
        if not _same(got[0], got[-1]):
            failures.append(f"case {i} ({kind}, block {block}): the readers differ: "
                            f"{str(got[0])[:120]!r} / {str(got[-1])[:120]!r}")
        seen["refused" if isinstance(got[0], str) else "read"] += 1
        refused_deep = isinstance(got[0], str) and f"nested more than {MAX_DEPTH} deep" in got[0]
        if too_deep is not None and refused_deep != too_deep:
            failures.append(f"case {i} (deep, block {block}): past the bound {too_deep}, refused as too deep "
                            f"{refused_deep}: {str(got[0])[:120]!r}")
    assert not failures, f"{len(failures)} failed:\n" + "\n".join(failures[:30])
    assert sum(kinds.values()) >= 2000 and min(kinds.values()) >= 100, kinds
    assert seen["read"] > 1000 and seen["refused"] > 100, seen  # both outcomes exercised
