"""A trace set analysed on a real Dask LocalCluster (2 worker processes) vs the local pool: equal, figure
for figure; a worker killed mid-analysis loses no rank silently; an unreachable scheduler is one line."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed")

from stepscope.analyze.trace.multirank import TraceSetAnalysis
from stepscope.errors import UserError
from stepscope.executor import LocalExecutor, executor_for
from stepscope.executor.base import Outcome
from stepscope.executor.dask import BATCH_MAX, DaskExecutor, batch_size, batched
from stepscope.executor.traceset import analyze_traceset, comm_matrix_from_traces
from tests.conftest import ROOT
from tests.executor.rankset import stretch, write_rank_set

RANKS = 16


@pytest.fixture(scope="module")
def rank_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ranks16")
    write_rank_set(out, RANKS)
    return out


@pytest.fixture(scope="module")
def cluster() -> Iterator[DaskExecutor]:
    ex = DaskExecutor(local_workers=2)
    try:
        yield ex
    finally:
        ex.close()


@pytest.fixture(scope="module")
def pooled(rank_set: Path) -> TraceSetAnalysis:
    return analyze_traceset([rank_set], executor=LocalExecutor(2))


def test_local_cluster_equals_local_pool_figure_for_figure(rank_set: Path, cluster: DaskExecutor,
                                                           pooled: TraceSetAnalysis) -> None:
    on_dask = analyze_traceset([rank_set], executor=cluster)
    assert on_dask.to_dict() == pooled.to_dict()
    assert [a.rank for a in on_dask.ranks] == list(range(RANKS)) and not on_dask.errors
    # independently: rank r is the fixture stretched by 1 + r/100, so its median step is rank 0's times that
    base = on_dask.ranks[0].steps.stat(np.median)
    assert base is not None
    for a in on_dask.ranks:
        assert a.steps.stat(np.median) == pytest.approx(base * stretch(a.rank), rel=1e-6)
    assert on_dask.slowest_rank == RANKS - 1
    assert on_dask.gpu_pop is not None and on_dask.gpu_pop.load_balance < 1


def test_scheduler_address_equals_local_pool(rank_set: Path, cluster: DaskExecutor,
                                              pooled: TraceSetAnalysis) -> None:
    address = cluster.client.scheduler.address
    assert address.startswith("tcp://")
    with closing(executor_for(dask=address)) as remote:
        assert analyze_traceset([rank_set], executor=remote).to_dict() == pooled.to_dict()


def test_comm_matrix_on_dask_equals_local(rank_set: Path, cluster: DaskExecutor) -> None:
    here = comm_matrix_from_traces([rank_set], workers=1)
    there = comm_matrix_from_traces([rank_set], executor=cluster)
    assert there.to_dict() == here.to_dict()
    assert list(there.ranks) == list(range(RANKS))


def test_unreachable_scheduler_is_one_line_within_the_timeout(tmp_path: Path) -> None:
    start = time.monotonic()
    with pytest.raises(UserError) as err:
        executor_for(dask="tcp://127.0.0.1:9", timeout_s=2)
    assert time.monotonic() - start < 15
    assert "no Dask scheduler answered within 2 s" in str(err.value) and "\n" not in str(err.value)


def test_cli_unreachable_scheduler_exits_non_zero_with_one_line(rank_set: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "stepscope", "trace", "analyze", str(rank_set), "--dask",
                           "tcp://127.0.0.1:9", "--dask-timeout", "2"], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "tcp://127.0.0.1:9" in proc.stderr, proc.stderr


@pytest.mark.parametrize("spec", ["local:0", "nonsense", "tcp:/x"])
def test_bad_dask_spec_is_a_user_error(spec: str) -> None:
    with pytest.raises(UserError, match="--dask"):
        executor_for(dask=spec)
    with pytest.raises(UserError, match="--workers 3 sizes the local pool"):
        executor_for(dask="local:2", workers=3)


def test_worker_killed_mid_analysis_loses_no_rank_silently(rank_set: Path, cluster: DaskExecutor) -> None:
    pids: dict[str, int] = cluster.client.run(os.getpid)
    victim = sorted(pids.values())[0]
    killed: list[int] = []

    def kill_once() -> None:
        if not killed:
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)

    result = analyze_traceset([rank_set], executor=_Hooked(cluster, kill_once))
    assert killed == [victim]
    with pytest.raises(ProcessLookupError):
        os.kill(victim, 0)
    analysed = {a.rank for a in result.ranks}
    missing = {f"rank{r}.json.gz" for r in range(RANKS) if r not in analysed}
    named = {m for m in missing if any(m in e for e in result.errors)}
    assert named == missing  # complete (the scheduler reran the lost tasks), or each missing rank named
    assert len(analysed) + len(result.errors) == RANKS


class _Hooked:
    """The cluster, with a hook run after the first rank finishes (while the others are in flight)."""

    def __init__(self, ex: DaskExecutor, hook: object) -> None:
        self.ex, self.hook = ex, hook
        self.description = ex.description

    def map(self, fn, jobs, *, on_done=None) -> list[Outcome[object]]:  # type: ignore[no-untyped-def]
        return self.ex.map(fn, jobs, on_done=self.hook)  # type: ignore[arg-type]

    def close(self) -> None:
        return None  # the module's cluster is closed by its fixture


def test_jobs_travel_in_batches_and_a_failing_job_fails_alone(cluster: DaskExecutor) -> None:
    jobs = [4.0, 9.0, -1.0, 16.0] * 5  # 20 jobs on 2 workers: batches of 2 (about 4 tasks per worker)
    assert batch_size(len(jobs), 2) == 2 and batch_size(4096, 64) == BATCH_MAX and batch_size(3, 2) == 1
    assert batched(5, 2) == [[0, 1], [2, 3], [4]]
    done: list[int] = []
    out = cluster.map(math.sqrt, jobs, on_done=lambda: done.append(1))
    assert len(done) == len(jobs)
    for job, o in zip(jobs, out, strict=True):
        if job < 0:
            assert o.value is None and o.error == "ValueError: math domain error"
        else:
            assert o.error is None and o.value == math.sqrt(job)


def test_local_cluster_workers_run_without_the_profiler(cluster: DaskExecutor) -> None:
    # runs after the worker killed above was restarted by its nanny: the new worker has the settings too
    def profiling(dask_worker: object) -> bool:
        return "profile" in dask_worker.periodic_callbacks  # type: ignore[attr-defined]

    assert set(cluster.client.run(profiling).values()) == {False}
