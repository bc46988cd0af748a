"""Host-side advisor rules provoked by real observed runs (and silent on runs without the problem)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from stepscope.analyze.advisor.host import CpuOversubscription, InputBound, LongFirstSteps
from stepscope.app import RunAnalysis
from tests.conftest import load

pytestmark = pytest.mark.slow


def _advice(observed, store: Path, *args: str):  # type: ignore[no-untyped-def]
    res = observed("advisor_train.py", *args)
    assert res.rc == 0, res
    data = load(store)
    ra = RunAnalysis(data)
    return ra.summary, ra.advice


def test_input_bound_fires_on_a_sleeping_dataset(observed, store: Path) -> None:  # type: ignore[no-untyped-def]
    summary, advice = _advice(observed, store, "--steps", "14", "--sample-sleep", "0.004")
    fd = next(f for f in advice.findings if f.rule_id == InputBound.id)
    r0 = summary.ranks[0]
    # independent: 8 samples x 4 ms of sleep per step is the least data wait a step can have
    assert fd.evidence["data_wait_per_step_s"] >= 8 * 0.004
    assert fd.evidence["data_wait_share"] == pytest.approx(r0.steps.data_wait_share)
    assert fd.saving_s_per_step == pytest.approx(fd.evidence["data_wait_per_step_s"])
    assert advice.findings[0].rule_id == InputBound.id  # the largest saving comes first


def test_quiet_run_has_no_host_findings(observed, store: Path) -> None:  # type: ignore[no-untyped-def]
    _, advice = _advice(observed, store, "--steps", "14", "--compute", "30")
    fired = {f.rule_id for f in advice.findings}
    assert not fired & {InputBound.id, CpuOversubscription.id, LongFirstSteps.id}, advice.findings
    assert any("no profiled window" in n for n in advice.notes)


def test_oversubscription_and_long_first_step_fire(observed, store: Path) -> None:  # type: ignore[no-untyped-def]
    """One run provokes both (each needs seconds of a real process): twice as many torch threads as cores
    (plus 2 workers, listed but not counted: their CPU is not sampled), and a step 0 that sleeps 1.5 s. The
    suggested thread count is the core budget and runs on this machine."""
    cores = os.cpu_count() or 2
    summary, advice = _advice(observed, store, "--steps", "12", "--threads", str(2 * cores), "--workers", "2",
                              "--first-step-sleep", "1.5")
    fd = next(f for f in advice.findings if f.rule_id == CpuOversubscription.id)
    assert fd.evidence["torch_threads_per_process"] == 2 * cores
    assert fd.evidence["dataloader_workers_per_process"] == 2
    assert "busy_workers" not in fd.evidence  # another tenant's CPU never passes for the run's workers
    assert fd.evidence["threads_demanded"] == 2 * cores
    assert fd.evidence["logical_cores"] == summary.run.host.cpu_cores_logical
    n = fd.evidence["suggested_torch_threads"]
    assert n == cores and f"torch.set_num_threads({n})" in fd.suggestion
    assert fd.measured_from.startswith("from the run's recorded settings")
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    assert torch.get_num_threads() == n
    torch.set_num_threads(before)
    fd = next(f for f in advice.findings if f.rule_id == LongFirstSteps.id)
    assert fd.evidence["first_step_s"] >= 1.5
    assert fd.saving_s_total == pytest.approx(fd.evidence["first_step_s"] - fd.evidence["median_step_s"])
    assert summary.headline.first_step_ns / 1e9 == pytest.approx(fd.evidence["first_step_s"])
