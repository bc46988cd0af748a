"""GPU time attributed to CPU operators: by the operator enclosing the launch, External id as a fallback."""

from __future__ import annotations

import bisect
import gzip
import io
from collections import defaultdict
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from stepscope.analyze.trace.gpuview import gpu_view
from stepscope.analyze.trace.ops import host_times
from stepscope.cli import main
from stepscope.model.events import EventKind
from stepscope.traces.kineto import read_trace
from tests.traces.tracebuild import FIXTURES, ev, kernel, launch, write

OLD_TRACE = FIXTURES / "a100_8rank_diff" / "control_rank3.json.gz"
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def _launched_inside_an_operator_us(events: list[dict[str, Any]]) -> tuple[float, int]:
    """Summed duration (µs) and count of GPU work whose launching runtime call (same correlation) lies
    within a cpu_op on the same (pid, tid), from the raw events."""
    ops: dict[tuple[Any, Any], list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            ops[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    tops: dict[tuple[Any, Any], tuple[list[float], list[float]]] = {}
    for key, iv in ops.items():  # outermost operators of each thread
        starts: list[float] = []
        ends: list[float] = []
        for s, e in sorted(iv, key=lambda x: (x[0], -x[1])):
            if not ends or not (starts[-1] <= s and e <= ends[-1]):
                starts.append(s)
                ends.append(e)
        tops[key] = (starts, ends)
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    total, count = 0.0, 0
    for g in events:
        if g.get("ph") != "X" or g.get("cat") not in GPU_CATS:
            continue
        rt = launches.get(g["args"].get("correlation"))
        if rt is None or (rt["pid"], rt["tid"]) not in tops:
            continue
        starts, ends = tops[(rt["pid"], rt["tid"])]
        i = bisect.bisect_right(starts, rt["ts"]) - 1
        if i >= 0 and rt["ts"] + rt["dur"] <= ends[i]:
            total += g["dur"]
            count += 1
    return total, count


def test_old_trace_gpu_time_reaches_top_level_operators() -> None:
    # PyTorch 1.x-era Kineto: every runtime call and kernel carries External id == correlation, not the
    # operator's id, so attribution has to go through the operator enclosing the launch.
    events = orjson.loads(gzip.decompress(OLD_TRACE.read_bytes()))["traceEvents"]
    expected_us, n = _launched_inside_an_operator_us(events)
    assert n > 8000 and expected_us > 0

    table = read_trace(OLD_TRACE)
    host = host_times(table, gpu_view(table))
    is_op = table["kind"][host.rows] == EventKind.CPU_OP
    par = host.parent.tolist()

    def has_op_ancestor(j: int) -> bool:
        j = par[j]
        while j >= 0:
            if is_op[j]:
                return True
            j = par[j]
        return False

    top = [j for j in np.flatnonzero(is_op).tolist() if not has_op_ancestor(j)]
    attributed_ns = int(host.device_total_ns[top].sum())
    assert attributed_ns == int(host.device_self_ns.sum())  # nothing lost between self and total
    assert attributed_ns == pytest.approx(expected_us * 1000, rel=1e-3)

    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["trace", "ops", str(OLD_TRACE), "--json", "--top", "100000"]) == 0
    ops = {o["name"]: o for o in orjson.loads(out.getvalue())["3"]}
    assert ops["aten::addmm"]["device_total_ns"] > 0 and ops["aten::mm"]["device_total_ns"] > 0
    assert ops["aten::addmm"]["device_self_ns"] > 0


def test_external_id_fallback_never_matches_a_copied_correlation(tmp_path: Path) -> None:
    events = [
        ev("cpu_op", "aten::mm", 100, 50, **{"External id": 7}),
        ev("cpu_op", "aten::add", 200, 50, **{"External id": 3}),
        launch(110, 2, 1, ext=1), kernel("sgemm_a", 120, 10, 1, **{"External id": 1}),  # inside aten::mm
        launch(300, 2, 3, ext=3), kernel("sgemm_b", 310, 10, 3, **{"External id": 3}),  # outside; id is a copy
        kernel("sgemm_c", 330, 10, 99, **{"External id": 3}),  # no launch in the trace: real External id
    ]
    table = read_trace(write(tmp_path / "t.json", events))
    host = host_times(table, gpu_view(table))
    names = table.name_of(table["name"][host.rows])
    dev = dict(zip(names, host.device_self_ns.tolist(), strict=True))
    assert dev == {"aten::mm": 10_000, "aten::add": 10_000}
