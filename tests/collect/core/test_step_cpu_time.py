"""The per-step CPU clocks (model/tables.py ``thread_cpu_ns`` / ``process_cpu_ns``) against steps of known CPU
content: a real torch training run (tests/scripts/cpu_steps.py) whose busy loops measure their own CPU time in the
thread that runs them. Margins hold on a loaded machine: CPU time does not grow with waiting for a core, and the
bounds compare a step with its own loop, never with a timing taken elsewhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepscope.analyze.run.summary import index_metrics, summarize_run
from tests.conftest import load

pytestmark = pytest.mark.slow

STEP_OVERHEAD_NS = 8e6
"""What a step's own training work (a Linear forward, backward and SGD step) and stepscope's hooks may add to the
thread's CPU time beyond its loop: about 1 ms measured, 8 ms allowed for a machine whose caches are shared."""


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any]]:
    import subprocess

    from tests.conftest import PY, SCRIPTS, stepscope_cmd

    tmp = tmp_path_factory.mktemp("cpu")
    out = tmp / "loops.json"
    proc = subprocess.run(stepscope_cmd("run", "--store", str(tmp / "store"), "--quiet", "--sample-interval", "0.2",
                                        "--", PY, str(SCRIPTS / "cpu_steps.py"), str(out)),
                          capture_output=True, text=True, timeout=300, cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return load(tmp / "store"), json.loads(Path(out).read_text())


def _cols(data: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    steps = data.ranks[0].steps
    return steps.duration_ns.astype("float64"), steps["thread_cpu_ns"], steps["process_cpu_ns"]


def test_busy_steps_count_their_loop_and_sleeping_steps_almost_nothing(cpu_run: tuple[Any, dict[str, Any]]) -> None:
    data, loops = cpu_run
    n = loops["n"]
    wall, thread, process = _cols(data)
    assert len(wall) == 2 + 3 * n
    busy = slice(2, 2 + n)
    sleep = slice(2 + n, 2 + 2 * n)
    work = np.asarray(loops["busy"], dtype="float64")
    # a busy step's thread CPU is its loop's CPU time plus the step's small training work
    assert (thread[busy] >= work).all(), (thread[busy], work)
    assert (thread[busy] <= work + STEP_OVERHEAD_NS).all(), (thread[busy], work)
    # one thread cannot run longer than the wall clock it ran in (1 ms for the clocks' different reads)
    assert (thread[1:] <= wall[1:] + 1e6).all(), (thread, wall)
    # a sleeping step: the 30 ms sleep costs no CPU
    assert (thread[sleep] < STEP_OVERHEAD_NS).all(), thread[sleep]
    assert (wall[sleep] >= loops["sleep_s"] * 1e9).all()
    # the process clock holds the thread's (1 ms for the two clocks' reads)
    assert (process[1:] >= thread[1:] - 1e6).all()


def test_work_on_another_thread_is_in_process_cpu_only(cpu_run: tuple[Any, dict[str, Any]]) -> None:
    data, loops = cpu_run
    n = loops["n"]
    _, thread, process = _cols(data)
    helper = slice(2 + 2 * n, 2 + 3 * n)
    work = np.asarray(loops["helper"], dtype="float64")
    assert (thread[helper] < STEP_OVERHEAD_NS).all(), thread[helper]  # the training thread only waited
    assert (process[helper] - thread[helper] >= 0.9 * work).all(), (process[helper], thread[helper], work)


def test_summary_and_index_carry_the_cpu_medians(cpu_run: tuple[Any, dict[str, Any]]) -> None:
    """Warm-up and instrumented steps (a FLOP-counted step) excluded as for step time; the median over the measured
    steps, in the index in seconds."""
    from stepscope.analyze.run.summary import profiled_steps

    data, _ = cpu_run
    summary = summarize_run(data, warmup=2)
    st = summary.ranks[0].steps
    _, thread, process = _cols(data)
    index = data.ranks[0].steps["index"]
    keep = index >= 2
    for lo, hi in profiled_steps(data.ranks[0]):
        keep &= ~((index >= lo) & (index <= hi))
    assert st.thread_cpu_time is not None and st.process_cpu_time is not None
    assert st.thread_cpu_time.count == st.measured_steps == int(keep.sum())
    assert st.thread_cpu_time.p50 == pytest.approx(float(np.median(thread[keep])))
    m = index_metrics(summary)
    assert m["step_cpu_time_median_s"] == pytest.approx(float(np.median(thread[keep])) / 1e9)
    assert m["process_cpu_time_median_s"] == pytest.approx(float(np.median(process[keep])) / 1e9)


def test_first_step_not_started_at_a_boundary_is_not_measured(cpu_run: tuple[Any, dict[str, Any]]) -> None:
    """Step 0 starts at the first forward (no fetch, no boundary before it): its CPU time is NaN, never a figure
    that includes the imports before it."""
    data, _ = cpu_run
    _, thread, process = _cols(data)
    assert np.isnan(thread[0]) and np.isnan(process[0])
    assert np.isfinite(thread[1:]).all() and np.isfinite(process[1:]).all()


def test_keras_fit_steps_carry_the_cpu_clocks(tmp_path: Path) -> None:
    """Keras fit's steps end in the same place (Session.mark_step): a callback sleeps 50 ms inside every step, and
    the thread's CPU time leaves that sleep out while the wall clock holds it."""
    import subprocess

    from tests.conftest import PY, SCRIPTS, stepscope_cmd

    pytest.importorskip("keras")
    proc = subprocess.run(stepscope_cmd("run", "--store", str(tmp_path / "store"), "--quiet", "--sample-interval",
                                        "0.2", "--", PY, str(SCRIPTS / "keras_slow_fit.py"), "--sleep", "0",
                                        "--prefetch", "--step-sleep", "0.05"),
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = load(tmp_path / "store")
    wall, thread, process = _cols(data)
    assert data.ranks[0].stream.step_source == "keras" and len(wall) >= 8
    later = slice(1, None)  # step 0 holds the graph's tracing
    assert np.isfinite(thread[later]).all() and (thread[later] > 0).all()
    assert (thread[later] <= wall[later] + 1e6).all(), (thread, wall)
    # the sleep is not CPU time (an epoch's first step may start after its batch's sleep: the median step)
    assert float(np.median(wall[later] - thread[later])) >= 0.045e9, (thread, wall)
    assert (process[later] >= thread[later] - 1e6).all()


def test_lightning_step_after_validation_leaves_its_cpu_out(tmp_path: Path) -> None:
    """Lightning's training step resumes after validation with its wall clock restarted (validation time is not
    in it): its CPU clocks restart with it, so no training step holds more thread CPU time than wall time."""
    import subprocess

    from tests.conftest import PY, SCRIPTS, stepscope_cmd

    pytest.importorskip("lightning")
    proc = subprocess.run(stepscope_cmd("run", "--store", str(tmp_path / "store"), "--quiet", "--sample-interval",
                                        "0.2", "--", PY, str(SCRIPTS / "lightning_train.py"), "--val-work", "1000000"),
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = load(tmp_path / "store")
    steps = data.ranks[0].steps
    train = steps.take(steps["phase"] == 0)
    wall, thread, process = train.duration_ns.astype("float64"), train["thread_cpu_ns"], train["process_cpu_ns"]
    assert data.ranks[0].stream.step_source == "lightning" and len(train) == 20
    measured = np.isfinite(thread)
    assert measured[1:].all()
    # step 10 follows epoch 0's validation, 4 batches of a million-iteration loop each (tens of ms of CPU time
    # each): its CPU time held them while its wall clock did not
    val = steps.take(steps["phase"] == 1)
    val_cpu = float(np.nansum(val["thread_cpu_ns"][:4]))
    assert val_cpu > 40e6, val_cpu / 1e6
    assert thread[10] < 0.5 * val_cpu, (thread[10] / 1e6, val_cpu / 1e6)
    assert (thread[measured] <= wall[measured] + 1e6).all(), (thread / 1e6, wall / 1e6)
    assert (process[measured] >= thread[measured] - 1e6).all()
