"""Lightning's sanity check (2 validation batches of 50 before the first training batch of 32) under
`stepscope run`: not a step and never folded into training step 0 (its samples, data wait and time), with the
callback and on the zero-code path alike."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from stepscope.model.tables import Phase
from tests.conftest import SCRIPTS, installed_or_skip, load

installed_or_skip("lightning")
pytestmark = pytest.mark.slow
SCRIPT = str(SCRIPTS / "lightning_sanity.py")
TRAIN_BATCH, VAL_BATCH, TRAIN_STEPS, VAL_PER_EPOCH, EPOCHS = 32, 50, 8, 2, 2


def _phase(store: Path, phase: int) -> np.ndarray:
    data = load(store)
    assert len(data.ranks) == 1
    steps = data.ranks[0].steps
    return np.asarray(steps.take(steps["phase"] == phase)["samples"])


def test_zero_code_sanity_check_is_not_step_0(observed, store: Path) -> None:
    res = observed(SCRIPT)
    assert res.rc == 0 and "lightning done" in res.out, res
    train = _phase(store, int(Phase.TRAIN))
    assert train.tolist() == [TRAIN_BATCH] * TRAIN_STEPS  # step 0 holds its own batch only (was 32 + 2 x 50)
    # each epoch's 2 validation batches are validation steps of 50; the sanity check's 2 are no step
    assert _phase(store, int(Phase.VALIDATION)).tolist() == [VAL_BATCH] * (VAL_PER_EPOCH * EPOCHS)


def test_callback_leaves_the_sanity_check_out(observed, store: Path) -> None:
    res = observed(SCRIPT, "--callback")
    assert res.rc == 0 and "lightning done" in res.out, res
    assert _phase(store, int(Phase.TRAIN)).tolist() == [TRAIN_BATCH] * TRAIN_STEPS
    assert _phase(store, int(Phase.VALIDATION)).tolist() == [VAL_BATCH] * (VAL_PER_EPOCH * EPOCHS)
