"""cpu-oversubscription gives advice that runs on this machine (never set_num_threads(0)) and does not
count idle DataLoader workers as load; the advisor's notes never suggest --profile-steps without steps."""

from __future__ import annotations

import os
import re
from dataclasses import replace

import pytest

from stepscope.analyze.advisor import AdvisorInput, advise
from stepscope.analyze.advisor.host import CpuOversubscription
from stepscope.analyze.run.summary import RunSummary, summarize_run
from stepscope.analyze.run.system import MetricStats
from tests.conftest import load

CORES = os.cpu_count() or 1


@pytest.fixture
def real(profiled_store) -> RunSummary:  # type: ignore[no-untyped-def]
    return summarize_run(load(profiled_store))


def _run(real: RunSummary, *, procs: int, threads: int, workers: int, host_pct: float | None = None,
         proc_pct: float | None = None, data_wait: float | None = None) -> RunSummary:
    """``procs`` ranks on one host with this machine's cores; CPU samples when given (percent)."""
    base = real.ranks[0]
    system = tuple(m for m in base.system if m.name not in ("cpu_system_pct", "cpu_process_pct"))
    if host_pct is not None and proc_pct is not None:
        system += (MetricStats("cpu_system_pct", host_pct, host_pct, host_pct, host_pct, 10),
                   MetricStats("cpu_process_pct", proc_pct, proc_pct, proc_pct, proc_pct, 10))
    dl = ({"num_workers": workers, "torch_threads": threads},)
    steps = replace(base.steps, data_wait_share=data_wait) if data_wait is not None else base.steps
    ranks = tuple(replace(base, rank=i, local_rank=i, dataloaders=dl, system=system, steps=steps)
                  for i in range(procs))
    host = replace(real.run.host, cpu_cores_logical=CORES)
    return replace(real, run=replace(real.run, host=host), ranks=ranks)


def _suggested_threads(text: str) -> int:
    m = re.search(r"torch\.set_num_threads\((\d+)\)", text)
    assert m, text
    return int(m.group(1))


def _runs_here(n: int) -> None:
    """The suggestion is valid on this machine: torch accepts it and uses that many threads."""
    import torch

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(n)
        assert torch.get_num_threads() == n
    finally:
        torch.set_num_threads(before)


def test_more_processes_than_cores_never_yield_zero_threads(real: RunSummary) -> None:
    """cores // processes is 0 with more processes than cores: the suggestion is still at least one thread."""
    for procs in (1, 2, CORES + 1):
        s = _run(real, procs=procs, threads=CORES + 1, workers=CORES)
        fd = CpuOversubscription().evaluate(AdvisorInput(s))
        assert fd is not None, procs
        n = _suggested_threads(fd.suggestion) if "set_num_threads" in fd.suggestion else None
        assert fd.evidence["suggested_torch_threads"] >= 1
        if n is not None:
            assert n == fd.evidence["suggested_torch_threads"] and 1 <= n <= CORES
            _runs_here(n)
        assert "num_workers=0" not in fd.suggestion  # loading in the training process would slow every step


def test_too_many_torch_threads_get_the_core_budget(real: RunSummary) -> None:
    s = _run(real, procs=1, threads=2 * CORES, workers=0)
    fd = CpuOversubscription().evaluate(AdvisorInput(s))
    assert fd is not None and _suggested_threads(fd.suggestion) == CORES
    assert fd.evidence["threads_demanded"] == 2 * CORES
    _runs_here(CORES)


def test_idle_workers_are_not_load(real: RunSummary) -> None:
    """Threads fill the cores, 4 workers exist but the host's CPU use is all the training process's own:
    the workers are idle, nothing is oversubscribed, and fewer threads would not help."""
    busy = 100.0 * min(CORES, 1) / CORES
    s = _run(real, procs=1, threads=CORES, workers=4, host_pct=busy, proc_pct=100.0 * min(CORES, 1))
    assert CpuOversubscription().evaluate(AdvisorInput(s)) is None
    unsampled = _run(real, procs=1, threads=CORES, workers=4)  # workers' CPU is never sampled: not counted
    assert CpuOversubscription().evaluate(AdvisorInput(unsampled)) is None


def test_host_cpu_outside_the_training_is_not_the_runs(real: RunSummary) -> None:
    """Host fully busy, the training process using one core: the rest may be its workers or another tenant
    (the sampler cannot tell), so it makes no finding and no fewer threads or workers."""
    for wait in (0.01, 0.5):
        s = _run(real, procs=1, threads=CORES, workers=8, host_pct=100.0, proc_pct=100.0, data_wait=wait)
        assert CpuOversubscription().evaluate(AdvisorInput(s)) is None, wait


def test_no_profile_steps_hint_without_steps(real: RunSummary) -> None:
    no_steps = replace(real, ranks=(replace(real.ranks[0], steps=replace(real.ranks[0].steps, steps=0)),))
    notes = advise(AdvisorInput(no_steps)).notes
    assert not any("--profile-steps N" in n for n in notes) and any("stepscope.step()" in n for n in notes)
    assert any("--profile-steps N" in n for n in advise(AdvisorInput(real)).notes)


def test_html_report_does_not_suggest_a_window_without_steps(real: RunSummary) -> None:
    from stepscope.report.html.run_sections import kernels_section

    no_steps = replace(real, ranks=(replace(real.ranks[0], steps=replace(real.ranks[0].steps, steps=0)),))
    html = kernels_section(advise(AdvisorInput(no_steps)), {}, ())
    assert "--profile-steps" not in html and "stepscope.step()" in html
    assert "--profile-steps N" in kernels_section(advise(AdvisorInput(real)), {}, ())


def test_input_bound_needs_the_lower_bound_not_a_few_preempted_steps() -> None:
    from stepscope.analyze.advisor.base import AdvisorInput
    from stepscope.analyze.advisor.host import InputBound
    from stepscope.analyze.run.summary import summarize_run
    from tests.analyze.distdata import rank_data, run_data

    def fired(step_ms: list[float], wait_ms: list[float]) -> bool:
        summary = summarize_run(run_data([rank_data(0, 1, step_ms, wait_ms=wait_ms)]), warmup=0)
        return InputBound().evaluate(AdvisorInput(summary)) is not None

    # 13 steps of 8 ms waiting 0.3 ms, one of them preempted for 20 ms inside next(): mean share 14.5%, but one
    # step makes it (lower bound below 0): not input-bound (what a quiet-run test saw on a machine at load 7)
    steps, waits = [8.0] * 13, [0.3] * 13
    steps[6], waits[6] = 28.0, 20.3
    s = summarize_run(run_data([rank_data(0, 1, steps, wait_ms=waits)]), warmup=0).ranks[0].steps
    assert s.data_wait_share is not None and s.data_wait_share > 0.10
    assert s.data_wait_share_low is not None and s.data_wait_share_low < 0.10
    assert not fired(steps, waits)
    # every step waits 2 ms of 10 (20%, a little jitter): input-bound, its bound above 10%
    assert fired([10.0 + 0.1 * (i % 3) for i in range(13)], [2.0 + 0.1 * (i % 3) for i in range(13)])
