"""TensorFlow / JAX profiles through the trace engine (traces/xla.py), on real profiles written by
tests/data/traces/xla/make_profiles.py: 3 steps annotated step_num 0..2, each sleeping 20 ms on the host."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stepscope.analyze.trace.analysis import analyze_trace
from stepscope.errors import TraceError
from stepscope.model.events import EventKind
from stepscope.traces.components import ComponentRules
from stepscope.traces.kineto import read_trace
from stepscope.traces.traceset import trace_files
from stepscope.traces.xla import STEP_ANNOTATION, kineto_events, profile_files
from tests.conftest import TRACES

XLA = TRACES / "xla"
SLEEP_NS = 20_000_000


def _raw(path: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    return events


def test_jax_log_dir_is_read_as_its_trace_viewer_json() -> None:
    files = trace_files([XLA / "jax_profile"])
    assert [f.name for f in files] == ["vm.trace.json.gz"]  # the converted JSON, not its XPlane
    raw = _raw(files[0])
    steps_raw = {int(e["args"]["step_num"]): round(e["dur"] * 1000) for e in raw
                 if e.get("ph") == "X" and "step_num" in (e.get("args") or {})}
    hlo = [e for e in raw if e.get("ph") == "X" and "hlo_op" in (e.get("args") or {})]
    a = analyze_trace(read_trace(files[0]))
    assert [s.step for s in a.steps.steps] == [0, 1, 2]
    for s in a.steps.steps:
        assert abs(s.dur_ns - steps_raw[s.step]) <= 1
        assert s.dur_ns >= SLEEP_NS
    assert a.gpu_events == len(hlo)  # the XLA ops executed on the CPU are the device work
    assert sum(k.sum_ns for k in a.kernels.by_kernel) == pytest.approx(sum(e["dur"] * 1000 for e in hlo), abs=3)


def test_tf_xplane_is_converted_and_read() -> None:
    pytest.importorskip("jax")  # the XPlane converter is jaxlib's
    files = trace_files([XLA / "tf_profile"])
    assert [f.name for f in files] == ["vm.xplane.pb"]
    table = read_trace(files[0])
    a = analyze_trace(table)
    assert [s.step for s in a.steps.steps] == [0, 1, 2]
    assert all(s.dur_ns >= SLEEP_NS for s in a.steps.steps)
    comp = {k.key: k.component for k in a.kernels.by_kernel}
    assert comp["_MklMatMul"] == "gemm" and comp["Relu"] == "elementwise" and comp["Sum"] == "reduction"
    host = {table.names[c] for c in table.cols["name"][table.cols["kind"] == EventKind.CPU_OP]}
    assert "EagerExecute" in host and "_MklMatMul" not in host


def test_profile_dir_without_profiles_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00").mkdir(parents=True)
    with pytest.raises(TraceError, match="no XPlane"):
        trace_files([tmp_path])
    proc = subprocess.run([sys.executable, "-m", "stepscope", "trace", "analyze", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "no XPlane" in proc.stderr
    assert profile_files(tmp_path / "plugins") is None  # an ordinary folder is not taken for a profile


def _ev(name: str, ts: float, dur: float, tid: int, pid: int = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "name": name, "ts": ts, "dur": dur, "pid": pid, "tid": tid, "args": args}


def test_kineto_events_gpu_planes() -> None:
    meta = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
            {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "/device:GPU:1"}},
            {"ph": "M", "pid": 2, "tid": 7, "name": "thread_name", "args": {"name": "Stream #7(Compute)"}},
            {"ph": "M", "pid": 2, "tid": 8, "name": "thread_name", "args": {"name": "XLA Ops"}}]
    out = kineto_events([
        *meta, _ev("train", 0, 100, 5, step_num="3"), _ev("fusion.2", 10, 5, 7, pid=2),
        _ev("MemcpyH2D", 20, 5, 7, pid=2),
        _ev("fusion.2", 10, 5, 8, pid=2), _ev("Relu", 30, 2, 9, long_name="Relu:Relu"),
        _ev("ThreadpoolListener::Record", 1, 0, 5)])
    got = [(e["name"], e["cat"], e["args"].get("device")) for e in out]
    assert got == [("ProfilerStep#3", "user_annotation", None), ("fusion.2", "kernel", 1),
                   ("MemcpyH2D", "gpu_memcpy", 1), ("fusion.2", "gpu_user_annotation", 1),
                   ("Relu", "cpu_op", None)]  # with a GPU plane, host TF ops are launches, not device work


def test_kineto_events_device_plane_without_streams() -> None:
    meta = [{"ph": "M", "pid": 3, "name": "process_name", "args": {"name": "/device:TPU:0"}},
            {"ph": "M", "pid": 3, "tid": 1, "name": "thread_name", "args": {"name": "XLA Ops"}},
            {"ph": "M", "pid": 3, "tid": 2, "name": "thread_name", "args": {"name": "XLA Modules"}}]
    out = kineto_events([*meta, _ev("fusion.1", 0, 5, 1, pid=3), _ev("jit_step", 0, 9, 2, pid=3)])
    assert [(e["name"], e["cat"]) for e in out] == [("fusion.1", "kernel"), ("jit_step", "gpu_user_annotation")]


def test_kineto_events_cpu_only_containers_and_our_steps() -> None:
    out = kineto_events([
        _ev("train", 0, 100, 5, step_num="0"), _ev(STEP_ANNOTATION, 1, 90, 5, step_num="12"),
        _ev("PartitionedCall", 10, 50, 9, long_name="f:PartitionedCall"),
        _ev("MatMul", 12, 20, 9, long_name="f/MatMul:MatMul"), _ev("ynn_fusion", 40, 5, 6, hlo_op="ynn_fusion"),
        _ev("Iterator::Prefetch", 0, 5, 4, long_name="Iterator::Prefetch"), _ev("$train.py:3 step", 0, 1, 5)])
    got = {e["name"]: (e["cat"], e["args"].get("stream")) for e in out}
    assert got["ProfilerStep#12"] == ("user_annotation", None)
    assert got["train"] == ("cpu_op", None)  # stepscope's step annotations win over the user's own
    assert got["PartitionedCall"] == ("cpu_op", None)  # contains MatMul on its thread
    assert got["MatMul"] == ("kernel", 9) and got["ynn_fusion"] == ("kernel", 6)
    assert got["Iterator::Prefetch"] == ("cpu_op", None) and got["$train.py:3 step"][0] == "python_function"


@pytest.mark.parametrize(("name", "component"), [
    ("all-reduce.3", "communication"), ("all-gather-start.1", "communication"), ("reduce-scatter", "communication"),
    ("collective-permute-done.2", "communication"), ("CollectiveReduceV2", "communication"),
    ("HorovodAllreduce", "communication"), ("NcclAllReduce", "communication"), ("send.1", "communication"),
    ("copy.5", "memcpy"), ("copy-start.2", "memcpy"), ("MemcpyD2H", "memcpy"), ("_Recv", "memcpy"),
    ("dot.1", "gemm"), ("ynn_fusion", "gemm"), ("_MklNativeFusedMatMul", "gemm"), ("convolution.4", "convolution"),
    ("Conv3DBackpropFilterV2", "convolution"), ("reduce.7", "reduction"), ("input_reduce_fusion", "reduction"),
    ("BiasAddGrad", "reduction"), ("Sum", "reduction"), ("fusion.12", "elementwise"),
    ("loop_add_fusion", "elementwise"), ("BiasAdd", "elementwise"), ("AddV2", "elementwise"),
    ("Softmax", "softmax"), ("FusedBatchNormV3", "reduction"), ("ResourceApplyAdam", "optimizer"),
    # PyTorch names keep their components
    ("aten::copy_", "elementwise"), ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "communication"),
    ("aten::sum", "reduction"), ("Memcpy HtoD (Pageable -> Device)", "memcpy"),
])
def test_xla_and_tf_component_rules(name: str, component: str) -> None:
    assert ComponentRules.defaults().classify(name) == component
