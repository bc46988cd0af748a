"""`stepscope data-bench`: no DataLoader, two ranks through torchrun, a streaming loader cut by
--max-batches and --time, and a --workers sweep."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SCRIPTS, Result, load

N = 96  # tests/scripts/databench_sleep.py
STREAM_SLEEP_S = 0.005  # tests/scripts/databench_stream.py


def test_a_script_without_a_dataloader_runs_to_its_end_then_exit_2(cli: Callable[..., Result]) -> None:
    r = cli("data-bench", "--sample-interval", "0.2", "--", sys.executable, str(SCRIPTS / "no_loader.py"))
    assert r.rc == 2, r
    assert "trained without a loader" in r.out
    assert "without iterating a torch DataLoader" in r.err and r.err.count("\n") == 1



@pytest.mark.parametrize("bad", [("--time", "0"), ("--epochs", "0"), ("--max-batches", "-1")])
def test_a_non_positive_limit_is_one_line_and_exit_2(cli: Callable[..., Result], bad: tuple[str, str]) -> None:
    r = cli("data-bench", *bad, "--", sys.executable, str(SCRIPTS / "no_loader.py"))
    assert r.rc == 2 and "must be positive" in r.err and r.err.count("\n") == 1, r

def test_two_ranks_through_torchrun_against_the_single_rank_reference(cli: Callable[..., Result],
                                                                      store: Path) -> None:
    script = str(SCRIPTS / "databench_sleep.py")
    one = cli("data-bench", "--sample-interval", "0.2", "--epochs", "1", "--json", "--", sys.executable, script)
    assert one.rc == 0, one
    single = json.loads(one.out)["loaders"][0]["first"]["local_samples_per_s"]
    two = cli("data-bench", "--sample-interval", "0.2", "--epochs", "1", "--json", "--", sys.executable, "-m",
              "torch.distributed.run", "--nproc-per-node", "2", script, timeout=180)
    assert two.rc == 0, two
    doc = json.loads(two.out)
    assert doc["world_size"] == 2
    lb = doc["loaders"][0]
    per_rank = lb["per_rank"]
    assert sorted(r["rank"] for r in per_rank) == [0, 1]
    assert [r["samples"] for r in per_rank] == [N / 2, N / 2]  # DistributedSampler shards
    (epoch,) = lb["epochs"]
    assert epoch["samples"] == N and epoch["ranks"] == 2
    assert epoch["total_samples_per_s"] == pytest.approx(N / (epoch["global_time_ns"] / 1e9))
    locals_ = [r["samples_per_s"] for r in per_rank]
    assert epoch["local_samples_per_s"] == pytest.approx(sum(locals_) / 2)
    first = lb["first"]
    assert first["local_ideal"] == pytest.approx(single)
    assert first["total_ideal"] == pytest.approx(2 * single)
    assert first["total_efficiency"] == pytest.approx(first["total_samples_per_s"] / (2 * single))


def test_streaming_loader_cut_by_max_batches_in_a_worker_sweep(cli: Callable[..., Result]) -> None:
    # 20 ms per sample, 4 per batch: 24 batches take at least 1.92 s of sleep in one process and about half
    # of that in two workers, which leaves the workers' start and the transfers 0.9 s to lose on a busy machine
    sleep_s, batches = 0.02, 24
    r = cli("data-bench", "--sample-interval", "0.2", "--epochs", "1", "--workers", "0,2", "--max-batches",
            str(batches), "--json", "--", sys.executable, str(SCRIPTS / "databench_stream.py"), str(sleep_s))
    assert r.rc == 0, r
    doc = json.loads(r.out)
    runs, sweep = doc["runs"], doc["sweep"]
    assert sweep["workers"] == [0, 2]
    for run, workers in zip(runs, (0, 2), strict=True):
        lb = run["loaders"][0]
        assert lb["streaming"] and lb["limit"] == f"--max-batches {batches}"
        assert lb["config"]["num_workers"] == workers
        assert [(e["batches"], e["stopped"]) for e in lb["per_rank"]] == [(batches, "max_batches")]
        assert any(f"--max-batches {batches}" in n and "streaming" in n for n in run["notes"])
    # one process makes at most 1 / sleep_s samples/s; two workers, sleeping side by side, make more
    zero, two = sweep["samples_per_s"]
    assert zero <= 1 / sleep_s
    assert two > zero and sweep["best_workers"] == 2


def test_streaming_loader_cut_by_time(cli: Callable[..., Result], store: Path) -> None:
    r = cli("data-bench", "--sample-interval", "0.2", "--epochs", "1", "--time", "0.3", "--", sys.executable,
            str(SCRIPTS / "databench_stream.py"))
    assert r.rc == 0, r
    assert "epochs stopped after --time 0.3 s" in r.out
    data = load(store)
    (rec,) = data.ranks[0].extra["databench"]
    (epoch,) = rec["epochs"]
    assert epoch["stopped"] == "time"
    elapsed = (epoch["end_ns"] - epoch["start_ns"]) / 1e9
    assert 0.3 <= elapsed < 0.3 + 4 * 4 * STREAM_SLEEP_S + 0.2
