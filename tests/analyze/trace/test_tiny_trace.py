"""Every analysis on a hand-built trace whose answers are worked out in tracebuild.tiny_trace()."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from stepscope.analyze.trace.analysis import TraceAnalysis, analyze_trace
from stepscope.errors import TraceError
from stepscope.executor.traceset import analyze_traceset
from stepscope.traces.kineto import read_trace
from tests.traces.tracebuild import ev, tiny_trace, write


@pytest.fixture
def analysis(tmp_path: Path) -> TraceAnalysis:
    return analyze_trace(read_trace(write(tmp_path / "rank0.json", tiny_trace(), distributedInfo={"rank": 0})))


def test_temporal_idle_overlap(analysis: TraceAnalysis) -> None:
    t = analysis.temporal
    assert t is not None
    assert t.window_ns == 70_000 and t.busy_ns == 38_000 and t.idle_ns == 32_000
    assert t.compute_ns == 20_000 and t.communication_ns == 8_000 and t.memory_ns == 10_000
    assert t.non_compute_ns == 70_000 - 20_000 - 32_000
    idle = analysis.idle
    assert idle is not None
    assert (idle.total("host_wait_ns"), idle.total("kernel_wait_ns"), idle.total("other_ns")) == (30_000, 2_000, 0)
    assert analysis.overlap is not None and analysis.overlap.overlap_ns == 0 and analysis.overlap.overlap_pct == 0


def test_kernels_copies_utilization(analysis: TraceAnalysis) -> None:
    comps = {s.key: s for s in analysis.kernels.by_component}
    assert comps["gemm"].count == 2 and comps["gemm"].sum_ns == 20_000 and comps["gemm"].std_ns == 0
    assert comps["communication"].sum_ns == 8_000 and comps["memcpy"].sum_ns == 10_000
    assert abs(comps["gemm"].pct - 100 * 20 / 38) < 1e-9
    (copy,) = analysis.copies
    assert copy.direction == "HtoD" and copy.bytes == 1000 and copy.bandwidth_gbps == 1000 / 10_000
    u = analysis.utilization
    assert u is not None
    assert u.sm_efficiency_pct == pytest.approx(100 * (10_000 * 0.5 + 10_000 * 1.0) / 70_000)
    assert u.achieved_occupancy_pct == pytest.approx(50.0)


def test_steps_add_up_exactly(analysis: TraceAnalysis) -> None:
    (step,) = analysis.steps.steps
    assert step.step == 3 and step.dur_ns == 110_000
    b = step.breakdown_ns
    assert sum(b.values()) == step.dur_ns
    # kernel [100,110)+[150,160); memcpy [160,170); comm [112,120); runtime within [95,98),[100,103) is
    # under kernels from 100: runtime = [95,98) + [140,141) + [141,142) = 5; cpu = rest of aten::mm [94,143).
    assert (b["kernel"], b["memcpy"], b["communication"]) == (20_000, 10_000, 8_000)
    assert b["runtime"] == 5_000
    assert b["cpu"] == 49_000 - 5_000 - 10_000 - 8_000 - 0  # aten::mm minus runtime, K1, K2 inside it
    assert b["other"] == 110_000 - sum(v for k, v in b.items() if k != "other")


def test_operators_and_launches(analysis: TraceAnalysis) -> None:
    (mm,) = [o for o in analysis.operators if o.name == "aten::mm"]
    assert mm.calls == 1 and mm.cpu_total_ns == 49_000 and mm.device_self_ns == 38_000
    assert mm.shapes == ("[[2,3],[3,4]]",) and mm.component == "gemm"
    ls = analysis.launches
    assert ls is not None and ls.items == 4 and ls.matched == 4 and ls.launches == 4 and ls.graph_launches == 0
    # delay = start − call end: K1 100−98 = 2, K2 112−103 = 9, K3 150−141 = 9, memcpy 160−142 = 18 µs
    assert ls.short_items == 0 and ls.delay_p50_ns == 9_000 and ls.long_delays == 0
    orjson.dumps(analysis.to_dict())


def test_no_gpu_events_is_absent_not_zero(tmp_path: Path) -> None:
    a = analyze_trace(read_trace(write(tmp_path / "c.json", [ev("cpu_op", "aten::add", 1, 2)])))
    assert a.temporal is None and a.utilization is None and a.overlap is None
    assert any("no GPU work" in w for w in a.warnings)


def test_multirank_without_comm_warns_and_bad_file_is_named(tmp_path: Path) -> None:
    no_comm = [e for e in tiny_trace() if "nccl" not in e.get("name", "")]
    write(tmp_path / "rank0.json", no_comm, distributedInfo={"rank": 0, "world_size": 2})
    write(tmp_path / "rank1.json", no_comm, distributedInfo={"rank": 1, "world_size": 2})
    write(tmp_path / "rank1_copy.json", no_comm, distributedInfo={"rank": 1, "world_size": 2})
    (tmp_path / "rank2.json").write_text('{"traceEvents": [')
    s = analyze_traceset([tmp_path], workers=1)
    assert [r.rank for r in s.ranks] == [0, 1]
    assert any("no communication kernels" in w for w in s.warnings)
    assert any("rank1_copy.json" in e and "rank 1 already read" in e for e in s.errors)
    assert any("rank2.json" in e for e in s.errors)
    with pytest.raises(TraceError):
        analyze_traceset([tmp_path / "rank2.json"])
