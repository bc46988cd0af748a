"""Zero-code collection of an unmodified script under `stepscope run` (real training, real store)."""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import EXAMPLES, PY, SCRIPTS, built_once, load, stepscope_cmd


def test_mlp_example_steps_samples_epochs_phases(cli, store):
    r = cli("run", "--quiet", "--sample-interval", "0.2", "--name", "mlp", "--param", "batch_size=64",
            "--tag", "exp=baseline", "--", PY, str(EXAMPLES / "train_mlp.py"), "--epochs", "2", "--samples", "1024")
    assert r.rc == 0, r
    data = load(store)
    run = data.run
    assert run.status.value == "completed" and run.exit_code == 0
    assert run.name == "mlp" and run.params == {"batch_size": "64"} and run.tags == {"exp": "baseline"}
    assert len(data.ranks) == 1
    steps = data.ranks[0].steps
    # 1024 samples / 64 per batch = 16 optimizer steps per epoch, 2 epochs
    assert len(steps) == 32
    assert np.all(steps["samples"] == 64)
    assert list(np.unique(steps["epoch"])) == [0, 1]
    assert np.all(steps.duration_ns > 0)
    # steps tile time: each starts where the previous ended
    assert np.all(steps["start_ns"][1:] == steps["end_ns"][:-1])
    for phase in ("data_wait_ns", "forward_ns", "backward_ns", "optimizer_ns"):
        assert np.isfinite(steps[phase]).all(), phase
    # measured phases never exceed the step
    phases = steps["data_wait_ns"][1:] + steps["forward_ns"][1:] + steps["backward_ns"][1:] + steps["optimizer_ns"][1:]
    assert np.all(phases <= steps.duration_ns[1:])
    assert np.isnan(steps["comm_ns"]).all()  # no torch.distributed: not measured, not zero


def _record_tiny(folder: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("STEPSCOPE_HOME", "STEPSCOPE_DB")}
    r = subprocess.run(stepscope_cmd("run", "--store", str(folder / "store"), "--quiet", "--sample-interval", "0.2",
                                     "--samples-per-step", "100", "--", PY, str(SCRIPTS / "tiny_train.py"),
                                     "--steps", "30", "--step-sleep", "0.03"),
                       capture_output=True, text=True, timeout=180, env=env, cwd=folder)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One real run of tiny_train.py, read by three tests: 30 steps of 8 samples with a 30 ms sleep each (several
    0.2 s system samples), under `--samples-per-step 100` (which only sets the steps' sample counts). Recorded
    once per test session (built_once, also when xdist splits the module)."""
    return load(built_once(tmp_path_factory, "zero_code_tiny", _record_tiny) / "store")


def test_model_summary_counts_parameters(tiny):
    model = tiny.ranks[0].model
    assert model is not None
    # nn.Sequential(Linear(16, 32), ReLU, Linear(32, 4))
    expected = 16 * 32 + 32 + 32 * 4 + 4
    assert model["total_params"] == expected == model["trainable_params"]
    assert model["param_bytes"] == expected * 4
    layers = {row["name"]: row for row in model["layers"]}
    assert layers["0"]["type"] == "Linear" and layers["0"]["params"] == 16 * 32 + 32
    assert layers["0"]["output_shape"] == [8, 32]
    assert layers["2"]["output_shape"] == [8, 4]


def test_system_sampler_fields_present_and_gpu_absent(tiny):
    samples = tiny.ranks[0].samples
    assert len(samples) >= 3
    for name in ("cpu_process_pct", "rss_bytes", "cpu_system_pct", "mem_system_used_bytes"):
        assert name in samples.columns
    rss = samples.columns["rss_bytes"]
    assert np.all(rss > 50e6)  # a process with torch imported
    assert not any(k.startswith("gpu") for k in samples.columns)  # no GPU here: absent, not zero


def test_data_wait_follows_a_slow_dataset(observed, store, tmp_path):
    # 4 samples per batch x 10 ms per sample; the script times its own fetching. Each step's data wait lies
    # between the time spent inside the dataset (it contains every __getitem__ of the batch) and the time the
    # script saw next() take (it is inside that call): exact containments, however loaded the machine is.
    own = tmp_path / "own.json"
    assert observed("slow_data.py", str(own), "--steps", "6", "--batch-size", "4", "--sample-sleep", "0.01",
                    opts=("--flops-per-step", "0")).rc == 0
    wait = load(store).ranks[0].steps["data_wait_ns"]
    timed = json.loads(own.read_text())
    getitem, next_ = np.array(timed["getitem_ns"]), np.array(timed["next_ns"])
    assert len(wait) == len(getitem) == 6
    assert np.all(getitem >= 4 * 10e6)  # the sleeps: at least 40 ms per batch
    assert np.all(wait >= getitem), (wait, getitem)
    assert np.all(wait <= next_), (wait, next_)


def test_samples_per_step_override(tiny):
    steps = tiny.ranks[0].steps
    assert len(steps) == 30 and np.all(steps["samples"] == 100)  # the batches hold 8


def test_torchrun_two_ranks_one_run(cli, store):
    r = cli("run", "--quiet", "--sample-interval", "0.2", "--", PY, "-m", "torch.distributed.run",
            "--nproc-per-node", "2", str(EXAMPLES / "train_ddp.py"), "--steps", "12")
    assert r.rc == 0, r
    data = load(store)
    assert [rk.stream.rank for rk in data.ranks] == [0, 1]
    assert data.run.world_size == 2
    for rk in data.ranks:
        assert rk.stream.world_size == 2 and rk.stream.complete
        assert len(rk.steps) == 12
        assert np.all(rk.steps["samples"] == 32)
    pids = {rk.stream.pid for rk in data.ranks}
    assert len(pids) == 2


def test_python_dash_m_module(cli, store, tmp_path):
    pkg = tmp_path / "mytrain"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text(
        "import torch\nm = torch.nn.Linear(4, 1)\nopt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(7):\n    opt.zero_grad(); m(torch.randn(3, 4)).sum().backward(); opt.step()\n")
    r = cli("run", "--quiet", "--", PY, "-m", "mytrain", cwd=tmp_path)
    assert r.rc == 0, r
    steps = load(store).ranks[0].steps
    assert len(steps) == 7
    # no DataLoader: the samples are the first dimension of the model's first tensor argument
    assert list(steps["samples"]) == [3.0] * 7
    assert math.isnan(steps["data_wait_ns"][0])  # data wait not measured, not zero


def test_validation_steps_and_epochs_zero_code(observed, store):
    assert observed("val_train.py").rc == 0
    steps = load(store).ranks[0].steps
    train = steps.take(steps["phase"] == 0)
    val = steps.take(steps["phase"] == 1)
    assert len(train) == 3 * 8
    assert len(val) == 3 * 3  # the sanity-check pass came before the first optimizer step: not a step
    assert list(train["epoch"]) == [0] * 8 + [1] * 8 + [2] * 8  # the validation loader never moves epochs
    assert list(train["index"]) == list(range(24)) and list(val["index"]) == list(range(9))
