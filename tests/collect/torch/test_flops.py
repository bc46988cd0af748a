"""FLOPs per step and MFU: the FLOP counter against hand-computed matmul FLOPs, on a real observed run."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from stepscope.analyze.run.flops import peak_for, precision_of
from stepscope.analyze.run.summary import index_metrics, summarize_run
from tests.conftest import load

# tests/scripts/tiny_train.py: Linear(16, 32) -> ReLU -> Linear(32, 4), batch 8, input without grad.
# First layer: forward 2*8*16*32 and the weight gradient (no input gradient) = 2x; second layer:
# forward, weight and input gradients = 3x. Bias adds and ReLU are not matmul FLOPs.
TINY_FLOPS = 2 * (2 * 8 * 16 * 32) + 3 * (2 * 8 * 32 * 4)


def test_counter_counts_linear_forward_and_backward_as_three_matmuls() -> None:
    import torch

    from stepscope.collect.torch.flops import _counter_class

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


# tests/scripts/honest_train.py lstm: Embedding(50, 16) -> LSTM(16, 32, 2 layers) -> Linear(32, 50),
# batch 4 x 10 tokens = 40 positions, 4 gates. Layer 0: F_ih = 2*4*32*16*40, F_hh = 2*4*32*32*40; its
# input (the embedding output) requires grad, so forward + backward = 3 (F_ih + F_hh). Layer 1: input
# 32, same. The output Linear: 3 * 2*40*32*50 (its input requires grad).
LSTM_LAYER0 = 3 * (2 * 4 * 32 * 16 * 40 + 2 * 4 * 32 * 32 * 40)
LSTM_LAYER1 = 3 * (2 * 4 * 32 * 32 * 40 + 2 * 4 * 32 * 32 * 40)
LSTM_FLOPS = LSTM_LAYER0 + LSTM_LAYER1 + 3 * 2 * 40 * 32 * 50


def test_rnn_formulas_by_hand() -> None:
    import torch

    from stepscope.collect.torch.flops import rnn_flops

    lstm = torch.nn.LSTM(16, 32, num_layers=2, batch_first=True)
    x = torch.randn(4, 10, 16, requires_grad=True)
    assert rnn_flops(lstm, x, training=True) == LSTM_LAYER0 + LSTM_LAYER1
    assert rnn_flops(lstm, x, training=False) == (LSTM_LAYER0 + LSTM_LAYER1) // 3
    # a GRU (3 gates), bidirectional, input without grad: forward F = F_ih + F_hh per direction;
    # backward: weight gradients F, hidden-state gradient F_hh, no input gradient
    gru = torch.nn.GRU(8, 6, bidirectional=True)
    f_ih, f_hh = 2 * 3 * 6 * 8 * 20 * 2, 2 * 3 * 6 * 6 * 20 * 2
    assert rnn_flops(gru, torch.randn(5, 4, 8), training=True) == 2 * (f_ih + f_hh) + f_hh
    rnn = torch.nn.RNN(8, 6)
    packed = torch.nn.utils.rnn.pack_padded_sequence(torch.randn(5, 2, 8), [5, 3])  # 8 positions
    assert rnn_flops(rnn, packed, training=False) == 2 * 6 * 8 * 8 + 2 * 6 * 6 * 8
    assert rnn_flops(torch.nn.LSTM(8, 6, proj_size=3), torch.randn(5, 8), training=False) is None


def test_counter_misses_lstm_so_it_is_added_by_formula() -> None:
    """PyTorch's counter sees no FLOPs in nn.LSTM (a fused kernel): the reason for the formula."""
    import torch

    from stepscope.collect.torch.flops import _counter_class

    lstm = torch.nn.LSTM(16, 32, batch_first=True)
    counter = _counter_class()()
    with counter:
        lstm(torch.randn(4, 10, 16))[0].sum().backward()
    assert counter.get_total_flops() == 0


@pytest.mark.slow
def test_lstm_run_counts_recurrent_flops(observed, cli, store: Path) -> None:
    r = observed("honest_train.py", "lstm", opts=("--peak-flops", "1e12"))
    assert r.rc == 0, r
    (rec,) = load(store).ranks[0].extra["flops"]
    assert (rec["flops"], rec["rnn_flops"], rec["uncounted"]) == (LSTM_FLOPS, LSTM_LAYER0 + LSTM_LAYER1, [])
    out = cli("show", "latest").out
    assert "of which recurrent layers" in out and "partial" not in out


def test_uncounted_layers_mark_flops_and_mfu_partial() -> None:
    """Layers counted neither by PyTorch nor by formula (an LSTM with proj_size under cuDNN) make the
    figures lower bounds: the FLOPs table says so on each figure that depends on them."""
    from stepscope.analyze.run.flops import FlopsSummary
    from stepscope.report.flops import flops_table
    from stepscope.report.terminal import console

    fl = FlopsSummary(flops_per_step=1.2e9, source="measured", precision="fp32", achieved_flops=3e10,
                      peak_flops=1e12, peak_source="--peak-flops", mfu=0.03, device_name=None, measured_step=2,
                      measure_cost_ns=None, ranks=1, rnn_flops=0.0, uncounted=("LSTM", "LSTM"))
    assert fl.partial
    import io

    buf = io.StringIO()
    console(buf).print(flops_table(fl))
    out = buf.getvalue()
    assert "partial: 2 layers not counted (LSTM)" in out
    assert out.count("at least (partial") == 2  # achieved FLOP/s and MFU
