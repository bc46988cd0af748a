"""Trace figures for the index, checked against HolisticTraceAnalysis's golden temporal breakdown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope.analyze.trace.metrics import trace_index_metrics
from stepscope.executor.traceset import analyze_traceset
from tests.conftest import TRACES

GOLDEN = Path(__file__).resolve().parents[2] / "traces" / "golden"


def test_idle_and_compute_shares_match_hta():
    golden = json.loads((GOLDEN / "a100_2rank_nccl__rank0.json").read_text())["temporal"]
    m = trace_index_metrics(analyze_traceset([TRACES / "a100_2rank_nccl" / "rank0.json.gz"]))
    # HTA's window is its kernel_time; our shares are of the same window (within 0.1% of it)
    assert m["trace.idle_share"] == pytest.approx(golden["idle_time(us)"] / golden["kernel_time(us)"], abs=1e-3)
    assert m["trace.compute_share"] == pytest.approx(golden["compute_time(us)"] / golden["kernel_time(us)"], abs=1e-3)
    comps = {k: v for k, v in m.items() if k.startswith("trace.component.")}
    assert sum(comps.values()) == pytest.approx(1.0)
    assert comps["trace.component.communication_share"] > 0.1  # an NCCL job


def test_cpu_only_trace_has_no_gpu_shares():
    m = trace_index_metrics(analyze_traceset([TRACES / "cpu_only"]))
    assert not any(k.endswith("_share") for k in m)
