"""A TorchScript model and a torch.compile model under `stepscope run`: every optimizer step is a step, samples and
forward time are read, and stderr carries nothing the bare run does not (torch's warning about global module hooks
included)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tests.conftest import PY, SCRIPTS, Result, load

STEPS = 32
PARAMS = 16 * 32 + 32 + 32 * 4 + 4


def _torch_lines(err: str) -> list[str]:
    """stderr without stepscope's own lines (each starts with ``stepscope:``), compared with the bare run's."""
    return [line for line in err.splitlines() if not line.startswith("stepscope:")]


@pytest.mark.parametrize("kind", ["script", "trace", "compile"])
def test_scripted_and_compiled_models_step_exactly(cli: Callable[..., Result], store: Any, kind: str) -> None:
    args = [str(SCRIPTS / "scripted_train.py"), "--kind", kind, "--steps", str(STEPS)]
    bare = subprocess.run([PY, *args], capture_output=True, text=True, timeout=170)
    assert bare.returncode == 0, bare.stderr[-2000:]
    r = cli("run", "--quiet", "--sample-interval", "0.5", "--", PY, *args, timeout=170)
    assert r.rc == 0, r
    assert r.out == bare.stdout
    assert _torch_lines(r.err) == _torch_lines(bare.stderr), r.err
    own = [line for line in r.err.splitlines() if line.startswith("stepscope:")]
    # stepscope's own lines: at most the FLOP counter's (it cannot count a compiled graph); never a failed step
    assert all("FLOPs per step not measured" in line for line in own), own
    rank = load(store).ranks[0]
    steps = rank.steps
    assert len(steps) == STEPS
    assert np.all(steps["samples"] == 8)
    assert np.isfinite(steps["forward_ns"][1:]).all()
    assert [m["summary"]["total_params"] for m in rank.extra.get("model", [])] == [PARAMS]
    assert not any("failed" in n for n in rank.notes), rank.notes
