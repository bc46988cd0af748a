"""One definition per figure: every fact the advisor reads equals the same figure of `stepscope trace
analyze --json` on every fixture trace (the JSON is produced by the CLI, the facts by the advisor)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from stepscope.analyze.advisor import trace_facts
from stepscope.cli import main
from stepscope.traces.kineto import read_trace
from tests.conftest import TRACES

FIXTURES = sorted(p for p in TRACES.rglob("*.json.gz"))


def _engine(path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["trace", "analyze", "--json", "--workers", "1", str(path)]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    (rank,) = doc["ranks"]
    return rank


def _get(doc: dict[str, Any] | None, *keys: str) -> Any:
    for k in keys:
        if doc is None:
            return None
        doc = doc[k]
    return doc


def _share(pct: float | None) -> float | None:
    return None if pct is None else pct / 100


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_advisor_fact_is_the_trace_engines_figure(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    facts = trace_facts(read_trace(path)).to_dict()
    e = _engine(path, capsys)
    same = {
        "profiled_steps": e["steps"]["count"],
        "gpu_span_ns": _get(e, "temporal", "window_ns") or 0,
        "gpu_busy_ns": _get(e, "temporal", "busy_ns") or 0,
        "gpu_idle_share": _share(_get(e, "temporal", "idle_pct")),
        "kernels": _get(e, "launches", "kernels") or 0,
        "short_kernels": _get(e, "launches", "short_kernels") or 0,
        "kernel_median_ns": _get(e, "launches", "kernel_p50_ns"),
        "kernel_ns": e["kernels"]["total_ns"],
        "launches": _get(e, "launches", "launches") or 0,
        "launch_api_ns": _get(e, "launches", "launch_total_ns") or 0,
        "gemm_ns": e["gemm"]["gemm_ns"],
        "fp32_gemm_ns": e["gemm"]["fp32_ns"],
        "comm_ns": _get(e, "overlap", "communication_ns") or 0,
        "comm_overlapped_ns": _get(e, "overlap", "overlap_ns") or 0,
        "comm_overlap_share": _share(_get(e, "overlap", "overlap_pct")),
        "comm_calls": e["communication"]["kernels"],
        "comm_bytes_median": e["communication"]["bytes_median"],
        "optimizer_steps": e["optimizer"]["steps"],
        "optimizer_ns": e["optimizer"]["dur_ns"],
        "optimizer_launches": e["optimizer"]["launches"],
        "optimizer_fused": e["optimizer"]["fused"],
        "device_name": _get(e, "device", "name"),
        "compute_capability": _get(e, "device", "compute_capability"),
        "tensor_cores": _get(e, "device", "tensor_cores"),
    }
    assert set(same) | {"path", "rank"} == set(facts), "a fact without its engine figure in this test"
    for name, engine_value in same.items():
        if isinstance(engine_value, float):
            assert facts[name] == pytest.approx(engine_value, rel=1e-12), name
        else:
            assert facts[name] == engine_value, name


def test_the_figures_that_disagreed() -> None:
    """The disagreements seen (issue 13): short kernels 1159 vs 1027 and 1696 vs 1914, profiled steps 1 vs 0."""
    nccl = trace_facts(read_trace(TRACES / "a100_2rank_nccl" / "rank0.json.gz"))
    v100 = trace_facts(read_trace(TRACES / "v100_1rank" / "rank0.json.gz"))
    alexnet = trace_facts(read_trace(TRACES / "a100_alexnet" / "rank0.json.gz"))
    assert (nccl.short_kernels, v100.short_kernels, alexnet.profiled_steps) == (1027, 1914, 0)
