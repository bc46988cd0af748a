"""Operators' ``Input type`` and ``Concrete Inputs`` are kept (the roofline's dtypes and conv strides), read the
same by the compiled and the Python reader."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope.traces import compiled
from stepscope.traces.kineto import read_trace

RAW = (
    b'{"schemaVersion": 1, "traceEvents": [\n'
    b'{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 5, "args": '
    b'{"Input Dims": [[2, 3], [3, 4]], "Input type": [ "float" , "c10::\\u0048alf"], "Concrete Inputs": ["", ""]}},\n'
    b'{"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "pid": 1, "tid": 1, "ts": 2, "dur": 5, "args": '
    b'{"Input type": ["float", "float"]}},\n'
    b'{"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 3, "dur": 5, "args": '
    b'{"Input type": null}},\n'
    b'{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 4, "dur": 5, "args": {}},\n'
    b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 5, "dur": 1, "args": '
    b'{"stream": 7, "device": 0, "correlation": 1, "Input type": ["float"]}},\n'
    b'{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 6, "dur": 5, "args": '
    b'{"Input type": ["float", "c10::Half"], "Concrete Inputs": ["", ""]}}\n'
    b']}'
)


@pytest.mark.parametrize("reader", ["python", "c"])
def test_operator_types_and_concrete_inputs_are_kept(tmp_path: Path, reader: str) -> None:
    if reader == "c" and not compiled.AVAILABLE:
        pytest.skip("compiled reader not built")
    path = tmp_path / "t.json"
    path.write_bytes(RAW)
    t = read_trace(path, reader=reader)
    by_name: dict[str, list[str | None]] = {}
    for i in range(len(t)):
        code = int(t["optype"][i])
        by_name.setdefault(t.names[int(t["name"][i])], []).append(t.optypes[code] if code >= 0 else None)
    # the escaped "\u0048alf" and the spacing read as the same text as the plain second aten::mm
    assert by_name["aten::mm"] == ['[["float","c10::Half"],["",""]]'] * 2
    assert by_name["aten::conv2d"] == ['[["float","float"],null]']
    assert by_name["aten::relu"] == [None] and by_name["aten::add"] == [None]
    assert by_name["k"] == [None]  # a kernel's args are not an operator's inputs
    assert t.optypes == ('[["float","c10::Half"],["",""]]', '[["float","float"],null]')
