"""`--memory-snapshot N`: a CUDA allocator history dumped for PyTorch's memory visualiser; on a machine
without CUDA the option warns once and the run goes on."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from stepscope.collect.torch.memsnapshot import NO_GPU
from tests.conftest import load


@pytest.mark.slow
def test_without_cuda_the_option_warns_once_and_the_run_goes_on(observed, store: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the no-GPU path is not taken")
    res = observed("tiny_train.py", "--steps", "6", opts=("--memory-snapshot", "2"))
    assert res.rc == 0, res
    assert res.err.count(NO_GPU) == 1
    data = load(store)
    assert data.run.status.value == "completed" and len(data.ranks[0].steps) == 6
    assert data.ranks[0].notes.count(NO_GPU) == 1
    assert not any(a.startswith("artifacts/memory/") for a in data.artifacts)


CUDA_SCRIPT = """
import torch
model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).cuda()
opt = torch.optim.Adam(model.parameters())
for _ in range(8):
    x = torch.randn(64, 256, device="cuda")
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
torch.cuda.synchronize()
"""


@pytest.mark.slow
def test_cuda_snapshot_covers_n_steps_and_opens_as_a_snapshot(cli, store: Path, tmp_path: Path) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU (torch.cuda.memory._record_memory_history)")
    script = tmp_path / "cuda_train.py"
    script.write_text(CUDA_SCRIPT)
    from tests.conftest import PY

    res = cli("run", "--quiet", "--sample-interval", "0", "--memory-snapshot", "3", "--", PY, str(script))
    assert res.rc == 0, res
    data = load(store)
    rec = data.ranks[0].extra["memory_snapshot"][0]
    # CUDA is first in use at the end of step 0: steps 1..3 are recorded
    assert rec["path"] == "artifacts/memory/rank0.pickle" and (rec["first_step"], rec["last_step"]) == (1, 3)
    assert rec["path"] in data.artifacts
    snap = pickle.loads((Path(data.path) / rec["path"]).read_bytes())
    assert {"segments", "device_traces"} <= set(snap)
    allocs = [e for trace in snap["device_traces"] for e in trace if e["action"] == "alloc"]
    assert allocs and all(e["frames"] for e in allocs[:5])  # with stack traces, as memory_viz shows
