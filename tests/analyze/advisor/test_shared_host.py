"""cpu-oversubscription on a shared host: only the run's own processes count. Real runs of advisor_train.py,
one beside CPU hogs (other tenants: must not fire, whatever they keep busy), one that oversubscribes the cores
with its own torch threads (must fire)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from stepscope.analyze.advisor import AdvisorInput
from stepscope.analyze.advisor.host import CpuOversubscription
from stepscope.analyze.run.summary import summarize_run
from tests.conftest import load, observe

CORES = os.cpu_count() or 1
STEPS = ("--steps", "80", "--compute", "60")  # about 2 s of busy steps here: several 0.2 s CPU samples


def _record(store: Path, *args: str) -> None:
    res = observe(store, *STEPS, *args, name="shared-host")
    assert res.returncode == 0, res.stderr[-3000:]


def test_other_tenants_cpu_never_counts_as_the_runs_workers(tmp_path: Path) -> None:
    """One torch thread and two DataLoader workers of a fast dataset while `yes` processes keep the host's
    cores busy (starved, the workers make the run wait for data): the host is busy outside the training
    process, but not because of it, so the rule neither fires nor suggests fewer threads or workers."""
    store = tmp_path / "store"
    hogs = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(min(CORES, 8))]
    try:
        _record(store, "--threads", "1", "--workers", "2")
    finally:
        for h in hogs:
            h.kill()
            h.wait(timeout=10)
    s = summarize_run(load(store))
    host_pct = [m.mean for r in s.ranks for m in r.system if m.name == "cpu_system_pct"]
    assert host_pct and host_pct[0] is not None  # the sampler saw the busy host
    fd = CpuOversubscription().evaluate(AdvisorInput(s))
    assert fd is None, fd


def test_own_threads_beyond_the_cores_still_fire(tmp_path: Path) -> None:
    """4 × cores torch threads and two workers: the run's own demand exceeds the cores, measured or not."""
    store = tmp_path / "store"
    _record(store, "--threads", str(4 * CORES), "--workers", "2")
    s = summarize_run(load(store))
    fd = CpuOversubscription().evaluate(AdvisorInput(s))
    assert fd is not None
    assert fd.evidence["torch_threads_per_process"] == 4 * CORES
    assert f"torch.set_num_threads({CORES})" in fd.suggestion
    assert fd.measured_from  # the evidence says where it came from
