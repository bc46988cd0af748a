"""FLOPs per step and MFU: the FLOP counter against hand-computed matmul FLOPs, on a real observed run."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from stepscope.analyze.flops import peak_for, precision_of
from stepscope.analyze.summary import index_metrics, summarize_run
from tests.conftest import load

# tests/scripts/tiny_train.py: Linear(16, 32) -> ReLU -> Linear(32, 4), batch 8, input without grad.
# First layer: forward 2*8*16*32 and the weight gradient (no input gradient) = 2x; second layer:
# forward, weight and input gradients = 3x. Bias adds and ReLU are not matmul FLOPs.
TINY_FLOPS = 2 * (2 * 8 * 16 * 32) + 3 * (2 * 8 * 32 * 4)


def test_counter_counts_linear_forward_and_backward_as_three_matmuls() -> None:
    import torch

    from stepscope.collect.flops import _counter_class

    n, k, m = 32, 64, 48
    layer = torch.nn.Linear(k, m)
    x = torch.randn(n, k, requires_grad=True)
    counter = _counter_class()()
    with counter:
        layer(x).sum().backward()
    assert counter.get_total_flops() == 3 * 2 * n * k * m
    assert dict(counter.by_dtype) == {"float32": 3 * 2 * n * k * m}


def test_peak_table_and_precision() -> None:
    assert peak_for("NVIDIA H100 80GB HBM3", "bf16") == (989.4e12, "NVIDIA H100 80GB HBM3, bf16 dense peak")
    assert peak_for("NVIDIA H100 PCIe", "tf32")[0] == 378e12  # type: ignore[index]
    assert peak_for("NVIDIA A10", "fp16")[0] == 125e12  # type: ignore[index]
    assert peak_for("NVIDIA A100-SXM4-80GB", "fp32")[0] == 19.5e12  # type: ignore[index]
    assert peak_for("Tesla V100-SXM2-16GB", "bf16") == (15.7e12, "Tesla V100-SXM2-16GB, fp32 dense peak")
    assert peak_for("AMD Instinct MI300X", "bf16")[0] == 1307.4e12  # type: ignore[index]
    assert peak_for(None, "bf16") is None and peak_for("Some NPU", "bf16") is None
    assert precision_of({"bfloat16": 10, "float32": 3}, tf32=False) == "bf16"
    assert precision_of({"float32": 10}, tf32=True) == "tf32"
    assert precision_of({"float32": 10}, tf32=False) == "fp32"


@pytest.mark.slow
def test_run_counts_flops_once_and_reports_mfu_against_given_peak(observed, store: Path) -> None:
    res = observed("tiny_train.py", "--steps", "12", opts=("--peak-flops", "1e12", "--warmup-steps", "1"))
    assert res.rc == 0, res
    data = load(store)
    rank = data.ranks[0]
    recs = rank.extra["flops"]
    assert len(recs) == 1
    assert recs[0]["flops"] == TINY_FLOPS and recs[0]["step"] == 2 and recs[0]["device"] == "cpu"
    assert recs[0]["by_dtype"] == {"float32": TINY_FLOPS}
    s = summarize_run(data)
    fl = s.flops
    assert fl is not None and fl.source == "measured" and fl.precision == "fp32" and fl.measured_step == 2
    median_s = s.ranks[0].steps.step_time.p50 * 1e-9
    assert math.isclose(fl.achieved_flops, TINY_FLOPS / median_s, rel_tol=1e-9)
    assert fl.peak_source == "--peak-flops" and math.isclose(fl.mfu, fl.achieved_flops / 1e12, rel_tol=1e-9)
    m = index_metrics(s)
    assert m["flops_per_step"] == TINY_FLOPS and math.isclose(m["mfu"], fl.mfu)
    # the counted step is left out of the step statistics (like profiled steps)
    assert s.ranks[0].steps.warmup_steps == 1 and s.ranks[0].steps.measured_steps == 12 - 1 - 1


@pytest.mark.slow
def test_given_flops_per_step_skips_counting_and_cpu_has_no_mfu(observed, store: Path) -> None:
    res = observed("tiny_train.py", "--steps", "6", opts=("--flops-per-step", "5e6"))
    assert res.rc == 0, res
    data = load(store)
    assert "flops" not in data.ranks[0].extra
    s = summarize_run(data)
    assert s.flops is not None and s.flops.source == "given" and s.flops.flops_per_step == 5e6
    assert s.flops.mfu is None and s.flops.peak_flops is None  # CPU: no peak without --peak-flops
    assert math.isclose(s.flops.achieved_flops, 5e6 / (s.ranks[0].steps.step_time.p50 * 1e-9))
    assert "mfu" not in index_metrics(s)
