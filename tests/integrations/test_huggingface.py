"""A real transformers.Trainer on a tiny randomly initialised GPT-2 (built from a config, no download),
under `stepscope run` and standalone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stepscope.analyze.run.summary import summarize_run
from tests.conftest import SCRIPTS, installed_or_skip, load

installed_or_skip("transformers")
installed_or_skip("accelerate")
pytestmark = pytest.mark.slow
SCRIPT = str(SCRIPTS / "hf_train.py")
# GPT-2, 2 layers, d=32, 16 tokens x batch 4, vocabulary 64 (tied LM head). Matmul weights per layer:
# c_attn 32x96 + attn c_proj 32x32 + c_fc 32x128 + mlp c_proj 128x32; plus the LM head 32x64.
N_MATMUL = 2 * (32 * 96 + 32 * 32 + 32 * 128 + 128 * 32) + 32 * 64
TOKENS = 4 * 16
# 6 N T (forward 2NT + backward 4NT) plus attention: QK^T and AV, 2*B*S^2*d each, x3 with backward, per layer
GPT2_FLOPS = 6 * N_MATMUL * TOKENS + 2 * 3 * (2 * 2 * 4 * 16 * 16 * 32)


def _metric(rank, name: str) -> tuple[list[int], list[float]]:  # type: ignore[no-untyped-def]
    t = rank.metrics
    mask = t["name_code"] == t.names.index(name)
    return t["step"][mask].tolist(), t["value"][mask].tolist()


def test_under_stepscope_run_steps_tokens_logs_and_flops(observed, store: Path, tmp_path: Path) -> None:
    res = observed(SCRIPT, str(tmp_path / "out"))
    assert res.rc == 0, res
    data = load(store)
    assert data.run.status.value == "completed" and len(data.ranks) == 1
    r = data.ranks[0]
    assert r.stream.step_source == "huggingface"
    steps = r.steps
    train = steps.take(steps["phase"] == 0)
    val = steps.take(steps["phase"] == 1)
    # max_steps 8, not doubled by the optimizer hook; eval every 4 steps on 8 samples / batch 4: 2 x 2
    assert train["index"].tolist() == list(range(8)) and val["index"].tolist() == list(range(4))
    assert train["samples"].tolist() == [4.0] * 8 and train["tokens"].tolist() == [64.0] * 8
    assert val["samples"].tolist() == [4.0] * 4
    # the Trainer logs every 2 steps (global_step 2, 4, ... = step index 1, 3, ...), evaluates at 4 and 8
    assert _metric(r, "loss")[0] == [1, 3, 5, 7]
    assert _metric(r, "learning_rate")[1][0] == pytest.approx(1e-3 * 7 / 8)
    assert _metric(r, "eval_loss")[0] == [3, 7]
    rec = r.extra["huggingface"][0]
    assert rec["model"] == "GPT2LMHeadModel" and rec["args"]["per_device_train_batch_size"] == 4
    s = summarize_run(data)
    st = s.ranks[0].steps
    assert s.headline.tokens_per_s == pytest.approx(st.samples_per_s * 16)
    assert s.models[0]["name"] == "GPT2LMHeadModel"
    assert s.flops is not None and s.flops.flops_per_step == GPT2_FLOPS


def test_standalone_creates_its_own_run(tmp_path: Path) -> None:
    store = tmp_path / "own"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEPSCOPE_")}
    proc = subprocess.run([sys.executable, SCRIPT, str(tmp_path / "out"), "--standalone", str(store)], env=env,
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = load(store)
    assert data.run.name == "tiny-gpt2" and data.run.status.value == "completed"
    assert data.run.params["per_device_train_batch_size"] == "4" and data.run.params["learning_rate"] == "0.001"
    r = data.ranks[0]
    assert r.stream.step_source == "huggingface" and r.stream.complete
    assert int((r.steps["phase"] == 0).sum()) == 8
