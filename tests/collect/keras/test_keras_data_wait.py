"""Data wait inside Keras ``Model.fit`` (TensorFlow backend): measured by a stamping stage on fit's dataset
(collect/keras/keras_datawait.py), checked against a known sleep per batch in a real ``tf.data`` map, shown not
to change what fit computes, and left out (NaN, a note) where TensorFlow's op determinism forbids it; on the
JAX and PyTorch backends, the Python ``next`` Keras calls is timed.

TensorFlow takes seconds to import: each process is started once per module and shared by its tests."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import PY, SCRIPTS, load, stepscope_cmd

if importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("keras") is None:
    pytest.skip("tensorflow / keras are not installed (extras tensorflow)", allow_module_level=True)
pytestmark = pytest.mark.slow

SLEEP_S = 0.06
SCRIPT = str(SCRIPTS / "keras_slow_fit.py")


def _run(d: Path, *argv: str, backend: str = "tensorflow", **env_extra: str) -> tuple[Any, list[float]]:
    run, out = _run_json(d, *argv, backend=backend, **env_extra)
    return run, out["loss"]


def _run_json(d: Path, *argv: str, backend: str = "tensorflow", **env_extra: str) -> tuple[Any, dict[str, Any]]:
    """The stored run of keras_slow_fit.py under `stepscope run` and the script's JSON line."""
    env = {**os.environ, "STEPSCOPE_HOME": str(d / "store"), "KERAS_BACKEND": backend, **env_extra}
    env.pop("STEPSCOPE_DB", None)
    r = subprocess.run(stepscope_cmd("run", "--quiet", "--", PY, SCRIPT, "--sleep", str(SLEEP_S), *argv),
                       capture_output=True, text=True, timeout=300, cwd=d, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return load(d / "store"), json.loads(r.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def waited(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, list[float]]:
    """No prefetch: every batch's 60 ms map runs while the step waits for it."""
    return _run(tmp_path_factory.mktemp("waited"))


@pytest.fixture(scope="module")
def hidden(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Prefetch on and 200 ms of other work per step: the pipeline prepares each batch while the step works
    (three times the map's 60 ms, so that a loaded machine that wakes the prefetch thread late still hides it)."""
    return _run(tmp_path_factory.mktemp("hidden"), "--prefetch", "--step-sleep", "0.2")[0]


def test_data_wait_is_the_injected_delay(waited: tuple[Any, list[float]]) -> None:
    steps = waited[0].ranks[0].steps
    assert len(steps) == 10  # 80 samples in batches of 16, 2 epochs
    wait = steps["data_wait_ns"]
    assert np.isfinite(wait).all()
    # each fetch runs the 60 ms map in full (a loaded machine may add to it, never take from it)
    assert np.all(wait >= 0.95 * SLEEP_S * 1e9), wait
    assert np.median(wait) <= 2.0 * SLEEP_S * 1e9, wait
    assert np.all(wait <= steps.duration_ns)


def test_a_hidden_pipeline_waits_near_zero(hidden: Any) -> None:
    steps = hidden.ranks[0].steps
    assert len(steps) == 10
    wait = steps["data_wait_ns"]
    first = np.r_[True, steps["epoch"][1:] != steps["epoch"][:-1]]
    # an epoch's first batch has nothing prefetched yet: the step waits for the map
    assert np.all(wait[first] >= 0.95 * SLEEP_S * 1e9), wait
    # the others were prepared during the previous step's 200 ms: well under the 60 ms the map takes
    assert np.all(wait[~first] < 0.25 * SLEEP_S * 1e9), wait


def test_unmetered_under_op_determinism_and_the_same_results(waited: tuple[Any, list[float]],
                                                              tmp_path: Path) -> None:
    """With op determinism on, tf.timestamp raises inside a pipeline: no stage is added, data wait is NaN with
    a note, and fit runs as without stepscope; its losses equal the metered run's bit for bit (seeded, one
    thread), so the stage changed nothing fit computes."""
    run, losses = _run(tmp_path, "--deterministic")
    rank = run.ranks[0]
    assert len(rank.steps) == 10 and np.isnan(rank.steps["data_wait_ns"]).all()
    assert sum("op determinism is on" in n for n in rank.notes) == 1
    assert losses == waited[1]


def test_read_in_batches_and_kept_when_fit_raises(tmp_path: Path) -> None:
    """The callback reads the stage's per-batch waits every 64 steps (keras_hooks.FILL_EVERY) and at the
    epoch's end; fit interrupted by an exception in its 100th step still leaves every step it ended with its
    own data wait (the last partial read happens as fit unwinds). 70 steps per epoch, 5 ms of sleep per batch:
    epoch 0 crosses one full read and ends on a partial one, epoch 1 stops 30 steps in."""
    from stepscope.collect.keras.keras_hooks import FILL_EVERY

    sleep, per_epoch, raise_at = 0.005, 70, 100
    assert FILL_EVERY < per_epoch < raise_at < per_epoch + FILL_EVERY
    env = {**os.environ, "STEPSCOPE_HOME": str(tmp_path / "store"), "KERAS_BACKEND": "tensorflow"}
    env.pop("STEPSCOPE_DB", None)
    r = subprocess.run(stepscope_cmd("run", "--quiet", "--", PY, SCRIPT, "--sleep", str(sleep), "--samples",
                                     str(per_epoch * 16), "--raise-at", str(raise_at)),
                       capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == {"loss": []}  # fit did raise
    steps = load(tmp_path / "store").ranks[0].steps
    # batch 100 raised before stepscope's callback ended step 99 (callbacks run in order, ours last)
    assert len(steps) == raise_at - 1
    assert list(steps["index"]) == list(range(raise_at - 1))
    wait = steps["data_wait_ns"]
    assert np.isfinite(wait).all(), np.flatnonzero(~np.isfinite(wait))
    assert np.all(wait >= 0.95 * sleep * 1e9), wait
    assert np.all(wait <= steps.duration_ns)


def test_the_plain_path_writes_what_the_general_one_does(tmp_path: Path) -> None:
    """The fit callback ends most training steps on a plain path written out for speed (keras_hooks
    ``_plain_begin``); a no-op per-step collector sends every step through the general one (``_end_train``,
    ``Session.mark_step``). The same fit both ways: 1100 samples in batches of 16 (68 full batches and one of
    12 per epoch, 2 epochs: the plain path ends 68 steps per epoch, all but the partial one, which validation
    ends), 5 ms of sleep per batch (every step's data wait at least that, read from the stage's ring in
    batches of 64), 100 validation samples (arrays: Keras' default batch of 32, so 3 batches and one of 4).
    Same rows, same waits' bounds, same losses bit for bit."""
    sleep, argv = 0.005, ("--sleep", "0.005", "--samples", "1100", "--val-samples", "100")
    (tmp_path / "plain").mkdir()
    (tmp_path / "general").mkdir()
    plain, plain_out = _run_json(tmp_path / "plain", *argv)
    general, general_out = _run_json(tmp_path / "general", *argv, "--general")
    assert plain_out["plain_steps"] == 2 * 68 and general_out["plain_steps"] == 0
    # the training data (a map, prefetch off) is stamped when ready; validation's keeps the zip stage
    assert plain_out["ready"] == general_out["ready"] == [True, False]
    assert plain_out["loss"] == general_out["loss"]
    per_epoch = [16.0] * 68 + [12.0]
    for run in (plain, general):
        steps = run.ranks[0].steps
        train = steps["phase"] == 0
        assert list(steps["index"][train]) == list(range(138))
        assert np.array_equal(steps["samples"][train], np.array(per_epoch * 2))
        assert list(steps["epoch"][train]) == [0] * 69 + [1] * 69
        val = steps["phase"] == 1
        assert np.array_equal(steps["samples"][val], np.array(([32.0] * 3 + [4.0]) * 2))
        assert list(steps["epoch"][val]) == [0] * 4 + [1] * 4
        start, end, epoch = steps["start_ns"][train], steps["end_ns"][train], steps["epoch"][train]
        same = epoch[1:] == epoch[:-1]
        assert np.array_equal(start[1:][same], end[:-1][same])  # training steps tile each epoch
        wait = steps["data_wait_ns"]
        assert np.isfinite(wait).all(), np.flatnonzero(~np.isfinite(wait))
        assert np.all(wait[train] >= 0.95 * sleep * 1e9), wait[train]
        assert np.all(wait <= steps.duration_ns)
    for column in ("index", "samples", "epoch", "phase"):
        assert np.array_equal(plain.ranks[0].steps[column], general.ranks[0].steps[column]), column


def test_a_dataset_of_unknown_length(tmp_path: Path) -> None:
    """Keras cannot know the length of a filtered dataset: in each epoch it begins a sixth step whose fetch
    finds the end. That step fetched no batch: its data wait stays NaN (not measured), and the five real
    steps of the epoch keep their own waits (the read at the epoch's end does not shift them)."""
    run, _ = _run(tmp_path, "--sleep", "0.02", "--unknown-length")
    steps = run.ranks[0].steps
    assert len(steps) == 12 and not run.ranks[0].notes
    wait = steps["data_wait_ns"]
    last = np.r_[steps["epoch"][1:] != steps["epoch"][:-1], True]
    assert np.isnan(wait[last]).all(), wait
    assert np.all(wait[~last] >= 0.95 * 0.02 * 1e9), wait


def test_turned_off_by_the_environment(tmp_path: Path) -> None:
    run, _ = _run(tmp_path, "--sleep", "0", STEPSCOPE_KERAS_DATA_WAIT="off")
    rank = run.ranks[0]
    assert len(rank.steps) == 10 and np.isnan(rank.steps["data_wait_ns"]).all()
    assert sum("STEPSCOPE_KERAS_DATA_WAIT turned it off" in n for n in rank.notes) == 1


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_other_backends_time_the_python_next(tmp_path: Path, backend: str) -> None:
    """On Keras' JAX and PyTorch backends the trainer calls next() on a Python iterator: a generator that
    sleeps 60 ms per batch gives the steps that wait. Keras' generator adapter reads a batch or two ahead
    (to learn the data's shapes) and hands them out later without a sleep: those steps did not wait, and
    their own duration, timed apart from the wait, says so too."""
    if importlib.util.find_spec(backend) is None:
        pytest.skip(f"{backend} is not installed")
    run, _ = _run(tmp_path, "--generator", backend=backend)
    steps = run.ranks[0].steps
    assert len(steps) == 10 and run.ranks[0].stream.step_source == "keras"
    wait, duration = steps["data_wait_ns"], steps.duration_ns
    assert np.isfinite(wait).all() and np.all(wait <= duration)
    waited = wait >= 0.95 * SLEEP_S * 1e9
    assert waited.sum() >= 6, wait  # most batches come from the sleeping generator
    # no wait: the steps were short too (but the first, which compiles the train function); their median, as
    # one step preempted on a busy machine was seen at 84 ms
    short = duration[1:][~waited[1:]]
    assert not len(short) or np.median(short) < SLEEP_S * 1e9, (wait, duration)
    assert np.median(wait) <= 2.0 * SLEEP_S * 1e9, wait


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts thread switches in Linux /proc")
def test_the_stage_runs_in_the_pulling_thread(tmp_path: Path) -> None:
    """The stage's two small functions run in the thread that pulls the batch (TensorFlow's single-threaded
    executor): no thread switch per batch beyond the pipeline's own. A plain ``map`` of a small stateful
    function, the stage's form before, hands its ops to a thread pool and waits: two switches per element
    (the stage had two such functions: four per batch, and the cost of waking a thread on a busy machine).
    Voluntary switches only: preemption by other processes does not count, so a loaded machine passes too."""
    # A busy machine adds switches of its own (threads that block on a lock another, preempted, holds: +0.5 a
    # batch seen beside two spinning processes) and can hide the control's (a pool still spinning when the next
    # element comes); a stage that hands work to a thread switches in every run. So: up to three runs, and one
    # must show the control and no switch added by the stage.
    seen = []
    for _ in range(3):
        r = subprocess.run([PY, str(SCRIPTS / "keras_stage_switches.py"), "--batches", "300"], capture_output=True,
                           text=True, timeout=300, cwd=tmp_path, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
        assert r.returncode == 0, r.stderr[-3000:]
        out = json.loads(r.stdout.strip().splitlines()[-1])
        assert out["batches_counted"] == 301  # every element pulled through the stage was numbered and kept
        seen.append(out)
        # the control: the count sees a thread pool's switches (+1.2 to +4.2 measured on a quiet machine)
        if out["plain_map"] - out["plain"] >= 0.5 and out["staged"] - out["plain"] < 0.5:
            break
    else:
        raise AssertionError(f"no run showed the control's switches without the stage adding any: {seen}")


def test_the_prefetch_hides_the_pipeline_from_the_steps_it_feeds(hidden: Any) -> None:
    """A step's data wait is from its begin to the time its batch was ready, both on the wall clock. With a
    prefetch (here the one TensorFlow would inject, added explicitly) the stamp runs in the prefetch's thread:
    the steps but an epoch's first find their batch ready, a wait of none at all (the stage at hand-out time
    it replaced gave each step tens of µs): most of them, as a loaded machine may wake the prefetch late."""
    steps = hidden.ranks[0].steps
    first = np.r_[True, steps["epoch"][1:] != steps["epoch"][:-1]]
    assert np.median(steps["data_wait_ns"][~first]) == 0, steps["data_wait_ns"]


def test_the_ready_stamp_runs_off_the_pulling_thread(tmp_path: Path) -> None:
    """Fit's training data is stamped when each batch is ready: beneath the pipeline's final prefetch (its
    own, or the one TensorFlow would inject, added explicitly), in the prefetch's background thread, so a batch
    prepared while the step did other work (200 ms; the map sleeps 30 ms) was stamped before the pull began;
    with no prefetch the stamp is the pipeline's last stage, in the pulling thread, after the map's sleep."""
    r = subprocess.run([PY, str(SCRIPTS / "keras_ready_stamps.py"), "--sleep", "0.03", "--pause", "0.2"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert [out[k]["ready"] for k in ("prefetch", "injected", "off")] == [True, True, True]
    assert [out[k]["prefetch_added"] for k in ("prefetch", "injected", "off")] == [False, True, False]
    for end in ("prefetch", "injected"):
        assert all(d < 0 for d in out[end]["after_begin_ns"]), out
    assert all(d >= 0.028e9 for d in out["off"]["after_begin_ns"]), out


def test_ready_wait_is_clamped_to_the_step() -> None:
    from stepscope.collect.keras.keras_datawait import ready_wait

    assert ready_wait(1_000_500.0, 1_000_000, 10_000) == 500  # ready 500 ns after the begin
    assert ready_wait(999_000.0, 1_000_000, 10_000) == 0  # ready before the step began
    assert ready_wait(1_050_000.0, 1_000_000, 10_000) == 10_000  # at most the step's duration
    assert ready_wait(1_000_000.0, 1_000_000, -5) == 0
