"""Which path each torch hook takes, and that every path counts the same: torch's private DataLoader iterator and
module call slot are used only where their install-time self-check passes; broken on purpose (in a real child
process, before stepscope installs), the public paths count every step, epoch and sample exactly. Unknown
samples (batches holding no tensor) are NaN on the zero-code and the API path alike."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import stepscope
from tests.conftest import load

torch = pytest.importorskip("torch")

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "private_paths.py"
ROOT = Path(__file__).resolve().parents[3]


def _hooks_records(store: Path) -> list[dict[str, Any]]:
    """The ``hooks`` records (Session.note_hooks) in the run's rank files."""
    out = []
    for f in store.rglob("*.jsonl*"):
        for line in f.read_text(errors="replace").splitlines():
            if '"hooks"' in line:
                rec = json.loads(line)
                if rec.get("kind") == "hooks":
                    out.append(rec)
    return out


def _run(breaks: str, store: Path) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(SCRIPT), breaks, str(store)], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    counts: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return counts


@pytest.mark.parametrize("breaks", ["none", "loader-renamed,slot-ignored", "loader-bypassed"])
def test_broken_private_paths_fall_back_and_count_exactly(tmp_path: Path, breaks: str) -> None:
    store = tmp_path / "s"
    counts = _run(breaks, store)
    steps = load(store).ranks[0].steps
    # every step of the loop, each with its batch's samples, its epoch, a fetch and a forward timed
    assert len(steps) == counts["steps"] == counts["epochs"] * 5
    assert list(steps["samples"]) == [float(counts["batch"])] * counts["steps"]
    assert list(steps["epoch"]) == [e for e in range(counts["epochs"]) for _ in range(5)]
    assert np.isfinite(steps["data_wait_ns"]).all() and (steps["data_wait_ns"] > 0).all()
    assert np.isfinite(steps["forward_ns"][1:]).all() and (steps["forward_ns"][1:] > 0).all()
    notes = _hooks_records(store)
    if not notes:
        pytest.fail("no hooks record: Session.note_hooks was not called")
    installed = " | ".join(notes[0]["installed"])
    refused = notes[0]["refused"]
    loader_private = breaks == "none" or breaks == "slot-ignored"
    slot_private = "slot-ignored" not in breaks
    assert ("_BaseDataLoaderIter.__next__, self-checked" in installed) == loader_private, installed
    assert ("dataloader (public wrapper)" in installed) == (not loader_private), installed
    assert ("call slot, self-checked" in installed) == slot_private, installed
    assert counts["slot_used"] == slot_private
    assert "optimizer (public step hooks)" in installed
    assert ("dataloader (private path)" in refused) == (not loader_private), refused
    assert ("modules (private path)" in refused) == (not slot_private), refused


class Words(torch.utils.data.Dataset):  # type: ignore[misc]
    """Batches of strings: nothing in them has a batch dimension to count."""

    def __len__(self) -> int:
        return 12

    def __getitem__(self, i: int) -> str:
        return f"item {i}"


def _loader() -> Any:
    return torch.utils.data.DataLoader(Words(), batch_size=3, collate_fn=list)


def _train_step(model: Any, opt: Any, words: list[str]) -> None:
    x = torch.full((len(words), 2), 1.0)
    loss = model(x).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()


def test_batches_without_tensors_give_unknown_samples_on_every_path(tmp_path: Path) -> None:
    """A loader of string batches: the zero-code path (optimizer-marked steps) and the API path
    (stepscope.steps) both record unknown (NaN) samples, never 0."""
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with stepscope.session(name="zero-code", store=str(tmp_path / "z")):
        for words in _loader():
            _train_step(model, opt, words)
    with stepscope.session(name="api", store=str(tmp_path / "a")):
        for words in stepscope.steps(_loader()):
            _train_step(model, opt, words)
    for store in ("z", "a"):
        steps = load(tmp_path / store).ranks[0].steps
        assert len(steps) == 4, store  # 12 items, 3 a batch
        assert all(math.isnan(v) for v in steps["samples"]), (store, list(steps["samples"]))
