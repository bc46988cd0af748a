"""Trace-based advisor rules on real Kineto traces (shared fixtures), with numbers checked independently."""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from stepscope.analyze.advisor import AdvisorInput, advise, trace_facts
from stepscope.analyze.advisor.gpu import GpuIdle, LaunchBound, NoMixedPrecision, UnfusedOptimizer
from stepscope.analyze.advisor.parallel import CommNotOverlapped, RankImbalance
from stepscope.analyze.run.summary import RunSummary, headline
from stepscope.analyze.trace.intervals import intersection, merge
from stepscope.model.run import HostInfo, Run, RunStatus, SoftwareInfo
from stepscope.traces.components import ComponentRules
from stepscope.traces.kineto import read_trace

TRACES = Path(__file__).resolve().parents[3] / "tests" / "data" / "traces"


def _summary() -> RunSummary:
    run = Run(id="x", name="fixture", status=RunStatus.COMPLETED, start_ns=0, end_ns=1, command=("python",),
              cwd="/", exit_code=0, git=None, host=HostInfo("h", "linux", None, 8, 16, None),
              software=SoftwareInfo(python="3", stepscope="0"), world_size=1)
    return RunSummary(run=run, headline=headline([]), ranks=(), models=(), artifacts=())


@functools.cache
def facts(name: str):  # type: ignore[no-untyped-def]
    return trace_facts(read_trace(TRACES / name))


def inp(*names: str) -> AdvisorInput:
    return AdvisorInput(summary=_summary(), traces=tuple(facts(n) for n in names))


@functools.cache
def raw_events(name: str) -> list[dict]:  # type: ignore[type-arg]
    with gzip.open(TRACES / name) as fh:
        doc = json.load(fh)
    return [e for e in doc["traceEvents"] if e.get("ph") == "X"]


def raw_kernels(name: str) -> list[dict]:  # type: ignore[type-arg]
    return [e for e in raw_events(name) if str(e.get("cat", "")).lower() == "kernel"]


def test_interval_helpers_against_brute_force() -> None:
    rng = np.random.default_rng(1)
    s = rng.integers(0, 1000, 60)
    e = s + rng.integers(1, 80, 60)
    s2 = rng.integers(0, 1000, 40)
    e2 = s2 + rng.integers(1, 80, 40)
    grid = np.zeros(1200, bool)
    grid2 = np.zeros(1200, bool)
    for a, b in zip(s, e):
        grid[a:b] = True
    for a, b in zip(s2, e2):
        grid2[a:b] = True
    u = merge(s, e)
    assert float((u[1] - u[0]).sum()) == grid.sum()
    assert intersection(u, merge(s2, e2)) == (grid & grid2).sum()


def test_fp32_gemm_share_matches_the_raw_json() -> None:
    ks = raw_kernels("v100_1rank/rank0.json.gz")
    rules = ComponentRules.defaults()
    gemm = sum(k["dur"] for k in ks if rules.classify(k["name"]) in ("gemm", "convolution"))
    f = facts("v100_1rank/rank0.json.gz")
    assert f.kernels == len(ks)
    assert gemm == pytest.approx(117_296.927 + 183_949.645)  # GEMM + convolution kernels, µs
    assert f.fp32_gemm_ns == pytest.approx(gemm * 1e3, rel=1e-6)  # every one in this trace is fp32
    assert f.tensor_cores is True and f.compute_capability == "7.0"


def test_mixed_precision_fires_on_fp32_gemms_on_tensor_cores() -> None:
    fd = NoMixedPrecision().evaluate(inp("v100_1rank/rank0.json.gz"))
    assert fd is not None and fd.evidence["fp32_gemm_share_of_kernel_time"] >= 0.2
    f = facts("v100_1rank/rank0.json.gz")
    assert fd.saving_s_per_step == pytest.approx(f.fp32_gemm_ns / 2 / f.steps_in_window / 1e9)


def test_mixed_precision_silent_without_gemms_or_gpu() -> None:
    assert NoMixedPrecision().evaluate(inp("cpu_only/rank34.json.gz")) is None
    assert NoMixedPrecision().evaluate(inp("mi250_1rank/rank0.json.gz")) is None


def test_gpu_idle_fires_on_a_starved_gpu_and_is_silent_on_a_busy_one() -> None:
    fd = GpuIdle().evaluate(inp("a100_2rank_nccl/rank0.json.gz"))
    assert fd is not None and fd.source == "trace" and fd.evidence["gpu_idle_share"] > 0.5
    assert GpuIdle().evaluate(inp("v100_1rank/rank0.json.gz")) is None  # 1.6% idle
    assert GpuIdle().evaluate(inp("cpu_only/rank34.json.gz")) is None


def test_launch_bound_fires_on_short_kernels_with_idle_gpu() -> None:
    fd = LaunchBound().evaluate(inp("a100_2rank_nccl/rank0.json.gz"))
    assert fd is not None
    ks = raw_kernels("a100_2rank_nccl/rank0.json.gz")
    calls = {e["args"]["correlation"]: e["dur"] for e in raw_events("a100_2rank_nccl/rank0.json.gz")
             if str(e.get("cat", "")).lower() == "cuda_runtime" and "correlation" in e.get("args", {})}
    launched = [k for k in ks if k["args"].get("correlation") in calls]
    assert len(launched) == len(ks)  # one launch call per kernel in this trace
    short = sum(1 for k in ks if k["dur"] < calls[k["args"]["correlation"]])  # finished before its launch did
    assert short == 1027
    assert fd.evidence["short_kernel_share"] == pytest.approx(short / len(ks))
    assert LaunchBound().evaluate(inp("v100_1rank/rank0.json.gz")) is None  # GPU busy
    assert LaunchBound().evaluate(inp("a100_alexnet/rank0.json.gz")) is None  # long kernels


def test_comm_not_overlapped() -> None:
    fd = CommNotOverlapped().evaluate(inp("a100_8rank_diff/control_rank3.json.gz"))
    assert fd is not None and fd.evidence["comm_overlap_share"] < 0.5
    assert CommNotOverlapped().evaluate(inp("a100_8rank_diff/test_rank3.json.gz")) is None  # 71% overlapped
    assert CommNotOverlapped().evaluate(inp("v100_1rank/rank0.json.gz")) is None  # no communication


def test_unfused_optimizer() -> None:
    fd = UnfusedOptimizer().evaluate(inp("sampled_128rank/rank0.json.gz"))
    assert fd is not None and fd.evidence["optimizer_share_of_window"] >= 0.1
    assert UnfusedOptimizer().evaluate(inp("a100_8rank_diff/control_rank3.json.gz")) is None  # FusedAdam
    assert UnfusedOptimizer().evaluate(inp("v100_1rank/rank0.json.gz")) is None  # SGD, 1% of the window


def test_rank_imbalance_from_traces_is_silent_on_balanced_ranks() -> None:
    both = inp("sampled_128rank/rank0.json.gz", "sampled_128rank/rank1.json.gz")
    assert RankImbalance().evaluate(both) is None  # GPU busy 548 vs 580 ms: load balance 0.97


def test_advise_ranks_by_saving_and_keeps_evidence() -> None:
    advice = advise(inp("a100_2rank_nccl/rank0.json.gz"))
    totals = [f.saving_s_total for f in advice.findings if f.saving_s_total is not None]
    assert totals == sorted(totals, reverse=True)
    assert {f.rule_id for f in advice.findings} >= {"gpu-idle", "launch-bound", "no-mixed-precision"}
    doc = advice.to_dict()
    assert doc["schema"] == "stepscope.advice/1" and all(f["evidence"] for f in doc["findings"])
