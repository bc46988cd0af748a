"""Two threads, each training its own model, under `stepscope run`: the same counts every time.

The step stream of a process is one thread's: the thread whose optimizer stepped first (docs/metrics.md, "step").
Another thread's steps, forwards and backwards are left out of it, and its model is still detected."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from typing import Any

import numpy as np

from tests.conftest import PY, SCRIPTS, Result, load

STEPS = 32
FIRST_PARAMS = 16 * 32 + 32 + 32 * 4 + 4
"""the first thread's 16-32-4 MLP"""
SECOND_PARAMS = 16 * 24 + 24 + 24 * 24 + 24 + 24 * 4 + 4
"""the second thread's 16-24-24-4 MLP"""
BATCH = {FIRST_PARAMS: 8.0, SECOND_PARAMS: 12.0}
"""each model's batch (samples per step)"""


def _bare(*args: str) -> str:
    proc = subprocess.run([PY, str(SCRIPTS / "threads_train.py"), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _observed(cli: Callable[..., Result], store: Any, *args: str) -> tuple[Result, Any]:
    r = cli("run", "--quiet", "--sample-interval", "0.5", "--", PY, str(SCRIPTS / "threads_train.py"), *args,
            timeout=170)
    assert r.rc == 0, r
    return r, load(store).ranks[0]


def _check_one_stream(rank: Any, owner_batch: float, loader: bool = False) -> None:
    """STEPS steps, both models detected, every step's samples the owning thread's batch, the phases inside it
    (with DataLoaders, the owning thread's data wait among them)."""
    steps = rank.steps
    assert len(steps) == STEPS
    models = sorted(m["summary"]["total_params"] for m in rank.extra.get("model", []))
    assert models == sorted(BATCH)
    assert np.all(steps["samples"] == owner_batch), steps["samples"]
    for phase in ("forward_ns", "backward_ns", "optimizer_ns") + (("data_wait_ns",) if loader else ()):
        assert np.isfinite(steps[phase]).all(), phase
    assert loader or np.isnan(steps["data_wait_ns"]).all()  # no DataLoader in this thread, nor data wait
    # only the owning thread's phases: disjoint, inside each step (the other thread's would overlap them)
    phases = steps["forward_ns"] + steps["backward_ns"] + steps["optimizer_ns"]
    if loader:
        phases = phases + steps["data_wait_ns"]
    assert np.all(phases[1:] <= steps.duration_ns[1:])
    assert any("threads" in n and "--samples-per-step" not in n for n in rank.notes), rank.notes


def test_the_first_thread_to_step_owns_the_steps(cli: Callable[..., Result], store: Any) -> None:
    """Each thread iterates its own DataLoader; the second starts after the first has stepped twice (after model
    discovery ended: its model is found again when its optimizer steps). The steps are the first's, run after
    run, and its batches only are counted."""
    bare = _bare("--lead", "2", "--loader")
    for _ in range(3):
        r, rank = _observed(cli, store, "--lead", "2", "--loader")
        assert r.out == bare  # both threads' training unchanged
        _check_one_stream(rank, BATCH[FIRST_PARAMS], loader=True)


def test_two_threads_starting_together_count_the_same_every_time(cli: Callable[..., Result], store: Any) -> None:
    """Both threads start at once: whichever steps first owns the stream, and the counts never vary."""
    bare = _bare("--lead", "0")
    for _ in range(5):
        r, rank = _observed(cli, store, "--lead", "0")
        assert r.out == bare
        owner = float(rank.steps["samples"][0])
        assert owner in BATCH.values()
        _check_one_stream(rank, owner)
