"""Real torchrun jobs (gloo, CPU) of 1, 2 and 4 ranks whose step times are set by sleeps: the balanced
job is never given a straggler, rank 3 of the 4-rank job sleeps 30 ms more per step and is named the straggler
with a load balance that matches the injected delay, and the three runs make a weak-scaling table.
(One test, so that the three launches are shared and never repeated on another xdist worker.)"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stepscope.analyze.ranks.ranks import analyze_ranks
from stepscope.cli import main
from tests.conftest import SCRIPTS, load

SLEEP_MS, DELAY_MS, STEPS = 10.0, 30.0, 16


def _observed(store: Path, ranks: int, *extra: str) -> None:
    cmd = [sys.executable, "-m", "stepscope", "run", "--store", str(store), "--quiet", "--sample-interval", "0.2",
           "--warmup-steps", "2", "--tag", "study=weak", "--name", f"ddp-{ranks}", "--",
           sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(ranks),
           str(SCRIPTS / "dist_steps.py"), "--steps", str(STEPS), "--sleep-ms", str(SLEEP_MS), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_balance_straggler_and_weak_scaling(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    _observed(store, 1)
    _observed(store, 2)
    _observed(store, 4, "--straggler", "3", "--delay-ms", str(DELAY_MS))

    balanced = analyze_ranks(load(store, "ddp-2"))
    assert balanced.stragglers == (), balanced.ranks
    # balanced, or left unresolved when the host's CPU contention explains the difference (the suite's other
    # worker shares the 2 cores: tests/analyze/ranks/test_straggler_contention.py)
    assert balanced.balanced is True or (balanced.unresolved and balanced.balanced is None), balanced
    assert balanced.pop is not None and balanced.pop.load_balance > 0.9

    slow = analyze_ranks(load(store, "ddp-4"))
    assert [s.rank for s in slow.stragglers] == [3]
    assert slow.stragglers[0].excess_ns / 1e6 == pytest.approx(DELAY_MS, rel=0.3)
    # the fast ranks' useful time u (measured), the straggler's u + delay: LB = (3u + u + d) / (4 (u + d))
    u = sum(r.useful_ns for r in slow.ranks[:3]) / 3 / 1e6
    assert slow.pop is not None
    assert slow.pop.load_balance == pytest.approx((4 * u + DELAY_MS) / (4 * (u + DELAY_MS)), abs=0.06)
    fast_comm = [r.comm_ns / 1e6 for r in slow.ranks[:3]]  # type: ignore[operator]
    assert min(fast_comm) > 0.6 * DELAY_MS  # the others wait for rank 3 in their all_reduce
    assert slow.comm_split is not None and slow.comm_split.ops[0].sync_ns > slow.comm_split.ops[0].transfer_ns

    assert main(["show", "--store", str(store), "ddp-4", "--ranks", "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert "straggler: rank 3 is slower by" in out and "load balance" in out

    # the advisor names the imbalance on the straggler run and stays silent on the balanced one
    assert main(["advise", "--store", str(store), "ddp-4", "--json"]) == 0
    assert "rank-imbalance" in {f["rule_id"] for f in json.loads(capsys.readouterr().out)["findings"]}
    assert main(["advise", "--store", str(store), "ddp-2", "--json"]) == 0
    assert "rank-imbalance" not in {f["rule_id"] for f in json.loads(capsys.readouterr().out)["findings"]}

    assert main(["scaling", "--store", str(store), "--tag", "study=weak", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["mode"] == "weak" and doc["sizes"] == [1, 2, 4]
    rows = {r["world_size"]: r for r in doc["tables"][0]["rows"]}
    assert rows[1]["total_efficiency"] == pytest.approx(1.0)
    # weak scaling: efficiency is the 1-rank step time over the N-rank one. Each 2-rank step sleeps the same 10 ms
    # (how close it gets to 1 depends on the load of the shared 2 cores: 0.45 seen under the suite, and 1.13 when
    # the load slowed the 1-rank run more than the 2-rank one), while every 4-rank step waits for rank 3's 40 ms,
    # so whatever the load, 4 ranks fall well below 2
    assert 0.2 < rows[2]["total_efficiency"] < 1.5
    assert rows[4]["total_efficiency"] < 0.6 and rows[4]["total_efficiency"] < 0.8 * rows[2]["total_efficiency"]
    assert rows[4]["total_ideal"] == pytest.approx(4 * rows[1]["total_throughput_mean"])
    assert rows[4]["comm_share"] > rows[2]["comm_share"]


MPI_STEPS, MPI_RANKS = 6, 2


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not installed (Debian: openmpi-bin)")
@pytest.mark.skipif(importlib.util.find_spec("mpi4py") is None, reason="mpi4py is not installed (stepscope[mpi])")
def test_mpirun_ranks_are_observed(tmp_path: Path) -> None:
    """`stepscope run -- mpirun -n 2 python mpi_steps.py`: one run with both ranks, named as MPI names them
    (OMPI_COMM_WORLD_RANK / _SIZE), whose allreduce really summed across the two processes."""
    store = tmp_path / "store"
    # OpenMPI refuses root without these; --oversubscribe lets 2 ranks share fewer cores
    env = {**os.environ, "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    env.pop("STEPSCOPE_DB", None)
    cmd = [sys.executable, "-m", "stepscope", "run", "--store", str(store), "--quiet", "--sample-interval", "0",
           "--name", "mpi", "--", "mpirun", "--oversubscribe", "-n", str(MPI_RANKS), sys.executable,
           str(SCRIPTS / "mpi_steps.py"), "--steps", str(MPI_STEPS)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # mpirun forwards both ranks' output into one stream, where one rank's line may run into the other's
    said = sorted(re.findall(r"rank \d+ of \d+: \d+ steps", proc.stdout))
    assert said == [f"rank {r} of {MPI_RANKS}: {MPI_STEPS} steps" for r in range(2)], proc.stdout
    data = load(store)
    assert data.run.name == "mpi" and data.run.status.value == "completed" and data.run.world_size == MPI_RANKS
    assert sorted(r.stream.rank for r in data.ranks) == [0, 1]
    assert len({r.stream.pid for r in data.ranks}) == MPI_RANKS
    for rank in data.ranks:
        assert rank.stream.world_size == MPI_RANKS and rank.stream.complete
        assert rank.stream.step_source == "api" and len(rank.steps) == MPI_STEPS
        logged = {name: rank.metrics["value"][rank.metrics.mask_of(name)].tolist()
                  for name in ("allreduce_sum", "mpi_rank", "mpi_size")}
        assert logged["mpi_rank"] == [rank.stream.rank] * MPI_STEPS  # stepscope's rank is MPI's rank
        assert logged["mpi_size"] == [MPI_RANKS] * MPI_STEPS
        assert logged["allreduce_sum"] == [MPI_RANKS * i for i in range(MPI_STEPS)]  # both ranks took part
