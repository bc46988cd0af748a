"""data-bench inside the process: a dataset that sleeps per sample gives the throughput the sleep
allows; the cached later epoch is faster; the training loop never runs; an ordinary run of the same
script is compared with."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from stepscope.analyze.run.databench import InputVerdict, data_bench

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
SLEEP_S = 0.004  # tests/scripts/databench_sleep.py
N, BATCH = 96, 8


def _stepscope(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STEPSCOPE_HOME": str(store)}
    env.pop("STEPSCOPE_DB", None)
    return subprocess.run([sys.executable, "-m", "stepscope", *args], capture_output=True, text=True, env=env,
                          timeout=120, cwd=store.parent)


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("databench")
    store = tmp / "store"
    script = str(SCRIPTS / "databench_sleep.py")
    train = _stepscope(store, "run", "--quiet", "--sample-interval", "0.2", "--", sys.executable, script)
    assert train.returncode == 0, train.stderr
    marker = tmp / "trained.txt"
    res = _stepscope(store, "data-bench", "--sample-interval", "0.2", "--epochs", "2", "--json", "--",
                     sys.executable, script, str(marker))
    from stepscope.store import open_store

    st = open_store(store)
    try:
        rows = st.rows()
        data = st.load("latest")
    finally:
        st.close()
    return {"res": res, "marker": marker, "rows": rows, "data": data}


def test_sleep_bounds_the_first_epoch_and_the_cache_speeds_up_the_later(bench: dict[str, Any]) -> None:
    assert bench["res"].returncode == 0, bench["res"].stderr
    result = data_bench(bench["data"])
    (lb,) = result.loaders
    assert lb.config["batch_size"] == BATCH and lb.config["num_workers"] == 0
    first, later = lb.epochs
    assert (first.samples, first.batches, later.samples, later.batches) == (N, N // BATCH, N, N // BATCH)
    # every first-epoch sample sleeps SLEEP_S in the main process: at most 1 / SLEEP_S samples/s, and the rate
    # is the samples over the epoch's time (how far below the bound it lies depends on the machine's load)
    assert first.local_samples_per_s is not None and first.local_samples_per_s <= 1 / SLEEP_S
    epoch0, epoch1 = sorted(lb.per_rank, key=lambda e: e.epoch)
    assert (epoch0.epoch, epoch1.epoch) == (0, 1)
    assert epoch0.time_ns >= N * SLEEP_S * 1e9
    assert first.local_samples_per_s == pytest.approx(N / (epoch0.time_ns / 1e9))
    assert epoch0.batch_p50_ns is not None and epoch0.batch_p50_ns >= BATCH * SLEEP_S * 1e9
    # the later epoch does the same work without the sleeps: the cache saves at least half of them, with the
    # other half left as margin for a loaded machine
    assert lb.later is not None and later.local_samples_per_s is not None
    assert epoch1.time_ns <= epoch0.time_ns - 0.5 * N * SLEEP_S * 1e9
    assert later.local_samples_per_s == pytest.approx(N / (epoch1.time_ns / 1e9))
    assert lb.first.local_efficiency == 1.0  # a single-rank run is its own reference
    assert all(r.stopped == "end" for r in lb.per_rank)


def test_training_never_runs_and_the_run_is_stored_as_a_data_bench(bench: dict[str, Any]) -> None:
    assert not bench["marker"].exists()
    assert "stopped before training" in bench["res"].stderr
    bench_row, train_row = bench["rows"]
    assert bench_row.tags == {"kind": "data-bench"} and bench_row.status == "completed"
    assert train_row.tags == {}


def test_compared_with_the_ordinary_run(bench: dict[str, Any]) -> None:
    import json

    doc = json.loads(bench["res"].stdout)
    c = doc["comparison"]
    train_id = bench["rows"][1].id
    assert c["training_run"] == train_id
    later_total = doc["loaders"][0]["later"]["total_samples_per_s"]
    assert c["pipeline_samples_per_s"] == pytest.approx(later_total)
    assert c["share"] == pytest.approx(c["training_samples_per_s"] / later_total)
    expected = InputVerdict.INPUT_BOUND if c["share"] >= 0.8 else InputVerdict.NOT_INPUT_BOUND
    assert c["verdict"] == expected.value
